package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
)

// recorded is one request the fake node received.
type recorded struct {
	Method string
	Path   string // escaped, as sent on the wire
	Query  url.Values
	Header http.Header
	Body   []byte
}

// reply is the fake node's canned answer to one request.
type reply struct {
	status int
	body   string
	header map[string]string
}

// fakeNode is an httptest server on 127.0.0.1 that records every request
// and answers with its answer function, which sees the requests in order.
type fakeNode struct {
	srv    *httptest.Server
	answer func(r recorded) reply
	mu     struct {
		sync.Mutex
		reqs []recorded // guarded by mu
	}
}

func newFakeNode(t *testing.T, answer func(r recorded) reply) *fakeNode {
	t.Helper()
	f := &fakeNode{answer: answer}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/cluster/slots" {
			// The SDK asks for the slot map before its first request, to
			// route by owner; a fake node has none, so the SDK sends
			// everything to --addr. Not recorded: the tests count the
			// requests of the commands.
			http.NotFound(w, r)
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("fake node: read body: %v", err)
		}
		rec := recorded{Method: r.Method, Path: r.URL.EscapedPath(), Query: r.URL.Query(), Header: r.Header.Clone(), Body: body}
		f.mu.Lock()
		f.mu.reqs = append(f.mu.reqs, rec)
		f.mu.Unlock()
		a := f.answer(rec)
		for k, v := range a.header {
			w.Header().Set(k, v)
		}
		if a.body != "" {
			w.Header().Set("Content-Type", "application/json")
		}
		w.WriteHeader(a.status)
		_, _ = io.WriteString(w, a.body)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

// constant answers every request with the same reply.
func constant(status int, body string) func(recorded) reply {
	return func(recorded) reply { return reply{status: status, body: body} }
}

func (f *fakeNode) requests() []recorded {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]recorded(nil), f.mu.reqs...)
}

// onlyRequest returns the single request the fake received.
func (f *fakeNode) onlyRequest(t *testing.T) recorded {
	t.Helper()
	reqs := f.requests()
	if len(reqs) != 1 {
		t.Fatalf("fake node got %d requests, want 1: %+v", len(reqs), reqs)
	}
	return reqs[0]
}

// cliResult is what one runTask call produced.
type cliResult struct {
	stdout, stderr string
	err            error
}

// runCLI runs `chime task args…` with the given stdin and environment.
// When f is non-nil, "--addr <fake URL>" is appended to args.
func runCLI(t *testing.T, f *fakeNode, stdin string, env map[string]string, args ...string) cliResult {
	t.Helper()
	if f != nil {
		args = append(append([]string(nil), args...), "--addr", f.srv.URL)
	}
	var stdout, stderr bytes.Buffer
	tc := &taskCmd{
		stdin:  strings.NewReader(stdin),
		stdout: &stdout,
		stderr: &stderr,
		env:    func(k string) string { return env[k] },
	}
	err := tc.run(t.Context(), args)
	return cliResult{stdout: stdout.String(), stderr: stderr.String(), err: err}
}

