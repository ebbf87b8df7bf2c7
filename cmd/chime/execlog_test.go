package main

import (
	"bytes"
	"net/url"
	"reflect"
	"strings"
	"testing"
)

// TestExecLogCLI: `executions list` and `task retry` send what their
// flags say and print the answer.
func TestExecLogCLI(t *testing.T) {
	const page = `{"executions":[{"task_id":"t1","fire_id":"t1:2","finished_at":"2026-03-01T12:00:00Z","attempt":1,"status_code":500,"result":"boom"}],"next_cursor":"CUR"}`
	f := newFakeNode(t, constant(200, page))
	var stdout, stderr bytes.Buffer
	err := runExecutions(t.Context(), []string{"list", "--status", "failed", "--task", "t1", "--since", "2026-03-01T00:00:00Z",
		"--limit", "5", "--cursor", "C0", "--addr", f.srv.URL}, &stdout, &stderr, func(string) string { return "" })
	if err != nil {
		t.Fatal(err, stderr.String())
	}
	req := f.onlyRequest(t)
	want := url.Values{"status": {"failed"}, "task_id": {"t1"}, "since": {"2026-03-01T00:00:00Z"}, "limit": {"5"}, "cursor": {"C0"}}
	if req.Method != "GET" || req.Path != "/v1/executions" || !reflect.DeepEqual(req.Query, want) {
		t.Fatalf("sent %s %s %v", req.Method, req.Path, req.Query)
	}
	if out := stdout.String(); !strings.Contains(out, "t1:2") || !strings.Contains(out, "500") || !strings.Contains(out, "boom") || !strings.Contains(out, "next cursor: CUR") {
		t.Fatalf("printed %q", out)
	}
	if err := runExecutions(t.Context(), []string{"list", "--status", "dead"}, &stdout, &stderr, nil); err == nil {
		t.Fatal("--status dead accepted")
	}

	f = newFakeNode(t, constant(200, taskJSON))
	if res := runCLI(t, f, "", nil, "retry", "t1"); res.err != nil || res.stdout != "retried t1\n" {
		t.Fatalf("retry: %+v", res)
	}
	if req := f.onlyRequest(t); req.Method != "POST" || req.Path != "/v1/tasks/t1/retry" {
		t.Fatalf("retry sent %s %s", req.Method, req.Path)
	}
	f = newFakeNode(t, constant(200, `{"retried":1,"results":[{"id":"a","status":200},{"id":"b","status":409,"error":{"code":"conflict","message":"not failed"}}],"more":false}`))
	res := runCLI(t, f, "", nil, "retry", "a", "b")
	if res.err != nil || !strings.Contains(res.stdout, "b: 409 not failed") || !strings.Contains(res.stdout, "retried 1 of 2") {
		t.Fatalf("retry a b: %+v", res)
	}
	if req := f.onlyRequest(t); req.Path != "/v1/tasks:retry" || string(req.Body) != `{"ids":["a","b"]}` {
		t.Fatalf("sent %s %s", req.Path, req.Body)
	}
	f = newFakeNode(t, constant(200, `{"retried":0,"results":[],"more":false}`))
	if res := runCLI(t, f, "", nil, "retry", "--failed", "--label", "team:ops", "--limit", "10"); res.err != nil {
		t.Fatalf("retry --failed: %+v", res)
	}
	assertJSON(t, f.onlyRequest(t).Body, `{"status":"failed","label":"team:ops","limit":10}`)
	for _, args := range [][]string{{"retry"}, {"retry", "--label", "a:b", "x"}, {"retry", "--failed", "x"}, {"retry", "--failed", "--limit", "2000"}} {
		if res := runCLI(t, nil, "", nil, args...); res.err == nil {
			t.Errorf("%v accepted", args)
		}
	}
}
