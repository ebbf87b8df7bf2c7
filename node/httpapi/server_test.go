package httpapi

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chime-scheduler/chime/ring"
	"github.com/chime-scheduler/chime/slots"
	"github.com/chime-scheduler/chime/storage"
)

// fake is a Backend over a map: it owns every slot but those in remote,
// which "n2" owns, and records what it is asked to forward.
type fake struct {
	mu       sync.Mutex
	tasks    map[string]*storage.Task
	remote   map[uint16]bool
	noOwner  bool   // remote slots have no owner
	stopped  *Error // Stopped's answer
	hops     int    // Hops' answer
	fwdErr   error
	answer   func(method, uri string, body []byte) Answer
	forwards []string // method uri hop body, in order
	batch    []*storage.Task
	version  uint64                    // the table version
	epochs   map[uint16]uint64         // SlotEpoch's answers
	execQ    []storage.ExecQuery       // RecentExecutions' queries
	execs    []storage.LoggedExecution // RecentExecutions' answer
	execMore bool
	dueQ     []storage.DueCountQuery // CountDue's queries
	due      storage.DueCounts       // CountDue's answer
	dueVer   uint64                  // DueVersion's answer
	flows    map[string]*storage.Flow
}

func newFake() *fake {
	return &fake{tasks: map[string]*storage.Task{}, remote: map[uint16]bool{}}
}

var fakeNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

var n2 = ring.Member{Name: "n2", HTTPAddr: "10.0.0.2:7070"}

type fakeView struct{ f *fake }

func (v fakeView) Owns(s uint16) bool { return !v.f.remote[s] }
func (v fakeView) Owner(s uint16) (ring.Member, bool) {
	if v.f.noOwner {
		return ring.Member{}, false
	}
	if v.f.remote[s] {
		return n2, true
	}
	return ring.Member{Name: "n1"}, true
}
func (v fakeView) Follower(s uint16) (ring.Member, bool) {
	if v.f.noOwner {
		return ring.Member{}, false
	}
	if v.f.remote[s] {
		return ring.Member{Name: "n1"}, true
	}
	return n2, true
}
func (v fakeView) Members() []ring.Member { return []ring.Member{{Name: "n1"}, n2} }
func (v fakeView) Version() uint64        { return v.f.version }

func (f *fake) Now() time.Time             { return fakeNow }
func (f *fake) View() View                 { return fakeView{f} }
func (f *fake) Stopped() *Error            { return f.stopped }
func (f *fake) Overloaded() *Error         { return nil }
func (f *fake) CheckCallback(string) error { return nil }

func (f *fake) Write(_ context.Context, t *storage.Task, put bool, _ time.Time) (*storage.Task, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, had := f.tasks[t.ID]
	if had && !put {
		return nil, false, ErrExists
	}
	f.tasks[t.ID] = t
	return t, !had, nil
}

func (f *fake) CreateBatch(_ context.Context, tasks []*storage.Task, _ time.Time) ([]*Error, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	errs := make([]*Error, len(tasks))
	for i, t := range tasks {
		if t == nil {
			continue
		}
		f.batch = append(f.batch, t)
		if _, had := f.tasks[t.ID]; had {
			errs[i] = ErrExists
			continue
		}
		f.tasks[t.ID] = t
	}
	return errs, nil
}

func (f *fake) PutFlow(_ context.Context, fl *storage.Flow) (*storage.Flow, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.flows == nil {
		f.flows = map[string]*storage.Flow{}
	}
	_, had := f.flows[fl.Key]
	f.flows[fl.Key] = fl
	return fl, !had, nil
}

func (f *fake) GetFlow(_ context.Context, key string) (FlowState, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if fl, ok := f.flows[key]; ok {
		return FlowState{Flow: fl, InFlight: 1, RateCount: 2, Waiting: 3, OldestWaitingDue: fakeNow.UnixNano()}, nil
	}
	return FlowState{}, ErrFlowNotFound
}

func (f *fake) DeleteFlow(_ context.Context, key string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.flows[key]; !ok {
		return ErrFlowNotFound
	}
	delete(f.flows, key)
	return nil
}

