package node

import (
	"errors"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chime-scheduler/chime/node/chain"
	"github.com/chime-scheduler/chime/node/dispatch"
	"github.com/chime-scheduler/chime/node/flow"
	"github.com/chime-scheduler/chime/node/idfilter"
	"github.com/chime-scheduler/chime/node/metrics"
	"github.com/chime-scheduler/chime/node/ownership"
	"github.com/chime-scheduler/chime/node/replication"
	"github.com/chime-scheduler/chime/slots"
	"github.com/chime-scheduler/chime/storage"
)

// The writer is the single goroutine that mutates task records. Every
// create, update, fire start and fire result is an op sent to it; it applies
// a group of ops to one Pebble batch, commits it without waiting for the
// disk (the writes are visible at once, so the next group reads them), and
// hands the group to the syncer. The syncer makes all committed groups
// durable with one shared fsync and only then answers the API, dispatches
// the group's callbacks and tells the loop about changed wake times. One
// writer means no locks around read-modify-write; the pipeline means the
// fsync of one group overlaps the building of the next (group commit).

// wakeChange tells the loop that task ID's wake time is now At (0 = none).
type wakeChange = flow.Wake

// syncGroup is one committed batch on its way to durability.
type syncGroup struct {
	acked bool              // some op waits for its fsync
	api   bool              // some op is an API write: its reply also waits for the followers
	wait  *replication.Wait // the followers' acks the group's API writes wait for; nil: none
	ops   []request
	wakes []wakeChange
	jobs  []*dispatch.Job
	// chains: parents whose pending children go to the chain outbox once
	// the group is committed (claimed, chain.go).
	chains []*storage.Task
	// applied: the slots' seqs this group committed at their current
	// epoch, for the ownership machine.
	applied []slots.Event
	reads   bool // some op reads after the commit (readsAfterCommit)
	bulk    int  // replicated message data applied, bytes (applyReplica)
	err     error
	// committed is when the group's batch was committed (Unix ns), for
	// the "sync" stage of the fire start lag (dispatchJobs).
	committed int64
	// unacked: the tasks the group's API ops wrote that wake soon; they
	// do not fire before done (writer_ackgate.go).
	unacked []string
	// done is set once the group is acknowledged (finish): durable, and
	// on the followers when it holds API writes.
	done atomic.Bool
}

// writerDeps is what the writer calls outside itself.
type writerDeps struct {
	store     *storage.Store
	notify    func([]wakeChange)       // the loop's inbox; never blocks
	dispatch  func(*dispatch.Job) bool // the dispatcher's submit; never blocks
	inWorkers func() int               // callbacks in a dispatcher worker now (nil: not known)
	// roomOpened tells the loop that fires it holds back for room at the
	// dispatcher may go (fireRoom); never blocks. nil: nobody waits.
	roomOpened func()
	metrics    *metrics.Metrics
	hosts      *dispatch.HostStats
	ids        *idfilter.Filter            // which ids may exist; creates of others skip a read
	rebuildIDs func()                      // asks for a larger id filter; never blocks
	counted    func(delta int64)           // tasks created (+) and deleted (-)
	view       func() *view                // the current view: a slot not owned is not fired
	ctl        *ownership.Board            // the slots' ownership; nil standalone
	metas      map[uint16]storage.SlotMeta // every slot's replication position, as stored
	// replicate hands a group's messages to the shipper, which settles
	// wait (nil: nobody waits); never blocks. nil: standalone, nothing is
	// replicated.
	replicate func([]replication.Msg, *replication.Wait)
	log       *slog.Logger
	now       func() time.Time
	// chain is the chain outbox (node/chain); nil: chains are not created
	// (writer tests).
	chain *chain.Outbox
	// breakers is the circuit breaker per callback host (nil: off), and
	// circuitEvent notes its openings and closings on the dashboard's
	// timeline (nil: nowhere). writer_breaker.go.
	breakers     *dispatch.Breakers
	circuitEvent func(kind, text string)
}

