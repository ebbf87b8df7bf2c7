package node

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chime-scheduler/chime/node/membership"
	"github.com/chime-scheduler/chime/node/metrics"
	"github.com/chime-scheduler/chime/storage"
	"github.com/chime-scheduler/chime/wheel"
)

// The loop is the goroutine that owns the timing wheel. It keeps in the
// wheel every task whose wake time is before the frontier (about now +
// Window), extends the frontier with scans of the due index, and hands
// expired entries to the writer, which decides from the record whether to
// fire. Wheel entries are hints: a stale one costs one record read.
//
// Invariant: every stored task with wake < frontier is in the wheel, or has
// an attempt at the dispatcher (its result re-files it), or has a wake
// change on its way to the loop, or is on its way to the writer (in a
// fire op, in the ready lane or in the late lane).
//
// The ready lane: expired entries on time go to the writer only as far as
// the dispatcher has room for their fires (writer.fireRoom, less what is
// already on its way). The rest wait in the loop, earliest first, and go
// as results free room (the writer wakes the loop). Sent at once, a wave
// of more tasks due together than the dispatcher takes (its MaxQueued)
// made the writer read every one, defer those beyond the limit by
// fireRetryDelay and read them all again 50 ms later, until the wave
// drained (issue 17 item 8).
//
// The late lane: an expired entry due more than the dispatcher's LateAfter
// ago (the overdue tasks of slots this node just took over, a catch-up
// after a stall) does not go to the writer with the entries still on
// time. It waits in the loop, and goes in ops of lateChunk, the next once
// the writer has applied the last: a backlog of thousands, late already,
// would otherwise hold every fire queued behind it at the writer (and then
// at the dispatcher, which has a late lane of its own) and make those late
// too.

// fireChunk bounds how many expired entries go to the writer in one op.
const fireChunk = 1024

// probeEvery is how long the ready lane waits, held back for room with
// none of its entries at the writer, before it sends a few all the same: a
// guard against a room count that never opens (the writer defers what it
// cannot start, as before the lane). Results normally open room, and wake
// the loop, far sooner.
const probeEvery = time.Second

// lateChunk bounds the entries of one op of the late lane: ~10 ms of the
// writer's time on this project's 2-core test machine under load.
const lateChunk = 128

// scanJob is one due-index scan: [from, to) in the owned slots, or in
// only the slots of gained (a catch-up scan for slots this node just
// gained, which does not move the frontier).
type scanJob struct {
	from, to int64
	gained   *membership.OwnedSet
}

type scanResult struct {
	job     scanJob
	entries []wheel.Entry
	err     error
}

type loop struct {
	cfg     *Config
	store   *storage.Store
	writer  *writer
	metrics *metrics.Metrics
	log     *slog.Logger
	now     func() time.Time

	view       func() *view // the current view: which slots to load
	wheel      *wheel.Wheel
	frontier   int64 // tasks with wake < frontier are filed
	scanTarget int64 // frontier once the scan in flight lands; 0 when none
	scanning   bool  // a scan is in flight
	gained     *membership.OwnedSet
	loaded     chan struct{}
	// late is the late lane, earliest expiry first; lateOut is set while
	// an op of it is at the writer (cleared by the writer, which then
	// kicks the loop).
	late    []wheel.Entry
	lateOut atomic.Bool
	// ready is the ready lane, earliest expiry first; sent counts its
	// entries handed to the writer and not yet applied (readyApplied
	// subtracts them, on the writer goroutine).
	ready     []wheel.Entry
	sent      atomic.Int64
	heldSince int64 // when the ready lane last found no room; 0: it had room

	mu struct {
		sync.Mutex
		inbox  []wakeChange // guarded by mu
		gained []uint16     // slots gained since the last loop pass
	}
	kick     chan struct{} // cap 1: coalesced "inbox has work"
	scanReq  chan scanJob
	scanRes  chan scanResult
	stop     chan struct{}
	done     chan struct{}
	scanDone chan struct{}
}

func newLoop(cfg *Config, store *storage.Store, wr *writer, m *metrics.Metrics, log *slog.Logger, now func() time.Time, v func() *view) (*loop, error) {
	w, err := wheel.New(now(), cfg.Tick, 256, 4)
	if err != nil {
		return nil, err
	}
	return &loop{
		cfg: cfg, store: store, writer: wr, metrics: m, log: log, now: now, view: v,
		wheel:    w,
		loaded:   make(chan struct{}),
		kick:     make(chan struct{}, 1),
		scanReq:  make(chan scanJob, 1),
		scanRes:  make(chan scanResult, 1),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
		scanDone: make(chan struct{}),
	}, nil
}