func (f *fake) ScanFlows(from storage.Position, owned func(uint16) bool, fn func(*storage.Flow) bool) error {
	f.mu.Lock()
	var all []*storage.Flow
	for _, fl := range f.flows {
		all = append(all, fl)
	}
	f.mu.Unlock()
	slices.SortFunc(all, func(a, b *storage.Flow) int { return cmp.Or(cmp.Compare(a.Slot, b.Slot), cmp.Compare(a.Key, b.Key)) })
	for _, fl := range all {
		c := cmp.Or(cmp.Compare(fl.Slot, from.Slot), cmp.Compare(fl.Key, from.ID))
		if c < 0 || c == 0 && from.Exclusive || owned != nil && !owned(fl.Slot) {
			continue
		}
		if !fn(fl) {
			return nil
		}
	}
	return nil
}

func (f *fake) Get(_ context.Context, id string) (*storage.Task, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if t, ok := f.tasks[id]; ok {
		return t, nil
	}
	return nil, ErrNotFound
}

func (f *fake) Delete(ctx context.Context, id string) error {
	if _, err := f.Get(ctx, id); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.tasks, id)
	return nil
}

func (f *fake) setStatus(ctx context.Context, id string, st storage.Status) (*storage.Task, error) {
	t, err := f.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	t.Status = st
	return t, nil
}

func (f *fake) Pause(ctx context.Context, id string) (*storage.Task, error) {
	return f.setStatus(ctx, id, storage.StatusPaused)
}
func (f *fake) Resume(ctx context.Context, id string) (*storage.Task, error) {
	return f.setStatus(ctx, id, storage.StatusScheduled)
}
func (f *fake) Trigger(ctx context.Context, id string, _ int64) (*storage.Task, error) {
	return f.Get(ctx, id)
}

func (f *fake) Backfill(ctx context.Context, id string, _, _ int64) (*storage.Task, BackfillResult, error) {
	t, err := f.Get(ctx, id)
	return t, BackfillResult{}, err
}

func (f *fake) Retry(ctx context.Context, id string) (*storage.Task, error) {
	t, err := f.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	if t.Status != storage.StatusFailed {
		return nil, &Error{Code: CodeConflict, Message: "not failed"}
	}
	return f.setStatus(ctx, id, storage.StatusScheduled)
}

func (f *fake) RecentExecutions(q storage.ExecQuery) ([]storage.LoggedExecution, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.execQ = append(f.execQ, q)
	return f.execs, f.execMore, nil
}

func (f *fake) Executions(ctx context.Context, id string, limit int) ([]storage.Execution, error) {
	if _, err := f.Get(ctx, id); err != nil {
		return nil, err
	}
	return []storage.Execution{{FireID: "f1", Attempt: 1, StatusCode: 200}}[:min(limit, 1)], nil
}

func (f *fake) DueVersion() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.dueVer
}

func (f *fake) CountDue(q storage.DueCountQuery) (storage.DueCounts, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.dueQ = append(f.dueQ, q)
	c := f.due
	c.Hours = make([]int64, q.Hours)
	copy(c.Hours, f.due.Hours)
	if c.Minutes == nil {
		c.Minutes = make([]int64, 60)
	}
	return c, nil
}

func (f *fake) ScanTasks(from storage.Position, fn func(*storage.Task) bool) error {
	f.mu.Lock()
	var ts []*storage.Task
	for _, t := range f.tasks {
		p := storage.Position{Slot: t.Slot, ID: t.ID}
		if c := comparePos(p, from); c > 0 || c == 0 && !from.Exclusive {
			ts = append(ts, t)
		}
	}
	f.mu.Unlock()
	slices.SortFunc(ts, func(a, b *storage.Task) int { return cmp.Or(cmp.Compare(a.Slot, b.Slot), cmp.Compare(a.ID, b.ID)) })
	for _, t := range ts {
		if !fn(t) {
			break
		}
	}
	return nil
}

