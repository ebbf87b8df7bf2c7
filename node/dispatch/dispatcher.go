// Package dispatch is Chime's callback client: it POSTs callbacks (API.md
// "Callback") and reports each attempt's Result, and decides nothing about
// tasks. It holds the connection pool (pool.go), builds and signs requests
// (request.go, signature.go), bounds callbacks in flight overall and per
// host (dispatcher.go), classifies responses (result.go) and enforces the
// callback address policy at dial time (policy.go; the node also checks it
// at create time with Policy.CheckURL). HostStats keeps per-host latency
// for the dashboard.
//
// It imports nothing of Chime (scripts/check-deps.sh): what it needs of
// the node — where results go, the clock, the node's name, the network —
// comes in Deps. Retries, backoff and persistence belong to the node.
package dispatch

import (
	"bufio"
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"hash"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/chime-scheduler/chime/node/clock"
)

// Deps is what the dispatcher takes from its user (the node), set once at
// New: where results go, the clock, the name it signs callbacks with, and
// how it reaches the network.
type Deps struct {
	// OnResult receives the result of every submitted job that runs,
	// exactly once, from a worker goroutine, never with a lock held; calls
	// may run concurrently. It may block briefly: that is the backpressure
	// path. Required.
	OnResult func(Result)
	// Clock is the dispatcher's one clock: the results' timestamps,
	// deadlines, idle expiry and the signature's t. Nil means clock.Real.
	Clock clock.Clock
	// Node, when set, is sent as X-Chime-Node on every callback.
	Node string
	// DialContext, when set, opens the connections (network "tcp", addr an
	// IP:port that passed the address policy, never a name); nil dials TCP
	// with net.Dialer. It must honour ctx's deadline and cancellation.
	DialContext func(ctx context.Context, network, addr string) (net.Conn, error)
	// LookupNetIP, when set, resolves callback host names (tests play DNS
	// rebinding with it); nil uses net.DefaultResolver.
	LookupNetIP func(ctx context.Context, host string) ([]netip.Addr, error)
}

