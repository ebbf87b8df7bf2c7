package node

// The flow limiter (API.md "Flow keys", DESIGN.md "Flow keys"): the
// writer holds the fires of a flow key over its limits, on the owner of
// the key's slot, where every task of the key lives (its id's hash tag is
// the key). Limits are exact on one owner because one goroutine, the
// writer, starts every fire of the key.
//
// A held fire changes nothing in its record, exactly like a fire held by
// an open circuit (writer_breaker.go): no attempt counted, no retry spent,
// no intent written; its wheel entry is filed again later and its record
// stays due in the store. The writer remembers the held fires of each key
// in due order (bounded) and wakes the earliest ones as soon as the key
// has room again: when a callback of the key finishes (parallelism), when
// the oldest start leaves the rate window, or when a new owner's first
// period ends.
//
// The rate window slides: at most rate attempts start in any period_ms,
// each counted from the instant the dispatcher sends it (dispatch.Job.
// Started), not from when the writer started it, so a queue between the
// two cannot bunch sends. An attempt the dispatcher has not sent yet
// counts as in the window until it is.

import (
	"container/heap"
	"errors"
	"sync/atomic"

	"github.com/chime-scheduler/chime/node/dispatch"
	"github.com/chime-scheduler/chime/slots"
	"github.com/chime-scheduler/chime/storage"
)

// Bounds of the limiter's memory.
const (
	// maxFlowStates bounds the keys the writer keeps state for; beyond it
	// the idle ones (nothing in flight, waiting or in the window) are
	// dropped, and read again at their next fire.
	maxFlowStates = 100_000
	// maxFlowWaiting bounds the held fires remembered across keys; one
	// beyond it is still held, but only retried at its fallback wake.
	maxFlowWaiting = 100_000
	// maxFlowRelease bounds the fires one kick wakes; each start kicks
	// again while there is room.
	maxFlowRelease = 256
	// flowPoll is how soon a key whose rate window is full of attempts
	// not sent yet looks again.
	flowPoll = 5_000_000 // 5 ms in ns
)

// flowStart is one start in a key's rate window.
type flowStart struct {
	sent *atomic.Int64 // the dispatcher's send instant; 0 while not sent
}

// flowWait is one held fire: its task and the wake it became due at.
type flowWait struct {
	id  string
	due int64
}

// flowHeap is the held fires of a key, earliest due first, with each
// one's index for removal.
type flowHeap struct {
	items []flowWait
	at    map[string]int
}

func (h *flowHeap) Len() int { return len(h.items) }
func (h *flowHeap) Less(i, j int) bool {
	a, b := h.items[i], h.items[j]
	return a.due < b.due || a.due == b.due && a.id < b.id
}
func (h *flowHeap) Swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	h.at[h.items[i].id], h.at[h.items[j].id] = i, j
}
func (h *flowHeap) Push(x any) {
	it := x.(flowWait)
	h.at[it.id] = len(h.items)
	h.items = append(h.items, it)
}
func (h *flowHeap) Pop() any {
	it := h.items[len(h.items)-1]
	h.items = h.items[:len(h.items)-1]
	delete(h.at, it.id)
	return it
}

// flowState is the limiter's state of one flow key on this owner.
type flowState struct {
	key   string
	slot  uint16
	epoch uint64 // the slot's epoch this state is of
	def   *storage.Flow
	// The limits; 0 = none. period is in ns.
	rate, period, par int64
	inflight          map[string]uint64 // task id -> fire seq of its callback in flight
	starts            []flowStart       // the rate window, in start order, from head on
	head              int
	blockedUntil      int64 // no start before (a new owner's first period)
	waiting           flowHeap
}

func (fs *flowState) limited() bool { return fs.rate > 0 || fs.par > 0 }

// setLimits applies the definition f (nil: none).
func (fs *flowState) setLimits(f *storage.Flow) {
	fs.def = f
	fs.rate, fs.period, fs.par = 0, 0, 0
	if f != nil {
		fs.rate, fs.period, fs.par = f.Rate, f.PeriodMs*1_000_000, f.Parallelism
	}
}

// prune drops the starts that left the window; it stops at the first one
// not sent yet, so the count is never too low. The window's slice is
// compacted once its dropped head is the larger part.
func (fs *flowState) prune(now int64) {
	i := fs.head
	for i < len(fs.starts) {
		s := fs.starts[i].sent.Load()
		if s == 0 || s+fs.period > now {
			break
		}
		fs.starts[i] = flowStart{}
		i++
	}
	fs.head = i
	if fs.head == len(fs.starts) {
		fs.starts, fs.head = fs.starts[:0], 0
	} else if fs.head > 64 && fs.head > len(fs.starts)/2 {
		n := copy(fs.starts, fs.starts[fs.head:])
		fs.starts, fs.head = fs.starts[:n], 0
	}
}

