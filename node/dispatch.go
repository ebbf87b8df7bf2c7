package node

// The callback dispatcher: the part of a node that POSTs callbacks (API.md
// "Callback"). See the dispatcher type for its contract.

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// fireJob is one attempt of one fire.
type fireJob struct {
	TaskID  string
	Slot    uint16
	Seq     uint64            // fire sequence; X-Chime-Fire-Id = TaskID + ":" + Seq
	Due     int64             // logical due (Unix ns) -> X-Chime-Due-At, RFC 3339 with nanoseconds, UTC
	Attempt int               // 1 = first attempt -> X-Chime-Attempt
	Epoch   uint64            // slot epoch; when non-zero send X-Chime-Slot-Epoch
	URL     string            // callback URL (absolute http or https)
	Payload []byte            // body (raw JSON); empty = no body
	Headers map[string]string // user's extra headers
	Timeout time.Duration     // this attempt's timeout; <= 0 means dispatchDefaultTimeout
}

// outcome classifies one attempt. The zero value is invalid on purpose.
type outcome uint8

// Attempt outcomes (API.md "Callback", "Response").
const (
	outcomeSuccess outcome = 1 + iota // 2xx
	outcomeGone                       // 404 or 410: the endpoint is gone, no retry
	outcomeFailure                    // anything else, a timeout, a connection error, shutdown
)

// String returns a short lower-case name of the outcome.
func (o outcome) String() string {
	switch o {
	case outcomeSuccess:
		return "success"
	case outcomeGone:
		return "gone"
	case outcomeFailure:
		return "failure"
	}
	return "unknown"
}

// fireResult is what one attempt produced.
type fireResult struct {
	Job        *fireJob
	Outcome    outcome
	StatusCode int           // 0 when no response
	Err        string        // transport error, timeout or "shutdown" text; "" when a response arrived
	Body       []byte        // first 512 bytes of the response body; owned by the receiver of the result
	RetryAfter time.Duration // parsed Retry-After of a non-2xx response, 0 if none
	StartedAt  time.Time
	FinishedAt time.Time
}

// DispatchConfig tunes the callback dispatcher. A zero field means its
// default (DefaultDispatchConfig); Validate rejects negative values.
type DispatchConfig struct {
	// Concurrency is the number of callbacks in flight overall, which is
	// also the number of worker goroutines. Default 512: a loopback
	// receiver saturates this machine at 64 in flight (~22k/s, limits.md),
	// but remote receivers with 20-30 ms of latency need rate × latency ≈
	// 15k/s × 30 ms ≈ 450 in flight to keep up. Each worker costs a
	// goroutine stack and ~5 KiB of scratch buffers, so 512 is ~4-6 MiB.
	Concurrency int

	// PerHost is the number of callbacks in flight per callback host
	// (scheme://host:port), and the transport's connection limit per host.
	// Default 64: enough to reach the measured loopback ceiling from one
	// host, while one slow host can hold at most 1/8 of the default pool.
	PerHost int

	// MaxQueued bounds the jobs waiting (submitted, not yet running);
	// submit refuses beyond it, which is the node's backpressure signal.
	// Default 100000: about 6 s of work at 15k callbacks/s, and ~16 B of
	// queue plus the job itself (a few hundred bytes) per entry.
	MaxQueued int

	// UserAgent is sent as User-Agent unless the task sets its own.
	// Default "chime".
	UserAgent string
}

// DefaultDispatchConfig returns the production defaults; the field docs
// give the reasons.
func DefaultDispatchConfig() DispatchConfig {
	return DispatchConfig{
		Concurrency: 512,
		PerHost:     64,
		MaxQueued:   100_000,
		UserAgent:   "chime",
	}
}