func (f *fake) SlotEpoch(s uint16) uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.epochs[s]
}
func (f *fake) Cluster(ranges bool) Cluster {
	m := Member{Name: "n1", HTTPAddr: "127.0.0.1:7070", State: "active", Status: "alive", SlotsOwned: 16384}
	if ranges {
		m.OwnedRanges, m.FollowingRanges = &[][2]uint16{{0, 16383}}, &[][2]uint16{}
	}
	return Cluster{Self: "n1", TableVersion: 7, ViewChecksum: "0000000000000007", Settled: true, Members: []Member{m}}
}
func (f *fake) Forget(name string) error {
	if name != "dead" {
		return &Error{Code: CodeNotFound, Field: "name", Message: "no such member"}
	}
	return nil
}
func (f *fake) Readiness() (bool, string, []string)       { return true, "ready", nil }
func (f *fake) Hops(*http.Request, []byte) int            { return f.hops }
func (f *fake) Authenticate(*http.Request, string) *Error { return nil }

func (f *fake) Forward(_ context.Context, to ring.Member, method, uri string, body []byte, _ http.Header, hop int) (Answer, error) {
	f.mu.Lock()
	f.forwards = append(f.forwards, method+" "+uri+" "+to.Name+" "+string(rune('0'+hop))+" "+string(body))
	f.mu.Unlock()
	if f.fwdErr != nil {
		return Answer{}, f.fwdErr
	}
	return f.answer(method, uri, body), nil
}

// serve runs one request through a server over f.
func serve(t *testing.T, f *fake, cfg Config, method, path, body string) *httptest.ResponseRecorder {
	t.Helper()
	if cfg.Name == "" {
		cfg.Name = "n1"
	}
	s := New(cfg, f)
	r := httptest.NewRequest(method, "http://localhost:7070"+path, strings.NewReader(body))
	if body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	w := httptest.NewRecorder()
	s.ServeHTTP(w, r)
	return w
}

// errorOf decodes an answer in the error shape.
func errorOf(t *testing.T, w *httptest.ResponseRecorder) *Error {
	t.Helper()
	var eb struct {
		Error *Error `json:"error"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &eb); err != nil || eb.Error == nil {
		t.Fatalf("answer %d %s is not in the error shape: %v", w.Code, w.Body, err)
	}
	return eb.Error
}

// remoteID returns a task id whose slot it makes n2's.
func remoteID(f *fake) string {
	id := "remote-task"
	f.remote[slots.Of(id)] = true
	return id
}

const cb = `"callback_url":"http://example.com/hook"`

func TestServerTaskEndpoints(t *testing.T) {
	f := newFake()
	w := serve(t, f, Config{}, "POST", "/v1/tasks", `{"id":"a",`+cb+`,"delay_ms":1000}`)
	if w.Code != http.StatusCreated || w.Header().Get("X-Chime-Node") != "n1" {
		t.Fatalf("create: %d %v %s", w.Code, w.Header(), w.Body)
	}
	var tr TaskResponse
	if err := json.Unmarshal(w.Body.Bytes(), &tr); err != nil || tr.ID != "a" || tr.Owner != "n1" || tr.DelayMs != 1000 {
		t.Fatalf("create answered %s (%v)", w.Body, err)
	}
	if w := serve(t, f, Config{}, "POST", "/v1/tasks", `{"id":"a",`+cb+`,"delay_ms":1000}`); w.Code != http.StatusConflict || errorOf(t, w).Code != CodeConflict {
		t.Errorf("create again: %d %s", w.Code, w.Body)
	}
	if w := serve(t, f, Config{}, "PUT", "/v1/tasks/a", `{`+cb+`,"every_ms":1000}`); w.Code != http.StatusOK {
		t.Errorf("put: %d %s", w.Code, w.Body)
	}
	if w := serve(t, f, Config{}, "GET", "/v1/tasks/a", ""); w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"every_ms":1000`) {
		t.Errorf("get: %d %s", w.Code, w.Body)
	}
	if w := serve(t, f, Config{}, "POST", "/v1/tasks/a/pause", `{}`); w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"status":"paused"`) {
		t.Errorf("pause: %d %s", w.Code, w.Body)
	}
	if w := serve(t, f, Config{}, "POST", "/v1/tasks/a/trigger", `{}`); w.Code != http.StatusAccepted {
		t.Errorf("trigger: %d %s", w.Code, w.Body)
	}
	if w := serve(t, f, Config{HistoryLimit: 5}, "GET", "/v1/tasks/a/executions?limit=6", ""); w.Code != http.StatusBadRequest || errorOf(t, w).Field != "limit" {
		t.Errorf("executions over the limit: %d %s", w.Code, w.Body)
	}
	if w := serve(t, f, Config{HistoryLimit: 5}, "GET", "/v1/tasks/a/executions", ""); w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"fire_id":"f1"`) {
		t.Errorf("executions: %d %s", w.Code, w.Body)
	}
	if w := serve(t, f, Config{}, "GET", "/v1/tasks?limit=1", ""); w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"id":"a"`) {
		t.Errorf("list: %d %s", w.Code, w.Body)
	}
	if w := serve(t, f, Config{}, "DELETE", "/v1/tasks/a", ""); w.Code != http.StatusNoContent {
		t.Errorf("delete: %d %s", w.Code, w.Body)
	}
	if w := serve(t, f, Config{}, "GET", "/v1/tasks/a", ""); w.Code != http.StatusNotFound || errorOf(t, w).Code != CodeNotFound {
		t.Errorf("get after delete: %d %s", w.Code, w.Body)
	}
	if w := serve(t, f, Config{}, "GET", "/v1/tasks/a%2Fb", ""); w.Code != http.StatusBadRequest || errorOf(t, w).Field != "id" {
		t.Errorf("bad id: %d %s", w.Code, w.Body)
	}
	if w := serve(t, f, Config{}, "POST", "/v1/tasks/a/forget", `{}`); w.Code != http.StatusMethodNotAllowed {
		t.Errorf("unknown action: %d %s", w.Code, w.Body)
	}
	if w := serve(t, f, Config{}, "POST", "/v1/cluster/members/dead/forget", `{}`); w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"forgotten":"dead"`) {
		t.Errorf("forget: %d %s", w.Code, w.Body)
	}
}

