package node

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// testNode is an in-process node on a temp dir with its API on httptest.
type testNode struct {
	*Node
	srv *httptest.Server
	cfg Config
}

// startNode starts a node with the test defaults, changed by mutate.
func startNode(t *testing.T, mutate func(*Config)) *testNode {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Name = "test-node"
	cfg.DataDir = t.TempDir()
	cfg.Logger = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if mutate != nil {
		mutate(&cfg)
	}
	return restartNode(t, cfg)
}

// restartNode starts a node with exactly cfg (e.g. the data dir of a
// stopped one).
func restartNode(t *testing.T, cfg Config) *testNode {
	t.Helper()
	n, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if err := n.Start(); err != nil {
		t.Fatalf("Start: %v", err)
	}
	srv := httptest.NewServer(n.Handler())
	tn := &testNode{Node: n, srv: srv, cfg: cfg}
	t.Cleanup(func() { tn.stop(t) })
	deadline := time.Now().Add(10 * time.Second)
	for !n.Ready() {
		if time.Now().After(deadline) {
			t.Fatal("node not ready after 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	return tn
}

// stop stops tn as chime serve does on SIGTERM: the node drains (a cluster
// member hands its slots over, which needs its internal endpoints) and
// closes, then its server stops.
func (tn *testNode) stop(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := tn.Close(ctx); err != nil {
		t.Errorf("Close: %v", err)
	}
	tn.srv.Close()
}

// do sends a request to the node's API and decodes a JSON answer into out
// (when non-nil). It returns the status code. A POST or PUT says
// Content-Type: application/json unless hdr sets another.
func (tn *testNode) do(t *testing.T, method, path string, body any, out any, hdr ...string) int {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = bytes.NewBufferString(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		buf, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(buf)
	}
	req, err := http.NewRequest(method, tn.srv.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if method == http.MethodPost || method == http.MethodPut {
		req.Header.Set("Content-Type", "application/json") // hdr may change it
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := tn.srv.Client().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if out != nil && len(data) > 0 && strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		if err := json.Unmarshal(data, out); err != nil {
			t.Fatalf("%s %s: decode %q: %v", method, path, data, err)
		}
	}
	return resp.StatusCode
}

// testWriter routes logs to t.Log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(bytes.TrimRight(p, "\n")))
	return len(p), nil
}

// hit is one callback the receiver got.
type hit struct {
	TaskID  string
	FireID  string
	Due     time.Time
	Attempt int
	At      time.Time
	Body    []byte
	Header  http.Header
}

// receiver is a real HTTP endpoint that records callbacks. respond decides
// the status of each hit (nil = 200).
type receiver struct {
	srv *httptest.Server

	mu struct {
		sync.Mutex
		hits       []hit
		respond    func(h hit, n int) int // n = hits so far for this task
		retryAfter string                 // Retry-After on non-2xx answers
		perTask    map[string]int
	}
	notify chan struct{}
}

func newReceiver(t *testing.T) *receiver {
	t.Helper()
	r := &receiver{notify: make(chan struct{}, 1)}
	r.mu.perTask = make(map[string]int)
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	now := time.Now()
	body, _ := io.ReadAll(req.Body)
	due, _ := time.Parse(time.RFC3339Nano, req.Header.Get("X-Chime-Due-At"))
	attempt, _ := strconv.Atoi(req.Header.Get("X-Chime-Attempt"))
	h := hit{
		TaskID: req.Header.Get("X-Chime-Task-Id"), FireID: req.Header.Get("X-Chime-Fire-Id"),
		Due: due, Attempt: attempt, At: now, Body: body, Header: req.Header.Clone(),
	}
	r.mu.Lock()
	r.mu.hits = append(r.mu.hits, h)
	r.mu.perTask[h.TaskID]++
	n := r.mu.perTask[h.TaskID]
	respond, retryAfter := r.mu.respond, r.mu.retryAfter
	r.mu.Unlock()
	status := http.StatusOK
	if respond != nil {
		status = respond(h, n)
	}
	if status >= 300 && retryAfter != "" {
		w.Header().Set("Retry-After", retryAfter)
	}
	select {
	case r.notify <- struct{}{}:
	default:
	}
	w.WriteHeader(status)
	_, _ = io.WriteString(w, `{"ok":true}`)
}

func (r *receiver) setRespond(f func(h hit, n int) int) {
	r.mu.Lock()
	r.mu.respond = f
	r.mu.Unlock()
}

func (r *receiver) setRetryAfter(v string) {
	r.mu.Lock()
	r.mu.retryAfter = v
	r.mu.Unlock()
}

func (r *receiver) hits() []hit {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]hit(nil), r.mu.hits...)
}

// waitHits waits until cond holds for the hits so far, or fails after d.
func (r *receiver) waitHits(t *testing.T, d time.Duration, cond func([]hit) bool) []hit {
	t.Helper()
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for {
		hs := r.hits()
		if cond(hs) {
			return hs
		}
		select {
		case <-r.notify:
		case <-time.After(50 * time.Millisecond):
		case <-deadline.C:
			t.Fatalf("condition not met after %v; %d hits", d, len(hs))
		}
	}
}

// url is the receiver's callback URL for path p.
func (r *receiver) url(p string) string { return r.srv.URL + p }
