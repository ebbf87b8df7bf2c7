package node

import (
	"bytes"
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
)

// dispNoLeaks fails t if a goroutine started during the test outlives it. It
// must be the first cleanup registered, so it runs last. (VerifyNone per
// test, not TestMain: other files of this package have their own tests.)
func dispNoLeaks(t *testing.T) {
	t.Helper()
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) })
}

// newDispTest builds a dispatcher whose results go to the returned
// channel (buffered, so done never blocks), and closes it at cleanup with an
// already-cancelled context so blocked callbacks cannot hang the test.
func newDispTest(t *testing.T, cfg DispatchConfig, now func() time.Time) (*dispatcher, chan fireResult) {
	t.Helper()
	results := make(chan fireResult, 1024)
	d := newDispatcher(cfg, now, func(r fireResult) { results <- r })
	t.Cleanup(func() {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		d.close(ctx)
	})
	return d, results
}

// dispRecv takes n results, in completion order.
func dispRecv(t *testing.T, results <-chan fireResult, n int) []fireResult {
	t.Helper()
	out := make([]fireResult, 0, n)
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

func dispJob(id, url string) *fireJob {
	return &fireJob{TaskID: id, Seq: 1, Due: 1, Attempt: 1, URL: url, Timeout: 10 * time.Second}
}

func dispJobIDs(jobs []*fireJob) []string {
	ids := make([]string, len(jobs))
	for i, j := range jobs {
		ids[i] = j.TaskID
	}
	return ids
}

// dispFireOne runs one job against a fresh dispatcher and returns its result.
func dispFireOne(t *testing.T, now func() time.Time, j *fireJob) fireResult {
	t.Helper()
	d, results := newDispTest(t, DispatchConfig{Concurrency: 1}, now)
	d.start()
	if !d.submit(j) {
		t.Fatalf("submit(%s) = false, want true", j.URL)
	}
	return <-results
}

func TestDispatchRequest(t *testing.T) {
	due := time.Date(2025, 3, 4, 5, 6, 7, 123456789, time.FixedZone("X", 3600)).UnixNano()
	tests := []struct {
		name       string
		job        fireJob
		wantBody   string
		wantHeader map[string]string // "" = must be absent
	}{
		{
			name: "full",
			job: fireJob{
				TaskID: "task-1", Seq: 7, Due: due, Attempt: 2, Epoch: 5,
				Payload: []byte(`{"a":1}`),
				Headers: map[string]string{
					"x-custom":        "v1",
					"Authorization":   "Bearer s",
					"X-Chime-Fire-Id": "forged", // validation rejects these; never sent anyway
					"x-chime-extra":   "forged",
					"Host":            "evil.example",
				},
			},
			wantBody: `{"a":1}`,
			wantHeader: map[string]string{
				"Content-Type":       "application/json",
				"User-Agent":         "chime-test",
				"Content-Length":     "7",
				"X-Chime-Task-Id":    "task-1",
				"X-Chime-Fire-Id":    "task-1:7",
				"X-Chime-Due-At":     "2025-03-04T04:06:07.123456789Z",
				"X-Chime-Attempt":    "2",
				"X-Chime-Slot-Epoch": "5",
				"X-Custom":           "v1",
				"Authorization":      "Bearer s",
				"X-Chime-Extra":      "",
			},
		},
		{
			name:     "no payload, no epoch",
			job:      fireJob{TaskID: "01J", Seq: 1, Due: 0, Attempt: 1},
			wantBody: "",
			wantHeader: map[string]string{
				"Content-Type":       "application/json",
				"Content-Length":     "0",
				"X-Chime-Task-Id":    "01J",
				"X-Chime-Fire-Id":    "01J:1",
				"X-Chime-Due-At":     "1970-01-01T00:00:00Z",
				"X-Chime-Attempt":    "1",
				"X-Chime-Slot-Epoch": "",
			},
		},
		{
			name: "framing headers dropped",
			job: fireJob{
				TaskID: "f", Seq: 2, Due: 0, Attempt: 1, Payload: []byte(`{"b":2}`),
				Headers: map[string]string{ // rejected by validation; never sent
					"Transfer-Encoding": "chunked",
					"content-length":    "99",
					"Trailer":           "X-T",
					"CONNECTION":        "close",
				},
			},
			wantBody: `{"b":2}`,
			wantHeader: map[string]string{
				"Content-Length":    "7",
				"Transfer-Encoding": "",
				"Trailer":           "",
				"Connection":        "",
				"X-Chime-Fire-Id":   "f:2",
			},
		},
		{
			name:     "user content type and agent",
			job:      fireJob{TaskID: "t", Seq: 18446744073709551615, Due: -1, Attempt: 101, Headers: map[string]string{"content-type": "application/cloudevents+json", "user-agent": "receiver-test/1"}},
			wantBody: "",
			wantHeader: map[string]string{
				"Content-Type":    "application/cloudevents+json",
				"User-Agent":      "receiver-test/1",
				"X-Chime-Fire-Id": "t:18446744073709551615",
				"X-Chime-Due-At":  "1969-12-31T23:59:59.999999999Z",
				"X-Chime-Attempt": "101",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dispNoLeaks(t)
			type seen struct {
				method, path, host string
				header             http.Header
				body               []byte
			}
			got := make(chan seen, 1)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				h := r.Header.Clone()
				if r.ContentLength >= 0 {
					h.Set("Content-Length", strconv.FormatInt(r.ContentLength, 10))
				}
				got <- seen{r.Method, r.URL.RequestURI(), r.Host, h, body}
			}))
			t.Cleanup(srv.Close)

			d, results := newDispTest(t, DispatchConfig{Concurrency: 1, UserAgent: "chime-test"}, nil)
			d.start()
			j := tt.job
			j.URL = srv.URL + "/hook?x=1"
			j.Timeout = 10 * time.Second
			if !d.submit(&j) {
				t.Fatal("submit = false, want true")
			}
			r := <-results
			s := <-got
			if r.Outcome != outcomeSuccess || r.Job != &j {
				t.Fatalf("result = %v %d %q (job %p), want success (job %p)", r.Outcome, r.StatusCode, r.Err, r.Job, &j)
			}
			if s.method != http.MethodPost || s.path != "/hook?x=1" || s.host != strings.TrimPrefix(srv.URL, "http://") {
				t.Errorf("request line = %s %s Host %s, want POST /hook?x=1 Host %s", s.method, s.path, s.host, srv.URL)
			}
			if string(s.body) != tt.wantBody {
				t.Errorf("body = %q, want %q", s.body, tt.wantBody)
			}
			for k, want := range tt.wantHeader {
				if v, ok := s.header[k]; want == "" && ok {
					t.Errorf("header %s = %q, want absent", k, v)
				} else if want != "" && (len(v) != 1 || v[0] != want) {
					t.Errorf("header %s = %q, want [%q]", k, v, want)
				}
			}
		})
	}
}

