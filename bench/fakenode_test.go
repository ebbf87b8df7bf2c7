package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeNode is a tiny stand-in for a Chime node that speaks the parts of the
// HTTP contract the workloads use: /readyz, POST /v1/tasks and
// /v1/tasks:batch. One-shot tasks with due_at are fired at their due time
// (never before) into their callback_url with the callback headers. It lets
// the workloads be tested without the real node.
type fakeNode struct {
	url string
	srv *http.Server
	hc  *http.Client

	// throttle answers the first throttle create requests with 429.
	throttle int
	// rejectSuffix makes tasks whose id ends in it fail with invalid_argument.
	rejectSuffix string
	// movingSuffix answers the first create of a task whose id ends in it
	// 503 unavailable, as a node does for a slot that is moving; with
	// movingStores the task is stored all the same (written on the owner,
	// not replicated), so a retry finds it: 409.
	movingSuffix string
	movingStores bool

	mu      sync.Mutex // guards the fields below
	cluster []byte     // GET /v1/cluster answer; nil = a standalone node named "fake"
	ids     map[string]bool
	moved   map[string]bool // ids answered 503 once (movingSuffix)
	timers  []*time.Timer
	creates int
	fired   sync.WaitGroup
	flows   []string // PUT /v1/flows/{key}: "key body"
	keyed   int      // tasks created with a flow_key
}

// taskReq is the part of a task request the fake reads.
type taskReq struct {
	ID          string          `json:"id"`
	CallbackURL string          `json:"callback_url"`
	DueAt       string          `json:"due_at"`
	DelayMs     *int64          `json:"delay_ms"`
	Payload     json.RawMessage `json:"payload"`
	FlowKey     string          `json:"flow_key"`
}

func startFakeNode(t *testing.T, throttle int, rejectSuffix string) *fakeNode {
	t.Helper()
	f := &fakeNode{throttle: throttle, rejectSuffix: rejectSuffix, ids: map[string]bool{}, moved: map[string]bool{},
		hc: newHTTPClient(16, 10*time.Second)}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	mux.HandleFunc("POST /v1/tasks", f.createOne)
	mux.HandleFunc("POST /v1/tasks:batch", f.createBatch)
	mux.HandleFunc("GET /v1/cluster", f.clusterView)
	mux.HandleFunc("PUT /v1/flows/{key}", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.flows = append(f.flows, r.PathValue("key")+" "+string(body))
		f.mu.Unlock()
		w.WriteHeader(http.StatusCreated)
	})
	mux.HandleFunc("GET /v1/cluster/slots", f.slotMap)
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, "# TYPE chime_fake_metric counter\nchime_fake_metric 1\n")
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f.url = "http://" + ln.Addr().String()
	f.srv = &http.Server{Handler: mux}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = f.srv.Serve(ln)
	}()
	t.Cleanup(func() {
		_ = f.srv.Close()
		<-done
		f.mu.Lock()
		for _, tm := range f.timers {
			if tm.Stop() {
				f.fired.Done()
			}
		}
		f.mu.Unlock()
		f.fired.Wait()
		f.hc.CloseIdleConnections()
	})
	return f
}

// clusterView answers GET /v1/cluster: the view set with setCluster, or a
// standalone node owning every slot.
func (f *fakeNode) clusterView(w http.ResponseWriter, _ *http.Request) {
	f.mu.Lock()
	body := f.cluster
	f.mu.Unlock()
	if body == nil {
		body = []byte(`{"self":"fake","table_version":1,"settled":true,"members":[{"name":"fake","http_addr":"` +
			strings.TrimPrefix(f.url, "http://") + `","state":"active","status":"alive","slots_owned":16384,"owned_ranges":[[0,16383]]}]}`)
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(body)
}

// slotMap answers GET /v1/cluster/slots (the Go SDK's slot map) from the
// owned ranges of the view clusterView answers, without followers.
func (f *fakeNode) slotMap(w http.ResponseWriter, r *http.Request) {
	rec := httptest.NewRecorder()
	f.clusterView(rec, r)
	var v clusterView
	if err := json.Unmarshal(rec.Body.Bytes(), &v); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	type slotRange struct {
		Start    int    `json:"start"`
		End      int    `json:"end"`
		Owner    string `json:"owner"`
		HTTPAddr string `json:"http_addr"`
	}
	var ranges []slotRange
	for _, m := range v.Members {
		for _, or := range m.OwnedRanges {
			ranges = append(ranges, slotRange{Start: int(or[0]), End: int(or[1]), Owner: m.Name, HTTPAddr: m.HTTPAddr})
		}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"version": fmt.Sprint(v.TableVersion), "ranges": ranges})
}