// Validate reports every problem of c (errors.Join). Zero fields are valid
// and mean "default".
func (c DispatchConfig) Validate() error {
	var errs []error
	if c.Concurrency < 0 {
		errs = append(errs, errors.New("node: dispatch: Concurrency must be >= 0 (0 = default)"))
	}
	if c.PerHost < 0 {
		errs = append(errs, errors.New("node: dispatch: PerHost must be >= 0 (0 = default)"))
	}
	if c.MaxQueued < 0 {
		errs = append(errs, errors.New("node: dispatch: MaxQueued must be >= 0 (0 = default)"))
	}
	if strings.ContainsFunc(c.UserAgent, func(r rune) bool { return r < ' ' || r == 0x7f }) {
		errs = append(errs, errors.New("node: dispatch: UserAgent must not contain control characters"))
	}
	return errors.Join(errs...)
}

// withDefaults returns c with every zero or negative field set to its
// default.
func (c DispatchConfig) withDefaults() DispatchConfig {
	def := DefaultDispatchConfig()
	if c.Concurrency <= 0 {
		c.Concurrency = def.Concurrency
	}
	if c.PerHost <= 0 {
		c.PerHost = def.PerHost
	}
	if c.MaxQueued <= 0 {
		c.MaxQueued = def.MaxQueued
	}
	if c.UserAgent == "" {
		c.UserAgent = def.UserAgent
	}
	return c
}

const (
	// dispatchBodyKeep is how much of a response body a result keeps
	// (API.md: last_fire.result is the first 512 bytes).
	dispatchBodyKeep = 512
	// dispatchDrainLimit is how much more of a response body is read and
	// discarded so the connection can go back to the pool; a longer body
	// costs the connection instead.
	dispatchDrainLimit = 64 << 10
	// dispatchDefaultTimeout applies to a job without a timeout (the
	// API's default timeout_ms), so no attempt can hold a worker forever.
	dispatchDefaultTimeout = 5 * time.Second
	// dispatchMaxRetryAfter clamps absurd Retry-After values (and keeps the
	// arithmetic from overflowing); the retry policy applies its own cap.
	dispatchMaxRetryAfter = 24 * time.Hour
	// dispatchShutdown is the Err of attempts cancelled by close.
	dispatchShutdown = "shutdown"
)

// dispatcher POSTs callbacks. It is I/O only: it decides nothing about task
// state, runs exactly one attempt per submitted job and reports the outcome
// through done. Retries, backoff and persistence belong to the caller.
//
// Scheduling: a fixed pool of Concurrency workers (no goroutine per job)
// takes jobs from per-host FIFO queues. Hosts that have waiting jobs and a
// free per-host slot sit in a ready ring; a worker takes the host at the
// front, runs one of its jobs and puts the host back at the end while it
// still qualifies. So hosts are served round-robin, one job at a time, and a
// slow host holds at most PerHost workers: the others keep serving the
// remaining hosts.
//
// Invariants (under mu):
//   - a host is in ready exactly when it has waiting jobs and
//     running < PerHost (host.ready mirrors membership);
//   - queued is the sum of the hosts' queue lengths and <= MaxQueued;
//   - running <= Concurrency and every host's running <= PerHost;
//   - a host with no waiting and no running jobs is not in hosts.
//
// Concurrency: submit, queued, running, start and close are safe for
// concurrent use. done is called from worker goroutines, never under mu,
// and may run concurrently with itself.
type dispatcher struct {
	cfg    DispatchConfig
	now    func() time.Time
	done   func(fireResult)
	client *http.Client
	tr     *http.Transport

	// stop is cancelled when close gives up waiting: it is the parent of
	// every attempt's context.
	stop       context.Context
	cancelStop context.CancelFunc

	wg      sync.WaitGroup // the workers
	cond    sync.Cond      // L = &mu.Mutex; signalled when a host becomes ready or on close
	stopped chan struct{}  // closed when the first close has returned

	mu struct {
		sync.Mutex
		hosts   map[string]*dispatchHost
		ready   dispatchFIFO[*dispatchHost]
		seq     uint64 // submission order, for close's result
		queued  int
		running int
		started bool
		closed  bool
	}
}

// dispatchHost is the queue and the running count of one callback host.
type dispatchHost struct {
	key     string // scheme://host:port, lower case
	jobs    dispatchFIFO[dispatchEntry]
	running int
	ready   bool // in dispatcher.mu.ready
}