type writer struct {
	writerDeps
	cfg *Config

	api      chan request // API ops; full = 429
	internal chan request // fire starts and results; sized so results never wait long
	syncq    chan *syncGroup
	stop     chan struct{}
	done     chan struct{} // closed when the syncer has answered everything
	runDone  chan struct{} // closed when the writer goroutine no longer takes ops
	// snaps admits replicated snapshots while the store has room
	// (replData.AdmitSnapshots).
	snaps *snapAdmission

	rnd     *rand.Rand
	pending map[string]*storage.Task // records written by the current group; nil = deleted
	running map[string]runningFire   // tasks with an attempt at the dispatcher
	// busy is len(running), for the loop (fireRoom); roomWanted is set by
	// the loop when it holds fires back for room.
	busy       atomic.Int64
	roomWanted atomic.Bool
	// refused holds the attempts the dispatcher refused, for the writer
	// to drop from running (undispatched may run on the syncer).
	refused struct {
		sync.Mutex
		fires []runningRef
	}
	// quarantined holds the tasks whose record does not decode
	// (storage.ErrCorrupt): they are not fired (nor read again to fire)
	// until a write replaces the record.
	quarantined map[string]struct{}
	dirty       chan struct{} // cap 1: fire-only groups await an idle sync
	hot         hotCache      // encoded records of tasks waking soon
	// chainAfter holds the parents whose last outbox try left children
	// to try again: not before then (chain.go).
	chainAfter map[string]int64
	linger     *time.Timer // bounds how long completions wait for company
	// acks holds back the fires of tasks whose API write is not
	// acknowledged yet (writer_ackgate.go).
	acks ackGate
	// pend holds the replica ops taken from the queue and not wholly
	// applied, in arrival order: the first may be applied in part, the
	// others wait for it (applyReplica).
	pend []*replicaOp
	repl writerRepl // replication state (writer_repl.go)
	// replWaits counts groups waiting for their followers; the syncer
	// closes done only after they are answered.
	replWaits sync.WaitGroup
	held      heldFires     // fires held by an open circuit (writer_breaker.go)
	flows     *flow.Limiter // the flow limiter (package node/flow)
	// pendingFlows are the flow definitions the current group wrote
	// (nil: deleted).
	pendingFlows map[string]*storage.Flow
	// noticing holds the tasks whose first result callback is at the
	// dispatcher: task id -> its fire sequence (notice.go). Lazily made.
	noticing map[string]uint64
}

func newWriter(cfg *Config, deps writerDeps, seed uint64) *writer {
	w := newWriterOnly(cfg, deps, seed)
	metas := deps.metas
	if metas == nil {
		metas = map[uint16]storage.SlotMeta{}
	}
	w.repl.init(metas)
	return w
}

func newWriterOnly(cfg *Config, deps writerDeps, seed uint64) *writer {
	w := &writer{
		writerDeps:  deps,
		cfg:         cfg,
		api:         make(chan request, cfg.WriteQueue),
		internal:    make(chan request, cfg.Dispatch.MaxQueued+cfg.Dispatch.Concurrency+1024),
		syncq:       make(chan *syncGroup, 4),
		stop:        make(chan struct{}),
		done:        make(chan struct{}),
		runDone:     make(chan struct{}),
		rnd:         rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		pending:     make(map[string]*storage.Task),
		running:     make(map[string]runningFire),
		quarantined: make(map[string]struct{}),
		dirty:       make(chan struct{}, 1),
		hot:         hotCache{m: make(map[string]hotEntry), bySlot: make(map[uint16]map[string]struct{})},
		chainAfter:  make(map[string]int64),
		linger:      stoppedTimer(cfg.Clock.NewTimer),
	}
	w.snaps = newSnapAdmission(w.store.Pressed, cfg.Clock)
	w.flows = flow.New(flow.Config{
		Holds:   func(slot uint16) uint64 { e, _ := w.holds(slot); return e },
		Load:    w.store.GetFlow,
		Cluster: w.ctl != nil,
		Born:    cfg.Clock.Now().UnixNano(),
	})
	return w
}

// submit hands an API op to the writer without blocking and waits until it
// is durable. It answers 429 when the queue is full and 503 when stopping.
func (w *writer) submit(done <-chan struct{}, r request) error {
	op := r.op()
	op.reply = make(chan struct{})
	select {
	case <-w.stop:
		return errStopping
	default:
	}
	select {
	case w.api <- r:
	default:
		return errOverloaded
	}
	select {
	case <-op.reply:
		return op.err
	case <-w.done:
		// The writer exited; the op may or may not have been applied but it
		// was not acknowledged.
		select {
		case <-op.reply:
			return op.err
		default:
			return errStopping
		}
	case <-done:
		return &Error{Code: CodeUnavailable, Message: "request cancelled before the write was acknowledged"}
	}
}

// send hands an internal op to the writer, blocking until there is room or
// the writer stops.
func (w *writer) send(r request) bool {
	select {
	case w.internal <- r:
		return true
	case <-w.stop:
		return false
	}
}

// run is the writer goroutine.
func (w *writer) run() {
	go w.syncLoop()
	defer close(w.syncq)
	defer close(w.runDone)
	for {
		var op request
		if len(w.pend) > 0 {
			// A replica op's next part: the group takes it (and what
			// queued meanwhile).
			select {
			case op = <-w.api:
			case op = <-w.internal:
			default:
			}
		} else {
			select {
			case op = <-w.api:
			case op = <-w.internal:
			case <-w.stop:
				w.drain()
				return
			}
		}
		w.group(op)
	}
}

