package node

import (
	"sync"
	"time"

	"github.com/chime-scheduler/chime/node/replication"
	"github.com/chime-scheduler/chime/slots"
	"github.com/chime-scheduler/chime/storage"
)

// The writer's replication state (see package node/replication). Only the
// writer goroutine changes it; metaMu lets ctl and the shipper read. The
// writer itself reads without the lock (own, gen): nobody else writes.
// Under the race detector every unlock is a release, and the race runtime
// resets all its shadow memory after a few million of those (every page
// faults in again): the writer's read locks, one per slot per write group,
// were ~9 % of the releases of node's fault tests.
type writerRepl struct {
	metaMu sync.RWMutex
	meta   map[uint16]storage.SlotMeta // every slot's data position and ownership state; written under metaMu
	// gens counts the times a slot's data was replaced wholesale (a
	// snapshot applied, a drop): a drop ctl decided before a newer
	// snapshot arrived must not delete it. Writer goroutine only.
	gens map[uint16]uint64
	// bumpPrev is a slot's data position before this node took a new
	// epoch of it as owner: the Prev of its first message at that epoch,
	// so that a replica holding the same data (the old owner after a
	// handover) applies it instead of needing a snapshot. Writer
	// goroutine only.
	bumpPrev map[uint16]storage.SlotMeta
}

func (r *writerRepl) init(metas map[uint16]storage.SlotMeta) {
	r.meta = metas
	r.gens = map[uint16]uint64{}
	r.bumpPrev = map[uint16]storage.SlotMeta{}
}

// position returns slot's stored meta: its data position (Epoch, Seq) and
// ownership state. For goroutines other than the writer.
func (r *writerRepl) position(slot uint16) storage.SlotMeta {
	r.metaMu.RLock()
	defer r.metaMu.RUnlock()
	return r.meta[slot]
}

// own is position for the writer goroutine: no lock, as nobody else writes.
func (r *writerRepl) own(slot uint16) storage.SlotMeta { return r.meta[slot] }

// setMeta records slot's meta and writes it into b. It takes metaMu for
// the one slot only: a lock held over a whole op's loop (thousands of
// slots at a bootstrap) would hold up the executor's and the shipper's
// reads for as long.
func (r *writerRepl) setMeta(b *storage.Batch, slot uint16, m storage.SlotMeta) {
	r.metaMu.Lock()
	r.meta[slot] = m
	r.metaMu.Unlock()
	b.PutSlotMeta(slot, m)
}

// bumpGen notes that slot's data was replaced and returns the new generation.
func (r *writerRepl) bumpGen(slot uint16) uint64 {
	r.gens[slot]++
	return r.gens[slot]
}

func (r *writerRepl) gen(slot uint16) uint64 { return r.gens[slot] }

// active reports whether this node may write and fire slot: standalone
// always; in a cluster while the ownership machine says it fires the slot
// (it owns it, sees a majority and its lease covers every node that could
// have taken it) and the slot's bound has not passed (Board.Fires: should
// the machine's run loop be stuck, the lease may have run out since it
// said so). Otherwise writes answer 503 and nothing of it fires.
func (w *writer) active(slot uint16) bool {
	ok, _ := w.fires(slot)
	return ok
}

// activeAt is active for a scan of many slots: one clock read, now.
func (w *writer) activeAt(now time.Time) func(slot uint16) bool {
	if w.ctl == nil {
		return w.view().Fires
	}
	return func(slot uint16) bool {
		ok, _ := w.ctl.Fires(slot, now)
		return ok
	}
}

// fires is active, and held: the machine fires slot but its bound has
// passed (its run loop is late), so a due fire waits and looks again.
func (w *writer) fires(slot uint16) (ok, held bool) {
	if w.ctl == nil {
		return w.view().Fires(slot), false
	}
	return w.ctl.Fires(slot, w.cfg.Clock.Now())
}

// holds returns the epoch at which this node holds slot as its owner
// (firing or not, sealing included); 0 if it does not. Standalone: 0 and
// true, since it owns every slot. Results of callbacks are recorded while
// the node holds the slot, so that a handover carries them.
func (w *writer) holds(slot uint16) (uint64, bool) {
	if w.ctl == nil {
		return 0, w.view().Fires(slot)
	}
	e := w.ctl.Holds(slot)
	return e, e != 0
}

// errNotOwner answers a write for a slot this node does not (yet) serve.
var errNotOwner = &Error{Code: CodeUnavailable, Message: "this node does not serve the slot right now (it is moving); retry"}

