package httpapi

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/chime-scheduler/chime/slots"
	"github.com/chime-scheduler/chime/storage"
)

// TestExecLogValidation: every bad parameter of GET /v1/executions is a
// 400 naming it, and the backend is not asked.
func TestExecLogValidation(t *testing.T) {
	good := encodeExecCursor(storage.ExecPos{Set: true, FinishedAt: 5, Slot: slots.Of("a"), ID: "a", Seq: 3})
	bad := encodeExecCursor(storage.ExecPos{Set: true, FinishedAt: 5, Slot: slots.Of("a") + 1, ID: "a", Seq: 3})
	for _, tc := range []struct {
		query, field string
	}{
		{"status=dead", "status"},
		{"status=", "status"},
		{"status=failed&status=all", "status"},
		{"task_id=", "task_id"},
		{"task_id=a%20b", "task_id"},
		{"task_id=" + strings.Repeat("x", 129), "task_id"},
		{"since=yesterday", "since"},
		{"since=", "since"},
		{"until=1969-01-01T00:00:00Z", "until"},
		{"until=2999-01-01T00:00:00Z", "until"},
		{"since=2026-01-02T00:00:00Z&until=2026-01-01T00:00:00Z", "until"},
		{"limit=0", "limit"},
		{"limit=1001", "limit"},
		{"limit=-1", "limit"},
		{"limit=ten", "limit"},
		{"limit=", "limit"},
		{"cursor=", "cursor"},
		{"cursor=!!", "cursor"},
		{"cursor=" + bad, "cursor"},
		{"cursor=" + good + "A", "cursor"},
		{"flow_key=", "flow_key"},
		{"flow_key=a%7Bb", "flow_key"},
		{"flow_key=a%20b", "flow_key"},
		{"flow_key=" + strings.Repeat("k", 129), "flow_key"},
		{"flow_key=a&flow_key=b", "flow_key"},
	} {
		t.Run(tc.query, func(t *testing.T) {
			f := newFake()
			w := serve(t, f, Config{}, "GET", "/v1/executions?"+tc.query, "")
			if w.Code != http.StatusBadRequest {
				t.Fatalf("%d %s", w.Code, w.Body)
			}
			if e := errorOf(t, w); e.Field != tc.field {
				t.Fatalf("field %q, want %q: %s", e.Field, tc.field, w.Body)
			}
			if len(f.execQ) != 0 {
				t.Fatal("the backend was asked")
			}
		})
	}
	f := newFake()
	w := serve(t, f, Config{}, "GET", "/v1/executions?status=failed&task_id=a&limit=1000&cursor="+good+"&since=2026-01-01T00:00:00Z", "")
	if w.Code != 200 || len(f.execQ) != 1 {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	q := f.execQ[0]
	if !q.Failed || q.Succeeded || q.ID != "a" || q.IDSlot != slots.Of("a") || q.Limit != 1000 || q.After.Seq != 3 || q.Since == 0 {
		t.Fatalf("query %+v", q)
	}
}

// TestExecLogMerge: the parts of every member merge newest first, a page
// at most limit long, with a cursor when there is more.
func TestExecLogMerge(t *testing.T) {
	pos := func(f int64, id string, seq uint64) storage.ExecPos {
		return storage.ExecPos{Set: true, FinishedAt: f, Slot: slots.Of(id), ID: id, Seq: seq}
	}
	f := newFake()
	f.execs = []storage.LoggedExecution{
		{Pos: pos(30, "a", 2), Execution: storage.Execution{StatusCode: 500}},
		{Pos: pos(10, "a", 1), Execution: storage.Execution{StatusCode: 500}},
	}
	remote := ExecPage{Executions: []LoggedExecutionResponse{{TaskID: "b"}, {TaskID: "b"}},
		Positions: []string{encodeExecCursor(pos(40, "b", 9)), encodeExecCursor(pos(20, "b", 8))}, More: false}
	f.answer = func(method, uri string, _ []byte) Answer {
		if method != "GET" || !strings.HasPrefix(uri, "/internal/v1/executions") {
			t.Errorf("forwarded %s %s", method, uri)
		}
		b, _ := json.Marshal(remote)
		return Answer{Status: 200, Body: b}
	}
	w := serve(t, f, Config{Clustered: true}, "GET", "/v1/executions?limit=3", "")
	var page ExecPage
	if w.Code != 200 || json.Unmarshal(w.Body.Bytes(), &page) != nil {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	var got []string
	for _, e := range page.Executions {
		got = append(got, e.TaskID)
	}
	if strings.Join(got, ",") != "b,a,b" || page.NextCursor != encodeExecCursor(pos(20, "b", 8)) {
		t.Fatalf("got %v cursor %q: %s", got, page.NextCursor, w.Body)
	}
	if strings.Contains(w.Body.String(), "positions") {
		t.Fatalf("positions served: %s", w.Body)
	}
	// A member's malformed position fails the listing.
	remote.Positions[0] = "x"
	if w := serve(t, f, Config{Clustered: true}, "GET", "/v1/executions", ""); w.Code != 500 {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
}

// TestRetryValidation: bad bodies of POST /v1/tasks:retry are 400s with
// the field, and change nothing.
func TestRetryValidation(t *testing.T) {
	many := make([]string, 1001)
	for i := range many {
		many[i] = `"t` + strings.Repeat("x", i%5) + string(rune('a'+i%26)) + `"`
	}
	for _, tc := range []struct{ body, field string }{
		{`{}`, "status"},
		{`{"ids":[]}`, "ids"},
		{`{"ids":[""]}`, "ids"},
		{`{"ids":["a b"]}`, "ids"},
		{`{"ids":["a","a"]}`, "ids"},
		{`{"ids":[` + strings.Join(many, ",") + `]}`, "ids"},
		{`{"ids":["a"],"status":"failed"}`, "ids"},
		{`{"status":"done"}`, "status"},
		{`{"status":"failed","limit":0}`, "limit"},
		{`{"status":"failed","limit":1001}`, "limit"},
		{`{"status":"failed","label":"nokey"}`, "label"},
		{`{"status":"failed","since":"x"}`, "since"},
		{`{"status":"failed","since":"2026-01-02T00:00:00Z","until":"2026-01-01T00:00:00Z"}`, "until"},
		{`{"status":"failed","cursor":"??"}`, "cursor"},
		{`{"status":"failed","other":1}`, "other"},
		{`{"status":"failed","limit":"ten"}`, "limit"},
		{`{"ids":"a"}`, "ids"},
		{`[1]`, ""},
		{`{"status":"failed"} {}`, ""},
	} {
		t.Run(tc.body[:min(len(tc.body), 40)], func(t *testing.T) {
			f := newFake()
			f.tasks["a"] = &storage.Task{ID: "a", Slot: slots.Of("a"), Status: storage.StatusFailed}
			w := serve(t, f, Config{}, "POST", "/v1/tasks:retry", tc.body)
			if w.Code != http.StatusBadRequest {
				t.Fatalf("%d %s", w.Code, w.Body)
			}
			if e := errorOf(t, w); e.Field != tc.field {
				t.Fatalf("field %q, want %q: %s", e.Field, tc.field, w.Body)
			}
			if f.tasks["a"].Status != storage.StatusFailed {
				t.Fatal("a task changed")
			}
		})
	}
}

// TestRetryEndpoints: one failed task is retried, others are 409; the
// bulk form retries by ids (forwarding remote ones) and by filter.
func TestRetryEndpoints(t *testing.T) {
	f := newFake()
	for _, id := range []string{"a", "b", "c"} {
		f.tasks[id] = &storage.Task{ID: id, Slot: slots.Of(id), Status: storage.StatusFailed, Spec: storage.Spec{Kind: storage.KindOnce}}
	}
	f.tasks["d"] = &storage.Task{ID: "d", Slot: slots.Of("d"), Status: storage.StatusDone, Spec: storage.Spec{Kind: storage.KindOnce}}
	if w := serve(t, f, Config{}, "POST", "/v1/tasks/a/retry", `{}`); w.Code != 200 || f.tasks["a"].Status != storage.StatusScheduled {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	if w := serve(t, f, Config{}, "POST", "/v1/tasks/a/retry", `{}`); w.Code != 409 {
		t.Fatalf("again: %d %s", w.Code, w.Body)
	}
	rid := remoteID(f)
	f.answer = func(method, uri string, _ []byte) Answer {
		return Answer{Status: 200, Body: []byte(`{}`)}
	}
	w := serve(t, f, Config{}, "POST", "/v1/tasks:retry", `{"ids":["b","d","zz","`+rid+`"]}`)
	var ans RetryAnswer
	if w.Code != 200 || json.Unmarshal(w.Body.Bytes(), &ans) != nil {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	if ans.Retried != 2 || len(ans.Results) != 4 || ans.Results[0].Status != 200 || ans.Results[1].Status != 409 ||
		ans.Results[2].Status != 404 || ans.Results[3].Status != 200 || ans.More {
		t.Fatalf("answer %s", w.Body)
	}
	if len(f.forwards) != 1 || !strings.HasPrefix(f.forwards[0], "POST /v1/tasks/"+rid+"/retry n2 1") {
		t.Fatalf("forwards %q", f.forwards)
	}
	// By filter, one task per request: a cursor until every one is done.
	f.tasks["b"].Status = storage.StatusFailed
	retried := 0
	body := `{"status":"failed","limit":1}`
	for range 10 {
		w := serve(t, f, Config{}, "POST", "/v1/tasks:retry", body)
		ans = RetryAnswer{}
		if w.Code != 200 || json.Unmarshal(w.Body.Bytes(), &ans) != nil {
			t.Fatalf("%d %s", w.Code, w.Body)
		}
		retried += ans.Retried
		if !ans.More {
			break
		}
		body = `{"status":"failed","limit":1,"cursor":"` + ans.NextCursor + `"}`
	}
	if retried != 2 || f.tasks["b"].Status != storage.StatusScheduled || f.tasks["c"].Status != storage.StatusScheduled {
		t.Fatalf("retried %d", retried)
	}
}
