package bench

import (
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// t0 is the fixed instant the receiver's fake clock reports in tests.
var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// callback is one request the tests send to a receiver.
type callback struct {
	path    string
	fireID  string        // "" sends no fire id
	due     time.Duration // due = t0 + due
	noDue   bool          // send no X-Chime-Due-At
	attempt int
}

// startReceiver starts a receiver whose clock always reads t0 and closes it
// at the end of the test.
func startReceiver(t *testing.T, cfg ReceiverConfig) *Receiver {
	t.Helper()
	if cfg.Now == nil {
		cfg.Now = func() time.Time { return t0 }
	}
	r, err := NewReceiver(cfg)
	if err != nil {
		t.Fatalf("NewReceiver: %v", err)
	}
	if err := r.Start(); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if err := r.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	r.Reset(t0)
	return r
}

// send posts one callback and returns the status code.
func send(t *testing.T, hc *http.Client, base string, cb callback) int {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, base+cb.path, strings.NewReader(`{"x":1}`))
	if err != nil {
		t.Fatal(err)
	}
	if cb.fireID != "" {
		req.Header.Set(headerFireID, cb.fireID)
	}
	if !cb.noDue {
		req.Header.Set(headerDueAt, t0.Add(cb.due).Format(time.RFC3339Nano))
	}
	req.Header.Set(headerAttempt, strconv.Itoa(max(cb.attempt, 1)))
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", cb.path, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestReceiverCountsFires(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name  string
		rules map[string]Rule
		calls []callback
		want  ReceiverStats // only the counters and lateness extremes are compared
	}{
		{
			name: "distinct fires",
			calls: []callback{
				{path: "/fire", fireID: "a:1", due: -3 * ms},
				{path: "/fire", fireID: "b:1", due: -1 * ms},
				{path: "/fire", fireID: "c:1", due: -2 * ms},
			},
			want: ReceiverStats{Requests: 3, Fires: 3, Delivered: 3, MinLateness: 1000, MaxLateness: 3000},
		},
		{
			name: "same fire delivered twice is a duplicate",
			calls: []callback{
				{path: "/fire", fireID: "a:1", due: -5 * ms},
				{path: "/fire", fireID: "a:1", due: -5 * ms, attempt: 1},
				{path: "/fire", fireID: "a:2", due: -1 * ms},
			},
			want: ReceiverStats{Requests: 3, Fires: 2, Delivered: 2, Duplicates: 1, MinLateness: 1000, MaxLateness: 5000},
		},
		{
			name:  "retry after a failed attempt is not a duplicate",
			rules: map[string]Rule{"/fail": {Status: http.StatusInternalServerError}},
			calls: []callback{
				{path: "/fail", fireID: "a:1", due: -2 * ms, attempt: 1},
				{path: "/fire", fireID: "a:1", due: -2 * ms, attempt: 2},
			},
			want: ReceiverStats{Requests: 2, Fires: 1, Delivered: 1, Retries: 1, MinLateness: 2000, MaxLateness: 2000},
		},
		{
			name: "early fire",
			calls: []callback{
				{path: "/fire", fireID: "a:1", due: 7 * ms},
				{path: "/fire", fireID: "b:1", due: -1 * ms},
			},
			want: ReceiverStats{Requests: 2, Fires: 2, Delivered: 2, Early: 1, MinLateness: -7000, MaxLateness: 1000},
		},
		{
			name: "early duplicate still counts as early",
			calls: []callback{
				{path: "/fire", fireID: "a:1", due: -1 * ms},
				{path: "/fire", fireID: "a:1", due: 4 * ms},
			},
			want: ReceiverStats{Requests: 2, Fires: 1, Delivered: 1, Duplicates: 1, Early: 1, MinLateness: -4000, MaxLateness: 1000},
		},
		{
			name: "malformed requests",
			calls: []callback{
				{path: "/fire", due: -1 * ms},
				{path: "/fire", fireID: "a:1", noDue: true},
			},
			want: ReceiverStats{Requests: 2, Malformed: 2},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := startReceiver(t, ReceiverConfig{Rules: tt.rules})
			hc := newHTTPClient(1, 10*time.Second)
			defer hc.CloseIdleConnections()
			for _, cb := range tt.calls {
				send(t, hc, r.URL(), cb)
			}
			got := r.Stats()
			gotCounts := ReceiverStats{Requests: got.Requests, Fires: got.Fires, Delivered: got.Delivered,
				Duplicates: got.Duplicates, Early: got.Early, Retries: got.Retries, Malformed: got.Malformed,
				DueMismatch: got.DueMismatch, MinLateness: got.MinLateness, MaxLateness: got.MaxLateness}
			if !equalCounts(gotCounts, tt.want) {
				t.Errorf("Stats() = %+v, want %+v", gotCounts, tt.want)
			}
			if r.Delivered() != tt.want.Delivered {
				t.Errorf("Delivered() = %d, want %d", r.Delivered(), tt.want.Delivered)
			}
		})
	}
}