func TestDispatchOutcome(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hang" {
			<-r.Context().Done()
			return
		}
		code, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/status/"))
		if code >= 300 && code < 400 {
			w.Header().Set("Location", "/status/200")
		}
		w.WriteHeader(code)
		_, _ = io.WriteString(w, "reply")
	}))
	t.Cleanup(srv.Close)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + ln.Addr().String() + "/"
	ln.Close()

	tests := []struct {
		name     string
		url      string
		timeout  time.Duration
		want     outcome
		wantCode int
		wantErr  string // substring; "" = Err must be empty
		wantBody string
	}{
		{name: "200", url: srv.URL + "/status/200", want: outcomeSuccess, wantCode: 200, wantBody: "reply"},
		{name: "204", url: srv.URL + "/status/204", want: outcomeSuccess, wantCode: 204},
		{name: "299", url: srv.URL + "/status/299", want: outcomeSuccess, wantCode: 299, wantBody: "reply"},
		{name: "301 not followed", url: srv.URL + "/status/301", want: outcomeFailure, wantCode: 301, wantBody: "reply"},
		{name: "400", url: srv.URL + "/status/400", want: outcomeFailure, wantCode: 400, wantBody: "reply"},
		{name: "404", url: srv.URL + "/status/404", want: outcomeGone, wantCode: 404, wantBody: "reply"},
		{name: "410", url: srv.URL + "/status/410", want: outcomeGone, wantCode: 410, wantBody: "reply"},
		{name: "429", url: srv.URL + "/status/429", want: outcomeFailure, wantCode: 429, wantBody: "reply"},
		{name: "500", url: srv.URL + "/status/500", want: outcomeFailure, wantCode: 500, wantBody: "reply"},
		{name: "timeout", url: srv.URL + "/hang", timeout: 50 * time.Millisecond, want: outcomeFailure, wantErr: "timeout after 50ms"},
		{name: "connection refused", url: refused, want: outcomeFailure, wantErr: "refused"},
		{name: "bad url", url: "http://[::1", want: outcomeFailure, wantErr: "missing ']'"},
		{name: "bad scheme", url: "ftp://127.0.0.1/x", want: outcomeFailure, wantErr: "unsupported protocol scheme"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dispNoLeaks(t)
			clock := time.Unix(1000, 0)
			j := dispJob("t", tt.url)
			if tt.timeout != 0 {
				j.Timeout = tt.timeout
			}
			r := dispFireOne(t, func() time.Time { return clock }, j)
			if r.Outcome != tt.want || r.StatusCode != tt.wantCode {
				t.Errorf("outcome, status = %v, %d, want %v, %d (err %q)", r.Outcome, r.StatusCode, tt.want, tt.wantCode, r.Err)
			}
			if (tt.wantErr == "") != (r.Err == "") || !strings.Contains(r.Err, tt.wantErr) {
				t.Errorf("Err = %q, want containing %q", r.Err, tt.wantErr)
			}
			if string(r.Body) != tt.wantBody {
				t.Errorf("Body = %q, want %q", r.Body, tt.wantBody)
			}
			if !r.StartedAt.Equal(clock) || !r.FinishedAt.Equal(clock) {
				t.Errorf("StartedAt, FinishedAt = %v, %v, want the injected clock %v", r.StartedAt, r.FinishedAt, clock)
			}
		})
	}
}

