package main

import (
	"bytes"
	"errors"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"github.com/chime-scheduler/chime/client"
)

// TestImportFlowKey: an exported task's flow_key goes into the import's
// create request, so a restore keeps its limits (and its id, which hashes
// by the key).
func TestImportFlowKey(t *testing.T) {
	line := `{"id":"{k1}a","callback_url":"http://x/","due_at":"2030-01-01T00:00:00Z","status":"scheduled","next_due_at":"2030-01-01T00:00:00Z","flow_key":"k1"}`
	if out := importRequestJSON(t, line); !strings.Contains(out, `"flow_key":"k1"`) || !strings.Contains(out, `"id":"{k1}a"`) {
		t.Errorf("import request %s lacks the flow key", out)
	}
}

// TestCreateFlowKeyFlag: --flow-key becomes the request's flow_key.
func TestCreateFlowKeyFlag(t *testing.T) {
	f := newFakeNode(t, constant(201, taskJSON))
	res := runCLI(t, f, "", nil, "create", "--url", cb, "--delay", "1s", "--flow-key", "tenant-7")
	if res.err != nil {
		t.Fatal(res.err)
	}
	assertJSON(t, f.onlyRequest(t).Body, `{"callback_url":"`+cb+`","delay_ms":1000,"flow_key":"tenant-7"}`)
}

// runFlowCLI runs `chime flow args… --addr <fake URL>`.
func runFlowCLI(t *testing.T, f *fakeNode, args ...string) cliResult {
	t.Helper()
	args = append(append([]string(nil), args...), "--addr", f.srv.URL)
	var stdout, stderr bytes.Buffer
	err := runFlow(t.Context(), args, &stdout, &stderr, func(string) string { return "" })
	return cliResult{stdout: stdout.String(), stderr: stderr.String(), err: err}
}

// flowAnswer is a node's answer of GET /v1/flows/{key}, state included.
const flowAnswer = `{"key":"tenant-7","rate":10,"period_ms":1000,"parallelism":2,"slot":3547,"owner":"n1",` +
	`"created_at":"2026-03-01T12:00:00Z","updated_at":"2026-03-01T12:05:00.5Z",` +
	`"in_flight":2,"rate_count":7,"waiting":4,"oldest_waiting_due":"2026-03-01T12:06:00Z"}`

// TestFlowVerbRequests: each flow verb sends its request (method, path,
// query, body) and prints the answer.
func TestFlowVerbRequests(t *testing.T) {
	const listAnswer = `{"flows":[{"key":"tenant-7","parallelism":2,"slot":3547,"owner":"n1"}],"next_cursor":"c2"}`
	tests := []struct {
		name    string
		args    []string
		answer  reply
		method  string
		path    string
		query   url.Values
		body    string
		wantOut []string
	}{
		{"put", []string{"put", "tenant-7", "--rate", "10", "--period", "1s", "--parallelism", "2"}, reply{201, flowAnswer, nil},
			"PUT", "/v1/flows/tenant-7", url.Values{}, `{"rate":10,"period_ms":1000,"parallelism":2}`,
			[]string{"created flow tenant-7", "10 per 1s", "2026-03-01T12:05:00.5Z"}},
		{"put-replace", []string{"put", "a:b", "--parallelism", "3"}, reply{200, `{"key":"a:b","parallelism":3,"slot":1}`, nil},
			"PUT", "/v1/flows/a:b", url.Values{}, `{"parallelism":3}`, []string{"replaced flow a:b"}},
		{"put-rate-ms", []string{"put", "k", "--period", "250", "--rate", "1"}, reply{201, `{"key":"k","rate":1,"period_ms":250,"slot":1}`, nil},
			"PUT", "/v1/flows/k", url.Values{}, `{"rate":1,"period_ms":250}`, []string{"1 per 250ms"}},
		{"get", []string{"get", "tenant-7"}, reply{200, flowAnswer, nil}, "GET", "/v1/flows/tenant-7", url.Values{}, "",
			[]string{"in flight           2", "rate count          7", "waiting             4", "oldest waiting due  2026-03-01T12:06:00Z"}},
		{"delete", []string{"delete", "tenant-7"}, reply{204, "", nil}, "DELETE", "/v1/flows/tenant-7", url.Values{}, "",
			[]string{"deleted flow tenant-7"}},
		{"list", []string{"list"}, reply{200, listAnswer, nil}, "GET", "/v1/flows", url.Values{}, "",
			[]string{"tenant-7", "next cursor: c2"}},
		{"list-page", []string{"list", "--limit", "1", "--cursor", "c/1"}, reply{200, `{"flows":[],"next_cursor":""}`, nil},
			"GET", "/v1/flows", url.Values{"limit": {"1"}, "cursor": {"c/1"}}, "", []string{"no flows"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeNode(t, func(recorded) reply { return tt.answer })
			res := runFlowCLI(t, f, tt.args...)
			if res.err != nil {
				t.Fatalf("%v: %v", tt.args, res.err)
			}
			req := f.onlyRequest(t)
			if req.Method != tt.method || req.Path != tt.path || !reflect.DeepEqual(req.Query, tt.query) {
				t.Errorf("%v sent %s %s ? %v, want %s %s ? %v", tt.args, req.Method, req.Path, req.Query, tt.method, tt.path, tt.query)
			}
			if tt.body == "" && len(req.Body) != 0 {
				t.Errorf("%v sent body %q, want none", tt.args, req.Body)
			} else if tt.body != "" {
				assertJSON(t, req.Body, tt.body)
			}
			for _, w := range tt.wantOut {
				if !strings.Contains(res.stdout, w) {
					t.Errorf("%v printed %q, want %q in it", tt.args, res.stdout, w)
				}
			}
		})
	}
}

