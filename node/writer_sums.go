package node

import (
	"github.com/chime-scheduler/chime/node/replication"
	"github.com/chime-scheduler/chime/slots"
	"github.com/chime-scheduler/chime/storage"
)

// The writer's side of anti-entropy (package node/replication): both
// sides read a slot's checksum and position on the writer goroutine right
// after a group's commit, where no write to the slot can fall between the
// two.

// readsAfterCommit reports whether ops of kind k read the store once the
// group's writes are committed (answerReads).
func (k opKind) readsAfterCommit() bool {
	return k == opSums || k == opCheckSums || k == opSnapshot
}

// answerReads answers the group's opSums, opCheckSums and opSnapshot, on
// the writer goroutine after the group's commit: every slot's position
// (its meta, set in the same batch) and its checksum (kept by the same
// commit) or its data (pinned by opSnapshot) describe the same state. A
// failed commit leaves them to finish, which reports it.
func (w *writer) answerReads(g *syncGroup) {
	if !g.reads || g.err != nil {
		return
	}
	for _, r := range g.ops {
		switch op := r.(type) {
		case *sumsOp:
			op.err = w.readSums(op)
		case *checkSumsOp:
			op.err = w.checkSums(op)
		case *snapshotOp:
			op.err = w.pinSnapshots(op)
		default:
			continue
		}
		op := r.op()
		close(op.reply)
		op.answered = true
	}
}

// readSums fills op.items with the position and checksum of op.slots.
func (w *writer) readSums(op *sumsOp) error {
	op.items = make([]replication.Item, 0, len(op.slots))
	for _, s := range op.slots {
		m := w.repl.own(s)
		sum, err := w.store.SlotChecksum(s)
		if err != nil {
			return err
		}
		it := replication.Item{Slot: s, Epoch: m.Epoch, Seq: m.Seq, Sum: sum.Sum, Count: sum.Count}
		if bp, ok := w.repl.bumpPrev[s]; ok && bp.Seq == m.Seq {
			it.HasAlt, it.AltEpoch = true, bp.Epoch
		}
		op.items = append(op.items, it)
	}
	return nil
}

// checkSums compares the owner's items with this node's copies. A slot this
// node holds as owner is not compared: the machine settles who owns it.
func (w *writer) checkSums(op *checkSumsOp) error {
	op.results = make([]uint8, len(op.items))
	op.epochs = make([]uint64, len(op.items))
	for i, it := range op.items {
		role, known, _ := w.ctl.State(it.Slot)
		op.epochs[i] = known
		op.results[i] = replication.NotComparable
		if op.version != storage.ChecksumVersion || role == slots.RoleOwner || role == slots.RoleSealing {
			continue
		}
		sum, err := w.store.SlotChecksum(it.Slot)
		if err != nil {
			return err
		}
		pos := w.repl.own(it.Slot)
		op.results[i] = replication.Compare(pos.Epoch, pos.Seq, replication.Checksum(sum), it)
	}
	return nil
}