// dispatchEntry is a waiting job and its submission number.
type dispatchEntry struct {
	job *fireJob
	seq uint64
}

// newDispatcher builds the dispatcher; nothing runs until start. Fields of
// cfg that are zero (or negative: call cfg.Validate first) take their
// defaults. now is the clock (nil means time.Now); done is called once per
// submitted job that runs, from a worker goroutine, with its result. done
// may block briefly — that is the backpressure path — and is never called
// with a lock held.
func newDispatcher(cfg DispatchConfig, now func() time.Time, done func(fireResult)) *dispatcher {
	if done == nil {
		panic("node: newDispatcher: done is nil")
	}
	if now == nil {
		now = time.Now
	}
	cfg = cfg.withDefaults()
	tr := &http.Transport{
		// Callbacks leave through the environment's proxy when one is set
		// (loopback is never proxied).
		Proxy: http.ProxyFromEnvironment,
		DialContext: (&net.Dialer{
			Timeout:   5 * time.Second,
			KeepAlive: 30 * time.Second,
		}).DialContext,
		TLSHandshakeTimeout: 5 * time.Second,
		// Our own scheduler limits callbacks per host to PerHost, so the
		// pool never makes a request wait for a connection, and every
		// in-flight request's connection can go back idle afterwards.
		MaxIdleConns:        max(cfg.Concurrency, cfg.PerHost),
		MaxIdleConnsPerHost: cfg.PerHost,
		MaxConnsPerHost:     cfg.PerHost,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
		// Responses are results, not documents: bound what a hostile or
		// broken receiver can make us buffer.
		MaxResponseHeaderBytes: 64 << 10,
		// HTTP/1.1 only (a custom DialContext disables the h2 upgrade and
		// ForceAttemptHTTP2 stays off): PerHost then means connections.
	}
	d := &dispatcher{
		cfg: cfg,
		now: now,
		client: &http.Client{
			Transport: tr,
			// Redirects are not followed: a 3xx is returned as is and
			// classified as a failure. Following one would POST the
			// payload to a URL the task's owner never registered.
			CheckRedirect: func(*http.Request, []*http.Request) error {
				return http.ErrUseLastResponse
			},
		},
		tr:      tr,
		done:    done,
		stopped: make(chan struct{}),
	}
	d.stop, d.cancelStop = context.WithCancel(context.Background())
	d.cond.L = &d.mu.Mutex
	d.mu.hosts = make(map[string]*dispatchHost)
	return d
}

// start launches the Concurrency workers. Calling it again, or after
// close, does nothing.
func (d *dispatcher) start() {
	d.mu.Lock()
	if d.mu.started || d.mu.closed {
		d.mu.Unlock()
		return
	}
	d.mu.started = true
	d.wg.Add(d.cfg.Concurrency)
	d.mu.Unlock()
	for range d.cfg.Concurrency {
		go d.worker()
	}
}

// submit queues a job; false if the dispatcher is closed or MaxQueued jobs
// are waiting. It never blocks on I/O. The dispatcher keeps j until done
// receives it (or close returns it); the caller must not modify it
// meanwhile. O(1) amortized.
func (d *dispatcher) submit(j *fireJob) bool {
	var kb [64]byte
	key := dispatchHostKey(kb[:0], j.URL)

	d.mu.Lock()
	if d.mu.closed || d.mu.queued >= d.cfg.MaxQueued {
		d.mu.Unlock()
		return false
	}
	h := d.mu.hosts[string(key)]
	if h == nil {
		h = &dispatchHost{key: string(key)}
		d.mu.hosts[h.key] = h
	}
	d.mu.seq++
	h.jobs.push(dispatchEntry{job: j, seq: d.mu.seq})
	d.mu.queued++
	if !h.ready && h.running < d.cfg.PerHost {
		h.ready = true
		d.mu.ready.push(h)
	}
	wake := h.ready
	d.mu.Unlock()

	if wake {
		d.cond.Signal()
	}
	return true
}

// queued returns the number of jobs waiting (submitted, not yet running).
func (d *dispatcher) queued() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.mu.queued
}

