package node

import (
	"log/slog"
	"sync"
	"time"

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
// change on its way to the loop.

// fireChunk bounds how many expired entries go to the writer in one op.
const fireChunk = 1024

type scanResult struct {
	to      int64
	entries []wheel.Entry
	err     error
}

type loop struct {
	cfg     *Config
	store   *storage.Store
	writer  *writer
	metrics *metrics
	log     *slog.Logger
	now     func() time.Time

	wheel      *wheel.Wheel
	frontier   int64 // tasks with wake < frontier are filed
	scanTarget int64 // frontier once the scan in flight lands; 0 when none
	loaded     chan struct{}

	mu struct {
		sync.Mutex
		inbox []wakeChange // guarded by mu
	}
	kick     chan struct{} // cap 1: coalesced "inbox has work"
	scanReq  chan [2]int64
	scanRes  chan scanResult
	stop     chan struct{}
	done     chan struct{}
	scanDone chan struct{}
}

func newLoop(cfg *Config, store *storage.Store, wr *writer, m *metrics, log *slog.Logger, now func() time.Time) (*loop, error) {
	w, err := wheel.New(now(), cfg.Tick, 256, 4)
	if err != nil {
		return nil, err
	}
	return &loop{
		cfg: cfg, store: store, writer: wr, metrics: m, log: log, now: now,
		wheel:    w,
		loaded:   make(chan struct{}),
		kick:     make(chan struct{}, 1),
		scanReq:  make(chan [2]int64, 1),
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

	timer := time.NewTimer(0)
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
			l.mu.Unlock()
			for _, c := range inbox {
				l.file(c.id, c.wake)
			}
			clear(inbox)
		case res := <-l.scanRes:
			l.landScan(res)
		case <-timer.C:
		}
		now := l.now()
		nowNs := now.UnixNano()
		if l.scanTarget == 0 && nowNs >= nextLoad {
			to := nowNs + int64(l.cfg.Window)
			l.scanTarget = to
			l.scanReq <- [2]int64{l.frontier, to}
			nextLoad = nowNs + int64(l.cfg.LoadInterval)
		}
		expired = l.wheel.Advance(now, expired[:0])
		for len(expired) > 0 {
			n := min(len(expired), fireChunk)
			chunk := make([]wheel.Entry, n)
			copy(chunk, expired[:n])
			expired = expired[n:]
			if !l.writer.send(&writeOp{kind: opFire, now: nowNs, fires: chunk}) {
				return
			}
		}
		l.metrics.wheelSize.Set(float64(l.wheel.Len()))
		wait := time.Duration(nextLoad - nowNs)
		if next, ok := l.wheel.Next(); ok {
			wait = min(wait, next.Sub(now))
		}
		timer.Reset(max(wait, 0))
	}
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
	l.frontier = res.to
	l.metrics.loaded.Add(float64(len(res.entries)))
	select {
	case <-l.loaded:
	default:
		close(l.loaded)
	}
}

// scanner runs due-index scans off the loop goroutine.
func (l *loop) scanner() {
	defer close(l.scanDone)
	for req := range l.scanReq {
		var entries []wheel.Entry
		err := l.store.ScanDue(nil, req[0], req[1], func(_ uint16, id string, wake int64) bool {
			entries = append(entries, wheel.Entry{ID: id, Due: time.Unix(0, wake)})
			return true
		})
		select {
		case l.scanRes <- scanResult{to: req[1], entries: entries, err: err}:
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