// Dispatcher POSTs callbacks. It is I/O only: it decides nothing about task
// state, runs exactly one attempt per submitted job and reports the outcome
// through Deps.OnResult (done). Retries, backoff and persistence belong to
// the caller.
//
// Scheduling: an elastic pool of at most Concurrency workers (no goroutine
// per job) takes jobs from per-host FIFO queues. Hosts that have waiting
// jobs and a free per-host slot sit in a ready ring; a worker takes the host
// at the front, runs one of its jobs and puts the host back at the end while
// it still qualifies. So hosts are served round-robin, one job at a time,
// and a slow host holds at most PerHost workers: the others keep serving the
// remaining hosts.
//
// Within a host, a job submitted more than LateAfter past its due (the
// overdue fires of slots a node just took over, retries, a backfill's past
// occurrences; not an ACK, whose delay is on purpose) waits in the host's
// late lane, and a job still on time goes
// ahead of it: a backlog that is late already must not make the fires
// behind it late too. The late lane is not starved: it gets every
// lateShare+1-th start while both lanes wait. Nor may it fill the host:
// at most lateCap of the host's PerHost callbacks in flight are late ones,
// so a job on time finds a free slot instead of waiting for a late
// callback to end.
//
// Workers start on demand and exit when idle: runnable counts the jobs that
// could start now (each host's waiting jobs up to its free per-host slots),
// and whenever it exceeds the workers on their way to the ring (neither
// running a job nor parked), a parked worker is woken (the one parked last)
// or, below Concurrency, a new one is started. A worker that finds the ring
// empty parks; parked for workerIdle, it exits. So an idle dispatcher holds
// no goroutine, and a busy one runs up to Concurrency workers, never more
// than its runnable and running jobs need.
//
// Transport: HTTP/1.1 with keep-alive, requests encoded and responses
// parsed by fasthttp (about half the CPU of net/http's client, limits.md),
// over the dispatcher's own connection pool (connPool). A worker does
// the whole exchange itself: no goroutine per connection or request.
// Redirects are never followed (a 3xx is a failure: following one would
// POST the payload to a URL the task's owner never registered), and
// proxies from the environment are not used.
//
// Shutdown: fasthttp has no request context, so Close cuts the
// connections instead: when Close's ctx ends it cancels dials in progress
// and closes every connection, idle or in use; an attempt blocked on one
// fails at once and, seeing the dispatcher stopping, reports Err
// "shutdown".
//
// Invariants (under mu):
//   - a host is in ready exactly when runnableOf(host) > 0: it has jobs
//     waiting that may start (host.ready mirrors membership);
//   - queued is the sum of the hosts' queue lengths and <= MaxQueued;
//   - running <= Concurrency and every host's running <= PerHost;
//   - runnable is the sum over hosts of runnableOf(host);
//   - every host's lateRunning <= lateCap(PerHost) and <= running;
//   - running + len(idle) <= workers <= Concurrency, and a worker parked
//     (in idle) has parked set.
//   - a host with no waiting and no running jobs is not in hosts.
//
// Concurrency: Submit, Queued, Running, Start and Close are safe for
// concurrent use. done is called from worker goroutines, never under mu,
// and may run concurrently with itself.
type Dispatcher struct {
	cfg   Config
	clock clock.Clock
	done  func(Result)
	node  string // X-Chime-Node; "": not sent
	pool  *connPool
	keys  [][]byte // signing keys, current first; none: callbacks are unsigned

	// stop is cancelled when Close gives up waiting: it is the parent of
	// every dial, and attempts failing after it report "shutdown".
	stop       context.Context
	cancelStop context.CancelFunc

	wg         sync.WaitGroup // the workers
	stopped    chan struct{}  // closed when the first Close has returned
	workerIdle time.Duration  // a worker parked this long exits

	mu struct {
		sync.Mutex
		hosts    map[string]*hostQueue
		ready    fifo[*hostQueue]
		seq      uint64 // submission order, for Close's result
		queued   int
		running  int
		runnable int            // jobs that could start now (see the invariants)
		workers  int            // live worker goroutines
		idle     []*workerState // parked workers, the last parked last
		started  bool
		closed   bool
	}
}

// workerIdle is how long a parked worker waits for a job before it exits.
const workerIdle = 10 * time.Second

// workerState is what the dispatcher knows of one worker.
type workerState struct {
	wake   chan struct{} // capacity 1: a job may be ready, or Close
	parked bool          // in dispatcher.mu.idle (under mu)
}

// hostQueue is the queues and the running count of one callback host.
type hostQueue struct {
	key     string           // scheme://host:port, lower case
	jobs    fifo[queueEntry] // on time
	late    fifo[queueEntry] // submitted more than LateAfter past their due
	running int
	// lateRunning counts the running jobs taken from late.
	lateRunning int
	ready       bool // in dispatcher.mu.ready
	// onTime counts the starts from jobs since the last from late.
	onTime int
}

// lateShare is how many on-time starts a host's late lane waits for at
// most (while both lanes wait) before one of its jobs starts.
const lateShare = 4

// lateCap is how many of a host's perHost callbacks in flight may be late
// ones: three quarters (at least one), so a quarter stays for the jobs
// on time.
func lateCap(perHost int) int { return max(1, perHost-perHost/4) }

// waiting is the number of h's jobs waiting, in both lanes.
func (h *hostQueue) waiting() int { return h.jobs.len() + h.late.len() }

// startable is the number of h's waiting jobs that the lanes let start,
// free slots aside.
func (h *hostQueue) startable(perHost int) int {
	return h.jobs.len() + min(h.late.len(), max(0, lateCap(perHost)-h.lateRunning))
}

// take removes the job to start next and reports whether it is a late
// one: the oldest on time, unless none waits or the late lane's turn has
// come (lateShare), and the late lane has room (lateCap). There must be
// one (startable > 0).
func (h *hostQueue) take(perHost int) (queueEntry, bool) {
	if h.late.len() > 0 && h.lateRunning < lateCap(perHost) && (h.jobs.len() == 0 || h.onTime >= lateShare) {
		h.onTime = 0
		return h.late.pop(), true
	}
	h.onTime++
	return h.jobs.pop(), false
}