// assertJSON checks that got and want hold the same JSON value.
func assertJSON(t *testing.T, got []byte, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("body %q is not JSON: %v", got, err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("bad want %q: %v", want, err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("body = %s, want %s", got, want)
	}
}

const cb = "http://127.0.0.1:9/cb"

// taskJSON is a task answer shaped like API.md's response body.
const taskJSON = `{"id":"t1","callback_url":"http://127.0.0.1:9/cb","cron":"*/5 * * * *","timezone":"Europe/Berlin",
"slot":42,"status":"scheduled","next_due_at":"2030-01-01T00:05:00Z","created_at":"2029-12-31T00:00:00Z",
"updated_at":"2029-12-31T00:00:00Z","fire_count":7,"fail_count":1,"owner":"n2","labels":{"team":"ops"},
"last_fire":{"fire_id":"t1:7","due_at":"2030-01-01T00:00:00Z","finished_at":"2030-01-01T00:00:01Z",
"attempts":2,"status_code":500,"error":"boom","result":"oops"}}`

func TestCreateRequestBody(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"delay=duration", []string{"--url", cb, "--delay", "5s"},
			`{"callback_url":"` + cb + `","delay_ms":5000}`},
		{"delay=plain-ms", []string{"--url", cb, "--delay", "1500"},
			`{"callback_url":"` + cb + `","delay_ms":1500}`},
		{"delay=zero", []string{"--url", cb, "--delay", "0"},
			`{"callback_url":"` + cb + `","delay_ms":0}`},
		{"due-at", []string{"--url", cb, "--due-at", "2030-01-02T15:04:05Z"},
			`{"callback_url":"` + cb + `","due_at":"2030-01-02T15:04:05Z"}`},
		// The SDK sends instants in UTC: the same instant as given.
		{"every", []string{"--url", cb, "--every", "1m30s", "--start-at", "2030-01-01T00:00:00+01:00"},
			`{"callback_url":"` + cb + `","every_ms":90000,"start_at":"2029-12-31T23:00:00Z"}`},
		{"cron", []string{"--url", cb, "--cron", "0 9 * * 1-5", "--tz", "Europe/Berlin"},
			`{"callback_url":"` + cb + `","cron":"0 9 * * 1-5","timezone":"Europe/Berlin"}`},
		{"cron-dst", []string{"--url", cb, "--cron", "30 2 * * *", "--tz", "Europe/Berlin", "--gap", "skip"},
			`{"callback_url":"` + cb + `","cron":"30 2 * * *","timezone":"Europe/Berlin","dst":{"gap":"skip"}}`},
		{"cron-dst-both", []string{"--url", cb, "--cron", "30 1 * * *", "--tz", "America/New_York", "--gap", "shift", "--overlap", "both"},
			`{"callback_url":"` + cb + `","cron":"30 1 * * *","timezone":"America/New_York","dst":{"gap":"shift","overlap":"both"}}`},
		{"all-options", []string{"--id", "job-1", "--url", cb, "--every", "100", "--payload", `{"a": [1, 2]}`,
			"--header", "X-A=1", "--header", "X-B=x=y", "--label", "team=ops", "--label", "env=dev",
			"--timeout-ms", "2000", "--max-retries", "0", "--misfire", "skip", "--max-fails", "3"},
			`{"id":"job-1","callback_url":"` + cb + `","every_ms":100,"payload":{"a":[1,2]},
			"headers":{"X-A":"1","X-B":"x=y"},"labels":{"team":"ops","env":"dev"},
			"timeout_ms":2000,"max_retries":0,"misfire":"skip","max_fails":3}`},
		{"end-at-max-runs", []string{"--url", cb, "--every", "1s", "--end-at", "2030-01-02T00:00:00+01:00", "--max-runs", "3"},
			`{"callback_url":"` + cb + `","every_ms":1000,"end_at":"2030-01-01T23:00:00Z","max_runs":3}`},
		{"max-catchup", []string{"--url", cb, "--every", "1s", "--misfire", "fire_all", "--max-catchup", "7"},
			`{"callback_url":"` + cb + `","every_ms":1000,"misfire":"fire_all","max_catchup":7}`},
		{"retention", []string{"--url", cb, "--delay", "1s", "--retention", "72h"},
			`{"callback_url":"` + cb + `","delay_ms":1000,"retention_ms":259200000}`},
		{"retention-forever", []string{"--url", cb, "--delay", "1s", "--retention", "0"},
			`{"callback_url":"` + cb + `","delay_ms":1000,"retention_ms":0}`},
		{"payload=scalar", []string{"--url", cb, "--delay", "1s", "--payload", `"hi"`},
			`{"callback_url":"` + cb + `","delay_ms":1000,"payload":"hi"}`},
		{"result-callbacks", []string{"--url", cb, "--delay", "1s", "--success-url", "https://x/ok", "--failure-url", "https://x/ko"},
			`{"callback_url":"` + cb + `","delay_ms":1000,"success_url":"https://x/ok","failure_url":"https://x/ko"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeNode(t, constant(201, taskJSON))
			res := runCLI(t, f, "", nil, append([]string{"create"}, tt.args...)...)
			if res.err != nil {
				t.Fatalf("create %v: %v", tt.args, res.err)
			}
			req := f.onlyRequest(t)
			if req.Method != "POST" || req.Path != "/v1/tasks" {
				t.Errorf("request = %s %s, want POST /v1/tasks", req.Method, req.Path)
			}
			if ct := req.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type = %q, want application/json", ct)
			}
			assertJSON(t, req.Body, tt.want)
		})
	}
}

func TestCreatePayloadSource(t *testing.T) {
	path := filepath.Join(t.TempDir(), "payload.json")
	if err := os.WriteFile(path, []byte(`{"from":"file"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		payload string
		stdin   string
		want    string
	}{
		{"inline", `{"from":"flag"}`, "", `{"from":"flag"}`},
		{"file", "@" + path, "", `{"from":"file"}`},
		{"stdin", "@-", `{"from":"stdin"}`, `{"from":"stdin"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeNode(t, constant(201, taskJSON))
			res := runCLI(t, f, tt.stdin, nil, "create", "--url", cb, "--delay", "1s", "--payload", tt.payload)
			if res.err != nil {
				t.Fatalf("create --payload %s: %v", tt.payload, res.err)
			}
			var body struct {
				Payload json.RawMessage `json:"payload"`
			}
			if err := json.Unmarshal(f.onlyRequest(t).Body, &body); err != nil {
				t.Fatal(err)
			}
			assertJSON(t, body.Payload, tt.want)
		})
	}
}

func TestCreateFileAndReplace(t *testing.T) {
	const fileBody = "{\n  \"id\": \"from-file\",\n  \"callback_url\": \"http://127.0.0.1:9/cb\",\n  \"cron\": \"@daily\"\n}\n"
	const fileJSON = `{"id":"from-file","callback_url":"http://127.0.0.1:9/cb","cron":"@daily"}`
	path := filepath.Join(t.TempDir(), "task.json")
	if err := os.WriteFile(path, []byte(fileBody), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		args       []string
		stdin      string
		wantMethod string
		wantPath   string
		wantJSON   string
	}{
		// The file is read into a client.Task (strictly: see
		// TestCreateRejectedLocally) and sent as the SDK renders it.
		{"file=path", []string{"--file", path}, "", "POST", "/v1/tasks", fileJSON},
		{"file=stdin", []string{"--file", "-"}, fileBody, "POST", "/v1/tasks", fileJSON},
		{"file+replace", []string{"--file", path, "--replace"}, "", "PUT", "/v1/tasks/from-file", fileJSON},
		{"file=answer", []string{"--file", "-"}, taskJSON, "POST", "/v1/tasks",
			`{"id":"t1","callback_url":"http://127.0.0.1:9/cb","cron":"*/5 * * * *","timezone":"Europe/Berlin","labels":{"team":"ops"}}`},
		{"flags+replace", []string{"--replace", "--id", "a/b c", "--url", cb, "--delay", "1s"}, "",
			"PUT", "/v1/tasks/a%2Fb%20c", `{"id":"a/b c","callback_url":"` + cb + `","delay_ms":1000}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeNode(t, constant(201, taskJSON))
			res := runCLI(t, f, tt.stdin, nil, append([]string{"create"}, tt.args...)...)
			if res.err != nil {
				t.Fatalf("create %v: %v", tt.args, res.err)
			}
			req := f.onlyRequest(t)
			if req.Method != tt.wantMethod || req.Path != tt.wantPath {
				t.Errorf("request = %s %s, want %s %s", req.Method, req.Path, tt.wantMethod, tt.wantPath)
			}
			assertJSON(t, req.Body, tt.wantJSON)
		})
	}
}