// setCluster makes the fake answer GET /v1/cluster as self, in a cluster
// of members; JSON of clusterView.
func (f *fakeNode) setCluster(t *testing.T, self string, members []clusterMember) {
	t.Helper()
	b, err := json.Marshal(clusterView{Self: self, TableVersion: 7, Settled: true, Members: members})
	if err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	f.cluster = b
	f.mu.Unlock()
}

// storedIDs returns the ids of the tasks the fake holds.
func (f *fakeNode) storedIDs() map[string]bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.ids)
}

// throttled reports whether this create request gets a 429.
func (f *fakeNode) throttled(w http.ResponseWriter) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.creates++
	if f.creates <= f.throttle {
		w.Header().Set("Retry-After", "0")
		w.WriteHeader(http.StatusTooManyRequests)
		return true
	}
	return false
}

func (f *fakeNode) createOne(w http.ResponseWriter, r *http.Request) {
	if f.throttled(w) {
		return
	}
	var tr taskReq
	if err := json.NewDecoder(r.Body).Decode(&tr); err != nil {
		http.Error(w, `{"error":{"code":"invalid_argument","message":"bad json"}}`, http.StatusBadRequest)
		return
	}
	status, msg := f.accept(tr)
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"id":%q,"error":%q}`, tr.ID, msg)
}

func (f *fakeNode) createBatch(w http.ResponseWriter, r *http.Request) {
	if f.throttled(w) {
		return
	}
	var req struct {
		Tasks []taskReq `json:"tasks"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, `{"error":{"code":"invalid_argument","message":"bad json"}}`, http.StatusBadRequest)
		return
	}
	var out bytes.Buffer
	out.WriteString(`{"results":[`)
	for i, tr := range req.Tasks {
		if i > 0 {
			out.WriteByte(',')
		}
		status, msg := f.accept(tr)
		if status == http.StatusCreated {
			fmt.Fprintf(&out, `{"id":%q,"status":201}`, tr.ID)
		} else {
			code := "invalid_argument"
			switch status {
			case http.StatusConflict:
				code = "conflict"
			case http.StatusServiceUnavailable:
				code = "unavailable"
			}
			fmt.Fprintf(&out, `{"index":%d,"status":%d,"error":{"code":%q,"message":%q,"field":"id"}}`, i, status, code, msg)
		}
	}
	out.WriteString(`]}`)
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(out.Bytes())
}

// accept stores a task and schedules its fire; it returns the status and,
// for a refusal, the message.
func (f *fakeNode) accept(tr taskReq) (int, string) {
	if tr.ID == "" || tr.CallbackURL == "" || (tr.DueAt == "") == (tr.DelayMs == nil) {
		return http.StatusBadRequest, "need id, callback_url and one of due_at, delay_ms"
	}
	if f.rejectSuffix != "" && strings.HasSuffix(tr.ID, f.rejectSuffix) {
		return http.StatusBadRequest, "rejected by the fake"
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ids[tr.ID] {
		return http.StatusConflict, "exists"
	}
	if f.movingSuffix != "" && strings.HasSuffix(tr.ID, f.movingSuffix) && !f.moved[tr.ID] {
		f.moved[tr.ID] = true
		if f.movingStores {
			f.ids[tr.ID] = true
		}
		return http.StatusServiceUnavailable, "this node does not serve the slot right now (it is moving); retry"
	}
	f.ids[tr.ID] = true
	if tr.FlowKey != "" {
		f.keyed++
	}
	if tr.DueAt == "" {
		return http.StatusCreated, "" // delayed tasks are stored, never fired
	}
	due, err := time.Parse(time.RFC3339Nano, tr.DueAt)
	if err != nil {
		return http.StatusBadRequest, err.Error()
	}
	f.fired.Add(1)
	f.timers = append(f.timers, time.AfterFunc(time.Until(due), func() {
		defer f.fired.Done()
		f.fire(tr, due)
	}))
	return http.StatusCreated, ""
}

// fire posts one callback as the contract describes.
func (f *fakeNode) fire(tr taskReq, due time.Time) {
	req, err := http.NewRequest(http.MethodPost, tr.CallbackURL, bytes.NewReader(tr.Payload))
	if err != nil {
		return
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(headerTaskID, tr.ID)
	req.Header.Set(headerFireID, tr.ID+":1")
	req.Header.Set(headerDueAt, due.UTC().Format(time.RFC3339Nano))
	req.Header.Set(headerAttempt, "1")
	resp, err := f.hc.Do(req)
	if err != nil {
		return // the receiver may be closed at the end of a test
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
}

// stored returns how many tasks the fake holds.
func (f *fakeNode) stored() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.ids)
}