// queueEntry is a waiting job and its submission number.
type queueEntry struct {
	job *Job
	seq uint64
}

// New builds a dispatcher; nothing runs until Start. Fields of cfg that
// are zero (or negative: call cfg.Validate first) take their defaults; it
// panics on address rules that do not parse, and without deps.OnResult.
func New(cfg Config, deps Deps) *Dispatcher {
	if deps.OnResult == nil {
		panic("dispatch: New: Deps.OnResult is nil")
	}
	cfg = cfg.withDefaults()
	d := &Dispatcher{
		cfg:     cfg,
		clock:   clock.Or(deps.Clock),
		done:    deps.OnResult,
		node:    deps.Node,
		stopped: make(chan struct{}),

		workerIdle: workerIdle,
	}
	d.stop, d.cancelStop = context.WithCancel(context.Background())
	d.pool = newConnPool(d.stop, d.clock, cfg.TLSConfig, cfg.IdleTimeout)
	d.pool.dialFn = deps.DialContext
	policy, err := NewPolicy(cfg.CallbackAllow, cfg.CallbackDeny, cfg.CallbackDenyPrivate)
	if err != nil {
		panic("dispatch: New: " + err.Error() + " (call Validate first)")
	}
	d.pool.policy = policy
	if deps.LookupNetIP != nil {
		d.pool.lookup = deps.LookupNetIP
	}
	for _, k := range [][]byte{cfg.SigningKey, cfg.SigningKeyNext} {
		if len(k) > 0 {
			d.keys = append(d.keys, bytes.Clone(k))
		}
	}
	d.mu.hosts = make(map[string]*hostQueue)
	return d
}

// Start lets jobs run: it starts the workers the jobs already submitted
// need (up to Concurrency), and later jobs start more on demand. Calling it
// again, or after Close, does nothing.
func (d *Dispatcher) Start() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.mu.started || d.mu.closed {
		return
	}
	d.mu.started = true
	d.staffLocked()
}

// staffLocked wakes parked workers or starts new ones (up to Concurrency)
// until the workers on their way to the ready ring cover the runnable jobs.
// A worker that has just finished a job counts as on its way (it looks at
// the ring before it parks, once its OnResult call returns), so one that
// frees a slot for its host's next job wakes no other.
func (d *Dispatcher) staffLocked() {
	if !d.mu.started || d.mu.closed {
		return
	}
	for d.mu.runnable > d.mu.workers-d.mu.running-len(d.mu.idle) {
		if n := len(d.mu.idle); n > 0 {
			w := d.mu.idle[n-1]
			d.mu.idle[n-1] = nil
			d.mu.idle = d.mu.idle[:n-1]
			w.parked = false
			w.wake <- struct{}{} // never blocks: one token per parking
			continue
		}
		if d.mu.workers >= d.cfg.Concurrency {
			return
		}
		d.mu.workers++
		d.wg.Add(1) // not closed, so Close is not waiting yet
		go d.worker()
	}
}

// runnableOf is the number of h's jobs that could start now.
func (d *Dispatcher) runnableOf(h *hostQueue) int {
	return max(0, min(h.startable(d.cfg.PerHost), d.cfg.PerHost-h.running))
}