// prepareRepl turns the group's captured mutations of slots this node owns
// into replication messages, advancing each slot's seq in the same batch.
// ops[i] are msgs[i]'s mutations; b's commit sets their Priors
// (storage.Batch.KeepPriors), for the caller to copy into msgs.
func (w *writer) prepareRepl(b *storage.Batch, g *syncGroup) (msgs []replication.Msg, ops []storage.SlotOps) {
	all := b.TakeSlotOps()
	ops = all[:0]
	for _, o := range all {
		ep, ok := w.holds(o.Slot)
		if !ok {
			continue // a write that raced a move: it is not replicated, and the slot resyncs
		}
		m := w.repl.own(o.Slot)
		prev := m
		if bp, ok := w.repl.bumpPrev[o.Slot]; ok {
			prev = bp
			delete(w.repl.bumpPrev, o.Slot)
		}
		m.Epoch = ep
		m.Seq++
		w.repl.setMeta(b, o.Slot, m)
		// The machine hears of the seq (Applied) once every replica has
		// it (shipper): its heartbeats tell the follower how far it is, and
		// an importer that believed itself further than its data would
		// take a slot over without the last results and repeat fires.
		msgs = append(msgs, replication.Msg{Slot: o.Slot, Epoch: m.Epoch, Seq: m.Seq, PrevEpoch: prev.Epoch, PrevSeq: prev.Seq,
			Count: o.Count, Data: o.Data})
		ops = append(ops, o)
	}
	b.KeepPriors(ops)
	return msgs, ops
}

// purgeSlot forgets the writer's cached records of a slot whose data was
// replaced from outside (a replica apply or a snapshot).
func (w *writer) purgeSlot(slot uint16, ids []string) {
	if ids == nil {
		w.hot.purge(slot)
		return
	}
	for _, id := range ids {
		w.hot.drop(id)
		if w.ids.Add(id) {
			w.rebuildIDs()
		}
	}
}

// applyReplica applies replicated messages as a follower and records one
// result per message in op.msgsRes (and this node's epoch of the slot in
// op.epochs). The rules: a message below the epoch this node knows is
// refused (stale), as is one from another node for a slot this node holds
// at the same or a higher epoch; a snapshot (Reset) replaces the slot; an
// op applies only on top of exactly the position it was made from (Prev),
// otherwise the owner is told of the gap and sends a snapshot.
//
// A request's messages may hold megabytes of snapshots (thousands of
// slots after a failover or a join): applied in one group they held the
// writer, and every fire start queued behind them, for tens of
// milliseconds. So a group applies at most replicaGroupBytes of message
// data (at least one message); done reports whether op's last message
// was. The rest waits in w.pend for the next groups (pendStep), which
// first take whatever queued meanwhile. op is answered with the group
// that applies its last message (replicaDone); the earlier groups'
// commits precede that group's fsync, which covers them. Each message is
// checked against its slot as it is when its part applies, as if the
// parts had come as requests of their own.
func (w *writer) applyReplica(b *storage.Batch, g *syncGroup, op *replicaOp) (n int, done bool) {
	res := &op.applied
	if res.Results == nil {
		res.Results = make([]uint8, len(op.msgs))
		res.Epochs = make([]uint64, len(op.msgs))
		res.Gens = make([]uint64, len(op.msgs))
		res.Held = make([]uint64, len(op.msgs))
	}
	first := op.next
	for ; op.next < len(op.msgs); op.next++ {
		if g.bulk >= replicaGroupBytes && op.next > first {
			return n, false
		}
		i := op.next
		m := &op.msgs[i]
		g.bulk += len(m.Data)
		role, known, _ := w.ctl.State(m.Slot)
		res.Epochs[i] = known
		own := role == slots.RoleOwner || role == slots.RoleSealing
		cur := w.repl.own(m.Slot)
		switch {
		case max(m.Epoch, m.SnapEpoch) < known || (own && max(m.Epoch, m.SnapEpoch) == known):
			res.Results[i] = replication.Stale
			continue
		case own:
			// The sender holds a newer epoch: this node must step down
			// first (the machine does so on this news), then resync.
			w.ctl.Post(slots.EpochSeen{Slot: slots.Slot(m.Slot), Epoch: slots.Epoch(m.Epoch), From: op.from, Owner: true})
			res.Results[i] = replication.Gap
			continue
		case m.Reset && m.SnapEpoch == m.Epoch && cur.Epoch == m.Epoch && m.Seq < cur.Seq:
			// A snapshot from the owner of the data's epoch, older than
			// the copy here (sent before ops this copy applied since: it
			// was delayed). Only that owner writes at its epoch, so ours
			// holds all of it and more: applying it would roll acked
			// writes back.
			res.Results[i], res.Gens[i], res.Held[i] = replication.OK, w.repl.gen(m.Slot), cur.Seq
			continue
		case m.Reset:
		case m.Epoch == cur.Epoch && m.Seq <= cur.Seq:
			res.Results[i] = replication.OK // applied before (or covered by a snapshot)
			continue
		case !(cur.Epoch == m.PrevEpoch && cur.Seq == m.PrevSeq) && !(cur.Epoch == m.Epoch && cur.Seq == m.PrevSeq):
			// Neither the position the op was made from nor that same
			// position at the op's epoch (a snapshot the new owner sent
			// after it took the epoch: only it writes data at its epoch).
			// Without the second form every slot's first write after a
			// bootstrap or takeover gapped into a snapshot.
			res.Results[i] = replication.Gap
			continue
		}
		o := storage.SlotOps{Slot: m.Slot, Count: m.Count, Data: m.Data, Priors: m.Priors}
		var err error
		b.WithoutCapture(func() {
			if m.Reset {
				b.DropSlot(m.Slot)
			}
			if m.Reset {
				err = b.ApplySlotOps(o) // a dropped slot's keys are not read anyway
			} else {
				err = b.ApplySlotOpsKnowing(o, w.ids.MayContainBytes)
			}
		})
		if err != nil {
			w.log.Error("malformed replicated ops", "slot", m.Slot, "err", err)
			res.Results[i] = replication.Gap // a snapshot replaces whatever this was
			continue
		}
		if m.Reset {
			delete(w.repl.bumpPrev, m.Slot)
			res.Gens[i] = w.repl.bumpGen(m.Slot)
			w.purgeSlot(m.Slot, nil)
			for _, id := range o.TaskIDs() {
				if w.ids.Add(id) {
					w.rebuildIDs()
				}
			}
		} else {
			w.purgeSlot(m.Slot, o.TaskIDs())
			if m.Epoch == known {
				g.applied = append(g.applied, slots.Applied{Slot: slots.Slot(m.Slot), Seq: m.Seq})
			}
		}
		cur.Epoch, cur.Seq = m.Epoch, m.Seq
		res.Held[i] = m.Seq
		w.repl.setMeta(b, m.Slot, cur)
		n += max(1, o.Count/4)
	}
	return n, true
}

