package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chime-scheduler/chime/client"
	"github.com/chime-scheduler/chime/slots"
)

// fakeCluster is a few HTTP servers that serve a slot map the test sets
// and record which server got each request: the routing tests' cluster.
type fakeCluster struct {
	mu      sync.Mutex
	version string
	ranges  []map[string]any
	nodes   []*fakeNode
}

// fakeNode is one server of a fakeCluster.
type fakeNode struct {
	name string
	srv  *httptest.Server
	c    *fakeCluster
	mu   sync.Mutex
	hits []string // "METHOD path", the slot map's loads included
	// handle answers a request other than the slot map; nil answers 200
	// with a task named like the path's last element.
	handle func(w http.ResponseWriter, r *http.Request)
}

func newFakeCluster(t *testing.T, n int) *fakeCluster {
	t.Helper()
	fc := &fakeCluster{version: "1"}
	for i := range n {
		fn := &fakeNode{name: fmt.Sprintf("n%d", i), c: fc}
		fn.srv = httptest.NewServer(fn)
		t.Cleanup(fn.srv.Close)
		fc.nodes = append(fc.nodes, fn)
	}
	return fc
}

// addr is node i's host:port.
func (fc *fakeCluster) addr(i int) string { return strings.TrimPrefix(fc.nodes[i].srv.URL, "http://") }

// setMap makes the map version v with owner/follower pairs per range
// (index of the node, -1 for no follower): ranges[k] covers slots
// k*Count/len(ranges) up to the next.
func (fc *fakeCluster) setMap(v string, owners ...[2]int) {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	fc.version = v
	fc.ranges = nil
	per := slots.Count / len(owners)
	for k, of := range owners {
		r := map[string]any{"start": k * per, "end": (k+1)*per - 1, "owner": fc.nodes[of[0]].name,
			"http_addr": fc.addr(of[0]), "epoch": 1}
		if k == len(owners)-1 {
			r["end"] = slots.Count - 1
		}
		if of[1] >= 0 {
			r["follower"] = fc.nodes[of[1]].name
		}
		fc.ranges = append(fc.ranges, r)
	}
}