// Submit queues a job; false if the dispatcher is closed or MaxQueued jobs
// are waiting. It never blocks on I/O. The dispatcher keeps j until
// OnResult receives it (or Close returns it); the caller must not modify it
// meanwhile. O(1) amortized.
func (d *Dispatcher) Submit(j *Job) bool {
	var kb [64]byte
	key := hostKey(kb[:0], j.URL)

	d.mu.Lock()
	if d.mu.closed || d.mu.queued >= d.cfg.MaxQueued {
		d.mu.Unlock()
		return false
	}
	h := d.mu.hosts[string(key)]
	if h == nil {
		h = &hostQueue{key: string(key)}
		d.mu.hosts[h.key] = h
	}
	d.mu.seq++
	before := d.runnableOf(h)
	// An ACK is late by its ack_delay_ms on purpose: it is on time.
	if e := (queueEntry{job: j, seq: d.mu.seq}); !j.Ack && d.cfg.Late(j.Due, d.clock.Now().UnixNano()) {
		h.late.push(e)
	} else {
		h.jobs.push(e)
	}
	d.mu.queued++
	d.mu.runnable += d.runnableOf(h) - before
	if !h.ready && d.runnableOf(h) > 0 {
		h.ready = true
		d.mu.ready.push(h)
	}
	d.staffLocked()
	d.mu.Unlock()
	return true
}

// Queued returns the number of jobs waiting (submitted, not yet running).
func (d *Dispatcher) Queued() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.mu.queued
}

// Running returns the number of callbacks in flight.
func (d *Dispatcher) Running() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.mu.running
}

// liveWorkers returns the number of worker goroutines alive (running a
// job, on their way to the ready ring, or parked).
func (d *Dispatcher) liveWorkers() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.mu.workers
}

