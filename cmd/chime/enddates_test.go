package main

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// TestImportEndDates: an exported task keeps its end_at and gets the runs it
// has left as max_runs; a completed one is not re-created.
func TestImportEndDates(t *testing.T) {
	tests := []struct {
		line        string
		wantEnd     string
		wantMaxRuns int64
		finished    bool
	}{
		{`{"id":"a","callback_url":"http://x/","every_ms":1000,"end_at":"2030-01-02T00:00:00Z","max_runs":5,"runs":2,"status":"scheduled","next_due_at":"2030-01-01T00:00:00Z"}`,
			"2030-01-02T00:00:00Z", 3, false},
		{`{"id":"b","callback_url":"http://x/","cron":"@daily","max_runs":5,"status":"paused"}`, "", 5, false},
		{`{"id":"c","callback_url":"http://x/","every_ms":1000,"status":"scheduled","next_due_at":"2030-01-01T00:00:00Z"}`, "", 0, false},
		{`{"id":"d","callback_url":"http://x/","every_ms":1000,"max_runs":2,"runs":2,"status":"completed"}`, "", 0, true},
	}
	for _, tt := range tests {
		var r exportRecord
		if err := json.Unmarshal([]byte(tt.line), &r); err != nil {
			t.Fatal(err)
		}
		q, err := importRequestOf(&r)
		if tt.finished {
			if !errors.Is(err, errFinished) {
				t.Errorf("%s: %v, want errFinished", tt.line, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tt.line, err)
		}
		if q.EndAt != tt.wantEnd || q.MaxRuns != tt.wantMaxRuns {
			t.Errorf("%s: end_at %q max_runs %d, want %q %d", tt.line, q.EndAt, q.MaxRuns, tt.wantEnd, tt.wantMaxRuns)
		}
	}
}

// TestImportChains: an exported task's on_success and on_failure go into
// the import's create request as exported.
func TestImportChains(t *testing.T) {
	line := `{"id":"p","callback_url":"http://x/","every_ms":1000,"status":"scheduled","next_due_at":"2030-01-01T00:00:00Z",` +
		`"on_success":[{"callback_url":"http://x/a","delay_ms":5}],"on_failure":[{"callback_url":"http://x/b","delay_ms":0,"payload_from_parent":true}]}`
	out := importRequestJSON(t, line)
	for _, want := range []string{`"on_success":[{"callback_url":"http://x/a","delay_ms":5}]`, `"on_failure":[{"callback_url":"http://x/b","delay_ms":0,"payload_from_parent":true}]`} {
		if !strings.Contains(out, want) {
			t.Errorf("import request %s lacks %s", out, want)
		}
	}
}

// TestImportResultCallbacks: an exported task's success_url and
// failure_url go into the import's create request.
func TestImportResultCallbacks(t *testing.T) {
	line := `{"id":"p","callback_url":"http://x/","every_ms":1000,"status":"scheduled","next_due_at":"2030-01-01T00:00:00Z",` +
		`"success_url":"http://x/ok","failure_url":"http://x/ko"}`
	out := importRequestJSON(t, line)
	for _, want := range []string{`"success_url":"http://x/ok"`, `"failure_url":"http://x/ko"`} {
		if !strings.Contains(out, want) {
			t.Errorf("import request %s lacks %s", out, want)
		}
	}
}

// importRequestJSON decodes one exported line and answers the JSON of the
// create request its import sends.
func importRequestJSON(t *testing.T, line string) string {
	t.Helper()
	var r exportRecord
	if err := json.Unmarshal([]byte(line), &r); err != nil {
		t.Fatal(err)
	}
	q, err := importRequestOf(&r)
	if err != nil {
		t.Fatal(err)
	}
	out, err := json.Marshal(q)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}