func equalCounts(a, b ReceiverStats) bool {
	return a.Requests == b.Requests && a.Fires == b.Fires && a.Delivered == b.Delivered &&
		a.Duplicates == b.Duplicates && a.Early == b.Early && a.Retries == b.Retries &&
		a.Malformed == b.Malformed && a.DueMismatch == b.DueMismatch &&
		a.MinLateness == b.MinLateness && a.MaxLateness == b.MaxLateness
}

func TestReceiverAnswersRules(t *testing.T) {
	r := startReceiver(t, ReceiverConfig{Rules: map[string]Rule{
		"/gone": {Status: http.StatusGone},
		"/slow": {Delay: time.Millisecond},
	}})
	hc := newHTTPClient(1, 10*time.Second)
	defer hc.CloseIdleConnections()
	tests := []struct {
		name string
		path string
		set  *Rule // applied with SetRule before the request
		want int
	}{
		{"default is 200", "/fire", nil, http.StatusOK},
		{"configured status", "/gone", nil, http.StatusGone},
		{"delay still answers 200", "/slow", nil, http.StatusOK},
		{"rule set at runtime", "/busy", &Rule{Status: http.StatusTooManyRequests}, http.StatusTooManyRequests},
		{"zero rule removes it", "/gone", &Rule{}, http.StatusOK},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.set != nil {
				r.SetRule(tt.path, *tt.set)
			}
			got := send(t, hc, r.URL(), callback{path: tt.path, fireID: "f:" + strconv.Itoa(i)})
			if got != tt.want {
				t.Errorf("POST %s = %d, want %d", tt.path, got, tt.want)
			}
		})
	}
	if st := r.Stats(); st.Fires != uint64(len(tests)) || st.Delivered != 3 {
		t.Errorf("Stats() fires, delivered = %d, %d, want %d, 3", st.Fires, st.Delivered, len(tests))
	}
}

func TestReceiverExpectOverridesHeader(t *testing.T) {
	want := t0.Add(-10 * time.Millisecond)
	r := startReceiver(t, ReceiverConfig{Expect: func(fireID string) (time.Time, bool) {
		return want, strings.HasPrefix(fireID, "x")
	}})
	hc := newHTTPClient(1, 10*time.Second)
	defer hc.CloseIdleConnections()
	send(t, hc, r.URL(), callback{path: "/", fireID: "x1:1", due: -10 * time.Millisecond}) // header agrees
	send(t, hc, r.URL(), callback{path: "/", fireID: "x2:1", due: 0})                      // header claims on time
	send(t, hc, r.URL(), callback{path: "/", fireID: "y1:1", due: -time.Millisecond})      // not expected: header used
	st := r.Stats()
	if st.DueMismatch != 1 {
		t.Errorf("DueMismatch = %d, want 1", st.DueMismatch)
	}
	if st.MaxLateness != 10_000 || st.MinLateness != 1000 {
		t.Errorf("lateness min, max = %d, %d µs, want 1000, 10000", st.MinLateness, st.MaxLateness)
	}
}

