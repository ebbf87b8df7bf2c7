package main

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

const previewAnswer = `{"timezone":"Europe/Berlin","fires":[
	{"at":"2026-03-28T01:30:00Z","local":"2026-03-28T02:30:00+01:00"},
	{"at":"2026-03-29T01:00:00Z","local":"2026-03-29T03:00:00+02:00","moved":"gap-shift"}],
	"next_transition":{"at":"2026-03-29T01:00:00Z","offset_before":"+01:00","offset_after":"+02:00"}}`

func TestPreviewRequests(t *testing.T) {
	tests := []struct {
		name  string
		args  []string
		path  string
		query string // url.Values.Encode of the expected query
	}{
		{"task", []string{"preview", "t1", "--n", "3"}, "/v1/tasks/t1/preview", "n=3"},
		{"task, server default n", []string{"preview", "t1"}, "/v1/tasks/t1/preview", ""},
		{"cron", []string{"preview", "--cron", "30 2 * * *", "--tz", "Europe/Berlin", "--gap", "skip", "--overlap", "both",
			"--start-at", "2026-03-28T00:00:00Z", "--end-at", "2026-04-01T00:00:00Z", "--n", "5"},
			"/v1/schedule:preview", "cron=30+2+%2A+%2A+%2A&end_at=2026-04-01T00%3A00%3A00Z&gap=skip&n=5&overlap=both&start_at=2026-03-28T00%3A00%3A00Z&timezone=Europe%2FBerlin"},
		{"cron, --timezone", []string{"preview", "--cron", "@daily", "--timezone", "Asia/Tokyo"},
			"/v1/schedule:preview", "cron=%40daily&timezone=Asia%2FTokyo"},
		{"every", []string{"preview", "--every", "90s"}, "/v1/schedule:preview", "every_ms=90000"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeNode(t, constant(200, previewAnswer))
			res := runCLI(t, f, "", nil, tt.args...)
			if res.err != nil {
				t.Fatalf("%v: %v %s", tt.args, res.err, res.stderr)
			}
			req := f.onlyRequest(t)
			if req.Method != "GET" || req.Path != tt.path || req.Query.Encode() != tt.query {
				t.Errorf("request %s %s?%s, want GET %s?%s", req.Method, req.Path, req.Query.Encode(), tt.path, tt.query)
			}
		})
	}
}

func TestPreviewTable(t *testing.T) {
	f := newFakeNode(t, constant(200, previewAnswer))
	res := runCLI(t, f, "", nil, "preview", "--cron", "30 2 * * *", "--tz", "Europe/Berlin")
	if res.err != nil {
		t.Fatal(res.err)
	}
	lines := strings.Split(strings.TrimSuffix(res.stdout, "\n"), "\n")
	want := [][]string{
		{"#", "AT", "(UTC)", "LOCAL", "(Europe/Berlin)", "MOVED"},
		{"1", "2026-03-28T01:30:00Z", "2026-03-28T02:30:00+01:00", "-"},
		{"2", "2026-03-29T01:00:00Z", "2026-03-29T03:00:00+02:00", "gap-shift"},
		{"next", "transition:", "2026-03-29T01:00:00Z", "(+01:00", "→", "+02:00)"},
	}
	if len(lines) != len(want) {
		t.Fatalf("preview printed %d lines, want %d:\n%s", len(lines), len(want), res.stdout)
	}
	for i, w := range want {
		if got := strings.Fields(lines[i]); !reflect.DeepEqual(got, w) {
			t.Errorf("line %d = %q, want fields %q", i, lines[i], w)
		}
	}

	f = newFakeNode(t, constant(200, previewAnswer))
	res = runCLI(t, f, "", nil, "preview", "t1", "--json")
	if res.err != nil {
		t.Fatal(res.err)
	}
	assertJSON(t, []byte(res.stdout), previewAnswer)

	f = newFakeNode(t, constant(200, `{"timezone":"UTC","fires":[],"next_transition":null}`))
	res = runCLI(t, f, "", nil, "preview", "done-task")
	if res.err != nil || !strings.Contains(res.stdout, "no fires") || !strings.Contains(res.stdout, "next transition: none") {
		t.Errorf("empty preview: %v %q", res.err, res.stdout)
	}
}

func TestPreviewRejectedLocally(t *testing.T) {
	for _, args := range [][]string{
		{"preview"},
		{"preview", "t1", "--cron", "@daily"},
		{"preview", "t1", "--gap", "skip"},
		{"preview", "--cron", "@daily", "--every", "1s"},
		{"preview", "--tz", "Europe/Berlin"},
		{"preview", "t1", "t2"},
		{"preview", "t1", "--n", "-1"},
		{"preview", "--cron", "@daily", "--start-at", "tomorrow"},
	} {
		f := newFakeNode(t, constant(200, previewAnswer))
		if res := runCLI(t, f, "", nil, args...); res.err == nil {
			t.Errorf("%q: no error", args)
		}
		if n := len(f.requests()); n != 0 {
			t.Errorf("%q: sent %d requests", args, n)
		}
	}
}

// TestImportKeepsDST: an exported cron task's dst goes back in its import
// request as exported.
func TestImportKeepsDST(t *testing.T) {
	var r exportRecord
	if err := json.Unmarshal([]byte(`{"id":"n","callback_url":"http://x/","cron":"30 2 * * *","timezone":"Europe/Berlin",
		"dst":{"gap":"skip","overlap":"both"},"status":"scheduled","next_due_at":"2030-01-01T01:30:00Z"}`), &r); err != nil {
		t.Fatal(err)
	}
	q, err := importRequestOf(&r)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(q)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"dst":{"gap":"skip","overlap":"both"}`) {
		t.Errorf("import request %s lost dst", b)
	}
}
