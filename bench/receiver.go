package bench

import (
	"fmt"
	"hash/maphash"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Callback headers of the HTTP contract (API.md "Callback").
const (
	headerTaskID  = "X-Chime-Task-Id"
	headerFireID  = "X-Chime-Fire-Id"
	headerDueAt   = "X-Chime-Due-At"
	headerAttempt = "X-Chime-Attempt"
)

// maxTimeline bounds the arrivals timeline (about 29 h at the default step)
// so a stray late request cannot grow it without limit; later arrivals are
// counted in the last bucket.
const maxTimeline = 1 << 20

// Rule is how the Receiver answers requests for one URL path.
type Rule struct {
	// Status is the response status; 0 means 200.
	Status int
	// Delay is how long to wait before answering (the request's context
	// still cancels the wait).
	Delay time.Duration
}

// ReceiverConfig configures a Receiver. The zero value is usable.
type ReceiverConfig struct {
	// Addr is the listen address. Default "127.0.0.1:0": loopback, a free
	// port. Anything but an IPv4 loopback address is refused.
	Addr string
	// Rules answers the listed URL paths (exact match) with a status or a
	// delay, for failure workloads. Paths not listed get 200 at once.
	Rules map[string]Rule
	// Expect, when set, returns the due time the harness scheduled for a fire
	// id. A request whose X-Chime-Due-At differs from it is counted in
	// DueMismatch, and lateness is measured against the expected time, so a
	// node that reports a wrong due time cannot hide lateness. It is called
	// from the HTTP handlers concurrently and must be safe for that.
	Expect func(fireID string) (time.Time, bool)
	// Observe, when set, is called for every request after it was
	// recorded: its fire id (maybe empty), arrival time and whether it
	// was answered 2xx. It is called from the HTTP handlers concurrently,
	// without the Receiver's lock, and must be safe for that.
	Observe func(fireID string, arrival time.Time, delivered bool)
	// TimelineStep is the width of a bucket of the arrivals timeline.
	// Default 100 ms: fine enough to see a stall, coarse enough that an
	// hour is 36,000 counters.
	TimelineStep time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Receiver is an HTTP server on loopback that callbacks hit. For every
// request it records the fire id, due time, arrival time and attempt; it
// counts distinct fires, duplicate deliveries and early requests, and keeps a
// histogram of lateness (arrival - due) of each fire's first request.
//
// Fire ids are remembered as 64-bit maphash values, not strings: 8 bytes per
// fire. Two distinct ids collide with probability about n²/2⁶⁵ (3·10⁻⁶ at
// 10M fires); a collision would show as one duplicate.
//
// NewReceiver starts nothing; Start listens and serves; Close stops and
// waits for the serving goroutine. All methods are safe for concurrent use.
type Receiver struct {
	cfg  ReceiverConfig
	seed maphash.Seed
	srv  *http.Server
	ln   net.Listener
	done chan struct{} // closed when Serve returns

	closeOnce sync.Once
	closeErr  error

	mu struct {
		sync.Mutex
		rules map[string]Rule
		rec   recording
	}
}

// fireState is what the Receiver remembers per fire id.
type fireState struct {
	delivered uint32 // requests answered 2xx
}

// recording is the Receiver's measurement state since the last Reset.
type recording struct {
	origin      time.Time
	fires       map[uint64]fireState
	requests    uint64
	delivered   uint64 // distinct fires answered 2xx at least once
	duplicates  uint64 // 2xx deliveries of a fire already delivered
	early       uint64 // requests that arrived before their due time
	retries     uint64 // requests with attempt > 1
	malformed   uint64 // requests without a parsable fire id or due time
	dueMismatch uint64
	late        Histogram
	minLate     time.Duration
	maxLate     time.Duration
	first, last time.Time
	timeline    []uint64
}

// NewReceiver returns a Receiver configured by cfg. It does not listen yet.
func NewReceiver(cfg ReceiverConfig) (*Receiver, error) {
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:0"
	}
	if err := checkLoopback(cfg.Addr); err != nil {
		return nil, err
	}
	if cfg.TimelineStep <= 0 {
		cfg.TimelineStep = 100 * time.Millisecond
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	r := &Receiver{cfg: cfg, seed: maphash.MakeSeed(), done: make(chan struct{})}
	r.mu.rules = make(map[string]Rule, len(cfg.Rules))
	for p, rule := range cfg.Rules {
		r.mu.rules[p] = rule
	}
	r.mu.rec = newRecording(cfg.Now())
	r.srv = &http.Server{
		Handler:           http.HandlerFunc(r.serveHTTP),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       90 * time.Second,
	}
	return r, nil
}

// checkLoopback refuses listen addresses other than IPv4 loopback literals
// (127.0.0.0/8): no wildcard, no names that might resolve elsewhere.
func checkLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("bench: listen address %q: %w", addr, err)
	}
	ip := net.ParseIP(host)
	if ip == nil || ip.To4() == nil || !ip.IsLoopback() {
		return fmt.Errorf("bench: listen address %q is not an IPv4 loopback address", addr)
	}
	return nil
}

