package node

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The single-node harness: standalone nodes (no gossip, no cluster), each
// on a Pebble store in its own temp dir, with their API, the callback
// receivers and the test's client on one in-memory network per test (a
// pipeNet, see pipenet_test.go: nodes at 127.0.0.1:7001, :7002, …, so the
// API's Host guard sees loopback names as before). No socket is opened,
// so a test can run inside a testing/synctest bubble, where time is fake:
// due times, backoff, Retry-After and periodic schedules of seconds cost
// no real time, only the CPU the node spends meanwhile, and "never early"
// holds to the nanosecond. Pebble on disk works in a bubble (its syscalls
// block nobody durably; an fsync takes real time and no fake time), so a
// restart finds what the node wrote, as a restarted process does. The
// cleanups stop every node (drained and closed), its server, the receivers
// and the client's connections, so the bubble can end.
//
//	synctest.Test(t, func(t *testing.T) {
//		tn := startNode(t, nil) // ready
//		rcv := newReceiver(t)
//		tn.do(t, "POST", "/v1/tasks", map[string]any{"id": "a", "callback_url": rcv.url("/cb"), "delay_ms": 500}, nil)
//		h := rcv.waitHits(t, 10*time.Second, func(hs []hit) bool { return len(hs) == 1 })[0]
//		// h.At is exactly when the node sent it, in fake time
//	})
//
// The same harness runs outside a bubble, in real time: the tests that are
// not about time (request validation, auth, edge headers, the backup
// stream; several use T.Run, which a bubble does not allow) run there, and
// wait on nothing shorter than 60 s.

// testNet is the in-memory network of one test (or one bubble): its
// nodes' APIs, its receivers and its client. It is made at the test's
// first startNode or newReceiver.
type testNet struct {
	pn     *pipeNet
	client *http.Client // the test's client (testNode.do)
	mu     sync.Mutex
	port   int  // the last port handed out
	fwd    bool // a forwarder dialed on it (forwarderIdle)
}

// forwarderIdle is how long a bubble that had a forwarder waits before it
// ends: the connection cleaner of the forwarder's fasthttp client exits at
// its next wake after the forwarder closed, and it sleeps up to
// forward.go's MaxIdleConnDuration (30 s) plus 1 ns past a connection's
// last use. A wait of exactly 30 s lost that race when the last call
// ended at the instant the cleanups began (TestInternalMemberAuth, CI:
// "main bubble goroutine has exited but blocked goroutines remain").
const forwarderIdle = 31 * time.Second

// testNetClientAddr is where the test's client dials from.
const testNetClientAddr = "127.0.0.1:40000"

var testNets struct {
	sync.Mutex
	m map[*testing.T]*testNet
}

// netOf returns t's network, made at the first call.
func netOf(t *testing.T) *testNet {
	testNets.Lock()
	defer testNets.Unlock()
	if nw := testNets.m[t]; nw != nil {
		return nw
	}
	pn := newPipeNet()
	nw := &testNet{pn: pn, client: &http.Client{Transport: &http.Transport{DialContext: pn.dialer(testNetClientAddr)}}}
	if testNets.m == nil {
		testNets.m = map[*testing.T]*testNet{}
	}
	testNets.m[t] = nw
	// Cleanups run last-registered first: this one after the nodes and
	// receivers of t stopped.
	t.Cleanup(func() {
		nw.client.CloseIdleConnections()
		nw.mu.Lock()
		fwd := nw.fwd
		nw.mu.Unlock()
		if fwd && inBubble() {
			time.Sleep(forwarderIdle)
		}
		testNets.Lock()
		delete(testNets.m, t)
		testNets.Unlock()
	})
	return nw
}

// newAddr returns an address nobody on the network uses yet.
func (nw *testNet) newAddr() string {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	nw.port++
	return fmt.Sprintf("127.0.0.1:%d", 7000+nw.port)
}

// inBubble reports whether the caller runs in a testing/synctest bubble,
// whose fake clock starts at midnight UTC, 2000-01-01.
func inBubble() bool { return time.Now().Year() < 2001 }

// testNode is an in-process node on a temp dir with its API on the test's
// network.
type testNode struct {
	*Node
	cfg  Config
	tnet *testNet
	pipe *pipeServer // the API on tnet at cfg.HTTPAddr
}

// testConfig returns the test defaults for a standalone node named name:
// a temp dir, the test's network (its API address and its dialer), logs
// at warning level to t.
func testConfig(t *testing.T, name string) Config {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Name = name
	cfg.DataDir = t.TempDir()
	cfg.HTTPAddr = netOf(t).newAddr()
	cfg.DialContext = netOf(t).pn.dialer(cfg.HTTPAddr)
	// Retry jitter drawn anew each run, as the clock's seed does in real
	// time (a bubble's clock starts at the same instant every run).
	cfg.Seed = rand.Uint64()
	cfg.Logger = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	return cfg
}