func TestDispatchRetryAfter(t *testing.T) {
	now := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	serverDate := now.Add(-time.Hour) // the receiver's clock is an hour behind ours
	tests := []struct {
		name       string
		status     int
		retryAfter string
		date       string // "" = no Date header
		want       time.Duration
	}{
		{name: "seconds", status: 503, retryAfter: "120", want: 120 * time.Second},
		{name: "zero seconds", status: 429, retryAfter: "0", want: 0},
		{name: "huge seconds clamped", status: 429, retryAfter: "99999999999999999999999", want: dispatchMaxRetryAfter},
		{name: "negative", status: 503, retryAfter: "-5", want: 0},
		{name: "garbage", status: 503, retryAfter: "soon", want: 0},
		{name: "date vs Date header", status: 503, retryAfter: serverDate.Add(30 * time.Second).Format(http.TimeFormat), date: serverDate.Format(http.TimeFormat), want: 30 * time.Second},
		{name: "date vs arrival time", status: 503, retryAfter: now.Add(45 * time.Second).Format(http.TimeFormat), want: 45 * time.Second},
		{name: "date in the past", status: 503, retryAfter: now.Add(-time.Minute).Format(http.TimeFormat), want: 0},
		{name: "on 404", status: 404, retryAfter: "7", want: 7 * time.Second},
		{name: "ignored on 2xx", status: 200, retryAfter: "7", want: 0},
		{name: "absent", status: 500, want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dispNoLeaks(t)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tt.retryAfter != "" {
					w.Header().Set("Retry-After", tt.retryAfter)
				}
				if tt.date != "" {
					w.Header().Set("Date", tt.date)
				} else {
					w.Header()["Date"] = nil // suppress the server's own
				}
				w.WriteHeader(tt.status)
			}))
			t.Cleanup(srv.Close)
			r := dispFireOne(t, func() time.Time { return now }, dispJob("t", srv.URL))
			if r.StatusCode != tt.status || r.RetryAfter != tt.want {
				t.Errorf("status, RetryAfter = %d, %v, want %d, %v", r.StatusCode, r.RetryAfter, tt.status, tt.want)
			}
		})
	}
}

func TestDispatchResultBody(t *testing.T) {
	big := bytes.Repeat([]byte("0123456789abcdef"), 1000) // 16000 bytes
	tests := []struct {
		name  string
		reply []byte
		want  []byte
	}{
		{name: "empty", reply: nil, want: nil},
		{name: "short", reply: []byte("ok"), want: []byte("ok")},
		{name: "exactly 512", reply: big[:512], want: big[:512]},
		{name: "513", reply: big[:513], want: big[:512]},
		{name: "16000", reply: big, want: big[:512]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dispNoLeaks(t)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = w.Write(tt.reply)
			}))
			t.Cleanup(srv.Close)
			r := dispFireOne(t, nil, dispJob("t", srv.URL))
			if !bytes.Equal(r.Body, tt.want) || (tt.want == nil) != (r.Body == nil) {
				t.Errorf("Body = %d bytes %.20q…, want %d bytes %.20q…", len(r.Body), r.Body, len(tt.want), tt.want)
			}
		})
	}
}

