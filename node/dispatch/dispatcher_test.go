package dispatch

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/chime-scheduler/chime/node/clock"
)

// dispNoLeaks fails t if a goroutine started during the test outlives it. It
// must be the first cleanup registered, so it runs last. (VerifyNone per
// test, not TestMain: other files of this package have their own tests.)
func dispNoLeaks(t *testing.T) {
	t.Helper()
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) })
}

// newDispTest builds a dispatcher with deps whose results go to the
// returned channel (buffered, so OnResult never blocks), and closes it at
// cleanup with an already-cancelled context so blocked callbacks cannot
// hang the test.
func newDispTest(t *testing.T, cfg Config, deps Deps) (*Dispatcher, chan Result) {
	t.Helper()
	results := make(chan Result, 1024)
	deps.OnResult = func(r Result) { results <- r }
	d := New(cfg, deps)
	t.Cleanup(func() {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		d.Close(ctx)
	})
	return d, results
}

// dispRecv takes n results, in completion order.
func dispRecv(t *testing.T, results <-chan Result, n int) []Result {
	t.Helper()
	out := make([]Result, 0, n)
	for range n {
		out = append(out, <-results)
	}
	return out
}

// dispWaitUntil polls cond, yielding the processor, until it holds. It asserts
// nothing about time; a condition that never holds ends in the test timeout.
func dispWaitUntil(cond func() bool) {
	for !cond() {
		runtime.Gosched()
		time.Sleep(100 * time.Microsecond)
	}
}

// dispGauge counts requests held at once and the most seen.
type dispGauge struct {
	cur, max atomic.Int64
}

func (g *dispGauge) enter() {
	n := g.cur.Add(1)
	for {
		m := g.max.Load()
		if n <= m || g.max.CompareAndSwap(m, n) {
			return
		}
	}
}

func (g *dispGauge) leave() { g.cur.Add(-1) }

// dispBlockingServer answers every request only once released (or when the
// client goes away), and tracks how many requests it holds at once.
type dispBlockingServer struct {
	*httptest.Server
	arrived  chan string // task id of each request, on arrival
	release  chan struct{}
	once     sync.Once
	inflight atomic.Int64
	maxSeen  atomic.Int64
}

func newDispBlockingServer(t *testing.T) *dispBlockingServer {
	t.Helper()
	return newDispBlockingServerIn(t, nil)
}