// running returns the number of callbacks in flight.
func (d *dispatcher) running() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.mu.running
}

// close stops accepting jobs and lets running callbacks finish until ctx
// ends; then it cancels them (their done is still called, with Err
// "shutdown"). It returns the jobs that never started, in submission order
// (the node leaves them persisted as in-flight; they are repeated after a
// restart), and waits for every worker goroutine to exit. Idempotent: a
// later call waits for the first to finish (or for its own ctx) and returns
// nil.
func (d *dispatcher) close(ctx context.Context) []*fireJob {
	d.mu.Lock()
	if d.mu.closed {
		d.mu.Unlock()
		select {
		case <-d.stopped:
		case <-ctx.Done():
		}
		return nil
	}
	d.mu.closed = true
	left := d.takeQueuedLocked()
	d.mu.Unlock()
	d.cond.Broadcast()

	workersDone := make(chan struct{})
	go func() {
		d.wg.Wait()
		close(workersDone)
	}()
	select {
	case <-workersDone:
	case <-ctx.Done():
		d.cancelStop()
		<-workersDone
	}
	d.cancelStop()
	d.tr.CloseIdleConnections()
	close(d.stopped)
	return left
}

// takeQueuedLocked empties every host queue and the ready ring and returns
// the waiting jobs in submission order.
func (d *dispatcher) takeQueuedLocked() []*fireJob {
	entries := make([]dispatchEntry, 0, d.mu.queued)
	for key, h := range d.mu.hosts {
		for h.jobs.len() > 0 {
			entries = append(entries, h.jobs.pop())
		}
		h.ready = false
		if h.running == 0 {
			delete(d.mu.hosts, key)
		}
	}
	d.mu.ready = dispatchFIFO[*dispatchHost]{}
	d.mu.queued = 0
	slices.SortFunc(entries, func(a, b dispatchEntry) int {
		switch {
		case a.seq < b.seq:
			return -1
		case a.seq > b.seq:
			return 1
		}
		return 0
	})
	jobs := make([]*fireJob, len(entries))
	for i, e := range entries {
		jobs[i] = e.job
	}
	return jobs
}

// dispatchScratch is one worker's reusable buffers.
type dispatchScratch struct {
	hdr   []byte // header values under construction
	body  [dispatchBodyKeep]byte
	drain [4 << 10]byte
}

// worker runs jobs until close.
func (d *dispatcher) worker() {
	defer d.wg.Done()
	s := &dispatchScratch{hdr: make([]byte, 0, 192)}
	for {
		j, h, ok := d.next()
		if !ok {
			return
		}
		res := d.attempt(j, s)
		d.finish(h)
		d.done(res)
	}
}

// next blocks until a job may run (and marks it running) or the dispatcher
// is closed (ok false).
func (d *dispatcher) next() (j *fireJob, h *dispatchHost, ok bool) {
	d.mu.Lock()
	for d.mu.ready.len() == 0 && !d.mu.closed {
		d.cond.Wait()
	}
	if d.mu.closed {
		d.mu.Unlock()
		return nil, nil, false
	}
	h = d.mu.ready.pop()
	e := h.jobs.pop()
	h.running++
	d.mu.queued--
	d.mu.running++
	if h.jobs.len() > 0 && h.running < d.cfg.PerHost {
		d.mu.ready.push(h) // round-robin: back of the ring
	} else {
		h.ready = false
	}
	d.mu.Unlock()
	return e.job, h, true
}

// finish releases the running slot of a job of host h.
func (d *dispatcher) finish(h *dispatchHost) {
	d.mu.Lock()
	h.running--
	d.mu.running--
	wake := false
	switch {
	case h.jobs.len() > 0:
		if !h.ready {
			h.ready = true
			d.mu.ready.push(h)
			wake = true
		}
	case h.running == 0:
		delete(d.mu.hosts, h.key)
	}
	d.mu.Unlock()
	if wake {
		d.cond.Signal()
	}
}