// pendStep applies the next part of the first pending replica op (and,
// room left, of the ones after it): applyReplica.
func (w *writer) pendStep(b *storage.Batch, g *syncGroup) int {
	n := 0
	for len(w.pend) > 0 && (n == 0 || g.bulk < replicaGroupBytes) {
		r := w.pend[0]
		m, done := w.applyReplica(b, g, r)
		n += m
		if !done {
			break
		}
		w.pend[0] = nil
		w.pend = w.pend[1:]
		w.replicaDone(g, r)
		if n == 0 {
			n = 1 // a part of stale messages only: still a step
		}
	}
	if len(w.pend) == 0 {
		w.pend = nil
	}
	return n
}

// replicaDone puts a replica op whose last message g applied in g: it is
// answered once g is durable.
func (w *writer) replicaDone(g *syncGroup, r *replicaOp) {
	g.ops = append(g.ops, r)
	g.acked = true // internal ops with a reply are acked
}

// replicaGroupBytes bounds the replicated message data one write group
// applies (applyReplica): a 256 KiB part applies and commits in ~10 ms on
// this project's 2-core test machine under load, where a 4 MiB request
// held the writer for 50–100 ms.
const replicaGroupBytes = 256 << 10

// applyPersist writes the ownership states the machine persists. A node
// that takes a new epoch as owner moves its data position to it: its next
// group is the first of the epoch.
func (w *writer) applyPersist(b *storage.Batch, op *persistOp) int {
	for _, p := range op.states {
		s := uint16(p.Slot)
		m := w.repl.own(s)
		m.Role, m.OwnEpoch, m.OwnSeq, m.Grantee = uint8(p.State.Role), uint64(p.State.Epoch), p.State.Seq, p.State.Grantee
		m.Handed, m.HandedSeq, m.HandedDropped, m.WasOwner = p.State.Handed, p.State.HandedSeq, p.State.HandedDropped, p.State.WasOwner
		m.HandedBare, m.HandedTook, m.FinalOf = p.State.HandedBare, p.State.HandedTook, uint64(p.State.FinalOf)
		if p.State.Role == slots.RoleOwner && uint64(p.State.Epoch) > m.Epoch {
			if _, ok := w.repl.bumpPrev[s]; !ok {
				w.repl.bumpPrev[s] = m
			}
			m.Epoch = uint64(p.State.Epoch)
		}
		w.repl.setMeta(b, s, m)
	}
	return len(op.states)
}

// applyDrop deletes the data of slots the machine dropped, unless a newer
// snapshot replaced it since the machine saw the slot (op.gens).
func (w *writer) applyDrop(b *storage.Batch, op *dropOp) int {
	for i, s := range op.slots {
		if w.repl.gen(s) != op.gens[i] {
			continue
		}
		b.WithoutCapture(func() { b.DropSlot(s) })
		w.repl.bumpGen(s)
		delete(w.repl.bumpPrev, s)
		w.purgeSlot(s, nil)
		m := w.repl.own(s)
		m.Epoch, m.Seq = 0, 0
		w.repl.setMeta(b, s, m)
	}
	return len(op.slots)
}

