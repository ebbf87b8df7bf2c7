package main

import (
	"bytes"
	"net/url"
	"reflect"
	"strings"
	"testing"
)

// TestStatsDueCLI: `stats due` sends what its flags say, prints a row per
// node (an unavailable one says so) and the busiest slots, and refuses
// bad flags before asking.
func TestStatsDueCLI(t *testing.T) {
	const answer = `{"from":"2026-03-01T12:00:00Z","hours":2,"by":"slot","hour":1,"total":7,"overdue":1,"truncated":true,"unavailable":true,
"nodes":[{"node":"n1","available":true,"hours":[3,4],"minutes":[],"total":7,"overdue":1,"overdue_complete":true,"truncated":true,"complete_until":"2026-03-01T13:00:00Z","keys_scanned":9},
{"node":"n2","available":false,"error":"unreachable","hours":[],"minutes":[],"total":0,"overdue":0,"overdue_complete":false,"truncated":false,"keys_scanned":0}],
"slots":[{"slot":812,"node":"n1","count":5}]}`
	f := newFakeNode(t, constant(200, answer))
	var stdout, stderr bytes.Buffer
	err := runStats(t.Context(), []string{"due", "--hours", "2", "--by", "slot", "--hour", "1", "--node", "n1", "--addr", f.srv.URL},
		&stdout, &stderr, func(string) string { return "" })
	if err != nil {
		t.Fatal(err, stderr.String())
	}
	req := f.onlyRequest(t)
	want := url.Values{"hours": {"2"}, "by": {"slot"}, "hour": {"1"}, "node": {"n1"}}
	if req.Method != "GET" || req.Path != "/v1/stats/due" || !reflect.DeepEqual(req.Query, want) {
		t.Fatalf("sent %s %s %v", req.Method, req.Path, req.Query)
	}
	out := stdout.String()
	for _, s := range []string{"+1h", "n1", "unavailable", "n2: unreachable", "812", "complete until 2026-03-01T13:00:00Z", "7 due, 1 overdue"} {
		if !strings.Contains(out, s) {
			t.Errorf("printed %q, missing %q", out, s)
		}
	}
	for _, args := range [][]string{{"due", "--hours", "0"}, {"due", "--hours", "169"}, {"due", "--by", "task"},
		{"due", "--hour", "1"}, {"due", "--by", "slot", "--hour", "24"}, {"due", "x"}, {"load"}, {}} {
		if err := runStats(t.Context(), args, &stdout, &stderr, func(string) string { return "" }); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
}