// newDispBlockingServerIn is newDispBlockingServer whose requests also
// count in total (nil: none), which several servers may share.
func newDispBlockingServerIn(t *testing.T, total *dispGauge) *dispBlockingServer {
	t.Helper()
	b := &dispBlockingServer{arrived: make(chan string, 1024), release: make(chan struct{})}
	b.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if total != nil {
			total.enter()
		}
		n := b.inflight.Add(1)
		for {
			m := b.maxSeen.Load()
			if n <= m || b.maxSeen.CompareAndSwap(m, n) {
				break
			}
		}
		b.arrived <- r.Header.Get("X-Chime-Task-Id")
		select {
		case <-b.release:
		case <-r.Context().Done():
		}
		b.inflight.Add(-1)
		if total != nil {
			total.leave() // before the client can have the response
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(b.Close)
	t.Cleanup(b.Release) // runs before Close
	return b
}

// Release lets every held and future request answer.
func (b *dispBlockingServer) Release() { b.once.Do(func() { close(b.release) }) }

// dispOKServer answers 200 at once.
func dispOKServer(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// dispJob is a job on time (due in an hour: the late lane has tests of
// its own).
func dispJob(id, url string) *Job {
	return &Job{TaskID: id, Seq: 1, Due: time.Now().Add(time.Hour).UnixNano(), Attempt: 1, URL: url, Timeout: 10 * time.Second}
}

func dispJobIDs(jobs []*Job) []string {
	ids := make([]string, len(jobs))
	for i, j := range jobs {
		ids[i] = j.TaskID
	}
	return ids
}

// dispFireOne runs one job against a fresh dispatcher with clock c (nil:
// clock.Real) and returns its result.
func dispFireOne(t *testing.T, c clock.Clock, j *Job) Result {
	t.Helper()
	d, results := newDispTest(t, Config{Concurrency: 1}, Deps{Clock: c})
	d.Start()
	if !d.Submit(j) {
		t.Fatalf("submit(%s) = false, want true", j.URL)
	}
	return <-results
}

// TestDispatchConnectionReuse checks that responses are drained so that
// sequential callbacks to one host share one keep-alive connection.
func TestDispatchConnectionReuse(t *testing.T) {
	dispNoLeaks(t)
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write(make([]byte, 10_000))
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	d, results := newDispTest(t, Config{Concurrency: 1}, Deps{})
	for i := range 5 {
		d.Submit(dispJob(strconv.Itoa(i), srv.URL))
	}
	d.Start()
	for _, r := range dispRecv(t, results, 5) {
		if r.Outcome != OutcomeSuccess {
			t.Fatalf("Outcome = %v (%q), want success", r.Outcome, r.Err)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("connections = %d, want 1", n)
	}
}

// TestDispatchRoundRobin checks that hosts with waiting jobs take turns.
func TestDispatchRoundRobin(t *testing.T) {
	dispNoLeaks(t)
	a, b := dispOKServer(t), dispOKServer(t)
	d, results := newDispTest(t, Config{Concurrency: 1}, Deps{})
	for _, j := range []*Job{dispJob("a1", a.URL), dispJob("a2", a.URL+"/x"), dispJob("a3", a.URL), dispJob("b1", b.URL), dispJob("b2", b.URL)} {
		d.Submit(j)
	}
	d.Start()
	var order []string
	for _, r := range dispRecv(t, results, 5) {
		order = append(order, r.Job.TaskID)
	}
	if want := []string{"a1", "b1", "a2", "b2", "a3"}; !slices.Equal(order, want) {
		t.Errorf("order = %v, want %v", order, want)
	}
}

// TestDispatchPerHostLimit checks that a slow host never holds more than
// PerHost callbacks while a fast host keeps being served.
func TestDispatchPerHostLimit(t *testing.T) {
	dispNoLeaks(t)
	slow, fast := newDispBlockingServer(t), dispOKServer(t)
	d, results := newDispTest(t, Config{Concurrency: 4, PerHost: 2}, Deps{})
	for i := range 6 {
		d.Submit(dispJob("slow"+strconv.Itoa(i), slow.URL))
	}
	for i := range 20 {
		d.Submit(dispJob("fast"+strconv.Itoa(i), fast.URL))
	}
	d.Start()
	<-slow.arrived
	<-slow.arrived
	for _, r := range dispRecv(t, results, 20) {
		if !strings.HasPrefix(r.Job.TaskID, "fast") || r.Outcome != OutcomeSuccess {
			t.Fatalf("result %s = %v, want a fast success while the slow host is held", r.Job.TaskID, r.Outcome)
		}
	}
	if got := slow.inflight.Load(); got != 2 {
		t.Errorf("slow host in flight = %d, want 2", got)
	}
	if r, q := d.Running(), d.Queued(); r != 2 || q != 4 {
		t.Errorf("running, queued = %d, %d, want 2, 4", r, q)
	}
	slow.Release()
	for _, r := range dispRecv(t, results, 6) {
		if r.Outcome != OutcomeSuccess {
			t.Errorf("result %s = %v (%q), want success", r.Job.TaskID, r.Outcome, r.Err)
		}
	}
	if got := slow.maxSeen.Load(); got != 2 {
		t.Errorf("slow host max in flight = %d, want 2", got)
	}
	if r, q := d.Running(), d.Queued(); r != 0 || q != 0 {
		t.Errorf("running, queued = %d, %d, want 0, 0", r, q)
	}
}

// TestDispatchConcurrencyLimit checks the global bound across hosts.
func TestDispatchConcurrencyLimit(t *testing.T) {
	dispNoLeaks(t)
	var total dispGauge // both hosts' requests, at the same instant
	s1, s2 := newDispBlockingServerIn(t, &total), newDispBlockingServerIn(t, &total)
	d, results := newDispTest(t, Config{Concurrency: 3, PerHost: 64}, Deps{})
	for i := range 5 {
		d.Submit(dispJob("a"+strconv.Itoa(i), s1.URL))
		d.Submit(dispJob("b"+strconv.Itoa(i), s2.URL))
	}
	d.Start()
	for range 3 {
		select {
		case <-s1.arrived:
		case <-s2.arrived:
		}
	}
	if r, q := d.Running(), d.Queued(); r != 3 || q != 7 {
		t.Errorf("running, queued = %d, %d, want 3, 7", r, q)
	}
	if n := s1.inflight.Load() + s2.inflight.Load(); n != 3 {
		t.Errorf("requests held by the servers = %d, want 3", n)
	}
	s1.Release()
	s2.Release()
	dispRecv(t, results, 10)
	// The sum of the per-host maxima may exceed 3 (they can occur at
	// different times); what is bounded is the total at any one time.
	if n := total.max.Load(); n != 3 {
		t.Errorf("max in flight (sum over hosts at one time) = %d, want 3", n)
	}
}

func TestDispatchSubmit(t *testing.T) {
	tests := []struct {
		name      string
		maxQueued int
		submits   int
		closeAt   int // close before this submit; -1 = never
		wantOK    []bool
		wantLeft  []string
	}{
		{name: "within MaxQueued", maxQueued: 3, submits: 3, closeAt: -1, wantOK: []bool{true, true, true}, wantLeft: []string{"0", "1", "2"}},
		{name: "beyond MaxQueued", maxQueued: 3, submits: 5, closeAt: -1, wantOK: []bool{true, true, true, false, false}, wantLeft: []string{"0", "1", "2"}},
		{name: "after close", maxQueued: 3, submits: 3, closeAt: 1, wantOK: []bool{true, false, false}, wantLeft: []string{"0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dispNoLeaks(t)
			// Not started: nothing runs, so every accepted job waits.
			d, _ := newDispTest(t, Config{Concurrency: 1, MaxQueued: tt.maxQueued}, Deps{})
			var ok []bool
			var left []*Job
			for i := range tt.submits {
				if i == tt.closeAt {
					left = d.Close(context.Background())
				}
				ok = append(ok, d.Submit(dispJob(strconv.Itoa(i), "http://127.0.0.1:1/")))
			}
			if !slices.Equal(ok, tt.wantOK) {
				t.Errorf("submit results = %v, want %v", ok, tt.wantOK)
			}
			if tt.closeAt < 0 {
				if q := d.Queued(); q != len(tt.wantLeft) {
					t.Errorf("queued() = %d, want %d", q, len(tt.wantLeft))
				}
				left = d.Close(context.Background())
			}
			if got := dispJobIDs(left); !slices.Equal(got, tt.wantLeft) {
				t.Errorf("close returned %v, want %v", got, tt.wantLeft)
			}
			if q := d.Queued(); q != 0 {
				t.Errorf("queued() after close = %d, want 0", q)
			}
		})
	}
}

// TestDispatchCloseWaits checks that close lets a running callback finish
// (done is called before close returns) and returns the jobs that never
// started, in submission order, across hosts.
func TestDispatchCloseWaits(t *testing.T) {
	dispNoLeaks(t)
	srv, other := newDispBlockingServer(t), dispOKServer(t)
	d, results := newDispTest(t, Config{Concurrency: 1}, Deps{})
	d.Submit(dispJob("j1", srv.URL))
	d.Submit(dispJob("j2", other.URL))
	d.Submit(dispJob("j3", srv.URL))
	d.Start()
	<-srv.arrived

	left := make(chan []*Job)
	go func() { left <- d.Close(context.Background()) }()
	dispWaitUntil(func() bool { d.mu.Lock(); defer d.mu.Unlock(); return d.mu.closed })
	srv.Release()
	got := <-left
	if ids := dispJobIDs(got); !slices.Equal(ids, []string{"j2", "j3"}) {
		t.Errorf("close returned %v, want [j2 j3]", ids)
	}
	select {
	case r := <-results:
		if r.Job.TaskID != "j1" || r.Outcome != OutcomeSuccess {
			t.Errorf("result = %s %v (%q), want j1 success", r.Job.TaskID, r.Outcome, r.Err)
		}
	default:
		t.Fatal("close returned before done was called for the running job")
	}
	if again := d.Close(context.Background()); again != nil {
		t.Errorf("second close returned %v, want nil", dispJobIDs(again))
	}
	if d.Submit(dispJob("late", srv.URL)) {
		t.Error("submit after close = true, want false")
	}
	d.Start() // no-op after close
	if r, q := d.Running(), d.Queued(); r != 0 || q != 0 {
		t.Errorf("running, queued = %d, %d, want 0, 0", r, q)
	}
}

// TestDispatchCloseCancels checks that when close's ctx ends, running
// callbacks are cancelled and still reported, with Err "shutdown".
func TestDispatchCloseCancels(t *testing.T) {
	dispNoLeaks(t)
	srv := newDispBlockingServer(t) // never released before close
	d, results := newDispTest(t, Config{Concurrency: 2}, Deps{})
	for _, id := range []string{"j1", "j2", "j3"} {
		d.Submit(dispJob(id, srv.URL))
	}
	d.Start()
	<-srv.arrived
	<-srv.arrived

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	left := d.Close(ctx)
	if ids := dispJobIDs(left); !slices.Equal(ids, []string{"j3"}) {
		t.Errorf("close returned %v, want [j3]", ids)
	}
	if n := len(results); n != 2 {
		t.Fatalf("results when close returned = %d, want 2", n)
	}
	for _, r := range dispRecv(t, results, 2) {
		if r.Outcome != OutcomeFailure || r.Err != "shutdown" || r.StatusCode != 0 {
			t.Errorf("result %s = %v %d %q, want failure 0 \"shutdown\"", r.Job.TaskID, r.Outcome, r.StatusCode, r.Err)
		}
	}
}

// TestDispatchCloseUnstarted checks close on a dispatcher never started.
func TestDispatchCloseUnstarted(t *testing.T) {
	dispNoLeaks(t)
	d, results := newDispTest(t, Config{}, Deps{})
	d.Submit(dispJob("j1", "http://127.0.0.1:1/"))
	if ids := dispJobIDs(d.Close(context.Background())); !slices.Equal(ids, []string{"j1"}) {
		t.Errorf("close returned %v, want [j1]", ids)
	}
	if n := len(results); n != 0 {
		t.Errorf("results = %d, want 0", n)
	}
}

func TestDispatchHostKey(t *testing.T) {
	tests := []struct {
		url, want string
	}{
		{"http://example.com/hook", "http://example.com:80"},
		{"HTTP://Example.COM:80?x=1", "http://example.com:80"},
		{"https://example.com", "https://example.com:443"},
		{"https://user:p@ss@example.com:8443/a@b", "https://example.com:8443"},
		{"http://127.0.0.1:8080#frag", "http://127.0.0.1:8080"},
		{"http://[::1]/x", "http://[::1]:80"},
		{"http://[::1]:9000/x", "http://[::1]:9000"},
		{"not a url", "not a url"},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			if got := string(hostKey(nil, tt.url)); got != tt.want {
				t.Errorf("hostKey(%q) = %q, want %q", tt.url, got, tt.want)
			}
		})
	}
}

func TestDispatchConfigValidate(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		wantErr []string
	}{
		{name: "defaults", cfg: DefaultConfig()},
		{name: "zero means default", cfg: Config{}},
		{name: "negative", cfg: Config{Concurrency: -1, PerHost: -1, MaxQueued: -1, LateAfter: -1}, wantErr: []string{"Concurrency", "PerHost", "MaxQueued", "LateAfter"}},
		{name: "user agent with newline", cfg: Config{UserAgent: "a\r\nX: y"}, wantErr: []string{"UserAgent"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if (err == nil) != (len(tt.wantErr) == 0) {
				t.Fatalf("Validate() = %v, want errors about %v", err, tt.wantErr)
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate() = %v, want it to mention %s", err, w)
				}
			}
		})
	}
}

