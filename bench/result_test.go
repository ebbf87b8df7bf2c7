package bench

import (
	"encoding/json"
	"math"
	"os"
	"strings"
	"testing"
	"time"
)

func TestFmtNum(t *testing.T) {
	tests := []struct {
		v    float64
		want string
	}{
		{0, "0"},
		{0.004567, "0.00457"},
		{1, "1"},
		{12.345, "12.3"},
		{123.4, "123"},
		{1234.5, "1,235"},
		{1_234_567, "1,234,567"},
		{-9876.4, "-9,876"},
		{math.NaN(), "n/a"},
		{math.Inf(1), "n/a"},
	}
	for _, tt := range tests {
		if got := fmtNum(tt.v); got != tt.want {
			t.Errorf("fmtNum(%v) = %q, want %q", tt.v, got, tt.want)
		}
	}
}

func TestRowRatio(t *testing.T) {
	tests := []struct {
		name      string
		value     float64
		ceiling   float64
		wantRatio float64
		wantName  string
	}{
		{"with ceiling", 50, 200, 0.25, "c"},
		{"no ceiling", 50, 0, 0, ""},
		{"value not finite", math.NaN(), 10, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := row("m", tt.value, "u", tt.ceiling, "c")
			if r.Ratio != tt.wantRatio || r.CeilingName != tt.wantName {
				t.Errorf("row(%v, %v) = %+v, want ratio %v and ceiling name %q", tt.value, tt.ceiling, r, tt.wantRatio, tt.wantName)
			}
		})
	}
}

func TestSaveWritesJSONMarkdownAndSVG(t *testing.T) {
	res := &Result{
		Workload: "fire",
		Started:  time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC),
		Env:      Env{OS: "linux", Arch: "amd64", NumCPU: 2, LoadAvg: "0.50 0.40 0.30 1/100 42"},
		Config:   DefaultFireConfig(),
		Summary: []Row{
			row("fire rate", 900, "fires/s", 20_000, "baseline-http"),
			row("early requests", 0, "", 0, ""),
		},
		Warnings: []string{"something odd"},
		Charts:   []Chart{{Title: "x", Lines: []Line{{X: []float64{0, 1}, Y: []float64{1, 2}}}}},
	}
	dir := t.TempDir()
	paths, err := Save(dir, res)
	if err != nil {
		t.Fatalf("Save: %v", err)
	}
	base := dir + "/fire-20260304T050607Z"
	want := []string{base + ".json", base + ".md", base + ".svg"}
	if strings.Join(paths, " ") != strings.Join(want, " ") {
		t.Fatalf("Save wrote %q, want %q", paths, want)
	}
	raw, err := os.ReadFile(want[0])
	if err != nil {
		t.Fatal(err)
	}
	var back map[string]any
	if err := json.Unmarshal(raw, &back); err != nil {
		t.Fatalf("result JSON does not parse: %v", err)
	}
	if back["workload"] != "fire" || back["summary"] == nil || back["config"] == nil {
		t.Errorf("JSON lacks workload, summary or config: %s", raw)
	}
	md, _ := os.ReadFile(want[1])
	for _, s := range []string{
		"| metric | chime | ceiling | ratio |",
		"| fire rate | 900 fires/s | 20,000 fires/s (baseline-http) | 0.045 |",
		"| early requests | 0 | — | — |",
		"load 0.50 0.40 0.30",
		"> warning: something odd",
	} {
		if !strings.Contains(string(md), s) {
			t.Errorf("markdown lacks %q:\n%s", s, md)
		}
	}
	svg, _ := os.ReadFile(want[2])
	checkSVG(t, svg)
}

func TestSaveWithoutChartsWritesNoSVG(t *testing.T) {
	paths, err := Save(t.TempDir(), &Result{Workload: "create", Started: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) != 2 || strings.HasSuffix(paths[1], ".svg") {
		t.Errorf("Save wrote %q, want only .json and .md", paths)
	}
}