// drain applies whatever is still queued when the writer stops.
func (w *writer) drain() {
	for {
		select {
		case op := <-w.api:
			w.group(op)
		case op := <-w.internal:
			w.group(op)
		default:
			if len(w.pend) == 0 {
				return
			}
			w.group(nil)
		}
	}
}

// group applies first (nil: none) and every op queued behind it (up to
// MaxGroupTasks task writes) as one batch, and of the replica ops pending
// (w.pend) one part at least and up to replicaGroupBytes of their data.
func (w *writer) group(first request) {
	b := w.store.NewBatch()
	defer b.Close()
	if w.replicate != nil {
		b.Capture()
	}
	g := &syncGroup{}
	w.acks.prune()
	w.dropRefused()
	n, onlyDone, lingered := 0, false, false
	if first != nil {
		n = w.apply(b, g, first)
		onlyDone = first.op().kind == opDone
	}
	if len(w.pend) > 0 && g.bulk < replicaGroupBytes {
		n += w.pendStep(b, g) // every group, however busy the queues
		onlyDone = false
	}
	for n < w.cfg.MaxGroupTasks {
		var op request
		select {
		case op = <-w.api:
		case op = <-w.internal:
		default:
		}
		if op == nil && len(w.pend) > 0 && g.bulk < replicaGroupBytes {
			n += w.pendStep(b, g)
			onlyDone = false
			continue
		}
		if op == nil && onlyDone && !lingered {
			// Only callback results so far: nobody waits on them, so give
			// their neighbours a moment to join the same commit.
			lingered = true
			w.linger.Reset(doneLinger)
			select {
			case op = <-w.api:
			case op = <-w.internal:
			case <-w.linger.C:
			}
			w.linger.Stop()
		}
		if op == nil {
			break
		}
		onlyDone = onlyDone && op.op().kind == opDone
		n += w.apply(b, g, op)
	}
	clear(w.pending)
	clear(w.pendingFlows)
	var msgs []replication.Msg
	var ops []storage.SlotOps
	if w.replicate != nil {
		msgs, ops = w.prepareRepl(b, g)
	}
	if b.Count() > 0 {
		start := w.cfg.Clock.Now()
		if err := b.Commit(false); err != nil {
			g.err = err
		}
		for i := range msgs {
			msgs[i].Priors = ops[i].Priors
		}
		end := w.cfg.Clock.Now()
		w.metrics.Commit.Observe(end.Sub(start).Seconds())
		g.committed = end.UnixNano()
	}
	if len(w.pend) > 0 && g.err != nil {
		// Nothing more of them applies: they are answered with the error.
		for _, r := range w.pend {
			g.ops = append(g.ops, r)
		}
		w.pend = nil
	}
	if len(g.applied) > 0 && g.err == nil {
		w.ctl.Post(g.applied...)
	}
	if len(g.unacked) > 0 && g.err == nil {
		w.acks.add(g)
	}
	// Checksums are read here, with the group committed and every slot's
	// position advanced: the two match (writer_sums.go).
	w.answerReads(g)
	if len(g.wakes) > 0 && g.err == nil {
		// The loop learns of wake changes in commit order, here on the
		// writer goroutine. Delivering them when a group is acknowledged
		// let a group that waited for its followers deliver a stale "wake
		// 0" after a later group had re-filed the task, which dropped a
		// periodic task from the wheel for good.
		w.notify(g.wakes)
		g.wakes = nil
	}
	if len(msgs) > 0 && g.err == nil {
		if g.api {
			g.wait = replication.NewWait(len(msgs), w.cfg.Clock.Now().Add(replTimeout))
		}
		w.replicate(msgs, g.wait)
	}
	w.metrics.WriteGroup(n)
	if !g.acked {
		// Only fire intents and results: nobody waits for their fsync, so
		// dispatch and re-file now, and let the syncer sync them later
		// (see syncLoop) without ever blocking on it.
		w.finish(g)
		if b.Count() > 0 { // a group of reads (anti-entropy's) wrote nothing to sync
			select {
			case w.dirty <- struct{}{}:
			default:
			}
		}
		return
	}
	if !g.api && g.err == nil {
		// Fire starts do not wait for an fsync that only internal ops (a
		// replica's apply, ownership states) wait for, as in a group of
		// fire intents alone: a fire whose intent a crash lost is
		// repeated with the same fire id. After a failover most groups
		// held such an op, and their fires waited 10–20 ms for the disk.
		w.dispatchJobs(g)
	}
	w.syncq <- g
}