// TestDispatchLateLane: a job submitted more than LateAfter past its due
// waits behind the jobs of its host still on time, and gets every
// lateShare+1-th start while both lanes wait: one worker, one host, the
// order of the starts is the order of the results.
func TestDispatchLateLane(t *testing.T) {
	dispNoLeaks(t)
	srv := dispOKServer(t)
	d, results := newDispTest(t, Config{Concurrency: 1, LateAfter: time.Second}, Deps{})
	now := time.Now().UnixNano()
	job := func(id string, due int64) *Job {
		j := dispJob(id, srv.URL)
		j.Due = due
		return j
	}
	late, onTime, noDue := now-int64(2*time.Second), now+int64(time.Minute), int64(0)
	ack := job("T4", late) // an ACK is late on purpose: on time
	ack.Ack = true
	for _, j := range []*Job{
		job("L1", late), job("L2", late), job("L3", late), job("T1", onTime), job("L4", late),
		job("L5", late), job("T2", onTime), job("T3", noDue), ack, job("T5", now),
		job("T6", onTime), job("L6", late),
	} {
		if !d.Submit(j) {
			t.Fatalf("Submit(%s) refused", j.TaskID)
		}
	}
	d.Start()
	var order []string
	for _, r := range dispRecv(t, results, 12) {
		order = append(order, r.Job.TaskID)
	}
	want := []string{"T1", "T2", "T3", "T4", "L1", "T5", "T6", "L2", "L3", "L4", "L5", "L6"}
	if !slices.Equal(order, want) {
		t.Errorf("order = %v, want %v", order, want)
	}
}

