package node

// The callback dispatcher: the part of a node that POSTs callbacks (API.md
// "Callback"). See the dispatcher type for its contract, and
// dispatch_conn.go for its connection pool.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/valyala/fasthttp"
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
	outcomeDenied                     // the callback address policy refused the address: never dialed, no retry
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
	case outcomeDenied:
		return "denied"
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
	// goroutine stack and ~25 KiB of buffers (a 16 KiB response reader, a
	// 4 KiB request writer, 4.5 KiB to keep and drain the response body),
	// so 512 is ~14-16 MiB; connections cost no goroutines.
	Concurrency int

	// PerHost is the number of callbacks in flight per callback host
	// (scheme://host:port), and so the number of connections per host
	// (each attempt holds one; idle ones are reused before a new one is
	// dialed). Default 64: enough to reach the measured loopback ceiling
	// from one host, while one slow host can hold at most 1/8 of the
	// default pool.
	PerHost int

	// MaxQueued bounds the jobs waiting (submitted, not yet running);
	// submit refuses beyond it, which is the node's backpressure signal.
	// Default 100000: about 6 s of work at 15k callbacks/s, and ~16 B of
	// queue plus the job itself (a few hundred bytes) per entry.
	MaxQueued int

	// UserAgent is sent as User-Agent unless the task sets its own.
	// Default "chime".
	UserAgent string

	// IdleTimeout closes keep-alive connections unused for this long.
	// Default 30 s: long enough that a host called every few seconds
	// keeps its connections (a new one costs a TCP, maybe a TLS,
	// handshake), short enough that a host no longer called does not pin
	// sockets for long. A connection the receiver closed earlier (Node.js
	// closes idle ones after 5 s) is noticed when it is next used and the
	// request is sent again on a new one, once (see attempt).
	IdleTimeout time.Duration

	// TLSConfig configures https callbacks; nil means crypto/tls defaults
	// (system roots). It is cloned for each connection, with ServerName
	// set from the URL when empty and NextProtos cleared (only HTTP/1.1
	// is spoken); it must not be modified after newDispatcher.
	TLSConfig *tls.Config

	// SigningKey, when set, signs every callback: X-Chime-Signature is
	// "t=<unix seconds>,v1=<hex HMAC-SHA256(key, t + "." + fire id + "." +
	// body)>". SigningKeyNext, set during a rotation, adds a second v1=
	// (current key first), so a receiver that knows either key accepts the
	// callback. Each must be at least MinSigningKey bytes; SigningKeyNext
	// needs SigningKey.
	SigningKey     []byte
	SigningKeyNext []byte

	// CallbackAllow and CallbackDeny refine the callback address policy
	// (ssrf.go): each entry is a CIDR, an IP, a host name, or one of them
	// with ":port". By default link-local, cloud metadata, unspecified,
	// multicast and broadcast addresses (and the metadata host names) are
	// refused; CallbackDenyPrivate also refuses loopback, RFC 1918 and ULA
	// (fc00::/7) addresses and the name localhost. A deny entry wins over an
	// allow entry, which wins over the defaults. The policy is checked on
	// every address a callback host resolves to, right before it is dialed.
	CallbackAllow       []string
	CallbackDeny        []string
	CallbackDenyPrivate bool

	// Set by the node, not by users: node is the X-Chime-Node of every
	// callback (Config.Name), dial opens the connections (Config.DialContext;
	// nil dials TCP).
	node string
	dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// lookup, when set, resolves callback host names (tests: DNS
	// rebinding); nil uses net.DefaultResolver.
	lookup func(ctx context.Context, host string) ([]netip.Addr, error)
}