func (fn *fakeNode) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	fn.mu.Lock()
	fn.hits = append(fn.hits, r.Method+" "+r.URL.Path)
	handle := fn.handle
	fn.mu.Unlock()
	fc := fn.c
	fc.mu.Lock()
	version := fc.version
	body, _ := json.Marshal(map[string]any{"version": fc.version, "ranges": fc.ranges})
	fc.mu.Unlock()
	w.Header().Set("X-Chime-Node", fn.name)
	w.Header().Set("X-Chime-Table-Version", version)
	if r.URL.Path == "/v1/cluster/slots" {
		h := fnv.New64a()
		h.Write(body)
		etag := fmt.Sprintf(`"%s-%x"`, version, h.Sum64())
		w.Header().Set("ETag", etag)
		if r.Header.Get("If-None-Match") == etag {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
		return
	}
	if handle != nil {
		handle(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	id := r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:]
	_, _ = fmt.Fprintf(w, `{"id":%q,"callback_url":"http://x/","owner":%q}`, id, fn.name)
}

// taken returns the requests node fn got since the last call, the slot
// map's loads (and 304s) apart when withMap is false.
func (fn *fakeNode) taken(withMap bool) []string {
	fn.mu.Lock()
	defer fn.mu.Unlock()
	var out []string
	for _, h := range fn.hits {
		if withMap || !strings.HasSuffix(h, "/v1/cluster/slots") {
			out = append(out, h)
		}
	}
	fn.hits = nil
	return out
}

// idIn returns a task id whose slot is in [from, to).
func idIn(from, to int) string {
	for i := 0; ; i++ {
		id := fmt.Sprintf("task-%d", i)
		if s := int(slots.Of(id)); s >= from && s < to {
			return id
		}
	}
}

// fastRetry retries quickly: the tests wait for Retry-After only.
var fastRetry = client.WithRetry(client.RetryPolicy{MaxAttempts: 4, BackoffBase: time.Millisecond, BackoffMax: 5 * time.Millisecond})

// newTestClient is a client of fc seeded with node seed.
func newTestClient(t *testing.T, fc *fakeCluster, seed int, opts ...client.Option) *client.Client {
	t.Helper()
	c, err := client.New([]string{fc.nodes[seed].srv.URL}, append([]client.Option{fastRetry}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// newHalves is three fake nodes, n0 owning the low half of the slots
// (followed by n1) and n1 the high half (followed by n2), and a client
// seeded with n2.
func newHalves(t *testing.T) (*fakeCluster, *client.Client) {
	t.Helper()
	fc := newFakeCluster(t, 3)
	fc.setMap("1", [2]int{0, 1}, [2]int{1, 2})
	return fc, newTestClient(t, fc, 2)
}

// half is the first slot of the second half of the slots.
const half = slots.Count / 2

func TestRoutingToTheOwner(t *testing.T) {
	fc, c := newHalves(t)
	ctx := t.Context()
	low, high := idIn(0, half), idIn(half, slots.Count)
	for _, id := range []string{low, high} {
		if _, err := c.Get(ctx, id); err != nil {
			t.Fatalf("Get(%s): %v", id, err)
		}
	}
	if _, err := c.Create(ctx, client.Task{ID: high, CallbackURL: "http://x/"}); err != nil {
		t.Fatal(err)
	}
	if got, want := fc.nodes[0].taken(true), []string{"GET /v1/tasks/" + low}; !slices.Equal(got, want) {
		t.Errorf("n0 got %q, want %q", got, want)
	}
	if got, want := fc.nodes[1].taken(true), []string{"GET /v1/tasks/" + high, "POST /v1/tasks"}; !slices.Equal(got, want) {
		t.Errorf("n1 got %q, want %q", got, want)
	}
	if got, want := fc.nodes[2].taken(true), []string{"GET /v1/cluster/slots"}; !slices.Equal(got, want) {
		t.Errorf("the seed n2 got %q, want only the slot map's load", got)
	}
	// Without an id: the seed.
	if _, err := c.Create(ctx, client.Task{CallbackURL: "http://x/"}); err != nil {
		t.Fatal(err)
	}
	if got, want := fc.nodes[2].taken(true), []string{"POST /v1/tasks"}; !slices.Equal(got, want) {
		t.Errorf("a create without an id: the seed got %q, want %q", got, want)
	}
}

func TestRoutingWithoutMap(t *testing.T) {
	fc := newFakeCluster(t, 1)
	fc.nodes[0].handle = func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/cluster/slots" {
			http.NotFound(w, r)
		}
		_, _ = w.Write([]byte(`{"id":"x"}`))
	}
	fc.setMap("1", [2]int{0, -1})
	fc.mu.Lock()
	fc.ranges = []map[string]any{{"start": 0, "end": 16383, "owner": "n0", "http_addr": "0.0.0.0:7070"}}
	fc.mu.Unlock()
	c := newTestClient(t, fc, 0)
	// An owner address that is no use from here: the seed serves.
	for range 3 {
		if _, err := c.Get(t.Context(), "a"); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := fc.nodes[0].taken(false), []string{"GET /v1/tasks/a", "GET /v1/tasks/a", "GET /v1/tasks/a"}; !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestRoutingReloadsOnNewVersion(t *testing.T) {
	fc, c := newHalves(t)
	ctx := t.Context()
	low := idIn(0, half)
	if _, err := c.Get(ctx, low); err != nil {
		t.Fatal(err)
	}
	// n1 joins the low half: the table changes; n0 answers with version 2,
	// which makes the client load the map (from n0).
	fc.setMap("2", [2]int{1, 0}, [2]int{1, 2})
	if _, err := c.Get(ctx, low); err != nil {
		t.Fatal(err)
	}
	if got, want := fc.nodes[0].taken(true), []string{"GET /v1/tasks/" + low, "GET /v1/tasks/" + low, "GET /v1/cluster/slots"}; !slices.Equal(got, want) {
		t.Errorf("n0 got %q, want %q", got, want)
	}
	if _, err := c.Get(ctx, low); err != nil {
		t.Fatal(err)
	}
	if got, want := fc.nodes[1].taken(true), []string{"GET /v1/tasks/" + low}; !slices.Equal(got, want) {
		t.Errorf("after the reload n1 got %q, want %q", got, want)
	}
}

func TestRoutingReloadsWhenForwarded(t *testing.T) {
	t.Parallel() // it waits a second
	fc := newFakeCluster(t, 2)
	fc.setMap("1", [2]int{0, 1})
	c := newTestClient(t, fc, 0)
	ctx := t.Context()
	if _, err := c.Get(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	// The map changes without a new version (another node's view): n0
	// forwards to n1 and says so.
	fc.setMap("1", [2]int{1, 0})
	fc.nodes[0].handle = func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Chime-Owner", "n1")
		_, _ = w.Write([]byte(`{"id":"a"}`))
	}
	// The first forwarded answer comes within a second of the first
	// load: the reload waits a second (minReload), so wait it out.
	time.Sleep(time.Second)
	if _, err := c.Get(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if got, want := fc.nodes[0].taken(true), []string{"GET /v1/cluster/slots", "GET /v1/tasks/a", "GET /v1/tasks/a", "GET /v1/cluster/slots"}; !slices.Equal(got, want) {
		t.Errorf("n0 got %q, want %q", got, want)
	}
	if _, err := c.Get(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if got, want := fc.nodes[1].taken(true), []string{"GET /v1/tasks/a"}; !slices.Equal(got, want) {
		t.Errorf("after the reload n1 got %q, want %q", got, want)
	}
}

func TestRoutingReloadUsesETag(t *testing.T) {
	t.Parallel() // it waits a second
	fc := newFakeCluster(t, 1)
	fc.setMap("1", [2]int{0, -1})
	forwarded := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Chime-Owner", "n0")
		_, _ = w.Write([]byte(`{"id":"a"}`))
	}
	fc.nodes[0].handle = forwarded
	c := newTestClient(t, fc, 0)
	var loads atomic.Int32
	fc.nodes[0].srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/cluster/slots" && r.Header.Get("If-None-Match") != "" {
			loads.Add(1)
		}
		fc.nodes[0].ServeHTTP(w, r)
	})
	if _, err := c.Get(t.Context(), "a"); err != nil { // loads the map
		t.Fatal(err)
	}
	time.Sleep(time.Second) // past minReload: the next forwarded answer reloads
	for range 5 {
		if _, err := c.Get(t.Context(), "a"); err != nil {
			t.Fatal(err)
		}
	}
	// The forwarded answers reload the map at most once a second, with
	// If-None-Match (the map did not change: 304).
	if n := loads.Load(); n != 1 {
		t.Errorf("%d conditional loads, want 1", n)
	}
}

func TestFailoverOnConnectionError(t *testing.T) {
	fc, c := newHalves(t)
	ctx := t.Context()
	low := idIn(0, half)
	if _, err := c.Get(ctx, low); err != nil {
		t.Fatal(err)
	}
	fc.nodes[0].taken(true)
	fc.nodes[0].srv.Close() // the owner is gone
	for _, do := range []func() error{
		func() error { _, err := c.Get(ctx, low); return err },
		func() error { _, err := c.Create(ctx, client.Task{ID: low, CallbackURL: "http://x/"}); return err },
		func() error { return c.Delete(ctx, low) },
	} {
		if err := do(); err != nil {
			t.Fatalf("with the owner down: %v", err)
		}
	}
	// The follower n1 gets them all.
	if got, want := fc.nodes[1].taken(false), []string{"GET /v1/tasks/" + low, "POST /v1/tasks", "DELETE /v1/tasks/" + low}; !slices.Equal(got, want) {
		t.Errorf("the follower got %q, want %q", got, want)
	}
}

func TestFailoverOn503HonoursRetryAfter(t *testing.T) {
	t.Parallel() // it waits a second
	fc, c := newHalves(t)
	fc.nodes[0].handle = func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"error":{"code":"unavailable","message":"the slot is moving"}}`))
	}
	low := idIn(0, half)
	start := time.Now()
	if _, err := c.Get(t.Context(), low); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < time.Second {
		t.Errorf("the retry came after %v, before the Retry-After of 1 s", d)
	}
	if got := fc.nodes[0].taken(false); len(got) != 1 {
		t.Errorf("the owner got %q, want one request", got)
	}
	if got := fc.nodes[1].taken(false); len(got) != 1 {
		t.Errorf("the follower got %q, want the retry", got)
	}
}

func TestRetry429SameNode(t *testing.T) {
	t.Parallel() // it waits a second
	fc := newFakeCluster(t, 2)
	fc.setMap("1", [2]int{0, 1})
	n := 0
	fc.nodes[0].handle = func(w http.ResponseWriter, r *http.Request) {
		if n++; n == 1 {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = w.Write([]byte(`{"error":{"code":"overloaded","message":"write queue is full"}}`))
			return
		}
		_, _ = w.Write([]byte(`{"id":"a"}`))
	}
	c := newTestClient(t, fc, 0)
	start := time.Now()
	if _, _, err := c.Put(t.Context(), client.Task{ID: "a", CallbackURL: "http://x/"}); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < time.Second {
		t.Errorf("the retry came after %v, before the Retry-After of 1 s", d)
	}
	if got, want := fc.nodes[0].taken(false), []string{"PUT /v1/tasks/a", "PUT /v1/tasks/a"}; !slices.Equal(got, want) {
		t.Errorf("n0 got %q, want %q", got, want)
	}
}

func TestNoRetryOfNonIdempotent(t *testing.T) {
	fc := newFakeCluster(t, 2)
	fc.setMap("1", [2]int{0, 1})
	for _, n := range fc.nodes {
		n.handle = func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"error":{"code":"unavailable","message":"a replica did not acknowledge"}}`))
		}
	}
	c, err := client.New([]string{fc.nodes[0].srv.URL, fc.nodes[1].srv.URL}, fastRetry)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	_, err = c.Create(ctx, client.Task{CallbackURL: "http://x/"})
	if !errors.Is(err, client.ErrUnavailable) {
		t.Errorf("create without an id: %v, want ErrUnavailable", err)
	}
	_, err = c.Trigger(ctx, "a")
	if !errors.Is(err, client.ErrUnavailable) {
		t.Errorf("trigger: %v, want ErrUnavailable", err)
	}
	got := append(fc.nodes[0].taken(false), fc.nodes[1].taken(false)...)
	if want := []string{"POST /v1/tasks", "POST /v1/tasks/a/trigger"}; !slices.Equal(got, want) {
		t.Errorf("requests %q, want each sent once: %q", got, want)
	}
	// With an id a create is retried: every attempt of the policy.
	_, err = c.Create(ctx, client.Task{ID: "a", CallbackURL: "http://x/"})
	var e *client.Error
	if !errors.As(err, &e) || e.Status != http.StatusServiceUnavailable || e.Code != "unavailable" {
		t.Errorf("create with an id: %v, want the 503", err)
	}
	got = append(fc.nodes[0].taken(false), fc.nodes[1].taken(false)...)
	if len(got) != 4 {
		t.Errorf("create with an id: %d attempts (%q), want 4", len(got), got)
	}
}

