package node

// The writer's task records: reading the current one (the group's own
// writes, the running fires' copies, the hot cache, the store), writing
// one, and the API's ops on them (create, replace, delete, pause, resume,
// trigger).

import (
	"fmt"
	"strconv"
	"time"

	"github.com/chime-scheduler/chime/node/firing"
	"github.com/chime-scheduler/chime/node/flow"
	"github.com/chime-scheduler/chime/node/schedule"
	"github.com/chime-scheduler/chime/slots"
	"github.com/chime-scheduler/chime/storage"
)

// runningFire is an attempt at the dispatcher: its fire sequence and the
// writer's own copy of the task's record as last written, so the attempt's
// result does not read the record back from the store. The copy is never
// handed out (get returns clones), so nothing else can see it change.
type runningFire struct {
	seq  uint64
	rec  *storage.Task
	flow *flow.State // the flow limiter's state it counts against; nil: none
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
	if t.TriggerDues != nil {
		c.TriggerDues = append([]int64(nil), t.TriggerDues...)
	}
	if t.Backfill != nil {
		bf := *t.Backfill
		c.Backfill = &bf
	}
	return &c
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
	if !w.ids.MayContain(id) {
		return nil, nil
	}
	return w.get(id)
}

// wakeOf is the wake time the loop should file t under: none while an
// attempt of it is at the dispatcher (its result re-files it).
// Pending children (chain.go) count unless they are at the outbox, and not
// before their retry time.
func (w *writer) wakeOf(t *storage.Task) int64 {
	if w.isRunning(t) {
		return 0
	}
	wake := t.FireWake()
	if nw := w.noticeWake(t); nw != 0 && (wake == 0 || nw < wake) {
		wake = nw // a pending result callback (notice.go)
	}
	if len(t.Children) > 0 && (w.chain == nil || !w.chain.Busy(t.ID)) {
		c := max(t.Children[0].At, w.chainAfter[t.ID])
		if wake == 0 || c < wake {
			wake = c
		}
	}
	return wake
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
	firing.SettleFinal(t, now, w.cfg.Retention)
	b.PutTask(t, prev)
	w.pending[t.ID] = t
	g.wakes = w.flows.Rewait(g.wakes, t.ID, now)
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
	g.wakes = append(g.wakes, wakeChange{ID: t.ID, At: wake})
	if w.acks.api && wake != 0 && wake < now+int64(ackGateHorizon) {
		g.unacked = append(g.unacked, t.ID)
	}
}

// del deletes t (as stored) with its history: the API's delete and an
// expiry. The batch's capture replicates it like any write.
func (w *writer) del(b *storage.Batch, g *syncGroup, t *storage.Task) {
	b.DeleteTask(t)
	w.hot.drop(t.ID)
	if now := w.now().UnixNano(); t.Spec.FlowKey != "" {
		g.wakes = w.flows.Rewait(g.wakes, t.ID, now)
		if !w.isRunning(t) {
			g.wakes = w.flows.Deleted(g.wakes, t.Spec.FlowKey, t.ID, now)
		}
	}
	w.counted(-1)
	w.pending[t.ID] = nil
	if rf, ok := w.running[t.ID]; ok {
		rf.rec = nil // its result finds the task gone
		w.running[t.ID] = rf
	}
	g.wakes = append(g.wakes, wakeChange{ID: t.ID, At: 0})
}