func newRecording(origin time.Time) recording {
	return recording{origin: origin, fires: make(map[uint64]fireState)}
}

// Start listens on the configured address and serves in a new goroutine.
// Call it once.
func (r *Receiver) Start() error {
	ln, err := net.Listen("tcp", r.cfg.Addr)
	if err != nil {
		return fmt.Errorf("bench: receiver listen: %w", err)
	}
	r.ln = ln
	go func() {
		defer close(r.done)
		_ = r.srv.Serve(ln) // always returns ErrServerClosed after Close
	}()
	return nil
}

// URL returns the receiver's base URL, e.g. "http://127.0.0.1:40123". It is
// valid after Start.
func (r *Receiver) URL() string {
	if r.ln == nil {
		return ""
	}
	return "http://" + r.ln.Addr().String()
}

// Close stops the server, closing open connections, and waits until the
// serving goroutine has returned. It is idempotent.
func (r *Receiver) Close() error {
	r.closeOnce.Do(func() {
		r.closeErr = r.srv.Close()
		if r.ln != nil {
			<-r.done
		}
	})
	return r.closeErr
}

// SetRule sets (or, with the zero Rule, removes) the answer for path.
func (r *Receiver) SetRule(path string, rule Rule) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if rule == (Rule{}) {
		delete(r.mu.rules, path)
		return
	}
	r.mu.rules[path] = rule
}

// Reset forgets everything recorded so far and starts a new recording whose
// timeline begins at origin. Arrivals before origin count in the first
// timeline bucket.
func (r *Receiver) Reset(origin time.Time) {
	rec := newRecording(origin)
	r.mu.Lock()
	r.mu.rec = rec
	r.mu.Unlock()
}

// Delivered returns the number of distinct fires answered 2xx since the
// last Reset. It is cheap enough to poll.
func (r *Receiver) Delivered() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.mu.rec.delivered
}

func (r *Receiver) serveHTTP(w http.ResponseWriter, req *http.Request) {
	arrival := r.cfg.Now()
	_, _ = io.Copy(io.Discard, req.Body) // drain for keep-alive
	fireID := req.Header.Get(headerFireID)
	due, dueErr := time.Parse(time.RFC3339Nano, req.Header.Get(headerDueAt))
	attempt, _ := strconv.Atoi(req.Header.Get(headerAttempt))
	mismatch := false
	if r.cfg.Expect != nil && fireID != "" {
		if want, ok := r.cfg.Expect(fireID); ok {
			mismatch = dueErr != nil || !want.Equal(due)
			due, dueErr = want, nil
		}
	}
	var key uint64
	if fireID != "" {
		key = maphash.String(r.seed, fireID)
	}

	r.mu.Lock()
	rule := r.mu.rules[req.URL.Path]
	status := rule.Status
	if status == 0 {
		status = http.StatusOK
	}
	r.mu.rec.recordLocked(r.cfg.TimelineStep, arrival, key, fireID != "" && dueErr == nil, due, attempt, mismatch, status/100 == 2)
	r.mu.Unlock()
	if r.cfg.Observe != nil {
		r.cfg.Observe(fireID, arrival, status/100 == 2)
	}

	if rule.Delay > 0 {
		t := time.NewTimer(rule.Delay)
		select {
		case <-t.C:
		case <-req.Context().Done():
			t.Stop()
			return
		}
	}
	w.WriteHeader(status)
}