// TestFlowJSONOutput: --json prints the node's answer as the node sent
// it (a limit not set stays absent; the state only from get).
func TestFlowJSONOutput(t *testing.T) {
	f := newFakeNode(t, constant(200, flowAnswer))
	res := runFlowCLI(t, f, "get", "tenant-7", "--json")
	if res.err != nil {
		t.Fatal(res.err)
	}
	assertJSON(t, []byte(res.stdout), flowAnswer)

	const put = `{"key":"k","parallelism":3,"slot":1,"owner":"n1","created_at":"2026-03-01T12:00:00Z","updated_at":"2026-03-01T12:00:00Z"}`
	f = newFakeNode(t, constant(201, put))
	if res = runFlowCLI(t, f, "put", "k", "--parallelism", "3", "--json"); res.err != nil {
		t.Fatal(res.err)
	}
	assertJSON(t, []byte(res.stdout), put)
}

// TestFlowListAll: list --all follows next_cursor to the end and prints
// every page's flows, without a cursor.
func TestFlowListAll(t *testing.T) {
	f := newFakeNode(t, func(r recorded) reply {
		if r.Query.Get("cursor") == "" {
			return reply{200, `{"flows":[{"key":"a","parallelism":1,"slot":5}],"next_cursor":"c1"}`, nil}
		}
		return reply{200, `{"flows":[{"key":"b","rate":3,"period_ms":60000,"slot":9}],"next_cursor":""}`, nil}
	})
	res := runFlowCLI(t, f, "list", "--all", "--limit", "1", "--json")
	if res.err != nil {
		t.Fatal(res.err)
	}
	assertJSON(t, []byte(res.stdout), `{"flows":[{"key":"a","parallelism":1,"slot":5},{"key":"b","rate":3,"period_ms":60000,"slot":9}]}`)
	reqs := f.requests()
	if len(reqs) != 2 || reqs[1].Query.Get("cursor") != "c1" || reqs[1].Query.Get("limit") != "1" {
		t.Errorf("requests %+v, want two pages, the second from c1", reqs)
	}
}

// TestFlowRefusedBeforeRequest: bad arguments and invalid keys are
// refused without a request; a node's error answer is printed as the
// other verbs print it.
func TestFlowRefusedBeforeRequest(t *testing.T) {
	for _, args := range [][]string{
		{"put", "k"},
		{"put", "k", "--rate", "5"},
		{"put", "k", "--period", "1s"},
		{"put", "k", "--rate", "0", "--period", "1s"},
		{"put", "k", "--parallelism", "0"},
		{"put", "k", "--parallelism", "1", "--period", "1.5ms", "--rate", "1"},
		{"put", "--parallelism", "1"},
		{"put", "a/b", "--parallelism", "1"},
		{"get", "{tag}"},
		{"get"},
		{"delete", "a", "b"},
		{"delete", strings.Repeat("k", 129)},
		{"list", "x"},
		{"list", "--limit", "1001"},
	} {
		f := newFakeNode(t, constant(500, ""))
		if res := runFlowCLI(t, f, args...); res.err == nil {
			t.Errorf("%v: no error", args)
		}
		if n := len(f.requests()); n != 0 {
			t.Errorf("%v: %d requests sent, want none", args, n)
		}
	}
	f := newFakeNode(t, constant(404, `{"error":{"code":"not_found","message":"no flow \"k\""}}`))
	res := runFlowCLI(t, f, "get", "k")
	if res.err == nil || res.err.Error() != `404 not_found: no flow "k"` || !errors.Is(res.err, client.ErrNotFound) {
		t.Errorf("get of a missing flow: %v, want 404 not_found matching ErrNotFound", res.err)
	}
}