// startNode starts a node with the test defaults, changed by mutate, and
// waits until it is ready.
func startNode(t *testing.T, mutate func(*Config)) *testNode {
	t.Helper()
	cfg := testConfig(t, "test-node")
	if mutate != nil {
		mutate(&cfg)
	}
	return restartNode(t, cfg)
}

// restartNode starts a node with exactly cfg (e.g. the data dir and the
// address of a stopped one) and waits until it is ready.
func restartNode(t *testing.T, cfg Config) *testNode {
	t.Helper()
	return runNode(t, cfg, nil)
}

// runNode starts a node with cfg, after prepare (when not nil) changed it
// between New and Start, serves its API at cfg.HTTPAddr on the test's
// network and waits until it is ready. A cleanup stops it.
func runNode(t *testing.T, cfg Config, prepare func(*Node)) *testNode {
	t.Helper()
	n, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if prepare != nil {
		prepare(n)
	}
	tnet := netOf(t)
	ln := tnet.pn.listen(cfg.HTTPAddr) // calls wait in accept until it serves
	if err := n.Start(); err != nil {
		ln.Close()
		t.Fatalf("Start: %v", err)
	}
	tn := &testNode{Node: n, cfg: cfg, tnet: tnet, pipe: servePipe(ln, n.Handler())}
	t.Cleanup(func() { tn.stop(t) })
	deadline := time.Now().Add(60 * time.Second)
	for !n.Ready() {
		if time.Now().After(deadline) {
			t.Fatal("node not ready after 60s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	return tn
}

// stop stops tn as chime serve does on SIGTERM: the node drains (a cluster
// member hands its slots over, which needs its internal endpoints) and
// closes, then its server stops. Stopping twice is harmless.
func (tn *testNode) stop(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := tn.Close(ctx); err != nil {
		t.Errorf("Close: %v", err)
	}
	tn.pipe.close()
}

// lateBound bounds how late tn sends a fire after its time in fake time,
// where the node's work takes none: a tick of the wheel, then an IdleSync
// (a fire's intent is synced before its callback is sent).
func (tn *testNode) lateBound() time.Duration { return tn.cfg.Tick + tn.cfg.IdleSync }

// url is the URL of path on tn's API.
func (tn *testNode) url(path string) string {
	return "http://" + tn.cfg.HTTPAddr + path
}

// client is the client that reaches tn's API.
func (tn *testNode) client() *http.Client {
	return tn.tnet.client
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
	req, err := http.NewRequest(method, tn.url(path), rd)
	if err != nil {
		t.Fatal(err)
	}
	if method == http.MethodPost || method == http.MethodPut {
		req.Header.Set("Content-Type", "application/json") // hdr may change it
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := tn.client().Do(req)
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

// metricsText returns tn's GET /metrics answer (without a token).
func (tn *testNode) metricsText(t *testing.T) string {
	t.Helper()
	resp, err := tn.client().Get(tn.url("/metrics"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(body)
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

// receiver is an HTTP endpoint on the test's network that records
// callbacks. respond decides the status of each hit (nil = 200).
type receiver struct {
	addr string // host:port

	mu struct {
		sync.Mutex
		hits       []hit
		respond    func(h hit, n int) int // n = hits so far for this task
		retryAfter string                 // Retry-After on non-2xx answers
		perTask    map[string]int
	}
	notify chan struct{}
}

// newReceiver starts a receiver on t's network.
func newReceiver(t *testing.T) *receiver {
	t.Helper()
	r := &receiver{notify: make(chan struct{}, 1)}
	r.mu.perTask = make(map[string]int)
	tnet := netOf(t)
	r.addr = tnet.newAddr()
	t.Cleanup(servePipe(tnet.pn.listen(r.addr), http.HandlerFunc(r.serve)).close)
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

// fireIDs returns the fire ids of hs, for messages.
func fireIDs(hs []hit) []string {
	out := make([]string, len(hs))
	for i, h := range hs {
		out[i] = h.FireID
	}
	return out
}

// waitHits waits until cond holds for the hits so far, or fails after d.
// cond runs under the receiver's lock and must not keep the slice.
func (r *receiver) waitHits(t *testing.T, d time.Duration, cond func([]hit) bool) []hit {
	t.Helper()
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		ok, n := cond(r.mu.hits), len(r.mu.hits)
		r.mu.Unlock()
		if ok {
			return r.hits()
		}
		select {
		case <-r.notify:
		case <-time.After(50 * time.Millisecond):
		case <-deadline.C:
			t.Fatalf("condition not met after %v; %d hits", d, n)
		}
	}
}

// url is the receiver's callback URL for path p.
func (r *receiver) url(p string) string { return "http://" + r.addr + p }

// waitFor polls cond every 20 ms until it holds, or fails after d (fake
// time in a bubble).
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %v", what, d)
		}
	}
}
