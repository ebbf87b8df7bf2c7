package httpapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/chime-scheduler/chime/slots"
	"github.com/chime-scheduler/chime/storage"
)

// TestFlowPutHostile: PUT /v1/flows/{key} refuses every malformed key or
// body with 400 naming the field, before the backend is asked.
func TestFlowPutHostile(t *testing.T) {
	for _, tc := range []struct {
		name, key, body, field string
	}{
		{"key with brace", "a%7Bb", `{"parallelism":1}`, "key"},
		{"key with space", "a%20b", `{"parallelism":1}`, "key"},
		{"key too long", strings.Repeat("k", 129), `{"parallelism":1}`, "key"},
		{"key unicode", "%C3%A9", `{"parallelism":1}`, "key"},
		{"empty body", "k", ` `, ""},
		{"not an object", "k", `[1]`, ""},
		{"garbage", "k", `{"rate":`, ""},
		{"trailing data", "k", `{"parallelism":1} x`, ""},
		{"no limit", "k", `{}`, "rate"},
		{"nulls only", "k", `{"rate":null,"parallelism":null}`, "rate"},
		{"unknown field", "k", `{"parallelism":1,"burst":3}`, "burst"},
		{"repeated field", "k", `{"parallelism":1,"parallelism":2}`, "parallelism"},
		{"rate without period", "k", `{"rate":10}`, "period_ms"},
		{"period without rate", "k", `{"period_ms":1000}`, "rate"},
		{"rate zero", "k", `{"rate":0,"period_ms":1000}`, "rate"},
		{"rate negative", "k", `{"rate":-1,"period_ms":1000}`, "rate"},
		{"rate too big", "k", `{"rate":100001,"period_ms":1000}`, "rate"},
		{"rate huge", "k", `{"rate":1e30,"period_ms":1000}`, "rate"},
		{"rate a string", "k", `{"rate":"10","period_ms":1000}`, "rate"},
		{"rate fractional", "k", `{"rate":1.5,"period_ms":1000}`, "rate"},
		{"period zero", "k", `{"rate":1,"period_ms":0}`, "period_ms"},
		{"period over a day", "k", `{"rate":1,"period_ms":86400001}`, "period_ms"},
		{"parallelism zero", "k", `{"parallelism":0}`, "parallelism"},
		{"parallelism too big", "k", `{"parallelism":100001}`, "parallelism"},
		{"parallelism bool", "k", `{"parallelism":true}`, "parallelism"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake()
			w := serve(t, f, Config{}, "PUT", "/v1/flows/"+tc.key, tc.body)
			if w.Code != http.StatusBadRequest {
				t.Fatalf("%d %s, want 400", w.Code, w.Body)
			}
			if e := errorOf(t, w); e.Field != tc.field || e.Code != CodeInvalidArgument {
				t.Fatalf("error %+v, want field %q", e, tc.field)
			}
			if len(f.flows) != 0 || len(f.forwards) != 0 {
				t.Fatal("the backend was asked")
			}
		})
	}
	// Other methods and paths answer the JSON error shape.
	for _, c := range []struct{ method, path string }{{"POST", "/v1/flows/k"}, {"PATCH", "/v1/flows"}, {"GET", "/v1/flows/a%2Fb/x"}} {
		w := serve(t, newFake(), Config{}, c.method, c.path, "")
		if w.Code != http.StatusMethodNotAllowed && w.Code != http.StatusNotFound && w.Code != http.StatusUnsupportedMediaType {
			t.Errorf("%s %s: %d %s", c.method, c.path, w.Code, w.Body)
		}
		errorOf(t, w)
	}
}