func TestReceiverTimeline(t *testing.T) {
	var mu sync.Mutex
	now := t0
	r := startReceiver(t, ReceiverConfig{Now: func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return now
	}})
	hc := newHTTPClient(1, 10*time.Second)
	defer hc.CloseIdleConnections()
	for i, at := range []time.Duration{-time.Second, 0, 50 * time.Millisecond, 250 * time.Millisecond, 299 * time.Millisecond} {
		mu.Lock()
		now = t0.Add(at)
		mu.Unlock()
		send(t, hc, r.URL(), callback{path: "/", fireID: "t:" + strconv.Itoa(i), due: -time.Hour})
	}
	st := r.Stats()
	want := []uint64{3, 0, 2} // before origin counts in bucket 0; 100 ms buckets
	if len(st.Timeline) != len(want) {
		t.Fatalf("Timeline = %v, want %v", st.Timeline, want)
	}
	for i := range want {
		if st.Timeline[i] != want[i] {
			t.Fatalf("Timeline = %v, want %v", st.Timeline, want)
		}
	}
	if !st.First.Equal(t0.Add(-time.Second)) || !st.Last.Equal(t0.Add(299*time.Millisecond)) {
		t.Errorf("First, Last = %v, %v, want %v, %v", st.First, st.Last, t0.Add(-time.Second), t0.Add(299*time.Millisecond))
	}
}

func TestReceiverResetForgets(t *testing.T) {
	r := startReceiver(t, ReceiverConfig{})
	hc := newHTTPClient(1, 10*time.Second)
	defer hc.CloseIdleConnections()
	send(t, hc, r.URL(), callback{path: "/", fireID: "a:1"})
	r.Reset(t0)
	send(t, hc, r.URL(), callback{path: "/", fireID: "a:1"})
	if st := r.Stats(); st.Requests != 1 || st.Duplicates != 0 || st.Delivered != 1 {
		t.Errorf("after Reset: requests, duplicates, delivered = %d, %d, %d, want 1, 0, 1", st.Requests, st.Duplicates, st.Delivered)
	}
}

func TestNewReceiverRefusesNonLoopback(t *testing.T) {
	tests := []struct {
		addr    string
		wantErr bool
	}{
		{"127.0.0.1:0", false},
		{"127.0.0.2:0", false},
		{"localhost:0", true},
		{"[::1]:0", true},
		{"0.0.0.0:0", true},
		{":0", true},
		{"192.0.2.1:80", true},
		{"nonsense", true},
	}
	for _, tt := range tests {
		t.Run(tt.addr, func(t *testing.T) {
			_, err := NewReceiver(ReceiverConfig{Addr: tt.addr})
			if (err != nil) != tt.wantErr {
				t.Errorf("NewReceiver(%q) error = %v, want error %v", tt.addr, err, tt.wantErr)
			}
		})
	}
}

func TestReceiverCloseIsIdempotent(t *testing.T) {
	r, err := NewReceiver(ReceiverConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil { // never started
		t.Errorf("Close before Start = %v", err)
	}
	r2, err := NewReceiver(ReceiverConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if err := r2.Start(); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if err := r2.Close(); err != nil {
			t.Errorf("Close #%d = %v", i+1, err)
		}
	}
}

// BenchmarkReceiver measures the receiver's capacity with a bare client in
// the same process: each iteration is conc concurrent callbacks.
func BenchmarkReceiver(b *testing.B) {
	for _, conc := range []int{1, 64} {
		b.Run("conc="+strconv.Itoa(conc), func(b *testing.B) {
			r, err := NewReceiver(ReceiverConfig{})
			if err != nil {
				b.Fatal(err)
			}
			if err := r.Start(); err != nil {
				b.Fatal(err)
			}
			defer r.Close()
			hc := newHTTPClient(conc, 10*time.Second)
			defer hc.CloseIdleConnections()
			url := r.URL() + "/fire"
			body := benchPayload("bench")
			work := make(chan int)
			var wg, done sync.WaitGroup
			for range conc {
				wg.Go(func() {
					for i := range work {
						if err := postCallback(b.Context(), hc, url, body, "b:"+strconv.Itoa(i)); err != nil {
							b.Error(err)
						}
						done.Done()
					}
				})
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				done.Add(conc)
				for range conc {
					work <- i
					i++
				}
				done.Wait()
			}
			close(work)
			wg.Wait()
			b.ReportMetric(float64(i)/b.Elapsed().Seconds(), "req/s")
		})
	}
}