func TestCreateRejectedLocally(t *testing.T) {
	notJSON := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(notJSON, []byte("callback_url: x"), 0o600); err != nil {
		t.Fatal(err)
	}
	noID := filepath.Join(t.TempDir(), "noid.json")
	if err := os.WriteFile(noID, []byte(`{"callback_url":"`+cb+`","delay_ms":1}`), 0o600); err != nil {
		t.Fatal(err)
	}
	// A file the SDK cannot carry whole is refused before anything is
	// sent, as the node would refuse it: nothing of it is silently lost.
	badFile := func(body string) string {
		path := filepath.Join(t.TempDir(), "task.json")
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"two-schedules", []string{"--url", cb, "--delay", "1s", "--cron", "* * * * *"}, "only one schedule may be given, got --delay and --cron"},
		{"three-schedules", []string{"--url", cb, "--every", "1s", "--due-at", "2030-01-01T00:00:00Z", "--delay", "1"}, "got --delay and --due-at and --every"},
		{"no-schedule", []string{"--url", cb}, "one of --delay, --due-at, --every, --cron is required"},
		{"no-url", []string{"--delay", "1s"}, "--url is required"},
		{"bad-delay", []string{"--url", cb, "--delay", "soon"}, "neither a duration"},
		{"negative-delay", []string{"--url", cb, "--delay", "-5s"}, "negative duration"},
		{"negative-ms", []string{"--url", cb, "--every", "-5"}, "negative duration"},
		{"sub-ms-delay", []string{"--url", cb, "--delay", "1500us"}, "not a whole number of milliseconds"},
		{"bad-due-at", []string{"--url", cb, "--due-at", "tomorrow"}, "--due-at \"tomorrow\" is not an RFC 3339 time"},
		{"bad-start-at", []string{"--url", cb, "--every", "1s", "--start-at", "2030-01-01"}, "--start-at"},
		{"empty-cron", []string{"--url", cb, "--cron", " "}, "--cron is empty"},
		{"bad-end-at", []string{"--url", cb, "--every", "1s", "--end-at", "never"}, "--end-at \"never\" is not an RFC 3339 time"},
		{"zero-max-runs", []string{"--url", cb, "--every", "1s", "--max-runs", "0"}, "--max-runs must be at least 1"},
		{"zero-max-catchup", []string{"--url", cb, "--every", "1s", "--max-catchup", "0"}, "--max-catchup must be at least 1"},
		{"negative-retention", []string{"--url", cb, "--delay", "1s", "--retention", "-1h"}, "--retention must be a whole number of milliseconds, 0 or more"},
		{"payload-not-json", []string{"--url", cb, "--delay", "1s", "--payload", "{a:1}"}, "--payload is not valid JSON"},
		{"payload-missing-file", []string{"--url", cb, "--delay", "1s", "--payload", "@/nonexistent/p.json"}, "--payload"},
		{"header-not-kv", []string{"--url", cb, "--delay", "1s", "--header", "X-A"}, `"X-A" is not k=v`},
		{"label-twice", []string{"--url", cb, "--delay", "1s", "--label", "a=1", "--label", "a=2"}, `key "a" given twice`},
		{"replace-without-id", []string{"--replace", "--url", cb, "--delay", "1s"}, "--replace needs --id"},
		{"file-with-flags", []string{"--file", noID, "--url", cb}, "--url cannot be combined with --file"},
		{"file-not-json", []string{"--file", notJSON}, "is not valid JSON"},
		{"file-replace-without-id", []string{"--file", noID, "--replace"}, `needs a string "id"`},
		{"file-unknown-field", []string{"--file", badFile(`{"callback_url":"` + cb + `","dealy_ms":5}`)}, `unknown field "dealy_ms"`},
		{"file-no-schedule", []string{"--file", badFile(`{"callback_url":"` + cb + `"}`)}, "no schedule"},
		{"file-two-schedules", []string{"--file", badFile(`{"callback_url":"` + cb + `","delay_ms":5,"cron":"@daily"}`)}, "only one schedule"},
		{"file-zero-every", []string{"--file", badFile(`{"callback_url":"` + cb + `","every_ms":0}`)}, "every_ms: must be positive"},
		{"file-bad-due-at", []string{"--file", badFile(`{"callback_url":"` + cb + `","due_at":"tomorrow"}`)}, "due_at"},
		{"file-wrong-type", []string{"--file", badFile(`{"callback_url":"` + cb + `","delay_ms":"5s"}`)}, "delay_ms"},
		{"zero-every", []string{"--url", cb, "--every", "0"}, "--every must be positive"},
		{"positional", []string{"--url", cb, "--delay", "1s", "extra"}, `unexpected argument "extra"`},
		{"unknown-flag", []string{"--url", cb, "--delay", "1s", "--retries", "2"}, "flag provided but not defined: -retries"},
		{"bad-timeout", []string{"--url", cb, "--delay", "1s", "--timeout", "0s"}, "--timeout must be positive"},
		{"bad-addr", []string{"--url", cb, "--delay", "1s", "--addr", "ftp://127.0.0.1:1"}, "scheme must be http or https"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeNode(t, constant(201, taskJSON))
			args := append([]string{"create"}, tt.args...)
			if !strings.Contains(strings.Join(tt.args, " "), "--addr") {
				args = append(args, "--addr", f.srv.URL)
			}
			res := runCLI(t, nil, "", nil, args...)
			if res.err == nil || !strings.Contains(res.err.Error(), tt.wantErr) {
				t.Errorf("create %v: err = %v, want it to contain %q", tt.args, res.err, tt.wantErr)
			}
			if n := len(f.requests()); n != 0 {
				t.Errorf("create %v sent %d requests, want none", tt.args, n)
			}
		})
	}
}