// TestDispatchLateCap: late jobs hold at most lateCap of a host's PerHost
// slots, so a job on time starts while they all hang.
func TestDispatchLateCap(t *testing.T) {
	dispNoLeaks(t)
	srv := newDispBlockingServer(t)
	d, results := newDispTest(t, Config{Concurrency: 8, PerHost: 4, LateAfter: time.Second}, Deps{})
	late := time.Now().UnixNano() - int64(2*time.Second)
	for i := range 6 {
		j := dispJob("L"+strconv.Itoa(i), srv.URL)
		j.Due = late
		d.Submit(j)
	}
	d.Start()
	for range lateCap(4) {
		if id := <-srv.arrived; !strings.HasPrefix(id, "L") {
			t.Fatalf("callback %s arrived, want a late one", id)
		}
	}
	j := dispJob("T", srv.URL)
	j.Due = time.Now().UnixNano()
	d.Submit(j)
	if id := <-srv.arrived; id != "T" {
		t.Fatalf("callback %s took the host's last slot, want the job on time", id)
	}
	if got := srv.inflight.Load(); got != 4 {
		t.Errorf("%d callbacks in flight, want 4", got)
	}
	srv.Release()
	for _, r := range dispRecv(t, results, 7) {
		if r.Outcome != OutcomeSuccess {
			t.Errorf("result %s = %v (%q), want success", r.Job.TaskID, r.Outcome, r.Err)
		}
	}
}