// TestFlowEndpoints: put (201, then 200), get with the limiter's state,
// list with a cursor, delete (204, then 404), and a key another node
// owns forwarded with its body.
func TestFlowEndpoints(t *testing.T) {
	f := newFake()
	s := New(Config{Name: "n1"}, f)
	do := func(method, path, body string) (int, map[string]any) {
		w := serveWith(t, s, method, path, body)
		var m map[string]any
		_ = json.Unmarshal(w.Body.Bytes(), &m)
		return w.Code, m
	}
	if code, m := do("PUT", "/v1/flows/k1", `{"rate":10,"period_ms":1000,"parallelism":2}`); code != 201 || m["key"] != "k1" || m["rate"] != 10.0 || m["slot"] != float64(slots.Of("k1")) {
		t.Fatalf("put: %d %v", code, m)
	}
	if code, m := do("PUT", "/v1/flows/k1", `{"parallelism":3}`); code != 200 || m["rate"] != nil || m["parallelism"] != 3.0 {
		t.Fatalf("replace: %d %v", code, m)
	}
	if code, m := do("GET", "/v1/flows/k1", ""); code != 200 || m["in_flight"] != 1.0 || m["rate_count"] != 2.0 || m["waiting"] != 3.0 || m["oldest_waiting_due"] == nil {
		t.Fatalf("get: %d %v", code, m)
	}
	for _, k := range []string{"k2", "k3", "k4"} {
		if code, _ := do("PUT", "/v1/flows/"+k, `{"parallelism":1}`); code != 201 {
			t.Fatalf("put %s: %d", k, code)
		}
	}
	seen := map[string]bool{}
	cursor := ""
	for page := 0; ; page++ {
		code, m := do("GET", "/v1/flows?limit=3&cursor="+cursor, "")
		if code != 200 || page > 3 {
			t.Fatalf("list: %d %v", code, m)
		}
		for _, fl := range m["flows"].([]any) {
			k := fl.(map[string]any)["key"].(string)
			if seen[k] {
				t.Fatalf("%s listed twice", k)
			}
			seen[k] = true
		}
		if cursor = m["next_cursor"].(string); cursor == "" {
			break
		}
	}
	if len(seen) != 4 {
		t.Errorf("listed %v, want 4 flows", seen)
	}
	for _, q := range []string{"limit=0", "limit=1001", "cursor=!!", "cursor=" + encodeCursor(storage.Position{Slot: slots.Of("k1") + 1, ID: "k1"}), "x=1", "limit=1&limit=2"} {
		if code, _ := do("GET", "/v1/flows?"+q, ""); code != 400 {
			t.Errorf("list ?%s: %d, want 400", q, code)
		}
	}
	if code, _ := do("DELETE", "/v1/flows/k1", ""); code != 204 {
		t.Fatalf("delete: %d", code)
	}
	for _, c := range []struct{ method, path string }{{"DELETE", "/v1/flows/k1"}, {"GET", "/v1/flows/k1"}} {
		if code, m := do(c.method, c.path, ""); code != 404 {
			t.Errorf("%s after delete: %d %v", c.method, code, m)
		}
	}
	// A key whose slot n2 owns goes there, body and all.
	f.remote[slots.Of("far")] = true
	f.answer = func(method, uri string, body []byte) Answer {
		return Answer{Status: 201, Body: []byte(`{"key":"far","slot":1}`), Header: http.Header{"Content-Type": {"application/json"}}}
	}
	w := serveWith(t, s, "PUT", "/v1/flows/far", `{"parallelism":1}`)
	if w.Code != 201 || len(f.forwards) != 1 || !strings.Contains(f.forwards[0], `{"parallelism":1}`) || w.Header().Get(HeaderOwner) != "n2" {
		t.Errorf("forwarded put: %d %v %q", w.Code, w.Header(), f.forwards)
	}
	if _, ok := f.flows["far"]; ok {
		t.Error("the non-owner stored the flow")
	}
}