func TestServerEdgeAnswers(t *testing.T) {
	f := newFake()
	if w := serve(t, f, Config{}, "PATCH", "/v1/tasks/a", `{}`); w.Code != http.StatusMethodNotAllowed || errorOf(t, w).Code != CodeInvalidArgument {
		t.Errorf("wrong method: %d %s", w.Code, w.Body)
	}
	if w := serve(t, f, Config{}, "GET", "/v1/nothing", ""); w.Code != http.StatusNotFound || errorOf(t, w).Code != CodeNotFound {
		t.Errorf("unknown path: %d %s", w.Code, w.Body)
	}
	if w := serve(t, f, Config{}, "GET", "/v1/stats", ""); w.Code != http.StatusNotFound {
		t.Errorf("a node-served endpoint without its handler: %d %s", w.Code, w.Body)
	}
	if w := serve(t, f, Config{APIToken: "tok"}, "GET", "/v1/tasks", ""); w.Code != http.StatusUnauthorized || w.Header().Get("WWW-Authenticate") == "" {
		t.Errorf("no token: %d %v", w.Code, w.Header())
	}
	f.stopped = ErrStopping
	if w := serve(t, f, Config{}, "GET", "/v1/tasks", ""); w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") != "1" {
		t.Errorf("stopped: %d %v", w.Code, w.Header())
	}
	if w := serve(t, f, Config{}, "GET", "/healthz", ""); w.Code != http.StatusOK {
		t.Errorf("healthz while stopped: %d", w.Code)
	}
	if w := serve(t, f, Config{}, "GET", "/readyz", ""); w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"ready"`) {
		t.Errorf("readyz: %d %s", w.Code, w.Body)
	}
	f.stopped = nil
	called := false
	cfg := Config{Handlers: Handlers{Stats: JSON(func(context.Context) (map[string]int, error) { called = true; return map[string]int{"x": 1}, nil })}}
	if w := serve(t, f, cfg, "GET", "/v1/stats", ""); w.Code != http.StatusOK || !called || strings.TrimSpace(w.Body.String()) != `{"x":1}` {
		t.Errorf("stats through JSON: %d %s", w.Code, w.Body)
	}
}

func TestServerForwardsToTheOwner(t *testing.T) {
	f := newFake()
	id := remoteID(f)
	f.answer = func(_, _ string, _ []byte) Answer {
		return Answer{Status: http.StatusCreated, Header: http.Header{"X-Chime-Node": {"n2"}, "X-Other": {"dropped"}}, Body: []byte(`{"id":"x"}`)}
	}
	w := serve(t, f, Config{}, "POST", "/v1/tasks", `{"id":"`+id+`",`+cb+`,"delay_ms":5}`)
	if w.Code != http.StatusCreated || w.Header().Get("X-Chime-Node") != "n2" || w.Header().Get("X-Other") != "" || w.Body.String() != `{"id":"x"}` {
		t.Errorf("forwarded create: %d %v %s", w.Code, w.Header(), w.Body)
	}
	if len(f.forwards) != 1 || !strings.HasPrefix(f.forwards[0], "POST /v1/tasks n2 1 {") {
		t.Errorf("forwards: %q", f.forwards)
	}
	if len(f.tasks) != 0 {
		t.Errorf("stored here: %v", f.tasks)
	}

	f.forwards = nil
	if w := serve(t, f, Config{}, "GET", "/v1/tasks/"+id+"?x=1", ""); w.Code != http.StatusCreated || len(f.forwards) != 1 || f.forwards[0] != "GET /v1/tasks/"+id+"?x=1 n2 1 " {
		t.Errorf("forwarded get: %d %q", w.Code, f.forwards)
	}

	// Trigger and backfill bodies go along.
	for _, tc := range []struct{ path, body string }{
		{"/trigger", `{"due_at":"2026-01-01T00:00:00Z"}`},
		{"/backfill", `{"from":"2026-01-01T00:00:00Z","to":"2026-01-02T00:00:00Z"}`},
	} {
		f.forwards = nil
		if w := serve(t, f, Config{}, "POST", "/v1/tasks/"+id+tc.path, tc.body); len(f.forwards) != 1 || f.forwards[0] != "POST /v1/tasks/"+id+tc.path+" n2 1 "+tc.body {
			t.Errorf("forwarded %s: %d %q", tc.path, w.Code, f.forwards)
		}
	}

	f.hops = maxHops
	if w := serve(t, f, Config{}, "DELETE", "/v1/tasks/"+id, ""); w.Code != http.StatusServiceUnavailable || !strings.Contains(errorOf(t, w).Message, "forwards") {
		t.Errorf("hop limit: %d %s", w.Code, w.Body)
	}
	f.hops = 0
	f.fwdErr = context.DeadlineExceeded
	if w := serve(t, f, Config{}, "DELETE", "/v1/tasks/"+id, ""); w.Code != http.StatusServiceUnavailable || !strings.Contains(errorOf(t, w).Message, "unreachable: timed out") {
		t.Errorf("owner down: %d %s", w.Code, w.Body)
	}
	f.noOwner = true
	if w := serve(t, f, Config{}, "DELETE", "/v1/tasks/"+id, ""); w.Code != http.StatusServiceUnavailable || errorOf(t, w).Message != ErrNoOwner.Message {
		t.Errorf("no owner: %d %s", w.Code, w.Body)
	}
}

// TestServerForwardsGeneratedID: a create without an id is given one
// where it arrives, and the owner gets it in the body.
func TestServerForwardsGeneratedID(t *testing.T) {
	f := newFake()
	for s := range uint16(slots.Count) {
		f.remote[s] = true
	}
	var got []byte
	f.answer = func(_, _ string, body []byte) Answer { got = body; return Answer{Status: http.StatusCreated} }
	serve(t, f, Config{}, "POST", "/v1/tasks", `{`+cb+`,"delay_ms":5}`)
	var req TaskRequest
	if err := json.Unmarshal(got, &req); err != nil || req.ID == "" {
		t.Errorf("forwarded body %s has no id (%v)", got, err)
	}
}

func TestServerBatchSplitsByOwner(t *testing.T) {
	f := newFake()
	id := remoteID(f)
	f.answer = func(_, uri string, body []byte) Answer {
		if uri != "/v1/tasks:batch" || !strings.Contains(string(body), id) {
			t.Errorf("sub-batch %s %s", uri, body)
		}
		return Answer{Status: http.StatusOK, Body: []byte(`{"results":[{"index":0,"id":"` + id + `","status":201}]}`)}
	}
	w := serve(t, f, Config{}, "POST", "/v1/tasks:batch", `{"tasks":[{"id":"local",`+cb+`,"delay_ms":5},{"id":"`+id+`",`+cb+`,"delay_ms":5},{"id":"bad"}]}`)
	var ans struct {
		Results []BatchResult `json:"results"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &ans); err != nil || w.Code != http.StatusOK || len(ans.Results) != 3 {
		t.Fatalf("batch: %d %s", w.Code, w.Body)
	}
	want := []int{http.StatusCreated, http.StatusCreated, http.StatusBadRequest}
	for i, r := range ans.Results {
		if r.Index != i || r.Status != want[i] {
			t.Errorf("result %d: %+v, want index %d status %d", i, r, i, want[i])
		}
	}
	if len(f.batch) != 1 || f.batch[0].ID != "local" {
		t.Errorf("stored here: %v", f.batch)
	}

	f.fwdErr = errors.New("refused")
	w = serve(t, f, Config{}, "POST", "/v1/tasks:batch", `{"tasks":[{"id":"`+id+`",`+cb+`,"delay_ms":5}]}`)
	if !strings.Contains(w.Body.String(), `"status":503`) {
		t.Errorf("sub-batch to an unreachable owner: %d %s", w.Code, w.Body)
	}
}