func TestDispatchFIFO(t *testing.T) {
	var q fifo[int]
	var want []int
	next := 0
	// Interleave pushes and pops so the ring wraps around while growing.
	for round := range 50 {
		for range round%7 + 1 {
			q.push(next)
			want = append(want, next)
			next++
		}
		for range round % 5 {
			if q.len() == 0 {
				break
			}
			if got := q.pop(); got != want[0] {
				t.Fatalf("pop() = %d, want %d", got, want[0])
			}
			want = want[1:]
		}
		if q.len() != len(want) {
			t.Fatalf("len() = %d, want %d", q.len(), len(want))
		}
	}
	for len(want) > 0 {
		if got := q.pop(); got != want[0] {
			t.Fatalf("pop() = %d, want %d", got, want[0])
		}
		want = want[1:]
	}
}

// TestDispatchElasticWorkers checks that workers start on demand and exit
// when idle: none after Start, as many as the runnable jobs need but never
// more than PerHost for one host nor Concurrency overall, none again once
// the jobs are done and the workers have been idle for workerIdle.
func TestDispatchElasticWorkers(t *testing.T) {
	dispNoLeaks(t)
	const concurrency, perHost = 64, 8
	d, results := newDispTest(t, Config{Concurrency: concurrency, PerHost: perHost}, Deps{})
	d.workerIdle = 50 * time.Millisecond
	d.Start()
	if n := d.liveWorkers(); n != 0 {
		t.Fatalf("workers after Start = %d, want 0", n)
	}

	// Sample the live workers until the end, to catch a transient excess.
	var maxLive atomic.Int64
	sampled := make(chan struct{})
	stopSampling := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			if n := int64(d.liveWorkers()); n > maxLive.Load() {
				maxLive.Store(n)
			}
			select {
			case <-stopSampling:
				return
			default:
				runtime.Gosched()
			}
		}
	}()
	defer func() { close(stopSampling); <-sampled }()

	// One slow host: PerHost workers, however many jobs it has.
	var total dispGauge
	slow := newDispBlockingServerIn(t, &total)
	for i := range 100 {
		d.Submit(dispJob("slow"+strconv.Itoa(i), slow.URL))
	}
	for range perHost {
		<-slow.arrived
	}
	time.Sleep(20 * time.Millisecond) // room for an excess worker to show
	if n := d.liveWorkers(); n != perHost {
		t.Errorf("workers with one held host = %d, want %d (PerHost)", n, perHost)
	}
	if n := maxLive.Load(); n > perHost {
		t.Errorf("max workers with one held host = %d, want <= %d (PerHost)", n, perHost)
	}

	// Nine more held hosts: 80 runnable jobs, Concurrency workers.
	servers := []*dispBlockingServer{slow}
	jobs := 100
	for h := range 9 {
		s := newDispBlockingServerIn(t, &total)
		servers = append(servers, s)
		for i := range 20 {
			d.Submit(dispJob("h"+strconv.Itoa(h)+"-"+strconv.Itoa(i), s.URL))
			jobs++
		}
	}
	dispWaitUntil(func() bool { return total.cur.Load() == concurrency })
	time.Sleep(20 * time.Millisecond)
	if n, r := d.liveWorkers(), d.Running(); n != concurrency || r != concurrency {
		t.Errorf("workers, running with ten held hosts = %d, %d, want %d, %d", n, r, concurrency, concurrency)
	}

	for _, s := range servers {
		s.Release()
	}
	for _, r := range dispRecv(t, results, jobs) {
		if r.Outcome != OutcomeSuccess {
			t.Fatalf("result %s = %v (%q), want success", r.Job.TaskID, r.Outcome, r.Err)
		}
	}
	if n := total.max.Load(); n != concurrency {
		t.Errorf("max in flight = %d, want %d", n, concurrency)
	}
	dispWaitUntil(func() bool { return d.liveWorkers() == 0 }) // after workerIdle
	if n := maxLive.Load(); n > concurrency {
		t.Errorf("max workers = %d, want <= %d (Concurrency)", n, concurrency)
	}

	// Idle again: a new job starts a new worker.
	ok := dispOKServer(t)
	d.Submit(dispJob("late", ok.URL))
	if r := <-results; r.Outcome != OutcomeSuccess {
		t.Errorf("late result = %v (%q), want success", r.Outcome, r.Err)
	}
	dispWaitUntil(func() bool { return d.liveWorkers() == 0 })
}