// inWindow is the number of starts in the rate window (after a prune).
func (fs *flowState) inWindow() int { return len(fs.starts) - fs.head }

// room returns how many fires may start now, and when there is none, when
// there may be (0: when a callback of the key finishes).
func (fs *flowState) room(now int64) (n int64, at int64) {
	if now < fs.blockedUntil {
		return 0, fs.blockedUntil
	}
	n = 1 << 62
	if fs.par > 0 {
		n = min(n, fs.par-int64(len(fs.inflight)))
	}
	if fs.rate > 0 {
		fs.prune(now)
		if r := fs.rate - int64(fs.inWindow()); r <= 0 {
			at = now + flowPoll
			if s := fs.starts[fs.head].sent.Load(); s != 0 {
				at = s + fs.period
			}
			return 0, at
		} else {
			n = min(n, r)
		}
	}
	return max(n, 0), 0
}

// flowOf returns the limiter's state of key (in slot) for a fire at now,
// or nil when the key has no limits. A state of an earlier epoch of the
// slot (the slot moved away and back) is started afresh. An error reading
// the definition is returned (the fire waits and tries again); a record
// that does not decode limits nothing (storage counted and logged it;
// anti-entropy repairs it from the replica) and is read again next time.
func (w *writer) flowOf(key string, slot uint16, now int64) (*flowState, error) {
	epoch, _ := w.holds(slot)
	fs := w.flows[key]
	if fs != nil && fs.epoch == epoch {
		if !fs.limited() {
			return nil, nil
		}
		return fs, nil
	}
	f, err := w.store.GetFlow(slot, key)
	switch {
	case errors.Is(err, storage.ErrNotFound):
		f = nil
	case errors.Is(err, storage.ErrCorrupt):
		return nil, nil
	case err != nil:
		return nil, err
	}
	fs = w.newFlowState(key, slot, epoch, f, now)
	if !fs.limited() {
		return nil, nil
	}
	return fs, nil
}

// newFlowState makes and keeps the state of key. This node knows every
// start of the slot's keys since knownSince (every one went through this
// writer); before that, the previous owner (or this node before a
// restart) may have started fires this node cannot see, so a state made
// within one period of that moment starts no fire before it has passed:
// the rate stays exact across a handover, a failover or a restart, at the
// cost of at most one period's pause. (A state dropped by trimFlows had no
// start in its window, so making it again later loses nothing.)
func (w *writer) newFlowState(key string, slot uint16, epoch uint64, f *storage.Flow, now int64) *flowState {
	if len(w.flows) >= maxFlowStates {
		w.trimFlows(now)
	}
	if w.flows == nil {
		w.flows = make(map[string]*flowState)
		w.flowWaitIdx = make(map[string]*flowState)
	}
	since := w.knownSince(slot, epoch, now)
	fs := &flowState{key: key, slot: slot, epoch: epoch, inflight: make(map[string]uint64),
		waiting: flowHeap{at: make(map[string]int)}}
	fs.setLimits(f)
	if fs.rate > 0 {
		fs.blockedUntil = since + fs.period
	}
	if old := w.flows[key]; old != nil {
		for id := range old.waiting.at {
			delete(w.flowWaitIdx, id)
		}
	} else if !fs.limited() && len(w.flows) >= maxFlowStates {
		return fs // full of busy keys: read again at the next fire
	}
	w.flows[key] = fs
	return fs
}

// slotSince is when this node first fired a slot at an epoch.
type slotSince struct {
	epoch uint64
	at    int64
}

// knownSince is the instant since which this node has started every
// fire of slot at epoch: standalone, since the writer was made (a
// restart forgets); in a cluster, since its first fire of the slot at
// that epoch (noteSlot), or now.
func (w *writer) knownSince(slot uint16, epoch uint64, now int64) int64 {
	if w.ctl == nil {
		return w.bornAt
	}
	if w.slotSince == nil {
		w.slotSince = new([slots.Count]slotSince)
	}
	s := &w.slotSince[slot]
	if s.epoch != epoch || s.at == 0 {
		s.epoch, s.at = epoch, now
	}
	return s.at
}

// noteSlot records a fire of slot (held at epoch) at now for knownSince.
func (w *writer) noteSlot(slot uint16, epoch uint64, now int64) {
	if w.slotSince == nil {
		w.slotSince = new([slots.Count]slotSince)
	}
	if s := &w.slotSince[slot]; s.epoch != epoch || s.at == 0 {
		s.epoch, s.at = epoch, now
	}
}

