package node

import (
	"sync"
	"time"

	"github.com/chime-scheduler/chime/slots"
	"github.com/chime-scheduler/chime/storage"
)

// The writer's replication state (see replicate.go). Only the writer
// goroutine changes it; metaMu lets the importer and the shipper read.
type writerRepl struct {
	ship *shipper // nil: standalone, nothing is replicated

	metaMu sync.RWMutex
	meta   map[uint16]storage.SlotMeta // every slot's (epoch, seq) on this node; guarded by metaMu
	// own is the epoch this node fires a slot at; 0 = not an active owner
	// (not owned, importing, or deposed). Guarded by metaMu.
	own map[uint16]uint64
	// bumpPrev is the position a slot was at when this node took its
	// epoch: the Prev of its first message. Writer goroutine only.
	bumpPrev map[uint16]storage.SlotMeta
	// sealed: slots this node owned until a view took them away, and that
	// nobody has written at a newer epoch since. Results of its callbacks
	// still running are written here (seq advanced, not shipped), so the
	// new owner's pull takes them. Writer goroutine only.
	sealed map[uint16]bool
	// onDepose is told of a slot this node stopped owning because another
	// node holds a newer epoch. If the view still gives this node the
	// slot, the two views disagreed: the node takes it again through an
	// import (newest copy, epoch above all), which converges. Any goroutine.
	onDepose func(slot uint16)
}

func (r *writerRepl) init(metas map[uint16]storage.SlotMeta) {
	r.meta = metas
	r.own = map[uint16]uint64{}
	r.bumpPrev = map[uint16]storage.SlotMeta{}
	r.sealed = map[uint16]bool{}
}

// position returns slot's (epoch, seq) on this node.
func (r *writerRepl) position(slot uint16) storage.SlotMeta {
	r.metaMu.RLock()
	defer r.metaMu.RUnlock()
	return r.meta[slot]
}

// ownEpoch returns the epoch this node fires slot at, 0 if it does not.
func (r *writerRepl) ownEpoch(slot uint16) uint64 {
	r.metaMu.RLock()
	defer r.metaMu.RUnlock()
	return r.own[slot]
}

func (r *writerRepl) setMeta(b *storage.Batch, slot uint16, m storage.SlotMeta) {
	r.metaMu.Lock()
	r.meta[slot] = m
	r.metaMu.Unlock()
	b.PutSlotMeta(slot, m)
}

// active reports whether this node may write and fire slot as its owner:
// the view gives it the slot and a majority, and, in a cluster, it holds
// the slot's epoch. A node cut off in a minority fires nothing and takes
// no writes (503): the majority's side owns its slots.
func (w *writer) active(slot uint16) bool {
	if !w.view().fires(slot) {
		return false
	}
	return w.repl.ship == nil || w.repl.ownEpoch(slot) != 0
}

// errNotOwner answers a write for a slot this node does not (yet) serve.
var errNotOwner = &Error{Code: CodeUnavailable, Message: "this node does not serve the slot right now (it is moving); retry"}

// prepareRepl turns the group's captured mutations of slots this node owns
// into replication messages, advancing each slot's seq in the same batch.
func (w *writer) prepareRepl(b *storage.Batch) []replMsg {
	ops := b.TakeSlotOps()
	var msgs []replMsg
	for _, o := range ops {
		ep := w.repl.ownEpoch(o.Slot)
		if ep == 0 {
			if w.repl.sealed[o.Slot] {
				// A result of a callback that ran across the move: the
				// new owner pulls it, so the position must say it is newer.
				m := w.repl.position(o.Slot)
				m.Seq++
				w.repl.setMeta(b, o.Slot, m)
			}
			continue // a replica's apply, or a write that raced a move
		}
		m := w.repl.position(o.Slot)
		prev := m
		if m.Seq == 0 {
			prev = w.repl.bumpPrev[o.Slot]
		}
		m.Seq++
		w.repl.setMeta(b, o.Slot, m)
		msgs = append(msgs, replMsg{Slot: o.Slot, Epoch: m.Epoch, Seq: m.Seq, PrevEpoch: prev.Epoch, PrevSeq: prev.Seq,
			Count: o.Count, Data: o.Data})
	}
	return msgs
}

// purgeSlot forgets the writer's cached records of a slot whose data was
// replaced from outside (a replica apply or a snapshot).
func (w *writer) purgeSlot(slot uint16, ids []string) {
	if ids == nil {
		for id := range w.hot.m {
			if slots.Of(id) == slot {
				w.hot.drop(id)
			}
		}
		return
	}
	for _, id := range ids {
		w.hot.drop(id)
		if w.ids.add(id) {
			w.rebuildIDs()
		}
	}
}