// TestTaskFlowKey: flow_key's validation and its ids (API.md "Flow keys").
func TestTaskFlowKey(t *testing.T) {
	for _, tc := range []struct {
		name, body, field string
	}{
		{"bad key", `{` + cb + `,"delay_ms":1,"flow_key":"a b"}`, "flow_key"},
		{"brace in key", `{` + cb + `,"delay_ms":1,"flow_key":"a}b"}`, "flow_key"},
		{"key too long", `{` + cb + `,"delay_ms":1,"flow_key":"` + strings.Repeat("k", 129) + `"}`, "flow_key"},
		{"key too long for an id", `{` + cb + `,"delay_ms":1,"flow_key":"` + strings.Repeat("k", 101) + `"}`, "flow_key"},
		{"key not a string", `{` + cb + `,"delay_ms":1,"flow_key":7}`, "flow_key"},
		{"key twice", `{` + cb + `,"delay_ms":1,"flow_key":"a","flow_key":"a"}`, "flow_key"},
		{"id without the tag", `{"id":"plain",` + cb + `,"delay_ms":1,"flow_key":"a"}`, "id"},
		{"id with another tag", `{"id":"{b}x",` + cb + `,"delay_ms":1,"flow_key":"a"}`, "id"},
		{"id with the tag later", `{"id":"x{b}{a}",` + cb + `,"delay_ms":1,"flow_key":"a"}`, "id"},
		{"child with a foreign id", `{` + cb + `,"delay_ms":1,"on_success":[{"id":"{b}c",` + cb + `,"delay_ms":1,"flow_key":"a"}]}`, "on_success[0].id"},
		{"child without an id, key too long for its id", `{` + cb + `,"delay_ms":1,"on_failure":[{` + cb + `,"delay_ms":1,"flow_key":"` + strings.Repeat("k", maxChildFlowKey+1) + `"}]}`, "on_failure[0].flow_key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake()
			w := serve(t, f, Config{}, "POST", "/v1/tasks", tc.body)
			if w.Code != http.StatusBadRequest {
				t.Fatalf("%d %s", w.Code, w.Body)
			}
			if e := errorOf(t, w); e.Field != tc.field {
				t.Fatalf("field %q, want %q: %s", e.Field, tc.field, w.Body)
			}
			if len(f.tasks) != 0 {
				t.Fatal("stored")
			}
		})
	}
	f := newFake()
	for _, c := range []struct{ body, wantPrefix string }{
		{`{` + cb + `,"delay_ms":1,"flow_key":"tenant-7"}`, "{tenant-7}"},
		{`{"id":"{tenant-7}.inv-1",` + cb + `,"delay_ms":1,"flow_key":"tenant-7"}`, "{tenant-7}.inv-1"},
		{`{"id":"tenant-7",` + cb + `,"delay_ms":1,"flow_key":"tenant-7"}`, "tenant-7"}, // the whole id hashes as the key
		{`{` + cb + `,"delay_ms":1,"flow_key":"` + strings.Repeat("k", 100) + `"}`, "{" + strings.Repeat("k", 100) + "}"},
	} {
		w := serve(t, f, Config{}, "POST", "/v1/tasks", c.body)
		var got TaskResponse
		if w.Code != 201 || json.Unmarshal(w.Body.Bytes(), &got) != nil || !strings.HasPrefix(got.ID, c.wantPrefix) || got.FlowKey == "" {
			t.Fatalf("%s: %d %s", c.body, w.Code, w.Body)
		}
		if got.Slot != slots.Of(got.FlowKey) {
			t.Errorf("%s: slot %d, want the key's %d", got.ID, got.Slot, slots.Of(got.FlowKey))
		}
		if f.tasks[got.ID].Spec.FlowKey != got.FlowKey {
			t.Errorf("%s: stored flow key %q", got.ID, f.tasks[got.ID].Spec.FlowKey)
		}
	}
	// A chain's child with a flow_key and no id gets the key as its tag.
	long := strings.Repeat("k", maxChildFlowKey)
	for _, c := range []struct{ parent, key string }{{"p", "tenant-7"}, {"{tenant-7}p", "tenant-7"}, {strings.Repeat("p", 128), "tenant-7"}, {strings.Repeat("p", 128), long}} {
		parent, body := c.parent, []byte(`{"flow_key":"`+c.key+`"}`)
		id := ChildID(body, parent, 1<<64-1, 15)
		if slots.HashKey(id) != c.key || len(id) > maxIDLen || validateID(id) != nil {
			t.Errorf("ChildID of %q = %q: not tagged by the key, or too long", parent, id)
		}
	}
	for _, parent := range []string{"p", "{tenant-7}p", strings.Repeat("p", 128)} {
		id := ChildID([]byte(`{"flow_key":"tenant-7"}`), parent, 3, 1)
		if slots.HashKey(id) != "tenant-7" || len(id) > maxIDLen || validateID(id) != nil {
			t.Errorf("ChildID of %q = %q: not tagged by the key", parent, id)
		}
		if again := ChildID([]byte(`{"flow_key":"tenant-7"}`), parent, 3, 1); again != id {
			t.Errorf("ChildID not stable: %q, %q", id, again)
		}
	}
}

