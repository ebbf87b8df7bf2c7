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
	opBackfill                    // queue the fires of a range of one task's occurrences
	opChild                       // create a chain's child unless it was created (chain.go); waits for the followers like a create
	opFire                        // start fires of expired wheel entries (internal)
	opDone                        // apply one attempt's result (internal)
	opReplica                     // apply replicated messages as a follower (internal, acked)
	opPersist                     // write slot ownership states (internal, acked)
	opDrop                        // delete slots' data (internal, acked)
	opSealCheck                   // which slots have no callback running (internal, acked)
	opSnapshot                    // pin slots' snapshots at their current seq, after the group's commit (internal, answered at once)
	opBarrier                     // nothing: answered once everything queued before it is committed (internal, acked)
	opSums                        // read slots' positions and checksums, after the group's commit (internal, answered at once)
	opCheckSums                   // compare an owner's checksums with this node's, after the group's commit (internal, answered at once)
	opRetry                       // fire one failed task again now
	opChainDone                   // drop a parent's settled pending children (internal, chain.go)
	opFlowPut                     // create or replace a flow definition (writer_flow.go)
	opFlowDel                     // delete a flow definition
	opFlowGet                     // read a flow's definition and its limiter state (answered without a sync of its own)
)

// apiWrite reports whether ops of kind k are API writes: their reply also
// waits for the followers.
func (k opKind) apiWrite() bool { return k < opReplica || k == opFlowPut || k == opFlowDel }

// writeOp is what every request to the writer shares, whatever its kind.
// The syncer closes reply once the op's writes are durable.
type writeOp struct {
	kind  opKind
	now   int64
	err   error         // the commit or sync failed: nothing of the op is acknowledged
	reply chan struct{} // closed when durable (nil for internal ops)
	// answered: reply was closed early (syncer only; finish skips it).
	answered bool
}

// request is an op as the writer's queues carry it: a kind's own struct
// below, which embeds its writeOp and holds what that kind reads and
// answers (a barrier is a bare *writeOp). One allocation per op, as with
// a single struct for every kind.
type request interface{ op() *writeOp }

func (o *writeOp) op() *writeOp { return o }

// tasksOp is opCreate, opPut and opChild (writer_tasks.go).
type tasksOp struct {
	writeOp
	tasks []*storage.Task // the new records; nil: refused by validation
	// One result per task.
	out     []*storage.Task
	errs    []*Error
	created []bool
}

// oneOp is opDelete, opPause, opResume, opTrigger and opRetry of one task
// (writer_tasks.go).
type oneOp struct {
	writeOp
	id      string
	out     *storage.Task // the task after the op
	refused *Error        // why the op was not applied (or not replicated)

	dueAt    int64  // opTrigger: the fire's logical due time, 0 = now
	from, to int64  // opBackfill: the range
	queued   uint64 // opBackfill: occurrences queued (the answer)
	first    int64  // opBackfill: the first and last of them
	last     int64
}

// fireOp is opFire: start the fires of expired wheel entries (writer_fire.go).
type fireOp struct {
	writeOp
	fires []wheel.Entry
	// applied, when set, is called on the writer goroutine once the
	// fires are applied (the loop's late lane).
	applied func()
}

// doneOp is opDone: one attempt's result (writer_fire.go).
type doneOp struct {
	writeOp
	res dispatch.Result
}

// replicaOp is opReplica: replicated messages to apply as a follower
// (writer_repl.go).
type replicaOp struct {
	writeOp
	msgs    []replication.Msg
	from    string              // the sender
	applied replication.Applied // one result, epoch, generation and seq held per message
	next    int                 // the first message not applied yet (applyReplica)
}

// persistOp is opPersist: slot ownership states to write (writer_repl.go).
type persistOp struct {
	writeOp
	states []slots.Persist
}

// dropOp is opDrop: slots whose data to delete (writer_repl.go).
type dropOp struct {
	writeOp
	slots []uint16
	gens  []uint64 // the data generation of each slot the machine saw
}

// sealCheckOp is opSealCheck: which of slots have no callback running
// (writer_repl.go).
type sealCheckOp struct {
	writeOp
	slots []uint16
	idle  []uint16 // the answer
}

// snapshotOp is opSnapshot: slots' snapshots at their current seq
// (writer_repl.go).
type snapshotOp struct {
	writeOp
	slots []uint16
	// The answer: a reader of the store as committed, and each slot's
	// position in it. The caller closes reader (set even when err is).
	reader *storage.SlotReader
	metas  []storage.SlotMeta
}

// sumsOp is opSums: slots' positions and checksums (writer_sums.go).
type sumsOp struct {
	writeOp
	slots []uint16
	items []replication.Item // the answer
}

// checkSumsOp is opCheckSums: an owner's checksums to compare with this
// node's (writer_sums.go).
type checkSumsOp struct {
	writeOp
	version byte               // the owner's checksum version
	items   []replication.Item // the owner's items
	results []uint8            // one per item
	epochs  []uint64           // this node's epoch of each item's slot
}

// apply applies one op to the batch and returns how many task writes it made.
func (w *writer) apply(b *storage.Batch, g *syncGroup, r request) int {
	if r, ok := r.(*replicaOp); ok {
		// In parts (applyReplica), after the ones pending.
		if len(w.pend) > 0 || g.bulk >= replicaGroupBytes {
			w.pend = append(w.pend, r)
			return 0
		}
		n, done := w.applyReplica(b, g, r)
		if done {
			w.replicaDone(g, r)
		} else {
			w.pend = append(w.pend, r)
		}
		return n
	}
	g.ops = append(g.ops, r)
	op := r.op()
	if op.reply != nil && op.kind != opFlowGet && !op.kind.readsAfterCommit() { // reads answer at once
		g.acked = true
		if op.kind.apiWrite() {
			g.api = true
		}
	}
	if op.now == 0 {
		op.now = w.now().UnixNano()
	}
	if op.kind.apiWrite() {
		w.acks.api = true // put notes what it writes (writer_ackgate.go)
		defer func() { w.acks.api = false }()
	}
	switch r := r.(type) {
	case *tasksOp:
		return w.applyTasks(b, g, r)
	case *oneOp:
		w.applyOne(b, g, r)
		return 1
	case *fireOp:
		n := w.applyFire(b, g, r)
		if r.applied != nil {
			r.applied()
		}
		return n
	case *doneOp:
		return w.applyDone(b, g, r)
	case *chainDoneOp:
		return w.applyChainDone(b, g, r)
	case *flowOp:
		return w.applyFlow(b, g, r)
	case *persistOp:
		return w.applyPersist(b, r)
	case *dropOp:
		return w.applyDrop(b, r)
	case *sealCheckOp:
		w.applySealCheck(r)
	case *sumsOp, *checkSumsOp, *snapshotOp:
		g.reads = true // answered after the commit (answerReads)
	}
	return 0 // a barrier: nothing
}