func TestNoRetryAfterSendWhenNotIdempotent(t *testing.T) {
	// The seed takes the request and drops the connection without an
	// answer: the create may have been stored, so it is not sent again.
	fc := newFakeCluster(t, 2)
	fc.setMap("1", [2]int{0, 1})
	fc.nodes[0].handle = func(w http.ResponseWriter, r *http.Request) {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
	}
	c, err := client.New([]string{fc.nodes[0].srv.URL, fc.nodes[1].srv.URL}, fastRetry)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Create(t.Context(), client.Task{CallbackURL: "http://x/"}); !errors.Is(err, client.ErrUnavailable) {
		t.Errorf("create: %v, want ErrUnavailable", err)
	}
	if got := fc.nodes[1].taken(false); len(got) != 0 {
		t.Errorf("the second seed got %q: the create was sent twice", got)
	}
	// A dial error, though, means it was never sent: the next seed gets it.
	fc.nodes[0].srv.Close()
	if _, err := c.Create(t.Context(), client.Task{CallbackURL: "http://x/"}); err != nil {
		t.Errorf("create with the first seed down: %v", err)
	}
	if got := fc.nodes[1].taken(false); len(got) != 1 {
		t.Errorf("the second seed got %q, want the create", got)
	}
}

func TestBatchSplitsByOwner(t *testing.T) {
	fc, c := newHalves(t)
	var mu sync.Mutex
	parts := map[string][]string{} // node → ids of the part it got
	for _, n := range fc.nodes {
		n.handle = func(w http.ResponseWriter, r *http.Request) {
			var env struct {
				Tasks []struct {
					ID string `json:"id"`
				} `json:"tasks"`
			}
			_ = json.NewDecoder(r.Body).Decode(&env)
			var res []map[string]any
			for i, tk := range env.Tasks {
				mu.Lock()
				parts[n.name] = append(parts[n.name], tk.ID)
				mu.Unlock()
				id := tk.ID
				if id == "" {
					id = "generated"
				}
				res = append(res, map[string]any{"index": i, "id": id, "status": 201})
			}
			_ = json.NewEncoder(w).Encode(map[string]any{"results": res})
		}
	}
	low1, low2, high := idIn(0, half), idIn(0, half/2), idIn(half, slots.Count)
	if low1 == low2 {
		low2 = idIn(half/2, half)
	}
	tasks := []client.Task{{ID: high}, {ID: low1}, {}, {ID: low2}}
	res, err := c.CreateBatch(t.Context(), tasks)
	if err != nil {
		t.Fatal(err)
	}
	wantIDs := []string{high, low1, "generated", low2}
	for i, r := range res {
		if r.ID != wantIDs[i] || r.Status != 201 || r.Err != nil {
			t.Errorf("result %d = %+v, want id %s created", i, r, wantIDs[i])
		}
	}
	want := map[string][]string{"n0": {low1, low2}, "n1": {high}, "n2": {""}}
	if fmt.Sprint(parts) != fmt.Sprint(want) {
		t.Errorf("parts %v, want %v", parts, want)
	}
}