// applyReplica applies replicated messages as a follower (replicate.go has
// the rules) and records one result per message in op.replRes.
func (w *writer) applyReplica(b *storage.Batch, op *writeOp) int {
	op.replRes = make([]uint8, len(op.repl))
	n := 0
	for i := range op.repl {
		m := &op.repl[i]
		cur := w.repl.position(m.Slot)
		own := w.repl.ownEpoch(m.Slot)
		switch {
		case m.Epoch < cur.Epoch || (own != 0 && m.Epoch <= own):
			op.replRes[i] = replStale
			continue
		case m.Reset:
		case m.Epoch == cur.Epoch && m.Seq <= cur.Seq:
			op.replRes[i] = replOK // applied before (or covered by a snapshot)
			continue
		case cur.Epoch != m.PrevEpoch || cur.Seq != m.PrevSeq:
			op.replRes[i] = replGap
			continue
		}
		delete(w.repl.sealed, m.Slot) // the new owner writes it now
		if own != 0 {
			// Another node holds a newer epoch: stop serving the slot.
			w.log.Warn("a newer epoch of a slot this node owned arrived: stepping down", "slot", m.Slot, "epoch", m.Epoch, "own", own)
			w.depose(m.Slot)
		}
		o := m.ops()
		var err error
		b.WithoutCapture(func() {
			if m.Reset {
				b.DropSlot(m.Slot)
			}
			err = b.ApplySlotOps(o)
		})
		if err != nil {
			w.log.Error("malformed replicated ops", "slot", m.Slot, "err", err)
			op.replRes[i] = replGap // a snapshot replaces whatever this was
			continue
		}
		if m.Reset {
			w.purgeSlot(m.Slot, nil)
			for _, id := range o.TaskIDs() {
				if w.ids.add(id) {
					w.rebuildIDs()
				}
			}
		} else {
			w.purgeSlot(m.Slot, o.TaskIDs())
		}
		w.repl.setMeta(b, m.Slot, storage.SlotMeta{Epoch: m.Epoch, Seq: m.Seq, Role: cur.Role})
		n += max(1, o.Count/4)
	}
	return n
}

// depose makes this node stop firing and writing slot, and asks for an
// import of it (which only happens if the view gives this node the slot).
// Safe from any goroutine.
func (w *writer) depose(slot uint16) {
	w.repl.metaMu.Lock()
	delete(w.repl.own, slot)
	w.repl.metaMu.Unlock()
	if w.repl.onDepose != nil {
		w.repl.onDepose(slot)
	}
}

// applyOwn makes this node the active owner of slots: it applies the
// snapshots pulled from the follower (newer copies), then takes an epoch
// above every epoch it knows of. Slots the current view does not give this
// node any more are skipped.
func (w *writer) applyOwn(b *storage.Batch, op *writeOp) int {
	n := 0
	snaps := map[uint16]*replMsg{}
	for i := range op.repl {
		snaps[op.repl[i].Slot] = &op.repl[i]
	}
	v := w.view()
	for _, s := range op.slots {
		if !v.fires(s) || w.repl.ownEpoch(s) != 0 {
			continue
		}
		cur := w.repl.position(s)
		if m := snaps[s]; m != nil && newer(m.Epoch, m.Seq, cur.Epoch, cur.Seq) {
			o := m.ops()
			var err error
			b.WithoutCapture(func() {
				b.DropSlot(s)
				err = b.ApplySlotOps(o)
			})
			if err != nil {
				w.log.Error("malformed pulled snapshot", "slot", s, "err", err)
				continue
			}
			w.purgeSlot(s, nil)
			for _, id := range o.TaskIDs() {
				if w.ids.add(id) {
					w.rebuildIDs()
				}
			}
			cur = storage.SlotMeta{Epoch: m.Epoch, Seq: m.Seq}
			n += max(1, o.Count/4)
		}
		delete(w.repl.sealed, s)
		w.repl.bumpPrev[s] = cur
		next := storage.SlotMeta{Epoch: max(cur.Epoch, op.maxEpoch[s]) + 1, Role: 2}
		w.repl.setMeta(b, s, next)
		w.repl.metaMu.Lock()
		w.repl.own[s] = next.Epoch
		w.repl.metaMu.Unlock()
		op.owned = append(op.owned, s)
		n++
	}
	if len(op.owned) > 0 {
		w.metrics.takeovers.Add(float64(len(op.owned)))
		w.log.Info("owning slots", "slots", len(op.owned), "newer_copies", len(op.repl), "first", op.owned[0],
			"first_epoch", w.repl.ownEpoch(op.owned[0]))
	}
	return n
}

// applyLose forgets the epochs of slots the view took away.
func (w *writer) applyLose(op *writeOp) {
	w.repl.metaMu.Lock()
	for _, s := range op.slots {
		if w.repl.own[s] != 0 {
			w.repl.sealed[s] = true
		}
		delete(w.repl.own, s)
	}
	w.repl.metaMu.Unlock()
}