// TestDispatchResultBodyOwned checks that a result's Body survives the
// worker's next attempt (the 512-byte buffer is reused).
func TestDispatchResultBodyOwned(t *testing.T) {
	dispNoLeaks(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, strings.Repeat(r.Header.Get("X-Chime-Task-Id"), 600))
	}))
	t.Cleanup(srv.Close)
	d, results := newDispTest(t, DispatchConfig{Concurrency: 1}, nil)
	for _, id := range []string{"a", "b", "c"} {
		d.submit(dispJob(id, srv.URL))
	}
	d.start()
	for _, r := range dispRecv(t, results, 3) {
		if want := strings.Repeat(r.Job.TaskID, 512); string(r.Body) != want {
			t.Errorf("Body of %s = %.10q… (%d bytes), want %d × %q", r.Job.TaskID, r.Body, len(r.Body), 512, r.Job.TaskID)
		}
	}
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
	d, results := newDispTest(t, DispatchConfig{Concurrency: 1}, nil)
	for i := range 5 {
		d.submit(dispJob(strconv.Itoa(i), srv.URL))
	}
	d.start()
	for _, r := range dispRecv(t, results, 5) {
		if r.Outcome != outcomeSuccess {
			t.Fatalf("outcome = %v (%q), want success", r.Outcome, r.Err)
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
	d, results := newDispTest(t, DispatchConfig{Concurrency: 1}, nil)
	for _, j := range []*fireJob{dispJob("a1", a.URL), dispJob("a2", a.URL+"/x"), dispJob("a3", a.URL), dispJob("b1", b.URL), dispJob("b2", b.URL)} {
		d.submit(j)
	}
	d.start()
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
	d, results := newDispTest(t, DispatchConfig{Concurrency: 4, PerHost: 2}, nil)
	for i := range 6 {
		d.submit(dispJob("slow"+strconv.Itoa(i), slow.URL))
	}
	for i := range 20 {
		d.submit(dispJob("fast"+strconv.Itoa(i), fast.URL))
	}
	d.start()
	<-slow.arrived
	<-slow.arrived
	for _, r := range dispRecv(t, results, 20) {
		if !strings.HasPrefix(r.Job.TaskID, "fast") || r.Outcome != outcomeSuccess {
			t.Fatalf("result %s = %v, want a fast success while the slow host is held", r.Job.TaskID, r.Outcome)
		}
	}
	if got := slow.inflight.Load(); got != 2 {
		t.Errorf("slow host in flight = %d, want 2", got)
	}
	if r, q := d.running(), d.queued(); r != 2 || q != 4 {
		t.Errorf("running, queued = %d, %d, want 2, 4", r, q)
	}
	slow.Release()
	for _, r := range dispRecv(t, results, 6) {
		if r.Outcome != outcomeSuccess {
			t.Errorf("result %s = %v (%q), want success", r.Job.TaskID, r.Outcome, r.Err)
		}
	}
	if got := slow.maxSeen.Load(); got != 2 {
		t.Errorf("slow host max in flight = %d, want 2", got)
	}
	if r, q := d.running(), d.queued(); r != 0 || q != 0 {
		t.Errorf("running, queued = %d, %d, want 0, 0", r, q)
	}
}

// TestDispatchConcurrencyLimit checks the global bound across hosts.
func TestDispatchConcurrencyLimit(t *testing.T) {
	dispNoLeaks(t)
	var total dispGauge // both hosts' requests, at the same instant
	s1, s2 := newDispBlockingServerIn(t, &total), newDispBlockingServerIn(t, &total)
	d, results := newDispTest(t, DispatchConfig{Concurrency: 3, PerHost: 64}, nil)
	for i := range 5 {
		d.submit(dispJob("a"+strconv.Itoa(i), s1.URL))
		d.submit(dispJob("b"+strconv.Itoa(i), s2.URL))
	}
	d.start()
	for range 3 {
		select {
		case <-s1.arrived:
		case <-s2.arrived:
		}
	}
	if r, q := d.running(), d.queued(); r != 3 || q != 7 {
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
			d, _ := newDispTest(t, DispatchConfig{Concurrency: 1, MaxQueued: tt.maxQueued}, nil)
			var ok []bool
			var left []*fireJob
			for i := range tt.submits {
				if i == tt.closeAt {
					left = d.close(context.Background())
				}
				ok = append(ok, d.submit(dispJob(strconv.Itoa(i), "http://127.0.0.1:1/")))
			}
			if !slices.Equal(ok, tt.wantOK) {
				t.Errorf("submit results = %v, want %v", ok, tt.wantOK)
			}
			if tt.closeAt < 0 {
				if q := d.queued(); q != len(tt.wantLeft) {
					t.Errorf("queued() = %d, want %d", q, len(tt.wantLeft))
				}
				left = d.close(context.Background())
			}
			if got := dispJobIDs(left); !slices.Equal(got, tt.wantLeft) {
				t.Errorf("close returned %v, want %v", got, tt.wantLeft)
			}
			if q := d.queued(); q != 0 {
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
	d, results := newDispTest(t, DispatchConfig{Concurrency: 1}, nil)
	d.submit(dispJob("j1", srv.URL))
	d.submit(dispJob("j2", other.URL))
	d.submit(dispJob("j3", srv.URL))
	d.start()
	<-srv.arrived

	left := make(chan []*fireJob)
	go func() { left <- d.close(context.Background()) }()
	dispWaitUntil(func() bool { d.mu.Lock(); defer d.mu.Unlock(); return d.mu.closed })
	srv.Release()
	got := <-left
	if ids := dispJobIDs(got); !slices.Equal(ids, []string{"j2", "j3"}) {
		t.Errorf("close returned %v, want [j2 j3]", ids)
	}
	select {
	case r := <-results:
		if r.Job.TaskID != "j1" || r.Outcome != outcomeSuccess {
			t.Errorf("result = %s %v (%q), want j1 success", r.Job.TaskID, r.Outcome, r.Err)
		}
	default:
		t.Fatal("close returned before done was called for the running job")
	}
	if again := d.close(context.Background()); again != nil {
		t.Errorf("second close returned %v, want nil", dispJobIDs(again))
	}
	if d.submit(dispJob("late", srv.URL)) {
		t.Error("submit after close = true, want false")
	}
	d.start() // no-op after close
	if r, q := d.running(), d.queued(); r != 0 || q != 0 {
		t.Errorf("running, queued = %d, %d, want 0, 0", r, q)
	}
}

// TestDispatchCloseCancels checks that when close's ctx ends, running
// callbacks are cancelled and still reported, with Err "shutdown".
func TestDispatchCloseCancels(t *testing.T) {
	dispNoLeaks(t)
	srv := newDispBlockingServer(t) // never released before close
	d, results := newDispTest(t, DispatchConfig{Concurrency: 2}, nil)
	for _, id := range []string{"j1", "j2", "j3"} {
		d.submit(dispJob(id, srv.URL))
	}
	d.start()
	<-srv.arrived
	<-srv.arrived

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	left := d.close(ctx)
	if ids := dispJobIDs(left); !slices.Equal(ids, []string{"j3"}) {
		t.Errorf("close returned %v, want [j3]", ids)
	}
	if n := len(results); n != 2 {
		t.Fatalf("results when close returned = %d, want 2", n)
	}
	for _, r := range dispRecv(t, results, 2) {
		if r.Outcome != outcomeFailure || r.Err != "shutdown" || r.StatusCode != 0 {
			t.Errorf("result %s = %v %d %q, want failure 0 \"shutdown\"", r.Job.TaskID, r.Outcome, r.StatusCode, r.Err)
		}
	}
}

// TestDispatchCloseUnstarted checks close on a dispatcher never started.
func TestDispatchCloseUnstarted(t *testing.T) {
	dispNoLeaks(t)
	d, results := newDispTest(t, DispatchConfig{}, nil)
	d.submit(dispJob("j1", "http://127.0.0.1:1/"))
	if ids := dispJobIDs(d.close(context.Background())); !slices.Equal(ids, []string{"j1"}) {
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
			if got := string(dispatchHostKey(nil, tt.url)); got != tt.want {
				t.Errorf("dispatchHostKey(%q) = %q, want %q", tt.url, got, tt.want)
			}
		})
	}
}

func TestDispatchConfigValidate(t *testing.T) {
	tests := []struct {
		name    string
		cfg     DispatchConfig
		wantErr []string
	}{
		{name: "defaults", cfg: DefaultDispatchConfig()},
		{name: "zero means default", cfg: DispatchConfig{}},
		{name: "negative", cfg: DispatchConfig{Concurrency: -1, PerHost: -1, MaxQueued: -1}, wantErr: []string{"Concurrency", "PerHost", "MaxQueued"}},
		{name: "user agent with newline", cfg: DispatchConfig{UserAgent: "a\r\nX: y"}, wantErr: []string{"UserAgent"}},
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

func TestDispatchFIFO(t *testing.T) {
	var q dispatchFIFO[int]
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