// notify queues wake changes for the loop. It never blocks; the inbox is
// drained on every loop iteration, so it holds at most what the writer
// produced since.
func (l *loop) notify(ch []wakeChange) {
	l.mu.Lock()
	l.mu.inbox = append(l.mu.inbox, ch...)
	l.mu.Unlock()
	l.wake()
}

// gain queues slots this node just became owner of: their due tasks up to
// the frontier are loaded by a catch-up scan. It never blocks.
func (l *loop) gain(s []uint16) {
	l.mu.Lock()
	l.mu.gained = append(l.mu.gained, s...)
	l.mu.Unlock()
	l.wake()
}

func (l *loop) wake() {
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

func (l *loop) run() {
	defer close(l.done)
	go l.scanner()
	defer func() { <-l.scanDone }()
	defer close(l.scanReq)

	timer := l.cfg.Clock.NewTimer(0)
	defer timer.Stop()
	var (
		nextLoad int64
		inbox    []wakeChange
		expired  []wheel.Entry
	)
	for {
		select {
		case <-l.stop:
			return
		case <-l.kick:
			l.mu.Lock()
			inbox, l.mu.inbox = l.mu.inbox, inbox[:0]
			for _, s := range l.mu.gained {
				if l.gained == nil {
					l.gained = new(membership.OwnedSet)
				}
				l.gained.Set(s)
			}
			l.mu.gained = l.mu.gained[:0]
			l.mu.Unlock()
			for _, c := range inbox {
				l.file(c.ID, c.At)
			}
			clear(inbox)
		case res := <-l.scanRes:
			l.landScan(res)
		case <-timer.C:
		}
		now := l.now()
		nowNs := now.UnixNano()
		switch {
		case l.scanning:
		case l.gained != nil && l.frontier > 0:
			// Before the first load lands the regular scan covers them.
			l.scanning = true
			l.scanReq <- scanJob{from: 0, to: l.frontier, gained: l.gained}
			l.gained = nil
		case nowNs >= nextLoad:
			l.gained = nil // the first load covers every owned slot
			to := nowNs + int64(l.cfg.Window)
			l.scanTarget, l.scanning = to, true
			l.scanReq <- scanJob{from: l.frontier, to: to}
			// On the multiples of LoadInterval since the Unix epoch: an
			// idle node's scans wake it with its other periodic work
			// (issue 17 item 1).
			nextLoad = nowNs + int64(l.cfg.LoadInterval) - nowNs%int64(l.cfg.LoadInterval)
		}
		expired = l.wheel.Advance(now, expired[:0])
		for _, e := range expired {
			if l.cfg.Dispatch.Late(e.Due.UnixNano(), nowNs) {
				l.late = append(l.late, e)
			} else {
				l.ready = append(l.ready, e)
			}
		}
		clear(expired) // the ids live on in the lanes only
		if !l.sendReady(nowNs) {
			return
		}
		if len(l.late) > 0 && !l.lateOut.Load() {
			n := min(len(l.late), lateChunk)
			chunk := make([]wheel.Entry, n)
			copy(chunk, l.late[:n])
			l.late = l.late[n:]
			if len(l.late) == 0 {
				l.late = nil // the backlog's array goes
			}
			l.lateOut.Store(true)
			op := &fireOp{writeOp: writeOp{kind: opFire, now: nowNs}, fires: chunk, applied: l.lateApplied}
			if !l.writer.send(op) {
				return
			}
		}
		l.metrics.LateLane.Set(float64(len(l.late)))
		l.metrics.ReadyLane.Set(float64(len(l.ready)))
		l.metrics.WheelSize.Set(float64(l.wheel.Len()))
		wait := time.Duration(nextLoad - nowNs)
		if next, ok := l.wheel.Next(); ok {
			wait = min(wait, next.Sub(now))
		}
		if len(l.ready) > 0 || len(l.late) > 0 {
			wait = min(wait, fireRetryDelay) // a kick normally comes first
		}
		timer.Reset(max(wait, 0))
	}
}

// room is how many more fires the loop may send the writer now.
func (l *loop) room() int {
	return l.writer.fireRoom() - int(l.sent.Load())
}

// sendReady hands the ready lane's entries to the writer as far as there is
// room, in ops of at most fireChunk. With less than a chunk's worth
// (roomKickAt) it asks the writer for a kick when that opens, and probes
// with a few after probeEvery if none of its entries are at the writer.
// false: the writer stopped.
func (l *loop) sendReady(nowNs int64) bool {
	if len(l.ready) == 0 {
		return true
	}
	room := l.room()
	if room < min(l.writer.roomKickAt(), len(l.ready)) {
		// Not a chunk's worth: wait for the writer's kick.
		l.writer.roomWanted.Store(true)
		if l.heldSince == 0 {
			l.heldSince = nowNs
		}
		if l.sent.Load() > 0 || nowNs-l.heldSince < int64(probeEvery) {
			return true
		}
		room = l.writer.roomKickAt()
	}
	l.heldSince = 0
	for len(l.ready) > 0 && room > 0 {
		n := min(len(l.ready), fireChunk, room)
		chunk := make([]wheel.Entry, n)
		copy(chunk, l.ready[:n])
		clear(l.ready[:n])
		l.ready = l.ready[n:]
		room -= n
		l.sent.Add(int64(n))
		op := &fireOp{writeOp: writeOp{kind: opFire, now: nowNs}, fires: chunk, applied: func() { l.readyApplied(n) }}
		if !l.writer.send(op) {
			return false
		}
	}
	if len(l.ready) == 0 {
		l.ready = nil // a wave's array goes
	} else {
		l.writer.roomWanted.Store(true)
	}
	return true
}

// readyApplied is the writer's word that n entries of the ready lane were
// applied: those it did not start (stale, held, deferred) leave room.
// Writer goroutine.
func (l *loop) readyApplied(n int) {
	l.sent.Add(-int64(n))
	w := l.writer
	if w.roomWanted.Load() && l.room() >= w.roomKickAt() && w.roomWanted.CompareAndSwap(true, false) {
		l.wake()
	}
}

// lateApplied is the writer's word that the late lane's op was applied:
// the loop sends the next.
func (l *loop) lateApplied() {
	l.lateOut.Store(false)
	l.wake()
}

// file puts id in the wheel at wake if wake is inside the loaded window,
// and takes it out otherwise (the loader finds it when its time comes).
func (l *loop) file(id string, wake int64) {
	limit := max(l.frontier, l.scanTarget)
	if wake != 0 && wake < limit {
		l.wheel.Add(id, time.Unix(0, wake))
		return
	}
	l.wheel.Cancel(id)
}

func (l *loop) landScan(res scanResult) {
	l.scanning = false
	if res.job.gained != nil {
		if res.err != nil {
			l.log.Error("scan due index of gained slots", "err", res.err)
			l.gained = res.job.gained // retried on the next pass
			return
		}
		for _, e := range res.entries {
			if _, ok := l.wheel.Due(e.ID); !ok {
				l.wheel.Add(e.ID, e.Due)
			}
		}
		l.metrics.Loaded.Add(float64(len(res.entries)))
		return
	}
	l.scanTarget = 0
	if res.err != nil {
		// Keep the frontier: the next pass scans the same range again.
		l.log.Error("scan due index", "err", res.err)
		return
	}
	for _, e := range res.entries {
		if _, ok := l.wheel.Due(e.ID); ok {
			continue // filed by a wake change that is newer than the scan
		}
		l.wheel.Add(e.ID, e.Due)
	}
	l.frontier = res.job.to
	l.metrics.Loaded.Add(float64(len(res.entries)))
	select {
	case <-l.loaded:
	default:
		close(l.loaded)
	}
}

// scanner runs due-index scans off the loop goroutine.
func (l *loop) scanner() {
	defer close(l.scanDone)
	for job := range l.scanReq {
		var entries []wheel.Entry
		owned := l.writer.activeAt(l.now())
		if job.gained != nil {
			owned = job.gained.Has
		}
		err := l.store.ScanDue(owned, job.from, job.to, func(_ uint16, id string, wake int64) bool {
			entries = append(entries, wheel.Entry{ID: id, Due: time.Unix(0, wake)})
			return true
		})
		select {
		case l.scanRes <- scanResult{job: job, entries: entries, err: err}:
		case <-l.stop:
			return
		}
	}
}

// close stops the loop and waits for it.
func (l *loop) close() {
	close(l.stop)
	<-l.done
}