func TestVerbRequests(t *testing.T) {
	const listJSON = `{"tasks":[],"next_cursor":""}`
	tests := []struct {
		name       string
		args       []string
		answer     reply
		wantMethod string
		wantPath   string
		wantQuery  url.Values
	}{
		{"get", []string{"get", "t1"}, reply{200, taskJSON, nil}, "GET", "/v1/tasks/t1", url.Values{}},
		{"get-escaped", []string{"get", "a/b?c d"}, reply{200, taskJSON, nil}, "GET", "/v1/tasks/a%2Fb%3Fc%20d", url.Values{}},
		{"delete", []string{"delete", "t1"}, reply{204, "", nil}, "DELETE", "/v1/tasks/t1", url.Values{}},
		{"pause", []string{"pause", "t1"}, reply{200, taskJSON, nil}, "POST", "/v1/tasks/t1/pause", url.Values{}},
		{"resume", []string{"resume", "t1"}, reply{200, taskJSON, nil}, "POST", "/v1/tasks/t1/resume", url.Values{}},
		{"trigger", []string{"trigger", "t1"}, reply{202, taskJSON, nil}, "POST", "/v1/tasks/t1/trigger", url.Values{}},
		{"executions", []string{"executions", "t1"}, reply{200, `{"executions":[]}`, nil}, "GET", "/v1/tasks/t1/executions", url.Values{}},
		{"executions-limit", []string{"executions", "--limit", "5", "t1"}, reply{200, `{"executions":[]}`, nil},
			"GET", "/v1/tasks/t1/executions", url.Values{"limit": {"5"}}},
		{"list", []string{"list"}, reply{200, listJSON, nil}, "GET", "/v1/tasks", url.Values{}},
		{"list-filters", []string{"list", "--status", "paused", "--label", "team:ops", "--limit", "50", "--cursor", "c/1"},
			reply{200, listJSON, nil}, "GET", "/v1/tasks",
			url.Values{"status": {"paused"}, "label": {"team:ops"}, "limit": {"50"}, "cursor": {"c/1"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeNode(t, func(recorded) reply { return tt.answer })
			res := runCLI(t, f, "", nil, tt.args...)
			if res.err != nil {
				t.Fatalf("%v: %v", tt.args, res.err)
			}
			req := f.onlyRequest(t)
			if req.Method != tt.wantMethod || req.Path != tt.wantPath {
				t.Errorf("%v sent %s %s, want %s %s", tt.args, req.Method, req.Path, tt.wantMethod, tt.wantPath)
			}
			if !reflect.DeepEqual(req.Query, tt.wantQuery) {
				t.Errorf("%v sent query %v, want %v", tt.args, req.Query, tt.wantQuery)
			}
			if len(req.Body) != 0 {
				t.Errorf("%v sent body %q, want none", tt.args, req.Body)
			}
		})
	}
}

// TestTriggerDueAtAndBackfill: trigger --due-at and backfill send their
// bodies; bad times are refused before any request.
func TestTriggerDueAtAndBackfill(t *testing.T) {
	bfAnswer := `{"queued":2,"first":"2026-01-01T00:00:00Z","last":"2026-01-01T01:00:00Z","task":` + taskJSON + `}`
	tests := []struct {
		name    string
		args    []string
		answer  reply
		path    string
		body    string
		wantOut string
	}{
		{"trigger-due-at", []string{"trigger", "t1", "--due-at", "2026-01-01T00:00:00+01:00"}, reply{202, taskJSON, nil},
			"/v1/tasks/t1/trigger", `{"due_at":"2025-12-31T23:00:00Z"}`, "triggered t1"},
		{"backfill", []string{"backfill", "t1", "--from", "2026-01-01T00:00:00Z", "--to", "2026-01-01T01:00:00Z"}, reply{202, bfAnswer, nil},
			"/v1/tasks/t1/backfill", `{"from":"2026-01-01T00:00:00Z","to":"2026-01-01T01:00:00Z"}`, "2 fires queued"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeNode(t, func(recorded) reply { return tt.answer })
			res := runCLI(t, f, "", nil, tt.args...)
			if res.err != nil {
				t.Fatalf("%v: %v", tt.args, res.err)
			}
			req := f.onlyRequest(t)
			if req.Method != "POST" || req.Path != tt.path || string(req.Body) != tt.body {
				t.Errorf("sent %s %s %s, want POST %s %s", req.Method, req.Path, req.Body, tt.path, tt.body)
			}
			if !strings.Contains(res.stdout, tt.wantOut) {
				t.Errorf("output %q, want %q in it", res.stdout, tt.wantOut)
			}
		})
	}
	for _, args := range [][]string{
		{"trigger", "t1", "--due-at", "soon"},
		{"backfill", "t1", "--from", "2026-01-01T00:00:00Z"},
		{"backfill", "t1", "--from", "yesterday", "--to", "2026-01-01T00:00:00Z"},
	} {
		f := newFakeNode(t, func(recorded) reply { return reply{500, "", nil} })
		if res := runCLI(t, f, "", nil, args...); res.err == nil {
			t.Errorf("%v: no error", args)
		}
		if n := len(f.requests()); n != 0 {
			t.Errorf("%v: %d requests sent, want none", args, n)
		}
	}
}