// snapshot returns a Reset message of slot at its current position, read by
// the writer goroutine so that it matches the slot's seq exactly.
func (w *writer) snapshot(slot uint16) (replMsg, error) {
	op := &writeOp{kind: opSnapshot, slots: []uint16{slot}}
	if err := w.submitInternal(nil, op); err != nil {
		return replMsg{}, err
	}
	if op.snapErr != nil {
		return replMsg{}, op.snapErr
	}
	return op.repl[0], nil
}

// errSlotBusy answers a pull for a slot that still has callbacks running
// here: their results must be in the copy the new owner takes, or it would
// repeat those fires.
var errSlotBusy = &Error{Code: CodeUnavailable, Message: "callbacks of the slot are still running here; pull again"}

// snapshotsIfNewer returns snapshots of the slots of ps where this node's
// copy is newer than the caller's, and this node's epoch of every slot.
// It fails with errSlotBusy while a callback of one of the slots runs here.
func (w *writer) snapshotsIfNewer(ps []slotPos) ([]replMsg, []uint64, error) {
	op := &writeOp{kind: opSnapshot, pull: ps}
	if err := w.submitInternal(nil, op); err != nil {
		return nil, nil, err
	}
	if op.snapErr != nil {
		return nil, nil, op.snapErr
	}
	return op.repl, op.epochs, nil
}

// applySnapshot serves opSnapshot on the writer goroutine. It reads
// committed data only, and the slots' positions before this group's writes:
// the two match. It answers at once (a read needs no fsync).
func (w *writer) applySnapshot(op *writeOp) {
	defer func() {
		close(op.reply)
		op.answered = true
	}()
	one := func(s uint16) bool {
		o, err := w.store.SnapshotSlot(s)
		if err != nil {
			op.snapErr = err
			return false
		}
		m := w.repl.position(s)
		op.repl = append(op.repl, replMsg{Slot: s, Epoch: m.Epoch, Seq: m.Seq, Reset: true, Count: o.Count, Data: o.Data})
		return true
	}
	if op.pull == nil {
		one(op.slots[0])
		return
	}
	busy := map[uint16]bool{}
	for id := range w.running {
		busy[slots.Of(id)] = true
	}
	for id := range w.pending { // written by this group, not committed yet
		busy[slots.Of(id)] = true
	}
	for _, p := range op.pull {
		if busy[p.Slot] {
			op.repl, op.epochs, op.snapErr = nil, nil, errSlotBusy
			return
		}
		cur := w.repl.position(p.Slot)
		op.epochs = append(op.epochs, cur.Epoch)
		if newer(cur.Epoch, cur.Seq, p.Epoch, p.Seq) && !one(p.Slot) {
			return
		}
	}
}

// submitInternal hands an op with a reply to the writer's internal queue,
// waiting for room rather than answering 429, and waits until it is
// durable (or answered).
func (w *writer) submitInternal(done <-chan struct{}, op *writeOp) error {
	op.reply = make(chan struct{})
	select {
	case w.internal <- op: // FIFO with opLose, which must come first
	case <-w.runDone:
		return errStopping
	case <-done:
		return &Error{Code: CodeUnavailable, Message: "request cancelled"}
	}
	select {
	case <-op.reply:
		return op.err
	case <-w.runDone:
		// The writer drained its queues before it exited: the op was
		// applied and is answered, or it never will be.
		select {
		case <-op.reply:
			return op.err
		default:
			return errStopping
		}
	}
}

// barrier returns once every op queued before it is committed: results of
// callbacks queue on the same channel.
func (w *writer) barrier() error {
	op := &writeOp{kind: opBarrier, reply: make(chan struct{})}
	if !w.send(op) {
		return errStopping
	}
	select {
	case <-op.reply:
		return op.err
	case <-w.done:
		return errStopping
	}
}

// replFailed marks the API writes of g whose slots were not replicated:
// they are stored here but not acknowledged (503, retry).
func (w *writer) replFailed(g *syncGroup) {
	failed := g.wait.result()
	if len(failed) == 0 {
		return
	}
	for _, op := range g.ops {
		if op.reply == nil {
			continue
		}
		switch op.kind {
		case opCreate, opPut:
			for i, t := range op.tasks {
				if t != nil && op.errs[i] == nil {
					if why, ok := failed[t.Slot]; ok {
						op.errs[i] = &Error{Code: CodeUnavailable, Message: "stored on the owner but not replicated: " + why}
					}
				}
			}
		case opDelete, opPause, opResume, opTrigger:
			if why, ok := failed[slots.Of(op.id)]; ok && (op.errs == nil || op.errs[0] == nil) {
				op.errs = []*Error{{Code: CodeUnavailable, Message: "applied on the owner but not replicated: " + why}}
			}
		}
	}
}

// replTimeout bounds how long an API write waits for its follower.
const replTimeout = 10 * time.Second