// TestServerBatchRoutesUndecoded: a batch's tasks for other owners go to
// them as they came, decoded and validated there (once), with generated
// ids added; the owner's answer is each task's result. A task whose id
// cannot be read plainly is decoded here first, as before.
func TestServerBatchRoutesUndecoded(t *testing.T) {
	f := newFake()
	for s := range uint16(slots.Count) {
		f.remote[s] = true
	}
	var sent []map[string]json.RawMessage
	f.answer = func(_, uri string, body []byte) Answer {
		var env struct {
			Tasks []map[string]json.RawMessage `json:"tasks"`
		}
		if err := json.Unmarshal(body, &env); err != nil {
			t.Fatalf("sub-batch %s: %v", body, err)
		}
		sent = env.Tasks
		var out []string
		for i := range env.Tasks {
			out = append(out, fmt.Sprintf(`{"index":%d,"id":%s,"status":201}`, i, env.Tasks[i]["id"]))
		}
		return Answer{Status: http.StatusOK, Body: []byte(`{"results":[` + strings.Join(out, ",") + `]}`)}
	}
	// Task 0 is invalid (delay_ms a string): its owner says so, here it is
	// not decoded. Task 1 has no id, task 2 a null one (decoded here).
	w := serve(t, f, Config{Clustered: true}, "POST", "/v1/tasks:batch", `{"tasks":[{"id":"r0",`+cb+`,"delay_ms":"soon"},{`+cb+`,"delay_ms":5},{"id":null,`+cb+`,"delay_ms":5}]}`)
	var ans struct {
		Results []BatchResult `json:"results"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &ans); err != nil || w.Code != http.StatusOK || len(ans.Results) != 3 || len(sent) != 3 {
		t.Fatalf("batch: %d %s; sent %d", w.Code, w.Body, len(sent))
	}
	if string(sent[0]["delay_ms"]) != `"soon"` {
		t.Errorf("task 0 sent as %v, want it as it came", sent[0])
	}
	for i, r := range ans.Results {
		var id string
		if err := json.Unmarshal(sent[i]["id"], &id); err != nil || id == "" || r.ID != id || r.Status != http.StatusCreated {
			t.Errorf("task %d: sent id %s, result %+v", i, sent[i]["id"], r)
		}
	}
}

// TestServerListsTheCluster: a clustered node merges its own page with
// the other owners'.
func TestServerListsTheCluster(t *testing.T) {
	f := newFake()
	id := remoteID(f)
	if w := serve(t, f, Config{}, "POST", "/v1/tasks", `{"id":"mine",`+cb+`,"delay_ms":5}`); w.Code != http.StatusCreated {
		t.Fatalf("create: %d %s", w.Code, w.Body)
	}
	f.answer = func(method, uri string, _ []byte) Answer {
		if method != "GET" || uri != "/internal/v1/tasks?limit=10" {
			t.Errorf("asked %s %s", method, uri)
		}
		page, _ := json.Marshal(ListPage{Tasks: []TaskResponse{{ID: id, Slot: slots.Of(id)}}})
		return Answer{Status: http.StatusOK, Body: page}
	}
	w := serve(t, f, Config{Clustered: true}, "GET", "/v1/tasks?limit=10", "")
	var page ListPage
	if err := json.Unmarshal(w.Body.Bytes(), &page); err != nil || len(page.Tasks) != 2 || page.NextCursor != "" {
		t.Fatalf("cluster list: %d %s", w.Code, w.Body)
	}
	f.answer = func(string, string, []byte) Answer { return Answer{Status: http.StatusInternalServerError} }
	if w := serve(t, f, Config{Clustered: true}, "GET", "/v1/tasks", ""); w.Code != http.StatusServiceUnavailable {
		t.Errorf("a member fails: %d %s", w.Code, w.Body)
	}
}

// TestClusterRanges: GET /v1/cluster leaves the members' slot ranges out
// unless ?ranges=true asks for them; any other value is a 400.
func TestClusterRanges(t *testing.T) {
	for _, tc := range []struct {
		query  string
		status int
		ranges bool
	}{
		{"", 200, false},
		{"?ranges=false", 200, false},
		{"?ranges=true", 200, true},
		{"?ranges=1", 200, true},
		{"?ranges=maybe", 400, false},
	} {
		w := serve(t, newFake(), Config{}, "GET", "/v1/cluster"+tc.query, "")
		if w.Code != tc.status {
			t.Errorf("GET /v1/cluster%s = %d %s, want %d", tc.query, w.Code, w.Body, tc.status)
			continue
		}
		if tc.status != 200 {
			if !strings.Contains(w.Body.String(), `"field":"ranges"`) {
				t.Errorf("GET /v1/cluster%s: %s, want an error on field ranges", tc.query, w.Body)
			}
			continue
		}
		if got := strings.Contains(w.Body.String(), `"owned_ranges"`); got != tc.ranges {
			t.Errorf("GET /v1/cluster%s: owned_ranges present %v, want %v: %s", tc.query, got, tc.ranges, w.Body)
		}
	}
}

// TestHashTagIDs: ids may hold braces (a hash tag); in a path they come
// percent-encoded, and the slot the node computes is the tag's.
func TestHashTagIDs(t *testing.T) {
	f := newFake()
	body := `{"callback_url":"https://x.example/cb","delay_ms":60000}`
	if w := serve(t, f, Config{}, "PUT", "/v1/tasks/%7Btenant-7%7D.invoice-42", body); w.Code != http.StatusCreated {
		t.Fatalf("PUT a braced id = %d %s, want 201", w.Code, w.Body)
	}
	if w := serve(t, f, Config{}, "POST", "/v1/tasks", `{"id":"{tenant-7}.reminder","callback_url":"https://x.example/cb","delay_ms":60000}`); w.Code != http.StatusCreated {
		t.Fatalf("POST a braced id = %d %s, want 201", w.Code, w.Body)
	}
	for _, id := range []string{"{tenant-7}.invoice-42", "{tenant-7}.reminder"} {
		if _, ok := f.tasks[id]; !ok {
			t.Errorf("task %q not stored", id)
		}
	}
	w := serve(t, f, Config{}, "GET", "/v1/tasks/%7Btenant-7%7D.invoice-42", "")
	if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), fmt.Sprintf(`"slot":%d`, slots.Of("tenant-7"))) {
		t.Errorf("GET a braced id = %d %s, want 200 with slot %d (the tag's)", w.Code, w.Body, slots.Of("tenant-7"))
	}
	if w := serve(t, f, Config{}, "POST", "/v1/tasks", `{"id":"a[b]","callback_url":"https://x.example/cb","delay_ms":1}`); w.Code != http.StatusBadRequest {
		t.Errorf("POST id a[b] = %d, want 400", w.Code)
	}
}