// trimFlows drops the states that hold nothing, and those of a slot this
// node no longer holds at their epoch (with their held fires: their new
// owner fires them).
func (w *writer) trimFlows(now int64) {
	for k, fs := range w.flows {
		if ep, _ := w.holds(fs.slot); ep != fs.epoch {
			w.dropFlow(k)
			continue
		}
		if len(fs.inflight) == 0 && fs.waiting.Len() == 0 {
			if fs.rate > 0 {
				fs.prune(now)
				if fs.inWindow() > 0 {
					continue
				}
			}
			delete(w.flows, k)
		}
	}
}

// flowAllow decides whether the fire of task id, due at due, may start
// now under fs's limits and its due order (no earlier held fire of the
// key waits). When not, it remembers it as held and returns the wake to
// file it at (a fallback: the kicks wake it as soon as it may go).
func (w *writer) flowAllow(fs *flowState, id string, due, now int64) (ok bool, wake int64) {
	// The fire is not at the dispatcher (applyFire checked): an in-flight
	// mark of it is stale (the dispatcher refused its last attempt).
	delete(fs.inflight, id)
	n, _ := fs.room(now)
	if n > 0 && (fs.waiting.Len() == 0 || !earlier(fs.waiting.items[0], flowWait{id, due})) {
		return true, 0
	}
	w.metrics.flowHolds.Inc()
	if _, there := fs.waiting.at[id]; !there && len(w.flowWaitIdx) < maxFlowWaiting {
		heap.Push(&fs.waiting, flowWait{id, due})
		w.flowWaitIdx[id] = fs
	}
	return false, w.heldWake(now+int64(w.cfg.Window/2), now)
}

func earlier(a, b flowWait) bool { return a.due < b.due || a.due == b.due && a.id < b.id }

// unwait forgets id as held (its entry came up, or it changed), and
// returns its key's state to kick afterwards.
func (w *writer) unwait(id string) *flowState {
	fs := w.flowWaitIdx[id]
	if fs == nil {
		return nil
	}
	delete(w.flowWaitIdx, id)
	if i, ok := fs.waiting.at[id]; ok {
		heap.Remove(&fs.waiting, i)
	}
	return fs
}

// flowStarted counts the attempt of t that job j starts against fs.
func (w *writer) flowStarted(fs *flowState, t *storage.Task, j *dispatch.Job) {
	fs.inflight[t.ID] = t.Inflight.Seq
	if fs.rate > 0 {
		s := flowStart{sent: new(atomic.Int64)}
		j.Started = s.sent
		fs.starts = append(fs.starts, s)
	}
}

// flowDone ends the in-flight attempt (task id, fire seq) of fs.
func (w *writer) flowDone(g *syncGroup, fs *flowState, id string, seq uint64, now int64) {
	if s, ok := fs.inflight[id]; ok && s == seq {
		delete(fs.inflight, id)
	}
	w.flowKick(g, fs, now)
}

// flowKick wakes fs's earliest held fires that may go now, or the
// earliest one at the time the key may have room again.
func (w *writer) flowKick(g *syncGroup, fs *flowState, now int64) {
	if fs.waiting.Len() == 0 || w.flows[fs.key] != fs {
		return
	}
	n, at := fs.room(now)
	if n == 0 {
		if at != 0 {
			g.wakes = append(g.wakes, wakeChange{fs.waiting.items[0].id, max(at, now+1)})
		}
		return
	}
	n = min(n, int64(fs.waiting.Len()), maxFlowRelease)
	if n == 1 {
		g.wakes = append(g.wakes, wakeChange{fs.waiting.items[0].id, now + 1})
		return
	}
	// The n earliest: popped in order, then put back (they stay held
	// until their entry comes up).
	first := make([]flowWait, 0, n)
	for range n {
		first = append(first, heap.Pop(&fs.waiting).(flowWait))
	}
	for _, it := range first {
		g.wakes = append(g.wakes, wakeChange{it.id, now + 1})
		heap.Push(&fs.waiting, it)
	}
}

// putFlow applies a flow definition written on this owner to its state:
// the limits apply from now, a new definition with an empty window.
func (w *writer) putFlow(g *syncGroup, f *storage.Flow, created bool, now int64) {
	epoch, _ := w.holds(f.Slot)
	fs := w.flows[f.Key]
	if fs == nil || fs.epoch != epoch {
		if !created {
			// Not known here: made at its next fire, as after a handover.
			if fs != nil {
				w.dropFlow(f.Key)
			}
			return
		}
		fs = w.newFlowState(f.Key, f.Slot, epoch, f, now)
		fs.blockedUntil = 0
		return
	}
	fs.setLimits(f)
	if fs.rate == 0 {
		fs.starts, fs.head = nil, 0
	}
	w.flowKick(g, fs, now)
}

