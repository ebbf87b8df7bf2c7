package node

// The writer's ops (writer.go): what each kind of request carries, and
// apply, which hands each to its part of the writer.

import (
	"github.com/chime-scheduler/chime/node/dispatch"
	"github.com/chime-scheduler/chime/node/replication"
	"github.com/chime-scheduler/chime/slots"
	"github.com/chime-scheduler/chime/storage"
	"github.com/chime-scheduler/chime/wheel"
)

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