func (w *writer) applyTasks(b *storage.Batch, g *syncGroup, op *tasksOp) int {
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
			if op.kind == opChild && old.ParentFire == t.ParentFire {
				op.out[i] = old // created before (a repeat): acknowledged, not created twice
				continue
			}
			if op.kind == opCreate || op.kind == opChild {
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
			t.SkippedFires = old.SkippedFires
			t.LastFire = old.LastFire
			t.Version = old.Version
			// The children of its finished fires are still created, and
			// a chain's child stays linked to its parent.
			t.Children = old.Children
			t.Notices = old.Notices // and its result callbacks delivered
			t.ParentID, t.ParentFire = old.ParentID, old.ParentFire
		} else {
			op.created[i] = true
			if w.ids.Add(t.ID) {
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
	w.metrics.Created.Add(float64(created))
	w.counted(int64(created))
	return n
}

func (w *writer) applyOne(b *storage.Batch, g *syncGroup, op *oneOp) {
	if !w.active(slots.Of(op.id)) {
		op.refused = errNotOwner
		return
	}
	t, err := w.get(op.id)
	if err != nil {
		op.refused = asError(err)
		return
	}
	if t == nil {
		op.refused = errNotFound
		return
	}
	prev := t.Wake()
	switch op.kind {
	case opDelete:
		w.del(b, g, t)
		op.out = t
		return
	case opPause:
		switch t.Status {
		case storage.StatusScheduled:
			t.Status = storage.StatusPaused
		case storage.StatusPaused:
		default:
			op.refused = &Error{Code: CodeConflict, Message: "a " + t.Status.String() + " task cannot be paused"}
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
			var last int64
			if t.LastFire != nil {
				last = t.LastFire.DueAt // stay on the fixed-rate grid
			}
			next := schedule.FirstAfter(&t.Spec, last, op.now)
			if next != 0 && schedule.Ended(&t.Spec, next, t.Runs) {
				op.refused = &Error{Code: CodeConflict, Message: "the task has reached its end_at or max_runs and cannot be resumed; replace it (PUT) to change its limits"}
				return
			}
			t.Status = storage.StatusScheduled
			t.FailCount = 0
			t.NextDue = next
		case storage.StatusCompleted:
			op.refused = &Error{Code: CodeConflict, Message: "a completed task reached its end_at or max_runs and cannot be resumed; replace it (PUT) to change its limits"}
			return
		default:
			op.refused = &Error{Code: CodeConflict, Message: "a " + t.Status.String() + " one-shot task cannot be resumed"}
			return
		}
	case opRetry:
		// A failed one-shot task fires again now: a new fire (the next
		// fire sequence, so a new fire id) whose attempts start at 1.
		if t.Status != storage.StatusFailed {
			op.refused = &Error{Code: CodeConflict, Message: "a " + t.Status.String() + " task cannot be retried; only a failed one can"}
			return
		}
		t.Status = storage.StatusScheduled
		t.FailCount = 0
		t.FailReason = ""
		t.NextDue = op.now
	case opTrigger:
		if len(t.Triggers) >= maxPendingTriggers {
			op.refused = &Error{Code: CodeOverloaded, Message: "too many triggers pending for this task"}
			return
		}
		if op.dueAt != 0 || t.TriggerDues != nil {
			if t.TriggerDues == nil {
				t.TriggerDues = make([]int64, len(t.Triggers), len(t.Triggers)+1)
			}
			t.TriggerDues = append(t.TriggerDues, op.dueAt)
		}
		t.Triggers = append(t.Triggers, op.now)
	case opBackfill:
		if e := w.startBackfill(t, op); e != nil {
			op.refused = e
			return
		}
	}
	w.put(b, g, t, prev, op.now)
	op.out = t
}

// startBackfill records a backfill of op.from..op.to on t (API.md
// "Backfill"), or says why not.
func (w *writer) startBackfill(t *storage.Task, op *oneOp) *Error {
	if t.Spec.Kind == storage.KindOnce {
		return invalid("id", "a one-shot task has no schedule to backfill")
	}
	if t.Backfill != nil {
		return &Error{Code: CodeConflict, Message: fmt.Sprintf("a backfill is pending on this task (%d occurrences left, next %s); wait for it to finish",
			t.Backfill.Left, time.Unix(0, t.Backfill.Next).UTC().Format(time.RFC3339Nano))}
	}
	anchor := t.NextDue
	if anchor == 0 && t.LastFire != nil {
		anchor = t.LastFire.DueAt
	}
	limit := schedule.MaxCatchup(&t.Spec)
	first, last, n := schedule.Occurrences(&t.Spec, anchor, op.from, op.to, limit)
	if n > uint64(limit) {
		more := "more than " + strconv.Itoa(limit)
		if first != 0 && last != 0 && n > uint64(limit)+1 {
			more = strconv.FormatUint(n, 10)
		}
		return invalid("to", "the range holds %s occurrences, over the task's max_catchup (%d); split it or raise max_catchup", more, limit)
	}
	op.first, op.last, op.queued = first, last, n
	if n == 0 {
		return nil // nothing to fire: the answer says so, the record is unchanged
	}
	t.Backfill = &storage.Backfill{Next: first, To: last, Left: n, At: op.now}
	return nil
}

// maxPendingTriggers bounds the extra fires queued on one task.
const maxPendingTriggers = 16

// hotCache keeps the encoded records of tasks that wake within hotWindow,
// as the writer last wrote them, so starting their fire decodes a few
// hundred bytes instead of reading the store. The writer is the only
// mutator of records, so the cache cannot go stale; it is bounded by
// hotMaxBytes (records beyond it are simply read from the store). The
// ids are indexed by slot too, for purge: a table change replaces or drops
// thousands of slots at once, and a scan of the whole cache per slot (with
// a hash of each id) took 41 % of a survivor's CPU in the seconds after a
// failover, the writer's time its fires waited for (docs/BENCHMARKS.md,
// issue 17 item 3).
type hotCache struct {
	m      map[string]hotEntry
	bySlot map[uint16]map[string]struct{}
	bytes  int
}

type hotEntry struct {
	enc  []byte
	slot uint16
}

const (
	hotWindow   = 30 * time.Second
	hotMaxBytes = 32 << 20
)

// get decodes the cached record of id, nil if none. The encoding is what s
// holds (the writer wrote it), so the record knows it: its next write
// does not read it back for the slot checksum (storage.DecodeStoredTask).
func (h *hotCache) get(s *storage.Store, id string) *storage.Task {
	e, ok := h.m[id]
	if !ok {
		return nil
	}
	t := new(storage.Task)
	if s.DecodeStoredTask(e.enc, t) != nil {
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
	h.bytes += len(enc) - len(old.enc)
	if !had {
		// The slot of the id, not the record's field: purge must find
		// every entry of a slot whatever a record says.
		old.slot = uint16(slots.Of(t.ID))
		ids := h.bySlot[old.slot]
		if ids == nil {
			ids = make(map[string]struct{})
			h.bySlot[old.slot] = ids
		}
		ids[t.ID] = struct{}{}
	}
	h.m[t.ID] = hotEntry{enc: enc, slot: old.slot}
}

func (h *hotCache) drop(id string) {
	e, ok := h.m[id]
	if !ok {
		return
	}
	h.bytes -= len(e.enc)
	delete(h.m, id)
	if ids := h.bySlot[e.slot]; len(ids) <= 1 {
		delete(h.bySlot, e.slot)
	} else {
		delete(ids, id)
	}
}

// purge drops every cached record of slot. O(its records).
func (h *hotCache) purge(slot uint16) {
	for id := range h.bySlot[slot] {
		h.bytes -= len(h.m[id].enc)
		delete(h.m, id)
	}
	delete(h.bySlot, slot)
}
