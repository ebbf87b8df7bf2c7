package node

import (
	"errors"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/chime-scheduler/chime/node/dispatch"
	"github.com/chime-scheduler/chime/node/ownership"
	"github.com/chime-scheduler/chime/node/replication"
	"github.com/chime-scheduler/chime/node/schedule"
	"github.com/chime-scheduler/chime/slots"
	"github.com/chime-scheduler/chime/storage"
	"github.com/chime-scheduler/chime/wheel"
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

// opKind names what a writeOp does.
type opKind uint8

const (
	opCreate    opKind = 1 + iota // store new tasks; conflict if an id exists
	opPut                         // create or replace tasks
	opDelete                      // delete one task
	opPause                       // pause one task
	opResume                      // resume one task
	opTrigger                     // queue one extra fire of one task
	opFire                        // start fires of expired wheel entries (internal)
	opDone                        // apply one attempt's result (internal)
	opReplica                     // apply replicated messages as a follower (internal, acked)
	opPersist                     // write slot ownership states (internal, acked)
	opDrop                        // delete slots' data (internal, acked)
	opSealCheck                   // which slots have no callback running (internal, acked)
	opSnapshot                    // read a slot's snapshot at its current seq (internal, acked)
	opBarrier                     // nothing: answered once everything queued before it is committed (internal, acked)
	opSums                        // read slots' positions and checksums, after the group's commit (internal, answered at once)
	opCheckSums                   // compare an owner's checksums with this node's, after the group's commit (internal, answered at once)
)

// writeOp is one request to the writer. The writer fills the result fields
// and the syncer closes reply once the op's writes are durable.
type writeOp struct {
	kind     opKind
	now      int64
	tasks    []*storage.Task   // opCreate, opPut: the new records
	id       string            // single-task ops
	fires    []wheel.Entry     // opFire
	res      *dispatch.Result  // opDone
	repl     []replication.Msg // opReplica: messages; opSnapshot: the result
	from     string            // opReplica: the sender
	slots    []uint16          // opDrop, opSealCheck, opSnapshot
	persist  []slots.Persist   // opPersist
	dropGens []uint64          // opDrop: the data generation of each slot the machine saw

	// Results, one per task for opCreate/opPut, one for single-task ops.
	out     []*storage.Task
	errs    []*Error
	created []bool
	err     error    // the commit or sync failed: nothing of the op is acknowledged
	replRes []uint8  // opReplica: one result per message
	epochs  []uint64 // opReplica: this node's epoch of each message's slot
	gens    []uint64 // opReplica: the data generation a snapshot made
	held    []uint64 // opReplica: the seq a snapshot's slot holds after it (its own, or a newer one kept)
	idle    []uint16 // opSealCheck: the slots with no callback running
	snapErr error    // opSnapshot
	ae      aeOp     // opSums, opCheckSums (writer_sums.go)

	reply chan struct{} // closed when durable (nil for internal ops)
	// answered: reply was closed early (syncer only; finish skips it).
	answered bool
}

// runningFire is an attempt at the dispatcher: its fire sequence and the
// writer's own copy of the task's record as last written, so the attempt's
// result does not read the record back from the store. The copy is never
// handed out (get returns clones), so nothing else can see it change.
type runningFire struct {
	seq uint64
	rec *storage.Task
}

// cloneTask copies the parts of a record the writer mutates in place.
func cloneTask(t *storage.Task) *storage.Task {
	c := *t
	if t.Inflight != nil {
		inf := *t.Inflight
		c.Inflight = &inf
	}
	if t.Triggers != nil {
		c.Triggers = append([]int64(nil), t.Triggers...)
	}
	return &c
}

// wakeChange tells the loop that a task's wake time is now wake (0 = none).
type wakeChange struct {
	id   string
	wake int64
}

// syncGroup is one committed batch on its way to durability.
type syncGroup struct {
	acked bool              // some op waits for its fsync
	api   bool              // some op is an API write: its reply also waits for the followers
	wait  *replication.Wait // the followers' acks the group's API writes wait for; nil: none
	ops   []*writeOp
	wakes []wakeChange
	jobs  []*dispatch.Job
	// applied: the slots' seqs this group committed at their current
	// epoch, for the ownership machine.
	applied []slots.Event
	sums    bool // some op is opSums or opCheckSums
	err     error
}

// writerDeps is what the writer calls outside itself.
type writerDeps struct {
	store      *storage.Store
	notify     func([]wakeChange)       // the loop's inbox; never blocks
	dispatch   func(*dispatch.Job) bool // the dispatcher's submit; never blocks
	queued     func() int               // dispatcher backlog
	metrics    *metrics
	hosts      *dispatch.HostStats
	ids        *idFilter                   // which ids may exist; creates of others skip a read
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
}

type writer struct {
	writerDeps
	cfg *Config

	api      chan *writeOp // API ops; full = 429
	internal chan *writeOp // fire starts and results; sized so results never wait long
	syncq    chan *syncGroup
	stop     chan struct{}
	done     chan struct{} // closed when the syncer has answered everything
	runDone  chan struct{} // closed when the writer goroutine no longer takes ops

	rnd     *rand.Rand
	pending map[string]*storage.Task // records written by the current group; nil = deleted
	running map[string]runningFire   // tasks with an attempt at the dispatcher
	// quarantined holds the tasks whose record does not decode
	// (storage.ErrCorrupt): they are not fired (nor read again to fire)
	// until a write replaces the record.
	quarantined map[string]struct{}
	dirty       chan struct{} // cap 1: fire-only groups await an idle sync
	hot         hotCache      // encoded records of tasks waking soon
	linger      *time.Timer   // bounds how long completions wait for company
	repl        writerRepl    // replication state (writer_repl.go)
	// replWaits counts groups waiting for their followers; the syncer
	// closes done only after they are answered.
	replWaits sync.WaitGroup
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
	return &writer{
		writerDeps:  deps,
		cfg:         cfg,
		api:         make(chan *writeOp, cfg.WriteQueue),
		internal:    make(chan *writeOp, cfg.Dispatch.MaxQueued+cfg.Dispatch.Concurrency+1024),
		syncq:       make(chan *syncGroup, 4),
		stop:        make(chan struct{}),
		done:        make(chan struct{}),
		runDone:     make(chan struct{}),
		rnd:         rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		pending:     make(map[string]*storage.Task),
		running:     make(map[string]runningFire),
		quarantined: make(map[string]struct{}),
		dirty:       make(chan struct{}, 1),
		hot:         hotCache{m: make(map[string][]byte)},
		linger:      stoppedTimer(cfg.Clock.NewTimer),
	}
}

// submit hands an API op to the writer without blocking and waits until it
// is durable. It answers 429 when the queue is full and 503 when stopping.
func (w *writer) submit(done <-chan struct{}, op *writeOp) error {
	op.reply = make(chan struct{})
	select {
	case <-w.stop:
		return errStopping
	default:
	}
	select {
	case w.api <- op:
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
func (w *writer) send(op *writeOp) bool {
	select {
	case w.internal <- op:
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
		var op *writeOp
		select {
		case op = <-w.api:
		case op = <-w.internal:
		case <-w.stop:
			w.drain()
			return
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
			return
		}
	}
}

// group applies first and every op queued behind it (up to MaxGroupTasks
// task writes) as one batch.
func (w *writer) group(first *writeOp) {
	b := w.store.NewBatch()
	defer b.Close()
	if w.replicate != nil {
		b.Capture()
	}
	g := &syncGroup{}
	n := w.apply(b, g, first)
	onlyDone, lingered := first.kind == opDone, false
	for n < w.cfg.MaxGroupTasks {
		var op *writeOp
		select {
		case op = <-w.api:
		case op = <-w.internal:
		default:
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
		onlyDone = onlyDone && op.kind == opDone
		n += w.apply(b, g, op)
	}
	clear(w.pending)
	var msgs []replication.Msg
	if w.replicate != nil {
		msgs = w.prepareRepl(b, g)
	}
	if b.Count() > 0 {
		start := w.cfg.Clock.Now()
		if err := b.Commit(false); err != nil {
			g.err = err
		}
		w.metrics.commit.Observe(w.cfg.Clock.Since(start).Seconds())
	}
	if len(g.applied) > 0 && g.err == nil {
		w.ctl.Post(g.applied...)
	}
	// Checksums are read here, with the group committed and every slot's
	// position advanced: the two match (writer_sums.go).
	w.answerSums(g)
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
	w.metrics.writeGroup(n)
	if !g.acked {
		// Only fire intents and results: nobody waits for their fsync, so
		// dispatch and re-file now, and let the syncer sync them later
		// (see syncLoop) without ever blocking on it.
		w.finish(g)
		select {
		case w.dirty <- struct{}{}:
		default:
		}
		return
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
					for _, op := range g.ops {
						if op.reply != nil && op.kind >= opReplica && !op.answered {
							close(op.reply)
							op.answered = true
						}
					}
					// Fires start now: a fire does not wait for its intent
					// to reach the follower (after a failover the new owner
					// repeats it with the same fire id). Waiting made every
					// fire of a group that happened to hold an API write
					// wait for the slowest follower, up to failure detection.
					for _, j := range g.jobs {
						if !w.dispatch(j) {
							w.undispatched(j)
						}
					}
					g.jobs = nil
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
	w.metrics.fsyncs.Inc()
	err := w.store.Sync()
	if err != nil {
		w.log.Error("sync failed: writes are not acknowledged", "err", err)
	}
	return err
}

// finish acknowledges a durable (or failed) group.
func (w *writer) finish(g *syncGroup) {
	for _, op := range g.ops {
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
	if g.err != nil {
		// Nothing of the group is known to be durable: fire nothing. The
		// records keep their previous state on disk and the loader finds them.
		return
	}
	if len(g.wakes) > 0 {
		w.notify(g.wakes)
	}
	for _, j := range g.jobs {
		if !w.dispatch(j) {
			w.undispatched(j)
		}
	}
}

// undispatched handles a fire the dispatcher refused (it is stopping, or
// its queue is full). The fire stays persisted as in flight: the loop tries
// it again shortly, and a restart or the slot's next owner repeats it with
// the same fire id. It no longer counts as running, so a seal for a handover
// (a drain) does not wait for a callback that never started. Before, the
// entry stayed, and a drain that raced a fire of its slot waited for its cap.
// Writer goroutine only.
func (w *writer) undispatched(j *dispatch.Job) {
	w.metrics.fireDeferred.Inc()
	if rf, ok := w.running[j.TaskID]; ok && rf.seq == j.Seq {
		delete(w.running, j.TaskID)
	}
	w.notify([]wakeChange{{j.TaskID, w.now().UnixNano() + int64(fireRetryDelay)}})
}

// get returns the current record of id: the group's own write if any, else
// the stored one. nil means absent.
func (w *writer) get(id string) (*storage.Task, error) {
	if t, ok := w.pending[id]; ok {
		return t, nil
	}
	if rf, ok := w.running[id]; ok && rf.rec != nil {
		return cloneTask(rf.rec), nil
	}
	if t := w.hot.get(w.store, id); t != nil {
		return t, nil
	}
	t, err := w.store.Get(slots.Of(id), id)
	if err == storage.ErrNotFound {
		return nil, nil
	}
	return t, err
}

// getForCreate is get for an id about to be created: when the id filter
// knows the id was never stored, the store is not read.
func (w *writer) getForCreate(id string) (*storage.Task, error) {
	if t, ok := w.pending[id]; ok {
		return t, nil
	}
	if !w.ids.mayContain(id) {
		return nil, nil
	}
	return w.get(id)
}

// wakeOf is the wake time the loop should file t under: none while an
// attempt of it is at the dispatcher (its result re-files it).
func (w *writer) wakeOf(t *storage.Task) int64 {
	if w.isRunning(t) {
		return 0
	}
	return t.Wake()
}

// isRunning reports whether t's in-flight attempt is at the dispatcher.
func (w *writer) isRunning(t *storage.Task) bool {
	rf, ok := w.running[t.ID]
	return ok && t.Inflight != nil && rf.seq == t.Inflight.Seq
}

// put writes t (whose stored wake was prev) and files its new wake.
func (w *writer) put(b *storage.Batch, g *syncGroup, t *storage.Task, prev int64, now int64) {
	t.Version++
	t.UpdatedAt = now
	b.PutTask(t, prev)
	w.pending[t.ID] = t
	delete(w.quarantined, t.ID) // a good record again
	wake := w.wakeOf(t)
	if rf, ok := w.running[t.ID]; ok {
		rf.rec = cloneTask(t)
		w.running[t.ID] = rf
		w.hot.drop(t.ID)
	} else if wake != 0 && wake < now+int64(hotWindow) {
		w.hot.put(t)
	} else {
		w.hot.drop(t.ID)
	}
	g.wakes = append(g.wakes, wakeChange{t.ID, wake})
}

// apply applies one op to the batch and returns how many task writes it made.
func (w *writer) apply(b *storage.Batch, g *syncGroup, op *writeOp) int {
	g.ops = append(g.ops, op)
	if op.reply != nil && op.kind != opSnapshot && !op.kind.readsAfterCommit() { // reads answer at once
		g.acked = true
		if op.kind < opReplica {
			g.api = true
		}
	}
	if op.now == 0 {
		op.now = w.now().UnixNano()
	}
	switch op.kind {
	case opCreate, opPut:
		return w.applyTasks(b, g, op)
	case opFire:
		return w.applyFire(b, g, op)
	case opDone:
		return w.applyDone(b, g, op)
	case opReplica:
		return w.applyReplica(b, g, op)
	case opPersist:
		return w.applyPersist(b, op)
	case opDrop:
		return w.applyDrop(b, op)
	case opSealCheck:
		w.applySealCheck(op)
		return 0
	case opSnapshot:
		w.applySnapshot(op)
		return 0
	case opBarrier:
		return 0
	case opSums, opCheckSums:
		g.sums = true // answered after the commit (answerSums)
		return 0
	}
	w.applyOne(b, g, op)
	return 1
}

func (w *writer) applyTasks(b *storage.Batch, g *syncGroup, op *writeOp) int {
	op.out = make([]*storage.Task, len(op.tasks))
	op.errs = make([]*Error, len(op.tasks))
	op.created = make([]bool, len(op.tasks))
	n := 0
	for i, t := range op.tasks {
		if t == nil {
			continue // rejected by validation
		}
		if !w.active(t.Slot) {
			op.errs[i] = errNotOwner
			continue
		}
		old, err := w.getForCreate(t.ID)
		if err != nil {
			op.errs[i] = asError(err)
			continue
		}
		var prev int64
		if old != nil {
			if op.kind == opCreate {
				op.errs[i] = errExists
				continue
			}
			// Replace: a new definition, but fire ids and history keys go on
			// from the old ones so a receiver never sees a fire id twice.
			prev = old.Wake()
			t.CreatedAt = old.CreatedAt
			t.FireSeq = old.FireSeq
			t.HistSeq = old.HistSeq
			t.FireCount = old.FireCount
			t.LastFire = old.LastFire
			t.Version = old.Version
		} else {
			op.created[i] = true
			if w.ids.add(t.ID) {
				w.rebuildIDs()
			}
		}
		// What t replaces is known (none, or old as read or written by this
		// writer): the slot checksum needs no read of it.
		t.Replaces(old)
		w.put(b, g, t, prev, op.now)
		op.out[i] = t
		n++
	}
	created := 0
	for i := range op.out {
		if op.out[i] != nil && op.created[i] {
			created++
		}
	}
	w.metrics.created.Add(float64(created))
	w.counted(int64(created))
	return n
}

func (w *writer) applyOne(b *storage.Batch, g *syncGroup, op *writeOp) {
	if !w.active(slots.Of(op.id)) {
		op.errs = []*Error{errNotOwner}
		return
	}
	t, err := w.get(op.id)
	if err != nil {
		op.errs = []*Error{asError(err)}
		return
	}
	if t == nil {
		op.errs = []*Error{errNotFound}
		return
	}
	prev := t.Wake()
	switch op.kind {
	case opDelete:
		b.DeleteTask(t)
		w.hot.drop(t.ID)
		w.counted(-1)
		w.pending[t.ID] = nil
		if rf, ok := w.running[t.ID]; ok {
			rf.rec = nil // its result finds the task gone
			w.running[t.ID] = rf
		}
		g.wakes = append(g.wakes, wakeChange{t.ID, 0})
		op.out = []*storage.Task{t}
		return
	case opPause:
		switch t.Status {
		case storage.StatusScheduled:
			t.Status = storage.StatusPaused
		case storage.StatusPaused:
		default:
			op.errs = []*Error{{Code: CodeConflict, Message: "a " + t.Status.String() + " task cannot be paused"}}
			return
		}
	case opResume:
		switch t.Status {
		case storage.StatusPaused:
			t.Status = storage.StatusScheduled
		case storage.StatusScheduled:
		case storage.StatusInactive:
			// A periodic task stopped by failures or a gone endpoint starts
			// again at its next occurrence.
			t.Status = storage.StatusScheduled
			t.FailCount = 0
			var last int64
			if t.LastFire != nil {
				last = t.LastFire.DueAt // stay on the fixed-rate grid
			}
			t.NextDue = schedule.FirstAfter(&t.Spec, last, op.now)
		default:
			op.errs = []*Error{{Code: CodeConflict, Message: "a " + t.Status.String() + " one-shot task cannot be resumed"}}
			return
		}
	case opTrigger:
		if len(t.Triggers) >= maxPendingTriggers {
			op.errs = []*Error{{Code: CodeOverloaded, Message: "too many triggers pending for this task"}}
			return
		}
		t.Triggers = append(t.Triggers, op.now)
	}
	w.put(b, g, t, prev, op.now)
	op.out = []*storage.Task{t}
}

// maxPendingTriggers bounds the extra fires queued on one task.
const maxPendingTriggers = 16

// fireRetryDelay is how long an expired entry waits when the dispatcher's
// backlog is full: the fire is not started (no intent written) until there
// is room, so overload delays fires but never loses one.
const fireRetryDelay = 50 * time.Millisecond

// maxQuarantined bounds the writer's set of tasks whose record does not
// decode; beyond it such a task is read (and skipped) again at each fire.
const maxQuarantined = 10000

func (w *writer) applyFire(b *storage.Batch, g *syncGroup, op *writeOp) int {
	n := 0
	limit := w.cfg.Dispatch.MaxQueued + w.cfg.Dispatch.Concurrency
	for _, e := range op.fires {
		if _, ok := w.quarantined[e.ID]; ok {
			continue // the loader files it again at every scan; it stays out
		}
		t, err := w.get(e.ID)
		if errors.Is(err, storage.ErrCorrupt) {
			// Not retried every second: it cannot decode the next time
			// either. Counted and logged once by the store.
			if len(w.quarantined) < maxQuarantined {
				w.quarantined[e.ID] = struct{}{}
			}
			continue
		}
		if err != nil {
			w.log.Error("read task to fire", "task", e.ID, "err", err)
			g.wakes = append(g.wakes, wakeChange{e.ID, op.now + int64(time.Second)})
			continue
		}
		if t == nil {
			continue // deleted since it was filed
		}
		if !w.active(t.Slot) {
			continue // the slot moved away: its new owner fires it; a catch-up scan refiles it if it comes back
		}
		if w.isRunning(t) {
			continue // an attempt is at the dispatcher; its result re-files the task
		}
		if len(w.running) >= limit {
			g.wakes = append(g.wakes, wakeChange{e.ID, op.now + int64(fireRetryDelay)})
			w.metrics.fireDeferred.Inc()
			continue
		}
		prev := t.Wake()
		switch beginFire(t, op.now, int64(w.cfg.MisfireGrace)) {
		case startNothing:
			g.wakes = append(g.wakes, wakeChange{t.ID, w.wakeOf(t)})
			continue
		case startSkipped:
			w.metrics.misfireSkipped.Inc()
			w.put(b, g, t, prev, op.now)
			n++
			continue
		}
		if t.Inflight.Attempt == 1 {
			w.metrics.startLag.WithLabelValues("loop").Observe(float64(op.now-t.Inflight.Due) / 1e9)
			w.metrics.startLag.WithLabelValues("writer").Observe(float64(w.now().UnixNano()-op.now) / 1e9)
		}
		w.running[t.ID] = runningFire{seq: t.Inflight.Seq}
		w.put(b, g, t, prev, op.now)
		j := jobFor(t)
		j.Epoch, _ = w.holds(t.Slot) // X-Chime-Slot-Epoch in a cluster; 0 (no header) standalone
		g.jobs = append(g.jobs, j)
		n++
	}
	return n
}

func (w *writer) applyDone(b *storage.Batch, g *syncGroup, op *writeOp) int {
	r := op.res
	id := r.Job.TaskID
	t, err := w.get(id)
	if rf, ok := w.running[id]; ok && rf.seq == r.Job.Seq {
		delete(w.running, id)
	}
	if r.StatusCode == 0 && r.Err == dispatch.Shutdown {
		// Cut off by a shutdown, not answered by the endpoint: leave the fire
		// in flight so the next start repeats it with the same fire id and
		// attempt, instead of spending one of its retries.
		return 0
	}
	w.metrics.observeResult(r)
	w.hosts.Observe(callbackHost(r.Job.URL), r.FinishedAt.Sub(r.StartedAt))
	if err != nil {
		w.log.Error("read task to finish fire", "task", id, "err", err)
		return 0
	}
	if t == nil {
		return 0 // deleted while its callback ran
	}
	if _, ok := w.holds(t.Slot); !ok {
		// Another node owns the slot now: the record is theirs, and they
		// repeat the fire (same fire id). While this node still holds the
		// slot (sealing for a handover, or owning it without a lease) the
		// result is recorded and replicated: the next owner gets it.
		return 0
	}
	prev := t.Wake()
	ex, fr := finishFire(t, r, op.now, w.rnd)
	switch fr {
	case finishStale:
		// Replaced while its callback ran: the new definition is filed
		// already, unless it was waiting for this attempt.
		g.wakes = append(g.wakes, wakeChange{t.ID, w.wakeOf(t)})
		return 0
	case finishRetry:
		w.metrics.retries.Inc()
	}
	b.AppendExecution(t, ex)
	w.put(b, g, t, prev, op.now)
	return 1
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

// hotCache keeps the encoded records of tasks that wake within hotWindow,
// as the writer last wrote them, so starting their fire decodes a few
// hundred bytes instead of reading the store. The writer is the only
// mutator of records, so the cache cannot go stale; it is bounded by
// hotMaxBytes (records beyond it are simply read from the store).
type hotCache struct {
	m     map[string][]byte
	bytes int
}

const (
	hotWindow   = 30 * time.Second
	hotMaxBytes = 32 << 20
)

// get decodes the cached record of id, nil if none. The encoding is what s
// holds (the writer wrote it), so the record knows it: its next write
// does not read it back for the slot checksum (storage.DecodeStoredTask).
func (h *hotCache) get(s *storage.Store, id string) *storage.Task {
	enc, ok := h.m[id]
	if !ok {
		return nil
	}
	t := new(storage.Task)
	if s.DecodeStoredTask(enc, t) != nil {
		h.drop(id)
		return nil
	}
	return t
}

func (h *hotCache) put(t *storage.Task) {
	old, had := h.m[t.ID]
	if !had && h.bytes >= hotMaxBytes {
		return
	}
	enc, err := storage.EncodeTask(t)
	if err != nil {
		h.drop(t.ID)
		return
	}
	h.bytes += len(enc) - len(old)
	h.m[t.ID] = enc
}

func (h *hotCache) drop(id string) {
	if old, ok := h.m[id]; ok {
		h.bytes -= len(old)
		delete(h.m, id)
	}
}
