package main

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestRunBenchArguments(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		wantErr    string // "" = no error; "help" = flag.ErrHelp
		wantStdout string
		wantStderr string
	}{
		{name: "no workload", args: nil, wantErr: "help", wantStderr: "workloads:"},
		{name: "help", args: []string{"-h"}, wantStdout: "baseline-pebble"},
		{name: "unknown workload", args: []string{"warp"}, wantErr: `unknown workload "warp"`, wantStderr: "usage: chime bench"},
		{name: "workload help", args: []string{"fire", "-h"}, wantErr: "help", wantStderr: "-rate"},
		{name: "unknown flag", args: []string{"create", "--bogus"}, wantErr: "bogus"},
		{name: "stray argument", args: []string{"scale", "extra"}, wantErr: `unexpected argument "extra"`},
		{name: "invalid config is refused before any work", args: []string{"create", "--target", "http://127.0.0.1:1", "--mode", "bulk"},
			wantErr: `mode "bulk"`},
		{name: "target and spawn together", args: []string{"fire", "--target", "http://127.0.0.1:1", "--spawn"}, wantErr: "not both"},
		{name: "failover help", args: []string{"failover", "-h"}, wantErr: "help", wantStderr: "-kill-after"},
		{name: "join help", args: []string{"join", "-h"}, wantErr: "help", wantStderr: "-join-after"},
		{name: "route owner needs single creates", args: []string{"create", "--target", "http://127.0.0.1:1,http://127.0.0.1:2", "--route", "owner"},
			wantErr: "needs --mode single"},
		{name: "failover kills a spawned node only", args: []string{"failover", "--spawn=false", "--target", "http://127.0.0.1:1"},
			wantErr: "needs a spawned cluster"},
		{name: "idle help", args: []string{"idle", "-h"}, wantErr: "help", wantStderr: "-settle"},
		{name: "idle needs spawned nodes", args: []string{"idle", "--spawn=false", "--target", "http://127.0.0.1:1"},
			wantErr: "needs spawned nodes"},
		{name: "bad pid list", args: []string{"fire", "--target", "http://127.0.0.1:1", "--pid", "x"}, wantErr: "pid -1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := runBench(t.Context(), tt.args, &stdout, &stderr, func(string) string { return "" })
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("runBench(%q) = %v, want nil", tt.args, err)
			case tt.wantErr == "help" && !errors.Is(err, flag.ErrHelp):
				t.Fatalf("runBench(%q) = %v, want flag.ErrHelp", tt.args, err)
			case tt.wantErr != "" && tt.wantErr != "help" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("runBench(%q) = %v, want an error containing %q", tt.args, err, tt.wantErr)
			}
			if !strings.Contains(stdout.String(), tt.wantStdout) {
				t.Errorf("stdout = %q, want it to contain %q", stdout.String(), tt.wantStdout)
			}
			if !strings.Contains(stderr.String(), tt.wantStderr) {
				t.Errorf("stderr = %q, want it to contain %q", stderr.String(), tt.wantStderr)
			}
		})
	}
}

// TestRunBenchBaselines runs the two node-free workloads end to end at tiny
// sizes: table on stdout, plain progress on stderr, files in --out.
func TestRunBenchBaselines(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		wantRow  string
		wantFile string
	}{
		{"baseline-http", []string{"baseline-http", "--requests", "100", "--concurrency", "2"}, "callbacks/s", "baseline-http-*.json"},
		{"baseline-pebble", []string{"baseline-pebble", "--n", "1000", "--batch", "500", "--dir", "TMP"}, "durable creates/s", "baseline-pebble-*.json"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := t.TempDir()
			args := append([]string(nil), tt.args...)
			for i, a := range args {
				if a == "TMP" {
					args[i] = t.TempDir()
				}
			}
			args = append(args, "--out", out)
			var stdout, stderr bytes.Buffer
			if err := runBench(t.Context(), args, &stdout, &stderr, func(string) string { return "" }); err != nil {
				t.Fatalf("runBench(%q) = %v\nstderr:\n%s", args, err, stderr.String())
			}
			if !strings.Contains(stdout.String(), "| metric | chime | ceiling | ratio |") || !strings.Contains(stdout.String(), tt.wantRow) {
				t.Errorf("stdout lacks the summary table with %q:\n%s", tt.wantRow, stdout.String())
			}
			if !strings.Contains(stderr.String(), ": done ") {
				t.Errorf("stderr lacks plain progress lines:\n%s", stderr.String())
			}
			files, _ := filepath.Glob(filepath.Join(out, tt.wantFile))
			if len(files) != 1 {
				t.Fatalf("files matching %s in --out = %q, want 1", tt.wantFile, files)
			}
			if b, err := os.ReadFile(files[0]); err != nil || !bytes.Contains(b, []byte(`"workload"`)) {
				t.Errorf("result file %s unreadable or lacks the workload (err %v)", files[0], err)
			}
		})
	}
}

func TestBenchTargetConfig(t *testing.T) {
	env := map[string]string{"CHIME_ADDR": "127.0.0.1:9999", "CHIME_API_TOKEN": "s3cret"}
	getenv := func(k string) string { return env[k] }
	tests := []struct {
		name      string
		flags     benchTargetFlags
		env       func(string) string
		wantURLs  []string
		wantToken string
		wantSpawn bool
		wantNodes int
		wantPIDs  []int
	}{
		{"defaults", benchTargetFlags{}, func(string) string { return "" }, []string{defaultAddr}, "", false, 0, nil},
		{"from the environment", benchTargetFlags{}, getenv, []string{"http://127.0.0.1:9999"}, "s3cret", false, 0, nil},
		{"flags win", benchTargetFlags{target: "http://127.0.0.1:1", token: "t"}, getenv, []string{"http://127.0.0.1:1"}, "t", false, 0, nil},
		{"a cluster's URLs and pids", benchTargetFlags{target: "127.0.0.1:1, http://127.0.0.1:2,", pids: "10,x"}, getenv,
			[]string{"http://127.0.0.1:1", "http://127.0.0.1:2"}, "s3cret", false, 0, []int{10, -1}},
		{"spawn ignores the environment", benchTargetFlags{spawn: true, nodes: 3}, getenv, nil, "", true, 3, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.flags.config(tt.env)
			if !slices.Equal(got.URLs, tt.wantURLs) || got.Token != tt.wantToken || got.Spawn != tt.wantSpawn ||
				got.Nodes != tt.wantNodes || !slices.Equal(got.PIDs, tt.wantPIDs) {
				t.Errorf("config() = urls %q token %q spawn %v nodes %d pids %v, want %q %q %v %d %v", got.URLs, got.Token, got.Spawn, got.Nodes, got.PIDs,
					tt.wantURLs, tt.wantToken, tt.wantSpawn, tt.wantNodes, tt.wantPIDs)
			}
		})
	}
}