// DefaultDispatchConfig returns the production defaults; the field docs
// give the reasons.
func DefaultDispatchConfig() DispatchConfig {
	return DispatchConfig{
		Concurrency: 512,
		PerHost:     64,
		MaxQueued:   100_000,
		UserAgent:   "chime",
		IdleTimeout: 30 * time.Second,
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
	if c.IdleTimeout < 0 {
		errs = append(errs, errors.New("node: dispatch: IdleTimeout must be >= 0 (0 = default)"))
	}
	if err := c.validateTrust(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// MinSigningKey is the shortest callback signing key, in bytes: 16 bytes
// (128 bits) of randomness is out of reach of guessing; longer keys are
// fine (openssl rand -hex 32 gives 64).
const MinSigningKey = 16

// validateTrust checks the signing keys and the address rules (also part
// of Config.Validate).
func (c DispatchConfig) validateTrust() error {
	var errs []error
	if n := len(c.SigningKey); n > 0 && n < MinSigningKey {
		errs = append(errs, fmt.Errorf("node: dispatch: the signing key has %d bytes: it needs at least %d (e.g. openssl rand -hex 32)", n, MinSigningKey))
	}
	if n := len(c.SigningKeyNext); n > 0 && n < MinSigningKey {
		errs = append(errs, fmt.Errorf("node: dispatch: the next signing key has %d bytes: it needs at least %d (e.g. openssl rand -hex 32)", n, MinSigningKey))
	}
	if len(c.SigningKeyNext) > 0 && len(c.SigningKey) == 0 {
		errs = append(errs, errors.New("node: dispatch: a next signing key needs a current signing key"))
	}
	if _, err := newCallbackPolicy(c.CallbackAllow, c.CallbackDeny, c.CallbackDenyPrivate); err != nil {
		errs = append(errs, fmt.Errorf("node: dispatch: %w", err))
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
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = def.IdleTimeout
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
	// dispatchDialTimeout bounds the TCP connect, and dispatchConnectTimeout
	// the connect plus the TLS handshake; the attempt's deadline may cut
	// either shorter.
	dispatchDialTimeout    = 5 * time.Second
	dispatchConnectTimeout = 10 * time.Second
	// dispatchReadBuffer is a worker's response reader. A response header
	// block must fit in it: a larger one fails the attempt. 16 KiB is 4×
	// fasthttp's default, which real receivers rarely come near.
	dispatchReadBuffer = 16 << 10
	// dispatchWriteBuffer is a worker's request writer; a payload larger
	// than it is written straight through.
	dispatchWriteBuffer = 4 << 10
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
// Transport: HTTP/1.1 with keep-alive, requests encoded and responses
// parsed by fasthttp (about half the CPU of net/http's client, limits.md),
// over the dispatcher's own connection pool (dispatchPool). A worker does
// the whole exchange itself: no goroutine per connection or request.
// Redirects are never followed (a 3xx is a failure: following one would
// POST the payload to a URL the task's owner never registered), and
// proxies from the environment are not used.
//
// Shutdown: fasthttp has no request context, so close cuts the
// connections instead: when close's ctx ends it cancels dials in progress
// and closes every connection, idle or in use; an attempt blocked on one
// fails at once and, seeing the dispatcher stopping, reports Err
// "shutdown".
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
	cfg  DispatchConfig
	now  func() time.Time
	done func(fireResult)
	pool *dispatchPool
	keys [][]byte // signing keys, current first; none: callbacks are unsigned

	// stop is cancelled when close gives up waiting: it is the parent of
	// every dial, and attempts failing after it report "shutdown".
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
// defaults. now is the clock of the results' timestamps (nil means
// time.Now; deadlines and idle expiry always use the wall clock); done is
// called once per submitted job that runs, from a worker goroutine, with
// its result. done may block briefly — that is the backpressure path — and
// is never called with a lock held.
func newDispatcher(cfg DispatchConfig, now func() time.Time, done func(fireResult)) *dispatcher {
	if done == nil {
		panic("node: newDispatcher: done is nil")
	}
	if now == nil {
		now = time.Now
	}
	cfg = cfg.withDefaults()
	d := &dispatcher{
		cfg:     cfg,
		now:     now,
		done:    done,
		stopped: make(chan struct{}),
	}
	d.stop, d.cancelStop = context.WithCancel(context.Background())
	d.pool = newDispatchPool(d.stop, cfg.TLSConfig, cfg.IdleTimeout)
	d.pool.dialFn = cfg.dial
	policy, err := newCallbackPolicy(cfg.CallbackAllow, cfg.CallbackDeny, cfg.CallbackDenyPrivate)
	if err != nil {
		panic("node: newDispatcher: " + err.Error() + " (call Validate first)")
	}
	d.pool.policy = policy
	if cfg.lookup != nil {
		d.pool.lookup = cfg.lookup
	}
	for _, k := range [][]byte{cfg.SigningKey, cfg.SigningKeyNext} {
		if len(k) > 0 {
			d.keys = append(d.keys, bytes.Clone(k))
		}
	}
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
// restart), closes every connection and waits for every worker goroutine
// to exit. Idempotent: a later call waits for the first to finish (or for
// its own ctx) and returns nil.
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
		// Order matters: stop first, so that an attempt failing on a cut
		// connection already sees it and reports "shutdown".
		d.cancelStop()
		d.pool.closeAll()
		<-workersDone
	}
	d.cancelStop()
	d.pool.closeAll()
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
	hdr   []byte        // X-Chime-* header values under construction
	key   []byte        // pool key of the request in progress
	br    *bufio.Reader // reset onto each attempt's connection
	bw    *bufio.Writer // likewise
	body  [dispatchBodyKeep]byte
	drain [4 << 10]byte
	macs  []hash.Hash // HMAC-SHA256 of each signing key (dispatcher.keys), reset per callback
	sig   []byte      // X-Chime-Signature under construction
	sum   [sha256.Size]byte
}

// worker runs jobs until close.
func (d *dispatcher) worker() {
	defer d.wg.Done()
	s := &dispatchScratch{
		hdr: make([]byte, 0, 192),
		key: make([]byte, 0, 64),
		br:  bufio.NewReaderSize(nil, dispatchReadBuffer),
		bw:  bufio.NewWriterSize(nil, dispatchWriteBuffer),
	}
	for _, k := range d.keys {
		s.macs = append(s.macs, hmac.New(sha256.New, k))
	}
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
// without FinishedAt. In the steady state (a kept-alive connection, a
// short response) it allocates only the result's copy of the body.
func (d *dispatcher) attempt(j *fireJob, s *dispatchScratch) fireResult {
	res := fireResult{Job: j, Outcome: outcomeFailure, StartedAt: d.now()}
	timeout := j.Timeout
	if timeout <= 0 {
		timeout = dispatchDefaultTimeout
	}
	deadline := time.Now().Add(timeout)
	if msg := dispatchCheckURL(j.URL); msg != "" {
		res.Err = msg
		res.FinishedAt = d.now()
		return res
	}

	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseResponse(resp)
	defer fasthttp.ReleaseRequest(req)
	d.buildRequest(req, j, s)
	s.key = dispatchPoolKey(s.key[:0], req.URI())

	c, err := d.roundTrip(req, resp, s, deadline)
	if err != nil {
		var denied *callbackDeniedError
		switch {
		case d.stop.Err() != nil:
			res.Err = dispatchShutdown
		case errors.As(err, &denied):
			res.Outcome = outcomeDenied
			res.Err = denied.Error()
		case !time.Now().Before(deadline):
			res.Err = "timeout after " + timeout.String()
		default:
			res.Err = dispatchErrText(err)
		}
		res.FinishedAt = d.now()
		return res
	}
	at := d.now()
	res.StatusCode = resp.StatusCode()
	switch {
	case res.StatusCode >= 200 && res.StatusCode <= 299:
		res.Outcome = outcomeSuccess
	case res.StatusCode == http.StatusNotFound || res.StatusCode == http.StatusGone:
		res.Outcome = outcomeGone
	default: // 101, 3xx (redirects are not followed), 4xx, 5xx
		res.Outcome = outcomeFailure
	}
	if res.Outcome != outcomeSuccess {
		if ra := resp.Header.Peek("Retry-After"); len(ra) > 0 {
			res.RetryAfter = parseRetryAfter(string(ra), string(resp.Header.Peek("Date")), at)
		}
	}
	// The outcome is decided by the status line; a body cut short (timeout,
	// shutdown, reset) only shortens Body, and costs the connection.
	stream := resp.BodyStream()
	var whole bool
	res.Body, whole = readResultBody(stream, s)
	_ = resp.CloseBodyStream()
	reusable := whole &&
		res.StatusCode >= 200 && // not 101 Switching Protocols
		resp.Header.IsHTTP11() && !resp.Header.ConnectionClose() &&
		(stream == nil || resp.Header.ContentLength() != -2) && // -2: delimited by close
		s.br.Buffered() == 0 // nothing beyond the response
	if reusable {
		d.pool.put(c)
	} else {
		d.pool.discard(c)
	}
	s.br.Reset(nil)
	s.bw.Reset(nil)
	res.FinishedAt = d.now()
	return res
}

// roundTrip writes req on a pooled connection and reads the response
// header into resp, leaving the body to stream from s.br. On success the
// caller owns the returned connection and must put or discard it; on error
// it is already discarded.
//
// A kept-alive connection may have been closed by the receiver while idle.
// That shows as a failure to write, or an end of stream before the first
// response byte; then the request is sent once more on a new connection.
// The receiver cannot have answered the first copy, but it may (rarely:
// it crashed mid-request) have processed it — harmless under at-least-once
// delivery, since the fire id is the same.
func (d *dispatcher) roundTrip(req *fasthttp.Request, resp *fasthttp.Response, s *dispatchScratch, deadline time.Time) (*dispatchConn, error) {
	fresh := false
	for {
		c, err := d.pool.get(s.key, fresh, deadline)
		if err != nil {
			return nil, err
		}
		stale, err := d.exchange(c, req, resp, s, deadline)
		if err == nil {
			return c, nil
		}
		d.pool.discard(c)
		if !stale || !c.reused || fresh || d.stop.Err() != nil || !time.Now().Before(deadline) {
			return nil, err
		}
		d.pool.dropIdle(c.key)
		fresh = true
	}
}

// exchange writes req to c and reads the response header. stale reports
// an error that leaves the request unanswered: a failed write, or the
// connection ending before the first response byte.
func (d *dispatcher) exchange(c *dispatchConn, req *fasthttp.Request, resp *fasthttp.Response, s *dispatchScratch, deadline time.Time) (stale bool, err error) {
	if err := c.conn.SetDeadline(deadline); err != nil {
		return false, err
	}
	s.bw.Reset(c.conn)
	if err := req.Write(s.bw); err != nil {
		return !dispatchIsTimeout(err), err
	}
	if err := s.bw.Flush(); err != nil {
		return !dispatchIsTimeout(err), err
	}
	s.br.Reset(c.conn)
	resp.StreamBody = true
	if err := resp.ReadLimitBody(s.br, 0); err != nil {
		// fasthttp reports any failure to read the first byte, other than
		// a timeout, as io.EOF.
		return errors.Is(err, io.EOF), err
	}
	return false, nil
}

// buildRequest writes the callback request of j into req (API.md
// "Callback"). The user's headers come before the X-Chime-* ones so that
// nothing can replace those; they may replace Content-Type and User-Agent.
// The values are copied into req, so s.hdr is reused.
func (d *dispatcher) buildRequest(req *fasthttp.Request, j *fireJob, s *dispatchScratch) {
	req.SetRequestURI(j.URL)
	req.Header.SetMethod(fasthttp.MethodPost)
	req.Header.SetContentType("application/json")
	req.Header.SetUserAgent(d.cfg.UserAgent)
	for k, v := range j.Headers {
		if dispatchReservedHeader(k) {
			continue // rejected by validation; never sent
		}
		req.Header.Set(k, v)
	}

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
	s.hdr = b[:0] // keep the buffer if it grew

	req.Header.Set("X-Chime-Task-Id", j.TaskID)
	if d.cfg.node != "" {
		req.Header.Set("X-Chime-Node", d.cfg.node)
	}
	req.Header.SetBytesV("X-Chime-Fire-Id", b[:fireEnd])
	req.Header.SetBytesV("X-Chime-Due-At", b[fireEnd:dueEnd])
	req.Header.SetBytesV("X-Chime-Attempt", b[dueEnd:attemptEnd])
	if j.Epoch > 0 {
		req.Header.SetBytesV("X-Chime-Slot-Epoch", b[attemptEnd:])
	}
	if len(s.macs) > 0 {
		s.sig = appendSignature(s.sig[:0], s.macs, &s.sum, time.Now().Unix(), b[:fireEnd], j.Payload)
		req.Header.SetBytesV("X-Chime-Signature", s.sig)
	}
	req.SetBodyRaw(j.Payload) // not copied: j is ours until done
}

// sigDot separates the parts of the signed string.
var sigDot = []byte{'.'}

// appendSignature appends the X-Chime-Signature value of a callback to
// dst: "t=<t>" and one ",v1=<hex HMAC-SHA256(key, t.fireID.body)>" per key
// of macs (current key first). The wall clock's t, not the node's, is what
// the receiver compares with its own. Allocation free once dst has grown to
// fit (about 80 bytes a key); sum is scratch.
func appendSignature(dst []byte, macs []hash.Hash, sum *[sha256.Size]byte, t int64, fireID, body []byte) []byte {
	dst = append(dst, "t="...)
	dst = strconv.AppendInt(dst, t, 10)
	tEnd := len(dst)
	for _, m := range macs {
		m.Reset()
		m.Write(dst[2:tEnd])
		m.Write(sigDot)
		m.Write(fireID)
		m.Write(sigDot)
		m.Write(body)
		dst = append(dst, ",v1="...)
		dst = hex.AppendEncode(dst, m.Sum(sum[:0]))
	}
	return dst
}

// dispatchReservedHeader reports whether a user header k must not be sent:
// Host routes the request, the framing headers would corrupt it (Trailer
// would make fasthttp chunk the body), and X-Chime-* are ours. Case
// insensitive; allocation free.
func dispatchReservedHeader(k string) bool {
	const prefix = "x-chime-"
	if len(k) >= len(prefix) && strings.EqualFold(k[:len(prefix)], prefix) {
		return true
	}
	for _, r := range [...]string{"host", "content-length", "transfer-encoding", "connection", "trailer"} {
		if strings.EqualFold(k, r) {
			return true
		}
	}
	return false
}

// dispatchPoolKey appends "scheme://host:port" of u to dst (fasthttp
// lower-cases both), the default port filled in: the connection pool's key
// and, after the "://", the address dialed.
func dispatchPoolKey(dst []byte, u *fasthttp.URI) []byte {
	dst = append(dst, u.Scheme()...)
	dst = append(dst, "://"...)
	host := u.Host()
	dst = append(dst, host...)
	if bytes.LastIndexByte(host, ':') <= bytes.LastIndexByte(host, ']') { // no port ("[::1]" has colons but no port)
		if string(u.Scheme()) == "https" {
			dst = append(dst, ":443"...)
		} else {
			dst = append(dst, ":80"...)
		}
	}
	return dst
}

// readResultBody returns a copy of the first dispatchBodyKeep bytes of the
// response body r (nil: none) and discards up to dispatchDrainLimit more.
// whole reports that the body was read to its end, so the connection can
// serve the next request. It returns nil for an empty body.
func readResultBody(r io.Reader, s *dispatchScratch) (body []byte, whole bool) {
	if r == nil {
		return nil, true
	}
	n := 0
	var err error
	for n < len(s.body) && err == nil {
		var m int
		m, err = r.Read(s.body[n:])
		n += m
	}
	if n > 0 {
		body = bytes.Clone(s.body[:n])
	}
	for left := dispatchDrainLimit; err == nil && left > 0; {
		var m int
		m, err = r.Read(s.drain[:min(left, len(s.drain))])
		left -= m
	}
	return body, err == io.EOF
}

// dispatchIsTimeout reports whether err is a deadline expiring.
func dispatchIsTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}

// dispatchErrText is the Err text of a transport error: the cause without
// net/url's `parse "<url>":` prefix (the URL is in the task already) or
// fasthttp's dump of the bytes it could not parse, and plain sentences for
// a connection that ended before the response and an oversized header.
func dispatchErrText(err error) string {
	if errors.Is(err, io.EOF) {
		return "connection closed before the response"
	}
	var small *fasthttp.ErrSmallBuffer
	if errors.As(err, &small) {
		return fmt.Sprintf("response header larger than %d KiB", dispatchReadBuffer>>10)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	msg := err.Error()
	if i := strings.Index(msg, ": buffer size="); i >= 0 {
		msg = msg[:i]
	}
	return msg
}

// dispatchCheckURL returns why rawURL cannot be called ("" if it can).
// Task validation has already required an absolute http(s) URL with a
// host; this guards the dispatcher itself. fasthttp accepts nearly
// anything, so the common shape — a scheme of http or https, a host name
// or IP literal, an optional numeric port, printable ASCII with valid
// escapes — is checked here without allocating, and only anything else is
// handed to net/url, whose verdict (and wording) decides.
func dispatchCheckURL(rawURL string) string {
	if dispatchPlainURL(rawURL) {
		return ""
	}
	u, err := url.Parse(rawURL)
	switch {
	case err != nil:
		return dispatchErrText(err)
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Sprintf("unsupported protocol scheme %q", u.Scheme)
	case u.Host == "":
		return "no Host in request URL"
	}
	return ""
}

// dispatchPlainURL reports whether rawURL has the common shape that
// dispatchCheckURL accepts without net/url. False means "ask net/url",
// not "invalid".
func dispatchPlainURL(rawURL string) bool {
	for i := 0; i < len(rawURL); i++ {
		switch c := rawURL[i]; {
		case c <= ' ' || c >= 0x7f:
			return false
		case c == '%':
			if i+2 >= len(rawURL) || !dispatchIsHex(rawURL[i+1]) || !dispatchIsHex(rawURL[i+2]) {
				return false
			}
		}
	}
	i := strings.Index(rawURL, "://")
	if i < 0 {
		return false
	}
	if scheme := rawURL[:i]; !strings.EqualFold(scheme, "http") && !strings.EqualFold(scheme, "https") {
		return false
	}
	auth := rawURL[i+3:]
	if k := strings.IndexAny(auth, "/?#"); k >= 0 {
		auth = auth[:k]
	}
	if k := strings.LastIndexByte(auth, '@'); k >= 0 {
		auth = auth[k+1:]
	}
	host, port := auth, ""
	if strings.HasPrefix(auth, "[") {
		k := strings.IndexByte(auth, ']')
		if k < 0 {
			return false
		}
		host, port = auth[1:k], auth[k+1:]
		if port != "" && port[0] != ':' {
			return false
		}
		for j := 0; j < len(host); j++ {
			if c := host[j]; !dispatchIsHex(c) && c != ':' && c != '.' {
				return false
			}
		}
	} else {
		if k := strings.LastIndexByte(auth, ':'); k >= 0 {
			host, port = auth[:k], auth[k:]
		}
		for j := 0; j < len(host); j++ {
			if c := host[j]; !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_') {
				return false
			}
		}
	}
	if host == "" {
		return false
	}
	for j := 1; j < len(port); j++ { // port[0] is ':'
		if port[j] < '0' || port[j] > '9' {
			return false
		}
	}
	return true
}

// dispatchIsHex reports whether c is an ASCII hexadecimal digit.
func dispatchIsHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
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