// attempt performs one POST and classifies it. It never returns early
// without FinishedAt.
func (d *dispatcher) attempt(j *fireJob, s *dispatchScratch) fireResult {
	res := fireResult{Job: j, Outcome: outcomeFailure, StartedAt: d.now()}
	timeout := j.Timeout
	if timeout <= 0 {
		timeout = dispatchDefaultTimeout
	}
	ctx, cancel := context.WithTimeout(d.stop, timeout)
	defer cancel()

	var body io.Reader
	if len(j.Payload) > 0 {
		body = bytes.NewReader(j.Payload) // also sets GetBody: safe replay if nothing was written
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, j.URL, body)
	if err != nil {
		res.Err = dispatchErrText(err)
		res.FinishedAt = d.now()
		return res
	}
	d.setHeaders(req.Header, j, s)

	resp, err := d.client.Do(req)
	if err != nil {
		switch {
		case d.stop.Err() != nil:
			res.Err = dispatchShutdown
		case errors.Is(ctx.Err(), context.DeadlineExceeded):
			res.Err = "timeout after " + timeout.String()
		default:
			res.Err = dispatchErrText(err)
		}
		res.FinishedAt = d.now()
		return res
	}
	at := d.now()
	res.StatusCode = resp.StatusCode
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode <= 299:
		res.Outcome = outcomeSuccess
	case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusGone:
		res.Outcome = outcomeGone
	default: // 1xx that ends a request, 3xx (redirects are not followed), 4xx, 5xx
		res.Outcome = outcomeFailure
	}
	if res.Outcome != outcomeSuccess {
		res.RetryAfter = parseRetryAfter(resp.Header.Get("Retry-After"), resp.Header.Get("Date"), at)
	}
	// The outcome is decided by the status line; a body cut short (timeout,
	// shutdown, reset) only shortens Body.
	res.Body = readResultBody(resp.Body, s)
	res.FinishedAt = d.now()
	return res
}

// setHeaders writes the callback headers of j into h (API.md "Callback").
// The user's headers come first so that nothing can replace an X-Chime-*
// header; they may replace Content-Type and User-Agent. All per-request
// values share one string allocation.
func (d *dispatcher) setHeaders(h http.Header, j *fireJob, s *dispatchScratch) {
	b := append(s.hdr[:0], j.TaskID...)
	b = append(b, ':')
	b = strconv.AppendUint(b, j.Seq, 10)
	fireEnd := len(b)
	b = time.Unix(0, j.Due).UTC().AppendFormat(b, time.RFC3339Nano)
	dueEnd := len(b)
	b = strconv.AppendInt(b, int64(j.Attempt), 10)
	attemptEnd := len(b)
	if j.Epoch > 0 {
		b = strconv.AppendUint(b, j.Epoch, 10)
	}
	vals := string(b)
	s.hdr = b[:0] // keep the buffer if it grew

	n := 6 + len(j.Headers)
	if j.Epoch > 0 {
		n++
	}
	backing := make([]string, 0, n)
	set := func(key, v string) {
		backing = append(backing, v)
		h[key] = backing[len(backing)-1 : len(backing) : len(backing)]
	}
	set("Content-Type", "application/json")
	set("User-Agent", d.cfg.UserAgent)
	for k, v := range j.Headers {
		ck := http.CanonicalHeaderKey(k)
		if ck == "Host" || strings.HasPrefix(ck, "X-Chime-") {
			continue // rejected by validation; never sent
		}
		set(ck, v)
	}
	set("X-Chime-Task-Id", j.TaskID)
	set("X-Chime-Fire-Id", vals[:fireEnd])
	set("X-Chime-Due-At", vals[fireEnd:dueEnd])
	set("X-Chime-Attempt", vals[dueEnd:attemptEnd])
	if j.Epoch > 0 {
		set("X-Chime-Slot-Epoch", vals[attemptEnd:])
	}
}

// readResultBody returns a copy of the first dispatchBodyKeep bytes of rb,
// discards up to dispatchDrainLimit more so the connection can be reused,
// and closes rb. It returns nil for an empty body.
func readResultBody(rb io.ReadCloser, s *dispatchScratch) []byte {
	defer rb.Close()
	n, err := io.ReadFull(rb, s.body[:])
	var out []byte
	if n > 0 {
		out = bytes.Clone(s.body[:n])
	}
	if err != nil {
		return out // EOF, short body or a read error: nothing left to drain
	}
	for left := dispatchDrainLimit; left > 0; {
		m, err := rb.Read(s.drain[:min(left, len(s.drain))])
		left -= m
		if err != nil {
			break
		}
	}
	return out
}