func TestErrorsMatchSentinels(t *testing.T) {
	all := []error{client.ErrNotFound, client.ErrConflict, client.ErrInvalid, client.ErrUnauthorized, client.ErrUnavailable, client.ErrTooManyRequests}
	tests := []struct {
		status int
		want   error // nil: none
	}{
		{400, client.ErrInvalid},
		{401, client.ErrUnauthorized},
		{403, client.ErrUnauthorized},
		{404, client.ErrNotFound},
		{405, client.ErrInvalid},
		{409, client.ErrConflict},
		{413, client.ErrInvalid},
		{415, client.ErrInvalid},
		{421, nil},
		{429, client.ErrTooManyRequests},
		{500, nil},
		{503, client.ErrUnavailable},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.status), func(t *testing.T) {
			var err error = &client.Error{Status: tt.status, Code: "x"}
			for _, s := range all {
				if got := errors.Is(err, s); got != (s == tt.want) {
					t.Errorf("errors.Is(%d, %v) = %v", tt.status, s, got)
				}
			}
		})
	}
}

func TestContextEndsRetries(t *testing.T) {
	t.Parallel() // it waits a second
	fc := newFakeCluster(t, 1)
	fc.setMap("1", [2]int{0, -1})
	fc.nodes[0].handle = func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "30")
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	c := newTestClient(t, fc, 0)
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	start := time.Now()
	_, err := c.Get(ctx, "a")
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, client.ErrUnavailable) {
		t.Errorf("Get = %v, want the deadline and the 503", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("Get took %v: the context did not end the wait", d)
	}
}