func TestBearerToken(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"flag", []string{"--token", "s3cret"}, nil, "Bearer s3cret"},
		{"env", nil, map[string]string{"CHIME_API_TOKEN": "from-env"}, "Bearer from-env"},
		{"flag-beats-env", []string{"--token", "flag"}, map[string]string{"CHIME_API_TOKEN": "env"}, "Bearer flag"},
		{"none", nil, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeNode(t, constant(200, taskJSON))
			res := runCLI(t, f, "", tt.env, append([]string{"get", "t1"}, tt.args...)...)
			if res.err != nil {
				t.Fatal(res.err)
			}
			if got := f.onlyRequest(t).Header.Get("Authorization"); got != tt.want {
				t.Errorf("Authorization = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestTokenNotInUsage(t *testing.T) {
	res := runCLI(t, nil, "", map[string]string{"CHIME_API_TOKEN": "s3cret"}, "get", "-h")
	if res.err != nil {
		t.Fatalf("get -h: %v", res.err)
	}
	if !strings.Contains(res.stderr, "usage: chime task get ID") {
		t.Errorf("get -h stderr = %q, want the usage", res.stderr)
	}
	if strings.Contains(res.stderr, "s3cret") {
		t.Errorf("get -h printed the token: %q", res.stderr)
	}
}

func TestAddrResolution(t *testing.T) {
	f := newFakeNode(t, constant(200, taskJSON))
	bare := strings.TrimPrefix(f.srv.URL, "http://")
	tests := []struct {
		name string
		args []string
		env  map[string]string
	}{
		{"flag-url", []string{"--addr", f.srv.URL}, nil},
		{"flag-bare", []string{"--addr", bare}, nil},
		{"env-url", nil, map[string]string{"CHIME_ADDR": f.srv.URL + "/"}},
		{"env-bare", nil, map[string]string{"CHIME_ADDR": bare}},
		{"flag-beats-env", []string{"--addr", bare}, map[string]string{"CHIME_ADDR": "http://127.0.0.1:1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(f.requests())
			res := runCLI(t, nil, "", tt.env, append([]string{"get", "t1"}, tt.args...)...)
			if res.err != nil {
				t.Fatalf("get t1 %v: %v", tt.args, res.err)
			}
			if got := len(f.requests()) - before; got != 1 {
				t.Errorf("fake node got %d requests, want 1", got)
			}
		})
	}
}

// TestAddrSeeds checks that --addr takes a comma-separated list of seeds
// and that a request goes on to the next one when a seed is down.
func TestAddrSeeds(t *testing.T) {
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close() // connections to it are refused
	f := newFakeNode(t, constant(200, taskJSON))
	res := runCLI(t, nil, "", nil, "get", "t1", "--addr", down.URL+", "+strings.TrimPrefix(f.srv.URL, "http://"))
	if res.err != nil {
		t.Fatalf("get t1 with the first seed down: %v", res.err)
	}
	if req := f.onlyRequest(t); req.Path != "/v1/tasks/t1" {
		t.Errorf("the live seed got %s %s, want GET /v1/tasks/t1", req.Method, req.Path)
	}
	res = runCLI(t, nil, "", nil, "get", "t1", "--addr", f.srv.URL+",")
	if res.err == nil || !strings.Contains(res.err.Error(), "empty --addr") {
		t.Errorf("--addr with an empty seed: err = %v, want empty --addr", res.err)
	}
}

func TestNormalizeAddr(t *testing.T) {
	tests := []struct {
		in, want, wantErr string
	}{
		{"http://127.0.0.1:7070", "http://127.0.0.1:7070", ""},
		{"127.0.0.1:7070", "http://127.0.0.1:7070", ""},
		{":7070", "http://127.0.0.1:7070", ""},
		{"localhost:7070/", "http://localhost:7070", ""},
		{"https://chime.example:443/prefix/", "https://chime.example:443/prefix", ""},
		{"", "", "empty --addr"},
		{"ftp://h:1", "", "scheme must be http or https"},
		{"http://", "", "no host"},
		{"http://h:1/?x=1", "", "only scheme, host, port and path"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := normalizeAddr(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("normalizeAddr(%q) = %q, %v; want error containing %q", tt.in, got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("normalizeAddr(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
			}
		})
	}
}

// fieldOf returns the value column of the vertical table row named key.
func fieldOf(t *testing.T, table, key string) string {
	t.Helper()
	for line := range strings.SplitSeq(table, "\n") {
		if rest, ok := strings.CutPrefix(line, key+"  "); ok {
			return strings.TrimSpace(rest)
		}
	}
	t.Fatalf("no %q row in\n%s", key, table)
	return ""
}

func TestTaskTable(t *testing.T) {
	want := map[string]string{
		"id":        "t1",
		"status":    "scheduled",
		"schedule":  "cron */5 * * * * (Europe/Berlin)",
		"next due":  "2030-01-01T00:05:00Z",
		"callback":  "http://127.0.0.1:9/cb",
		"fires":     "7",
		"fails":     "1",
		"last fire": `2030-01-01T00:00:00Z, code 500, 2 attempts, error: "boom"`,
	}
	for _, verb := range []string{"get", "pause", "resume", "create"} {
		t.Run(verb, func(t *testing.T) {
			f := newFakeNode(t, constant(200, taskJSON))
			args := []string{verb, "t1"}
			if verb == "create" {
				args = []string{verb, "--url", cb, "--cron", "*/5 * * * *"}
			}
			res := runCLI(t, f, "", nil, args...)
			if res.err != nil {
				t.Fatal(res.err)
			}
			for key, v := range want {
				if got := fieldOf(t, res.stdout, key); got != v {
					t.Errorf("%s row %q = %q, want %q", verb, key, got, v)
				}
			}
			if n := strings.Count(res.stdout, "\n"); n != len(want) {
				t.Errorf("%s printed %d lines, want %d:\n%s", verb, n, len(want), res.stdout)
			}
		})
	}
}

func TestScheduleText(t *testing.T) {
	tests := []struct {
		name string
		task string
		want string
	}{
		{"cron-utc", `{"cron":"@daily"}`, "cron @daily"},
		{"cron-dst", `{"cron":"30 2 * * *","timezone":"Europe/Berlin","dst":{"gap":"skip","overlap":"first"}}`, "cron 30 2 * * * (Europe/Berlin) dst gap skip, overlap first"},
		{"cron-dst-odd", `{"cron":"30 2 * * *","dst":"later"}`, "cron 30 2 * * * dst later"},
		{"every-from", `{"every_ms":90000,"start_at":"2030-01-01T00:00:00Z"}`, "every 1m30s from 2030-01-01T00:00:00Z"},
		{"every-until-max", `{"every_ms":1000,"end_at":"2030-01-02T00:00:00Z","max_runs":5,"runs":2}`, "every 1s until 2030-01-02T00:00:00Z max 5 runs (2 done)"},
		{"cron-max", `{"cron":"@daily","max_runs":5}`, "cron @daily max 5 runs"},
		{"due-at", `{"due_at":"2030-01-01T00:00:00Z","delay_ms":5000}`, "once at 2030-01-01T00:00:00Z"},
		{"delay", `{"delay_ms":1500}`, "once after 1.5s"},
		{"every-odd", `{"every_ms":"often"}`, "every oftenms"},
		{"none", `{}`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var v taskView
			if err := json.Unmarshal([]byte(tt.task), &v); err != nil {
				t.Fatal(err)
			}
			if got := scheduleText(v); got != tt.want {
				t.Errorf("scheduleText(%s) = %q, want %q", tt.task, got, tt.want)
			}
		})
	}
}

func TestListTable(t *testing.T) {
	const page = `{"tasks":[
		{"id":"a","status":"scheduled","every_ms":60000,"next_due_at":"2030-01-01T00:01:00Z","fire_count":3,"fail_count":0,"owner":"n1"},
		{"id":"b","status":"done","delay_ms":5000,"fire_count":1,"fail_count":0,"owner":"n2"}
	],"next_cursor":"c2"}`
	f := newFakeNode(t, constant(200, page))
	res := runCLI(t, f, "", nil, "list")
	if res.err != nil {
		t.Fatal(res.err)
	}
	lines := strings.Split(strings.TrimSuffix(res.stdout, "\n"), "\n")
	want := [][]string{
		{"ID", "STATUS", "SCHEDULE", "NEXT", "DUE", "FIRES", "FAILS", "OWNER"},
		{"a", "scheduled", "every", "1m0s", "2030-01-01T00:01:00Z", "3", "0", "n1"},
		{"b", "done", "once", "after", "5s", "-", "1", "0", "n2"},
		{"next", "cursor:", "c2"},
	}
	if len(lines) != len(want) {
		t.Fatalf("list printed %d lines, want %d:\n%s", len(lines), len(want), res.stdout)
	}
	for i, w := range want {
		if got := strings.Fields(lines[i]); !reflect.DeepEqual(got, w) {
			t.Errorf("line %d = %q, want fields %q", i, lines[i], w)
		}
	}
}

func TestExecutionsTable(t *testing.T) {
	const page = `{"executions":[
		{"fire_id":"t1:2","due_at":"2030-01-01T00:01:00Z","started_at":"2030-01-01T00:01:00.01Z","finished_at":"2030-01-01T00:01:00.2Z","attempt":1,"status_code":200,"error":"","result":"ok"},
		{"fire_id":"t1:1","due_at":"2030-01-01T00:00:00Z","started_at":"2030-01-01T00:00:01Z","finished_at":"2030-01-01T00:00:06Z","attempt":2,"status_code":0,"error":"context deadline exceeded"}
	]}`
	f := newFakeNode(t, constant(200, page))
	res := runCLI(t, f, "", nil, "executions", "t1")
	if res.err != nil {
		t.Fatal(res.err)
	}
	lines := strings.Split(strings.TrimSuffix(res.stdout, "\n"), "\n")
	want := [][]string{
		{"FIRE", "ID", "ATTEMPT", "DUE", "STARTED", "FINISHED", "CODE", "ERROR"},
		{"t1:2", "1", "2030-01-01T00:01:00Z", "2030-01-01T00:01:00.01Z", "2030-01-01T00:01:00.2Z", "200", "-"},
		{"t1:1", "2", "2030-01-01T00:00:00Z", "2030-01-01T00:00:01Z", "2030-01-01T00:00:06Z", "-", "context", "deadline", "exceeded"},
	}
	if len(lines) != len(want) {
		t.Fatalf("executions printed %d lines, want %d:\n%s", len(lines), len(want), res.stdout)
	}
	for i, w := range want {
		if got := strings.Fields(lines[i]); !reflect.DeepEqual(got, w) {
			t.Errorf("line %d = %q, want fields %q", i, lines[i], w)
		}
	}
}

// TestJSONOutput checks that --json prints the node's answer, indented.
// The SDK decodes the answer into a client.Task and renders it back, so the
// output is the same JSON value as the answer (a complete one, as a node
// sends it), not its bytes: key order and number spelling may differ.
func TestJSONOutput(t *testing.T) {
	const listJSON = `{"tasks":[` + taskJSON + `],"next_cursor":"c2"}`
	const execJSON = `{"executions":[{"fire_id":"t1:1","due_at":"2030-01-01T00:00:00Z","started_at":"2030-01-01T00:00:00.5Z",
"finished_at":"2030-01-01T00:00:01Z","attempt":1,"status_code":500,"error":"boom","result":"oops"}]}`
	tests := []struct {
		name   string
		args   []string
		answer reply
	}{
		{"get-flag-after-id", []string{"get", "t1", "--json"}, reply{200, taskJSON, nil}},
		{"get-flag-before-id", []string{"get", "--json", "t1"}, reply{200, taskJSON, nil}},
		{"create", []string{"create", "--url", cb, "--delay", "1s", "--json"}, reply{201, taskJSON, nil}},
		{"list", []string{"list", "--json"}, reply{200, listJSON, nil}},
		{"executions", []string{"executions", "t1", "--json"}, reply{200, execJSON, nil}},
		{"trigger", []string{"trigger", "t1", "--json"}, reply{202, taskJSON, nil}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeNode(t, func(recorded) reply { return tt.answer })
			res := runCLI(t, f, "", nil, tt.args...)
			if res.err != nil {
				t.Fatal(res.err)
			}
			assertJSON(t, []byte(res.stdout), tt.answer.body)
			var indented bytes.Buffer
			if err := json.Indent(&indented, []byte(res.stdout), "", "  "); err != nil {
				t.Fatal(err)
			}
			if res.stdout != indented.String() || !strings.HasSuffix(res.stdout, "}\n") {
				t.Errorf("%v printed\n%s\nwant it indented by two spaces, one value and a newline", tt.args, res.stdout)
			}
		})
	}
}

func TestDoneMessages(t *testing.T) {
	tests := []struct {
		name   string
		args   []string
		status int
		body   string
		want   string
	}{
		{"delete", []string{"delete", "t1"}, 204, "", "deleted t1\n"},
		{"delete-json-no-body", []string{"delete", "t1", "--json"}, 204, "", "deleted t1\n"},
		{"trigger", []string{"trigger", "t1"}, 202, taskJSON, "triggered t1\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeNode(t, constant(tt.status, tt.body))
			res := runCLI(t, f, "", nil, tt.args...)
			if res.err != nil || res.stdout != tt.want {
				t.Errorf("%v = %q, %v; want %q", tt.args, res.stdout, res.err, tt.want)
			}
		})
	}
}