// dropFlow forgets key's state (its definition was deleted): its held
// fires go at once, unlimited.
func (w *writer) dropFlow(key string) []string {
	fs := w.flows[key]
	if fs == nil {
		return nil
	}
	delete(w.flows, key)
	ids := make([]string, 0, fs.waiting.Len())
	for _, it := range fs.waiting.items {
		delete(w.flowWaitIdx, it.id)
		ids = append(ids, it.id)
	}
	return ids
}

// rewait forgets id as held when its record changes (paused, replaced,
// deleted, ...): the change re-files it, and the next held fire of its
// key may go in its place.
func (w *writer) rewait(g *syncGroup, id string, now int64) {
	if len(w.flowWaitIdx) == 0 {
		return
	}
	if fs := w.unwait(id); fs != nil {
		w.flowKick(g, fs, now)
	}
}

// flowDeleted drops the stale in-flight mark a deleted task t may have
// left in its key's state (an attempt the dispatcher refused): a running
// attempt's result drops its own.
func (w *writer) flowDeleted(g *syncGroup, t *storage.Task, now int64) {
	if t.Spec.FlowKey == "" || w.isRunning(t) {
		return
	}
	if fs := w.flows[t.Spec.FlowKey]; fs != nil {
		if _, ok := fs.inflight[t.ID]; ok {
			delete(fs.inflight, t.ID)
			w.flowKick(g, fs, now)
		}
	}
}

// flowOp is opFlowPut, opFlowDel and opFlowGet.
type flowOp struct {
	writeOp
	flow    *storage.Flow // opFlowPut: the new definition (Key, Slot, limits)
	key     string        // opFlowDel, opFlowGet
	slot    uint16
	out     *storage.Flow // the definition after the op (opFlowGet: nil = none)
	created bool
	live    flowLive // opFlowGet: the limiter's state
	refused *Error
}

// flowLive is a flow's limiter state on its owner.
type flowLive struct {
	InFlight, RateCount, Waiting int
	OldestWaitingDue             int64 // 0: none
}

// storedFlow is the current definition of key: the group's own write if
// any, else the stored one; nil means none.
func (w *writer) storedFlow(slot uint16, key string) (*storage.Flow, error) {
	if f, ok := w.pendingFlows[key]; ok {
		return f, nil
	}
	f, err := w.store.GetFlow(slot, key)
	if err == storage.ErrNotFound {
		return nil, nil
	}
	return f, err
}

func (w *writer) applyFlow(b *storage.Batch, g *syncGroup, op *flowOp) int {
	key, slot := op.key, op.slot
	if op.flow != nil {
		key, slot = op.flow.Key, op.flow.Slot
	}
	if op.kind == opFlowGet {
		f, err := w.storedFlow(slot, key)
		if err != nil {
			op.refused = asError(err)
			return 0
		}
		op.out = f
		epoch, _ := w.holds(slot)
		if fs := w.flows[key]; fs != nil && fs.epoch == epoch && f != nil {
			if fs.rate > 0 {
				fs.prune(op.now)
			}
			op.live = flowLive{InFlight: len(fs.inflight), RateCount: fs.inWindow(), Waiting: fs.waiting.Len()}
			if fs.waiting.Len() > 0 {
				op.live.OldestWaitingDue = fs.waiting.items[0].due
			}
		}
		return 0
	}
	if !w.active(slot) {
		op.refused = errNotOwner
		return 0
	}
	old, err := w.storedFlow(slot, key)
	if err != nil {
		op.refused = asError(err)
		return 0
	}
	if w.pendingFlows == nil {
		w.pendingFlows = make(map[string]*storage.Flow)
	}
	if op.kind == opFlowDel {
		if old == nil {
			op.refused = errNotFound
			return 0
		}
		b.DeleteFlow(slot, key)
		w.pendingFlows[key] = nil
		for _, id := range w.dropFlow(key) {
			g.wakes = append(g.wakes, wakeChange{id, op.now + 1})
		}
		return 1
	}
	f := op.flow
	f.CreatedAt, f.UpdatedAt, f.Version = op.now, op.now, 1
	if old != nil {
		f.CreatedAt, f.Version = old.CreatedAt, old.Version+1
	}
	b.PutFlow(slot, f)
	w.pendingFlows[key] = f
	op.out, op.created = f, old == nil
	w.putFlow(g, f, old == nil, op.now)
	return 1
}