// dispatchErrText is the Err text of a transport error: the cause without
// net/url's `Post "<url>":` prefix (the URL is in the task already).
func dispatchErrText(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return err.Error()
}

// parseRetryAfter parses a Retry-After value: delta-seconds, or an
// HTTP-date taken relative to the response's Date header when it has a
// valid one (so the receiver's clock skew cancels out), else relative to at,
// the time the response arrived. It returns 0 for a missing, invalid or
// past value and clamps to dispatchMaxRetryAfter.
func parseRetryAfter(v, date string, at time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if v[0] >= '0' && v[0] <= '9' {
		const maxSecs = int64(dispatchMaxRetryAfter / time.Second)
		var secs int64
		for i := 0; i < len(v); i++ {
			c := v[i]
			if c < '0' || c > '9' {
				return 0
			}
			if secs <= maxSecs {
				secs = secs*10 + int64(c-'0')
			}
		}
		return time.Duration(min(secs, maxSecs)) * time.Second
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0
	}
	ref := at
	if date != "" {
		if dt, err := http.ParseTime(date); err == nil {
			ref = dt
		}
	}
	delay := t.Sub(ref)
	if delay <= 0 {
		return 0
	}
	return min(delay, dispatchMaxRetryAfter)
}

// dispatchHostKey appends the per-host key of rawURL to dst:
// "scheme://host:port" in lower case, the default port filled in and any
// userinfo dropped, so that it names the same thing as the transport's
// connection pool. It does not allocate beyond dst. A URL without "://"
// is its own key (its request fails in attempt).
func dispatchHostKey(dst []byte, rawURL string) []byte {
	i := strings.Index(rawURL, "://")
	if i <= 0 {
		return append(dst, rawURL...)
	}
	scheme, auth := rawURL[:i], rawURL[i+3:]
	if k := strings.IndexAny(auth, "/?#"); k >= 0 {
		auth = auth[:k]
	}
	if k := strings.LastIndexByte(auth, '@'); k >= 0 {
		auth = auth[k+1:]
	}
	dst = dispatchAppendLower(dst, scheme)
	dst = append(dst, "://"...)
	dst = dispatchAppendLower(dst, auth)
	if strings.LastIndexByte(auth, ':') <= strings.LastIndexByte(auth, ']') { // no port ("[::1]" has colons but no port)
		if strings.EqualFold(scheme, "https") {
			dst = append(dst, ":443"...)
		} else {
			dst = append(dst, ":80"...)
		}
	}
	return dst
}

// dispatchAppendLower appends s to dst with ASCII letters in lower case.
func dispatchAppendLower(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		dst = append(dst, c)
	}
	return dst
}

// dispatchFIFO is a growable ring buffer queue. The zero value is empty and
// ready to use. Not safe for concurrent use; push and pop are O(1)
// amortized.
type dispatchFIFO[T any] struct {
	buf  []T
	head int
	n    int
}

func (q *dispatchFIFO[T]) len() int { return q.n }

func (q *dispatchFIFO[T]) push(v T) {
	if q.n == len(q.buf) {
		buf := make([]T, max(4, 2*len(q.buf)))
		m := copy(buf, q.buf[q.head:])
		copy(buf[m:], q.buf[:q.head])
		q.buf, q.head = buf, 0
	}
	q.buf[(q.head+q.n)%len(q.buf)] = v
	q.n++
}

// pop removes and returns the oldest element; the queue must not be empty.
func (q *dispatchFIFO[T]) pop() T {
	var zero T
	v := q.buf[q.head]
	q.buf[q.head] = zero // drop the reference
	q.head = (q.head + 1) % len(q.buf)
	q.n--
	if q.n == 0 {
		q.head = 0
	}
	return v
}