// applySealCheck reports the slots of op.slots with no callback running
// here: sealed, once this group (with their last results) is durable.
func (w *writer) applySealCheck(op *sealCheckOp) {
	busy := map[uint16]bool{}
	for id := range w.running {
		busy[slots.Of(id)] = true
	}
	for _, s := range op.slots {
		if !busy[s] {
			op.idle = append(op.idle, s)
		}
	}
}

// persistStates makes the machine's Persist effects durable.
func (w *writer) persistStates(ps []slots.Persist) error {
	return w.submitInternal(nil, &persistOp{writeOp: writeOp{kind: opPersist}, states: ps})
}

// dropSlots deletes slots' data (see applyDrop), durably.
func (w *writer) dropSlots(ss []uint16, gens []uint64) error {
	return w.submitInternal(nil, &dropOp{writeOp: writeOp{kind: opDrop}, slots: ss, gens: gens})
}

// sealCheck returns the slots of ss with no callback running, once their
// results are durable.
func (w *writer) sealCheck(ss []uint16) ([]uint16, error) {
	op := &sealCheckOp{writeOp: writeOp{kind: opSealCheck}, slots: ss}
	if err := w.submitInternal(nil, op); err != nil {
		return nil, err
	}
	return op.idle, nil
}

// snapshots returns a Reset message of each slot of ss at its current
// position: in order, until the data read reaches maxBytes (at least one;
// see replication.Copies). The writer goroutine only pins the store and
// copies the slots' positions between two commits (answerReads), where
// the two match; the data is read here, on the caller's goroutine. Read
// on the writer, a failover's thousands of snapshots (megabytes per
// request) held up every fire queued behind them.
func (w *writer) snapshots(ss []uint16, maxBytes int) []replication.SnapResult {
	op := &snapshotOp{writeOp: writeOp{kind: opSnapshot}, slots: ss}
	err := w.submitInternal(nil, op)
	if op.reader != nil {
		defer func() {
			if err := op.reader.Close(); err != nil {
				w.log.Warn("closing a snapshot reader", "err", err)
			}
		}()
	}
	if err != nil {
		out := make([]replication.SnapResult, len(ss))
		for i, s := range ss {
			out[i] = replication.SnapResult{Msg: replication.Msg{Slot: s}, Err: err}
		}
		return out
	}
	var out []replication.SnapResult
	read := 0
	for i, s := range ss {
		if read >= maxBytes && len(out) > 0 {
			break // the rest wait for the next request
		}
		o, err := op.reader.Snapshot(s)
		if err != nil {
			out = append(out, replication.SnapResult{Msg: replication.Msg{Slot: s}, Err: err})
			continue
		}
		m := op.metas[i]
		out = append(out, replication.SnapResult{Msg: replication.Msg{Slot: s, Epoch: m.Epoch, Seq: m.Seq, Reset: true, Count: o.Count, Data: o.Data}})
		read += len(o.Data)
	}
	return out
}

// pinSnapshots serves opSnapshot on the writer goroutine, after the
// group's commit: it pins the store as committed and copies the slots'
// positions (set in the same batches), which describe the same data.
func (w *writer) pinSnapshots(op *snapshotOp) error {
	op.reader = w.store.NewSlotReader()
	if err := op.reader.Open(); err != nil {
		return err
	}
	op.metas = make([]storage.SlotMeta, len(op.slots))
	for i, s := range op.slots {
		op.metas[i] = w.repl.own(s)
	}
	return nil
}

// submitInternal hands an op with a reply to the writer's internal queue,
// waiting for room rather than answering 429, and waits until it is
// durable (or answered).
func (w *writer) submitInternal(done <-chan struct{}, r request) error {
	op := r.op()
	op.reply = make(chan struct{})
	select {
	case w.internal <- r: // FIFO with opLose, which must come first
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
	failed := g.wait.Failed()
	if len(failed) == 0 {
		return
	}
	for _, r := range g.ops {
		if r.op().reply == nil {
			continue
		}
		switch op := r.(type) {
		case *tasksOp:
			for i, t := range op.tasks {
				if t != nil && op.errs[i] == nil {
					if why, ok := failed[t.Slot]; ok {
						op.errs[i] = &Error{Code: CodeUnavailable, Message: "stored on the owner but not replicated: " + why}
					}
				}
			}
		case *oneOp:
			if why, ok := failed[slots.Of(op.id)]; ok && op.refused == nil {
				op.refused = &Error{Code: CodeUnavailable, Message: "applied on the owner but not replicated: " + why}
			}
		}
	}
}