// Close stops accepting jobs and lets running callbacks finish until ctx
// ends; then it cancels them (OnResult still receives theirs, with Err
// Shutdown). It returns the jobs that never started, in submission order
// (the node leaves them persisted as in-flight; they are repeated after a
// restart), closes every connection and waits for every worker goroutine
// to exit. Idempotent: a later call waits for the first to finish (or for
// its own ctx) and returns nil.
func (d *Dispatcher) Close(ctx context.Context) []*Job {
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
	for i, w := range d.mu.idle { // wake them to exit
		w.parked = false
		w.wake <- struct{}{}
		d.mu.idle[i] = nil
	}
	d.mu.idle = d.mu.idle[:0]
	d.mu.Unlock()

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
func (d *Dispatcher) takeQueuedLocked() []*Job {
	entries := make([]queueEntry, 0, d.mu.queued)
	for key, h := range d.mu.hosts {
		for h.jobs.len() > 0 {
			entries = append(entries, h.jobs.pop())
		}
		for h.late.len() > 0 {
			entries = append(entries, h.late.pop())
		}
		h.ready = false
		if h.running == 0 {
			delete(d.mu.hosts, key)
		}
	}
	d.mu.ready = fifo[*hostQueue]{}
	d.mu.queued = 0
	d.mu.runnable = 0
	slices.SortFunc(entries, func(a, b queueEntry) int {
		switch {
		case a.seq < b.seq:
			return -1
		case a.seq > b.seq:
			return 1
		}
		return 0
	})
	jobs := make([]*Job, len(entries))
	for i, e := range entries {
		jobs[i] = e.job
	}
	return jobs
}

// scratch is one worker's reusable buffers.
type scratch struct {
	hdr   []byte        // X-Chime-* header values under construction
	key   []byte        // pool key of the request in progress
	br    *bufio.Reader // reset onto each attempt's connection
	bw    *bufio.Writer // likewise
	body  [bodyKeep]byte
	drain [4 << 10]byte
	macs  []hash.Hash // HMAC-SHA256 of each signing key (dispatcher.keys), reset per callback
	sig   []byte      // X-Chime-Signature under construction
	sum   [sha256.Size]byte
}

// worker runs jobs until Close, or until it has been parked for
// workerIdle. staffLocked has counted it in workers.
func (d *Dispatcher) worker() {
	defer d.wg.Done()
	w := &workerState{wake: make(chan struct{}, 1)}
	var idle *time.Timer // made on the first parking
	s := &scratch{
		hdr: make([]byte, 0, 192),
		key: make([]byte, 0, 64),
		br:  bufio.NewReaderSize(nil, readBuffer),
		bw:  bufio.NewWriterSize(nil, writeBuffer),
	}
	for _, k := range d.keys {
		s.macs = append(s.macs, hmac.New(sha256.New, k))
	}
	for {
		j, h, late, ok := d.next(w, &idle)
		if !ok {
			return
		}
		res := d.attempt(j, s)
		d.finish(h, late)
		d.done(res)
	}
}

// next blocks until a job may run (and marks it running), or returns ok
// false, the worker no longer counted, when the dispatcher is closed or
// the worker has been parked for workerIdle. *idle is the worker's timer
// (nil until it first parks).
func (d *Dispatcher) next(w *workerState, idle **time.Timer) (j *Job, h *hostQueue, late, ok bool) {
	d.mu.Lock()
	for d.mu.ready.len() == 0 && !d.mu.closed {
		// Park, the last in line to be woken.
		w.parked = true
		d.mu.idle = append(d.mu.idle, w)
		d.mu.Unlock()
		if *idle == nil {
			*idle = d.clock.NewTimer(d.workerIdle)
		} else {
			(*idle).Reset(d.workerIdle)
		}
		select {
		case <-w.wake:
			(*idle).Stop()
			d.mu.Lock()
		case <-(*idle).C:
			d.mu.Lock()
			if w.parked { // nobody woke it: exit
				i := slices.Index(d.mu.idle, w)
				d.mu.idle = slices.Delete(d.mu.idle, i, i+1)
				w.parked = false
				d.mu.workers--
				d.mu.Unlock()
				return nil, nil, false, false
			}
			<-w.wake // woken as the timer fired; sent under mu, so already there
		}
	}
	if d.mu.closed {
		d.mu.workers--
		d.mu.Unlock()
		return nil, nil, false, false
	}
	h = d.mu.ready.pop()
	before := d.runnableOf(h)
	e, late := h.take(d.cfg.PerHost)
	h.running++
	if late {
		h.lateRunning++
	}
	d.mu.queued--
	d.mu.running++
	d.mu.runnable += d.runnableOf(h) - before
	if d.runnableOf(h) > 0 {
		d.mu.ready.push(h) // round-robin: back of the ring
	} else {
		h.ready = false
	}
	d.mu.Unlock()
	return e.job, h, late, true
}

// finish releases the running slot of a job of host h.
func (d *Dispatcher) finish(h *hostQueue, late bool) {
	d.mu.Lock()
	before := d.runnableOf(h)
	h.running--
	if late {
		h.lateRunning--
	}
	d.mu.running--
	d.mu.runnable += d.runnableOf(h) - before
	switch {
	case d.runnableOf(h) > 0:
		if !h.ready {
			h.ready = true
			d.mu.ready.push(h)
		}
	case h.running == 0 && h.waiting() == 0:
		delete(d.mu.hosts, h.key)
	}
	d.staffLocked()
	d.mu.Unlock()
}

// hostKey appends the per-host key of rawURL to dst:
// "scheme://host:port" in lower case, the default port filled in and any
// userinfo dropped, so that it names the same thing as the transport's
// connection pool. It does not allocate beyond dst. A URL without "://"
// is its own key (its request fails in attempt).
func hostKey(dst []byte, rawURL string) []byte {
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
	dst = appendLower(dst, scheme)
	dst = append(dst, "://"...)
	dst = appendLower(dst, auth)
	if strings.LastIndexByte(auth, ':') <= strings.LastIndexByte(auth, ']') { // no port ("[::1]" has colons but no port)
		if strings.EqualFold(scheme, "https") {
			dst = append(dst, ":443"...)
		} else {
			dst = append(dst, ":80"...)
		}
	}
	return dst
}

// appendLower appends s to dst with ASCII letters in lower case.
func appendLower(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		dst = append(dst, c)
	}
	return dst
}

// fifo is a growable ring buffer queue. The zero value is empty and
// ready to use. Not safe for concurrent use; push and pop are O(1)
// amortized.
type fifo[T any] struct {
	buf  []T
	head int
	n    int
}

func (q *fifo[T]) len() int { return q.n }

func (q *fifo[T]) push(v T) {
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
func (q *fifo[T]) pop() T {
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