// syncLoop makes committed groups durable and then acknowledges them. A
// group with API writes is synced at once (with every group that queued up
// meanwhile: group commit). A group of only fire intents and results was
// finished by the writer already; it is synced with the next API group or
// after IdleSync, whichever comes first, so firing costs at most one fsync
// per IdleSync instead of one per callback. A crash in that window repeats
// the affected fires with the same fire ids, as at-least-once allows.
func (w *writer) syncLoop() {
	defer close(w.done)
	groups := make([]*syncGroup, 0, 8)
	dirty := false
	idle := w.cfg.Clock.NewTimer(time.Hour)
	idle.Stop()
	defer idle.Stop()
	for {
		select {
		case g, ok := <-w.syncq:
			if !ok {
				select {
				case <-w.dirty:
					dirty = true
				default:
				}
				if dirty {
					w.sync()
				}
				// Groups waiting for their followers are answered before
				// done (not in a defer: a panic must not hang on them).
				w.replWaits.Wait()
				return
			}
			groups = append(groups[:0], g)
		more:
			for {
				select {
				case g2, ok := <-w.syncq:
					if !ok {
						break more
					}
					groups = append(groups, g2)
				default:
					break more
				}
			}
			// This fsync also covers every fire-only group committed so far.
			select {
			case <-w.dirty:
			default:
			}
			err := w.sync()
			dirty = false
			idle.Stop()
			for _, g := range groups {
				if g.err == nil {
					g.err = err
				}
				if g.wait != nil && g.err == nil {
					// Internal ops (a replica's apply, an import, a
					// snapshot) are answered now: only API writes wait for
					// the followers. A replica's apply waiting for this
					// node's own followers would deadlock two nodes that
					// follow each other.
					for _, r := range g.ops {
						op := r.op()
						if op.reply != nil && !op.kind.apiWrite() && !op.answered {
							close(op.reply)
							op.answered = true
						}
					}
					// Fires start now: a fire does not wait for its intent
					// to reach the follower (after a failover the new owner
					// repeats it with the same fire id). Waiting made every
					// fire of a group that happened to hold an API write
					// wait for the slowest follower, up to failure detection.
					w.dispatchJobs(g)
					// Acknowledge once the followers have it too.
					w.replWaits.Add(1)
					go func() {
						defer w.replWaits.Done()
						<-g.wait.Done()
						w.replFailed(g)
						w.finish(g)
					}()
					continue
				}
				w.finish(g)
			}
		case <-w.dirty:
			if !dirty {
				dirty = true
				idle.Reset(w.cfg.IdleSync)
			}
		case <-idle.C:
			if dirty {
				w.sync()
				dirty = false
			}
		}
	}
}

func (w *writer) sync() error {
	w.metrics.Fsyncs.Inc()
	err := w.store.Sync()
	if err != nil {
		w.log.Error("sync failed: writes are not acknowledged", "err", err)
	}
	return err
}

// finish acknowledges a durable (or failed) group.
func (w *writer) finish(g *syncGroup) {
	for _, r := range g.ops {
		op := r.op()
		if g.err != nil {
			e := &Error{Code: CodeInternal, Message: "write failed: " + g.err.Error()}
			if errors.Is(g.err, storage.ErrFailed) {
				// The node is stopping (storageFailed): another member
				// takes the write once it owns the slot.
				e.Code = CodeUnavailable
			}
			op.err = e
		}
		if op.reply != nil && !op.answered {
			close(op.reply)
		}
	}
	g.done.Store(true)
	if g.err != nil {
		// Nothing of the group is known to be durable: fire nothing. The
		// records keep their previous state on disk and the loader finds them.
		for _, p := range g.chains {
			w.chain.Release(p.ID)
		}
		return
	}
	if len(g.chains) > 0 {
		w.chain.Enqueue(g.chains)
	}
	if len(g.wakes) > 0 {
		w.notify(g.wakes)
	}
	w.dispatchJobs(g)
}

// dispatchJobs hands the fire jobs of g to the dispatcher (after its fsync
// when g holds an API write; at once, committed, when it holds only fire
// intents and results), and notes how long a first attempt waited since
// the commit (the start lag's "sync" stage) and when it was handed over
// (the "dispatch" stage ends when a worker starts it).
func (w *writer) dispatchJobs(g *syncGroup) {
	if len(g.jobs) == 0 {
		return
	}
	now := w.cfg.Clock.Now().UnixNano()
	for _, j := range g.jobs {
		if g.committed != 0 && j.Attempt == 1 && !j.Ack && !j.Notice {
			w.metrics.StartLagSync.Observe(float64(now-g.committed) / 1e9)
		}
		j.Submitted = now
		if !w.dispatch(j) {
			w.undispatched(j)
		}
	}
	g.jobs = nil
}

// doneLinger is how long a group of only callback results waits for more
// ops to share its commit: far below a tick, and it spares a commit per
// callback when results trickle in one by one.
const doneLinger = 10 * time.Millisecond

func stoppedTimer(newTimer func(time.Duration) *time.Timer) *time.Timer {
	t := newTimer(time.Hour)
	t.Stop()
	return t
}