// TestFlowKeyFilters: the task listing, the execution log and the bulk
// retry take flow_key, validated, and pass it on.
func TestFlowKeyFilters(t *testing.T) {
	for _, q := range []string{"flow_key=", "flow_key=a%7D", "flow_key=" + strings.Repeat("k", 129)} {
		if w := serve(t, newFake(), Config{}, "GET", "/v1/tasks?"+q, ""); w.Code != 400 || errorOf(t, w).Field != "flow_key" {
			t.Errorf("list ?%s: %d %s", q, w.Code, w.Body)
		}
	}
	for _, body := range []string{`{"status":"failed","flow_key":""}`, `{"status":"failed","flow_key":"a b"}`, `{"status":"failed","flow_key":7}`, `{"ids":["a"],"flow_key":"k"}`} {
		w := serve(t, newFake(), Config{}, "POST", "/v1/tasks:retry", body)
		if e := errorOf(t, w); w.Code != 400 || (e.Field != "flow_key" && e.Field != "ids") {
			t.Errorf("retry %s: %d %s", body, w.Code, w.Body)
		}
	}
	f := newFake()
	for _, tk := range []struct{ id, key string }{{"{k}a", "k"}, {"{k}b", ""}, {"{j}c", "j"}} {
		sp := storage.Spec{CallbackURL: "http://example.com/h", Kind: storage.KindOnce, DueAt: 1, FlowKey: tk.key}
		f.tasks[tk.id] = &storage.Task{ID: tk.id, Slot: slots.Of(tk.id), Spec: sp, Status: storage.StatusFailed}
	}
	w := serve(t, f, Config{}, "GET", "/v1/tasks?flow_key=k", "")
	var page ListPage
	if w.Code != 200 || json.Unmarshal(w.Body.Bytes(), &page) != nil || len(page.Tasks) != 1 || page.Tasks[0].ID != "{k}a" {
		t.Errorf("list flow_key=k: %d %s", w.Code, w.Body)
	}
	w = serve(t, f, Config{}, "GET", "/v1/executions?flow_key=k", "")
	if w.Code != 200 || len(f.execQ) != 1 || f.execQ[0].FlowKey != "k" || f.execQ[0].Match == nil ||
		!f.execQ[0].Match(slots.Of("k"), "{k}x") || f.execQ[0].Match(slots.Of("k"), "{j}x") {
		t.Errorf("executions flow_key=k: %d %s, query %+v", w.Code, w.Body, f.execQ)
	}
	w = serve(t, f, Config{}, "POST", "/v1/tasks:retry", `{"status":"failed","flow_key":"k"}`)
	var ans RetryAnswer
	if w.Code != 200 || json.Unmarshal(w.Body.Bytes(), &ans) != nil || len(ans.Results) != 1 || ans.Results[0].ID != "{k}a" {
		t.Errorf("retry flow_key=k: %d %s", w.Code, w.Body)
	}
}

// serveWith runs one request through s.
func serveWith(t *testing.T, s *Server, method, path, body string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(method, "http://localhost:7070"+path, strings.NewReader(body))
	if body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	w := httptest.NewRecorder()
	s.ServeHTTP(w, r)
	return w
}