func TestErrorAnswer(t *testing.T) {
	tests := []struct {
		name   string
		answer reply
		want   string
	}{
		{"field-separate", reply{400, `{"error":{"code":"invalid_argument","message":"expected 5 or 6 fields","field":"cron"}}`, nil},
			"400 invalid_argument: cron: expected 5 or 6 fields"},
		{"field-in-message", reply{400, `{"error":{"code":"invalid_argument","message":"cron: expected 5 or 6 fields","field":"cron"}}`, nil},
			"400 invalid_argument: cron: expected 5 or 6 fields"},
		{"no-field", reply{404, `{"error":{"code":"not_found","message":"task t1 not found"}}`, nil},
			"404 not_found: task t1 not found"},
		{"unauthenticated", reply{401, `{"error":{"code":"unauthenticated","message":"missing bearer token"}}`, nil},
			"401 unauthenticated: missing bearer token"},
		{"retry-after", reply{503, `{"error":{"code":"unavailable","message":"slot 7 is moving"}}`, map[string]string{"Retry-After": "2"}},
			"503 unavailable: slot 7 is moving (retry after 2s)"},
		{"not-json", reply{502, "<html>bad\tgateway</html>", nil}, "502 Bad Gateway: <html>bad gateway</html>"},
		{"empty", reply{500, "", nil}, "500 Internal Server Error"},
		{"wrong-shape", reply{409, `{"error":"exists"}`, nil}, `409 Conflict: {"error":"exists"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeNode(t, func(recorded) reply { return tt.answer })
			res := runCLI(t, f, "", nil, "get", "t1")
			if res.err == nil || res.err.Error() != tt.want {
				t.Fatalf("get t1 err = %v, want %q", res.err, tt.want)
			}
			var ae *apiError
			if !errors.As(res.err, &ae) || ae.Status != tt.answer.status {
				t.Errorf("get t1 err = %#v, want an *apiError with status %d", res.err, tt.answer.status)
			}
			if res.stdout != "" {
				t.Errorf("get t1 printed %q on error, want nothing", res.stdout)
			}
		})
	}
}

// pagedNode answers GET /v1/tasks from pages keyed by the cursor asked for.
func pagedNode(t *testing.T, pages map[string]string) *fakeNode {
	t.Helper()
	return newFakeNode(t, func(r recorded) reply {
		body, ok := pages[r.Query.Get("cursor")]
		if !ok {
			return reply{400, `{"error":{"code":"invalid_argument","message":"bad cursor","field":"cursor"}}`, nil}
		}
		return reply{200, body, nil}
	})
}

func TestListAll(t *testing.T) {
	// task is a task of a listing as a node answers it.
	task := func(id string) string {
		return `{"id":"` + id + `","callback_url":"` + cb + `","every_ms":1000,"status":"scheduled","slot":7,"fire_count":0,"fail_count":0}`
	}
	pages := map[string]string{
		"":   `{"tasks":[` + task("a") + `,` + task("b") + `],"next_cursor":"c1"}`,
		"c1": `{"tasks":[` + task("c") + `],"next_cursor":"c2"}`,
		"c2": `{"tasks":[` + task("d") + `]}`,
	}
	t.Run("table", func(t *testing.T) {
		f := pagedNode(t, pages)
		res := runCLI(t, f, "", nil, "list", "--all", "--status", "scheduled", "--limit", "2")
		if res.err != nil {
			t.Fatal(res.err)
		}
		var cursors []string
		for _, r := range f.requests() {
			cursors = append(cursors, r.Query.Get("cursor"))
			if r.Query.Get("status") != "scheduled" || r.Query.Get("limit") != "2" {
				t.Errorf("page request query = %v, want status and limit on every page", r.Query)
			}
		}
		if want := []string{"", "c1", "c2"}; !reflect.DeepEqual(cursors, want) {
			t.Errorf("cursors asked = %q, want %q", cursors, want)
		}
		var ids []string
		for _, line := range strings.Split(strings.TrimSpace(res.stdout), "\n")[1:] {
			ids = append(ids, strings.Fields(line)[0])
		}
		if want := []string{"a", "b", "c", "d"}; !reflect.DeepEqual(ids, want) {
			t.Errorf("listed ids = %q, want %q\n%s", ids, want, res.stdout)
		}
		if strings.Contains(res.stdout, "next cursor") {
			t.Errorf("--all printed a next cursor:\n%s", res.stdout)
		}
	})
	t.Run("json", func(t *testing.T) {
		f := pagedNode(t, pages)
		res := runCLI(t, f, "", nil, "list", "--all", "--json")
		if res.err != nil {
			t.Fatal(res.err)
		}
		assertJSON(t, []byte(res.stdout), `{"tasks":[`+task("a")+`,`+task("b")+`,`+task("c")+`,`+task("d")+`]}`)
	})
	t.Run("from-cursor", func(t *testing.T) {
		f := pagedNode(t, pages)
		res := runCLI(t, f, "", nil, "list", "--all", "--cursor", "c1")
		if res.err != nil {
			t.Fatal(res.err)
		}
		if n := len(f.requests()); n != 2 {
			t.Errorf("list --all --cursor c1 sent %d requests, want 2", n)
		}
	})
	t.Run("repeated-cursor", func(t *testing.T) {
		f := pagedNode(t, map[string]string{
			"":   `{"tasks":[{"id":"a"}],"next_cursor":"c1"}`,
			"c1": `{"tasks":[{"id":"b"}],"next_cursor":"c1"}`,
		})
		res := runCLI(t, f, "", nil, "list", "--all")
		if res.err == nil || !strings.Contains(res.err.Error(), `server repeated cursor "c1"`) {
			t.Errorf("list --all err = %v, want a repeated-cursor error", res.err)
		}
	})
	t.Run("error-mid-way", func(t *testing.T) {
		f := pagedNode(t, map[string]string{"": `{"tasks":[{"id":"a"}],"next_cursor":"gone"}`})
		res := runCLI(t, f, "", nil, "list", "--all")
		if res.err == nil || res.err.Error() != "400 invalid_argument: cursor: bad cursor" {
			t.Errorf("list --all err = %v, want the second page's error", res.err)
		}
	})
}

func TestOddAnswers(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		answer  reply
		wantErr string // empty: must succeed
		wantOut string // substring of stdout when it succeeds
	}{
		{"get-not-json", []string{"get", "t1"}, reply{200, "hello", nil}, "unexpected answer from server", ""},
		{"get-array", []string{"get", "t1"}, reply{200, "[1,2]", nil}, "unexpected answer from server", ""},
		{"get-empty", []string{"get", "t1"}, reply{200, "", nil}, "unexpected answer from server", ""},
		// The SDK decodes every answer into its types before the CLI
		// prints it, --json too: an answer of the wrong shape is an error.
		{"get-json-not-json", []string{"get", "t1", "--json"}, reply{200, "{", nil}, "unexpected answer from server", ""},
		{"get-wrong-types", []string{"get", "t1"},
			reply{200, `{"id":7,"status":null,"fire_count":"many","last_fire":"yesterday","every_ms":true}`, nil}, "unexpected answer from server", ""},
		{"get-control-chars", []string{"get", "t1"}, reply{200, `{"id":"a\tb\nc","status":"x"}`, nil}, "", "a b c"},
		{"list-tasks-not-array", []string{"list"}, reply{200, `{"tasks":{"id":"a"}}`, nil}, "unexpected answer from server", ""},
		{"list-task-not-object", []string{"list"}, reply{200, `{"tasks":[1]}`, nil}, "unexpected answer from server", ""},
		{"list-null", []string{"list"}, reply{200, `{"tasks":null}`, nil}, "", "no tasks"},
		{"executions-null", []string{"executions", "t1"}, reply{200, `{"executions":null}`, nil}, "", "no executions"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeNode(t, func(recorded) reply { return tt.answer })
			res := runCLI(t, f, "", nil, tt.args...)
			if tt.wantErr != "" {
				if res.err == nil || !strings.Contains(res.err.Error(), tt.wantErr) {
					t.Errorf("%v err = %v, want it to contain %q", tt.args, res.err, tt.wantErr)
				}
				return
			}
			if res.err != nil {
				t.Fatalf("%v: %v", tt.args, res.err)
			}
			if !strings.Contains(res.stdout, tt.wantOut) {
				t.Errorf("%v printed\n%s\nwant it to contain %q", tt.args, res.stdout, tt.wantOut)
			}
			if tt.args[0] == "get" {
				if n := strings.Count(res.stdout, "\n"); n != 8 {
					t.Errorf("%v printed %d lines, want 8 (table shape kept):\n%s", tt.args, n, res.stdout)
				}
			}
		})
	}
}

func TestConnectionError(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	addr := srv.URL
	srv.Close() // the port is now closed: connections are refused
	res := runCLI(t, nil, "", nil, "get", "t1", "--addr", addr)
	if res.err == nil || !strings.HasPrefix(res.err.Error(), "chime node at "+addr+": ") {
		t.Errorf("get t1 against a closed port: err = %v, want it to name %s", res.err, addr)
	}
}

func TestRequestTimeout(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) }) // runs before srv.Close
	res := runCLI(t, nil, "", nil, "get", "t1", "--addr", srv.URL, "--timeout", "50ms")
	want := "chime node at " + srv.URL + ": no answer within 50ms"
	if res.err == nil || !strings.HasPrefix(res.err.Error(), want) {
		t.Errorf("get t1 against a silent node: err = %v, want %q", res.err, want)
	}
}

func TestUsageAndArgs(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		wantErr    string // empty: must succeed
		wantStderr string
	}{
		{"no-verb", nil, "task: missing verb", "usage: chime task <verb>"},
		{"help", []string{"help"}, "", "usage: chime task <verb>"},
		{"dash-h", []string{"-h"}, "", "usage: chime task <verb>"},
		{"unknown-verb", []string{"frobnicate"}, `task: unknown verb "frobnicate"`, "usage: chime task <verb>"},
		{"verb-h", []string{"list", "-h"}, "", "usage: chime task list"},
		{"verb-h-after-arg", []string{"get", "t1", "-h"}, "", "usage: chime task get ID"},
		{"create-h", []string{"create", "--help"}, "", "-replace"},
		{"get-no-id", []string{"get"}, "task get: missing task ID", ""},
		{"get-two-ids", []string{"get", "a", "b"}, `task get: unexpected argument "b"`, ""},
		{"get-empty-id", []string{"delete", ""}, "task delete: empty task ID", ""},
		{"list-positional", []string{"list", "x"}, `task list: unexpected argument "x"`, ""},
		{"list-bad-label", []string{"list", "--label", "team=ops"}, "--label must be key:value", ""},
		{"list-negative-limit", []string{"list", "--limit", "-1"}, "--limit must be ≥ 0", ""},
		{"executions-negative-limit", []string{"executions", "t1", "--limit", "-1"}, "--limit must be ≥ 0", ""},
		{"bad-flag-value", []string{"executions", "t1", "--limit", "many"}, "task executions: invalid value", "usage: chime task executions"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeNode(t, constant(200, taskJSON))
			args := tt.args
			if len(args) > 1 {
				args = append(append([]string(nil), args...), "--addr", f.srv.URL)
			}
			res := runCLI(t, nil, "", nil, args...)
			if tt.wantErr == "" && res.err != nil {
				t.Errorf("%q: %v", tt.args, res.err)
			}
			if tt.wantErr != "" && (res.err == nil || !strings.Contains(res.err.Error(), tt.wantErr)) {
				t.Errorf("%q err = %v, want it to contain %q", tt.args, res.err, tt.wantErr)
			}
			if !strings.Contains(res.stderr, tt.wantStderr) {
				t.Errorf("%q stderr = %q, want it to contain %q", tt.args, res.stderr, tt.wantStderr)
			}
			if res.stdout != "" {
				t.Errorf("%q stdout = %q, want nothing", tt.args, res.stdout)
			}
			if n := len(f.requests()); n != 0 {
				t.Errorf("%q sent %d requests, want none", tt.args, n)
			}
		})
	}
}

// TestFlagErrorAlreadyPrinted checks the contract with main: a flag parse
// error is printed once (by the flag package, with the usage) and matches
// flag.ErrHelp so main does not print it again.
func TestFlagErrorAlreadyPrinted(t *testing.T) {
	res := runCLI(t, nil, "", nil, "get", "t1", "--bogus")
	if !errors.Is(res.err, flag.ErrHelp) {
		t.Errorf("get --bogus err = %v, want it to match flag.ErrHelp", res.err)
	}
	if !strings.Contains(res.stderr, "flag provided but not defined: -bogus") || !strings.Contains(res.stderr, "usage: chime task get") {
		t.Errorf("get --bogus stderr = %q, want the error and the usage", res.stderr)
	}
	// A plain usage error from runTask's own checks is not marked as printed.
	res = runCLI(t, nil, "", nil, "get")
	if errors.Is(res.err, flag.ErrHelp) {
		t.Errorf("get (no id) err = %v matches flag.ErrHelp; main would not print it", res.err)
	}
}

func TestParseArgs(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantPos []string
		wantID  string
		wantJS  bool
	}{
		{"flags-first", []string{"--json", "--id", "x", "a"}, []string{"a"}, "x", true},
		{"flags-last", []string{"a", "b", "--json", "--id=x"}, []string{"a", "b"}, "x", true},
		{"interleaved", []string{"a", "--id", "x", "b", "-json"}, []string{"a", "b"}, "x", true},
		{"double-dash", []string{"a", "--", "--json", "-x"}, []string{"a", "--json", "-x"}, "", false},
		{"double-dash-as-value", []string{"--id", "--", "a", "--json"}, []string{"a"}, "--", true},
		{"single-dash-positional", []string{"-", "--json"}, []string{"-"}, "", true},
		{"none", nil, nil, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := (&taskCmd{stderr: io.Discard}).newFlagSet("test", "")
			id := fs.String("id", "", "")
			js := fs.Bool("json", false, "")
			pos, help, err := parseArgs(fs, tt.args)
			if err != nil || help {
				t.Fatalf("parseArgs(%q) = _, %v, %v", tt.args, help, err)
			}
			if !reflect.DeepEqual(pos, tt.wantPos) || *id != tt.wantID || *js != tt.wantJS {
				t.Errorf("parseArgs(%q) = %q id=%q json=%v, want %q id=%q json=%v",
					tt.args, pos, *id, *js, tt.wantPos, tt.wantID, tt.wantJS)
			}
		})
	}
}

func TestParseMillis(t *testing.T) {
	tests := []struct {
		in      string
		want    int64
		wantErr bool
	}{
		{"0", 0, false},
		{"1500", 1500, false},
		{"5s", 5000, false},
		{"1500ms", 1500, false},
		{"1h1m", 3660000, false},
		{"2000000us", 2000, false},
		{"-1", 0, true},
		{"-1s", 0, true},
		{"1.5ms", 0, true},
		{"5 s", 0, true},
		{"", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := parseMillis(tt.in)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("parseMillis(%q) = %d, %v; want %d, error=%v", tt.in, got, err, tt.want, tt.wantErr)
			}
		})
	}
}