// recordLocked records one request. ok is false when the fire id or due
// time is missing or unparsable; such requests count only as malformed.
func (rec *recording) recordLocked(step time.Duration, arrival time.Time, key uint64, ok bool, due time.Time, attempt int, mismatch, success bool) {
	rec.requests++
	if rec.first.IsZero() || arrival.Before(rec.first) {
		rec.first = arrival
	}
	if arrival.After(rec.last) {
		rec.last = arrival
	}
	i := 0
	if d := arrival.Sub(rec.origin); d > 0 {
		i = min(int(d/step), maxTimeline-1)
	}
	if i >= len(rec.timeline) {
		rec.timeline = append(rec.timeline, make([]uint64, i+1-len(rec.timeline))...)
	}
	rec.timeline[i]++
	if attempt > 1 {
		rec.retries++
	}
	if mismatch {
		rec.dueMismatch++
	}
	if !ok {
		rec.malformed++
		return
	}
	late := arrival.Sub(due)
	if late < 0 {
		rec.early++
	}
	if len(rec.fires) == 0 || late < rec.minLate {
		rec.minLate = late
	}
	st, seen := rec.fires[key]
	if !seen {
		if rec.late.Count() == 0 || late > rec.maxLate {
			rec.maxLate = late
		}
		rec.late.RecordDuration(late)
	}
	if success {
		switch st.delivered {
		case 0:
			rec.delivered++
		default:
			rec.duplicates++
		}
		st.delivered++
	}
	rec.fires[key] = st
}

// ReceiverStats is a snapshot of what a Receiver recorded since its last
// Reset. Durations are in microseconds; times are wall clock.
type ReceiverStats struct {
	// Requests is every request received, including retries and duplicates.
	Requests uint64 `json:"requests"`
	// Fires is the number of distinct fire ids seen.
	Fires uint64 `json:"fires"`
	// Delivered is the number of distinct fire ids answered 2xx.
	Delivered uint64 `json:"delivered"`
	// Duplicates counts 2xx deliveries of a fire id already delivered.
	Duplicates uint64 `json:"duplicates"`
	// Early counts requests that arrived before their due time: a broken
	// "never early" guarantee.
	Early uint64 `json:"early"`
	// Retries counts requests with X-Chime-Attempt > 1.
	Retries uint64 `json:"retries"`
	// Malformed counts requests without a parsable fire id or due time.
	Malformed uint64 `json:"malformed"`
	// DueMismatch counts requests whose X-Chime-Due-At differed from the
	// due time the harness scheduled (only with ReceiverConfig.Expect).
	DueMismatch uint64 `json:"due_mismatch"`
	// Lateness summarizes arrival - due of each fire's first request;
	// early arrivals are recorded as 0 there (see MinLateness).
	Lateness Summary `json:"lateness"`
	// MinLateness is the smallest arrival - due of any request, in µs;
	// negative means a fire came early.
	MinLateness int64 `json:"min_lateness_us"`
	// MaxLateness is the largest first-request lateness, exact, in µs.
	MaxLateness int64 `json:"max_lateness_us"`
	// First and Last are the first and last arrival times.
	First time.Time `json:"first_arrival"`
	Last  time.Time `json:"last_arrival"`
	// Origin is the timeline's start; Step its bucket width.
	Origin time.Time     `json:"timeline_origin"`
	Step   time.Duration `json:"timeline_step_ns"`
	// Timeline counts arrivals per Step since Origin.
	Timeline []uint64 `json:"timeline"`
	// LatenessBuckets are the non-empty buckets of the lateness histogram.
	LatenessBuckets []Bucket `json:"lateness_buckets"`
}

// Stats returns a snapshot of the recording. The returned slices are copies
// owned by the caller. It costs O(histogram buckets + timeline length).
func (r *Receiver) Stats() ReceiverStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	rec := &r.mu.rec
	return ReceiverStats{
		Requests:        rec.requests,
		Fires:           uint64(len(rec.fires)),
		Delivered:       rec.delivered,
		Duplicates:      rec.duplicates,
		Early:           rec.early,
		Retries:         rec.retries,
		Malformed:       rec.malformed,
		DueMismatch:     rec.dueMismatch,
		Lateness:        rec.late.Summary(),
		MinLateness:     rec.minLate.Microseconds(),
		MaxLateness:     rec.maxLate.Microseconds(),
		First:           rec.first,
		Last:            rec.last,
		Origin:          rec.origin,
		Step:            r.cfg.TimelineStep,
		Timeline:        append([]uint64(nil), rec.timeline...),
		LatenessBuckets: rec.late.Buckets(),
	}
}