// TestDispatchWorkerChurn runs bursts of jobs with workers that exit almost
// as soon as they park, so that wake-ups race with idle exits (run it with
// -race): every job must still run exactly once.
func TestDispatchWorkerChurn(t *testing.T) {
	dispNoLeaks(t)
	srv := dispOKServer(t)
	d, results := newDispTest(t, Config{Concurrency: 8, PerHost: 4}, Deps{})
	d.workerIdle = 50 * time.Microsecond
	d.Start()
	seen := make(map[string]bool)
	for round := range 30 {
		for i := range 12 {
			// Two hosts' keys: 127.0.0.1 and localhost name the same server.
			url := srv.URL
			if i%2 == 1 {
				url = strings.Replace(url, "127.0.0.1", "localhost", 1)
			}
			if !d.Submit(dispJob(strconv.Itoa(round)+"-"+strconv.Itoa(i), url)) {
				t.Fatal("submit refused")
			}
		}
		for _, r := range dispRecv(t, results, 12) {
			if seen[r.Job.TaskID] {
				t.Fatalf("job %s reported twice", r.Job.TaskID)
			}
			seen[r.Job.TaskID] = true
		}
		if n := d.liveWorkers(); n > 8 {
			t.Fatalf("workers = %d, want <= 8", n)
		}
		time.Sleep(time.Duration(round%4) * 100 * time.Microsecond)
	}
}
