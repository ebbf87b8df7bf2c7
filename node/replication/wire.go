// Package replication is the data path between a slot's owner and its
// replicas: the shipper, which sends every write group and every snapshot
// the ownership machine asks for to the slot's replicas and learns their
// answers (shipper.go); the follower's side of it (Receive); and the
// anti-entropy checker, which compares the owner's checksum of each slot
// with its replicas' (antientropy.go, aewire.go).
//
// It reaches the node only through the small interfaces it is built
// with (deps.go): a Transport for signed calls to other members, the
// published Ownership state, the writer's replicated data (Copies, Sums),
// a Clock, a logger and Metrics. The writer's apply path (applying a
// replica's messages, snapshots, reading checksums on the writer
// goroutine) stays with the writer in package node: it works on the
// writer's batch and its caches.
package replication

import (
	"sync"
	"time"
)

// Replication: every write group the writer commits for slots this node
// owns is also applied by each of the slot's replicas (Ownership.Replicas:
// the follower the ownership machine feeds, and any node that may still
// hold its lease grant) before the group's API writes are acknowledged. The
// unit is storage.SlotOps: the exact key mutations of one slot in one
// group, tagged (slot, epoch, seq) and with the position the replica must
// be at to apply it (Prev). A replica that is not there answers Gap; the
// ownership machine then streams it a snapshot of the whole slot (Reset).
// A message below the replica's epoch is refused: it comes from a deposed
// owner, which learns of the newer epoch from the answer.
//
// Snapshots are the machine's SendSnapshot effects: a Reset message that
// carries the machine's Sent and Grant, after which the receiver's machine
// gets SnapshotComplete.
//
// Fire intents and results are replicated the same way but nobody waits
// for them: a fire does not cost a network round trip of its own. After a
// failover the new owner repeats the fires whose results it had not
// received yet, with the same fire id (at least once).

// Paths of the endpoints, on the node's internal API.
const (
	PathReplicate   = "/internal/v1/replicate"
	PathAntiEntropy = "/internal/v1/antientropy"
)

// maxBatch bounds the messages of one replication request.
const maxBatch = 4096

// maxSnapBytes bounds the snapshot data of one replication request (one
// snapshot always goes, however big).
const maxSnapBytes = 4 << 20

// Msg is one slot's group, or a snapshot of the slot (Reset). Count and
// Data are a storage.SlotOps of Slot.
type Msg struct {
	Slot      uint16 `msgpack:"s"`
	Epoch     uint64 `msgpack:"e"`
	Seq       uint64 `msgpack:"q"`
	PrevEpoch uint64 `msgpack:"pe"`
	PrevSeq   uint64 `msgpack:"pq"`
	Reset     bool   `msgpack:"r,omitempty"`
	// A snapshot the ownership machine sent (SendSnapshot): its Sent time
	// and Grant, for the receiver's SnapshotComplete.
	Snap  bool  `msgpack:"x,omitempty"`
	Sent  int64 `msgpack:"t,omitempty"`
	Grant bool  `msgpack:"g,omitempty"`
	// Owner: the sender owns the epoch (SendSnapshot.Owner).
	Owner bool `msgpack:"o,omitempty"`
	// SnapEpoch is the machine's epoch the snapshot speaks for (Epoch
	// and Seq are the data's position, which may be at an older epoch:
	// a node that handed a slot over keeps its data as it was).
	SnapEpoch uint64 `msgpack:"xe,omitempty"`
	// SnapInc and SnapTerm are the sending owner's incarnation and vote
	// term (SendSnapshot.Inc, Term): a grant in the snapshot is theirs.
	SnapInc  uint64 `msgpack:"xi,omitempty"`
	SnapTerm uint64 `msgpack:"xm,omitempty"`
	// Final: the snapshot is the complete copy of epoch SnapEpoch-1,
	// which the sender owned, for the node SnapEpoch was handed to
	// (SendSnapshot.Final).
	Final bool   `msgpack:"xf,omitempty"`
	Count int    `msgpack:"n"`
	Data  []byte `msgpack:"d"`
	// Priors: what each op replaced, as the owner's commit found it
	// (storage.SlotOps.Priors); empty: the replica reads it.
	Priors []byte `msgpack:"p,omitempty"`
}

// Results of one Msg at the replica.
const (
	OK    uint8 = 0
	Stale uint8 = 1 // the message's epoch is below the replica's: a deposed owner
	Gap   uint8 = 2 // the replica is not at Prev: send a Reset
	Busy  uint8 = 3 // the replica could not apply it now (stopping, overloaded): retry
)

// Request is the body of POST PathReplicate (msgpack).
type Request struct {
	From string `msgpack:"f"`
	Msgs []Msg  `msgpack:"m"`
}

// Answer is its answer: one result per message.
type Answer struct {
	Results []uint8 `msgpack:"r"`
	// Epochs is the replica's epoch of each message's slot (for Stale).
	Epochs []uint64 `msgpack:"e"`
	// Pressed says the replica's store was close to a write stall when
	// it answered (Copies.Pressed): the sender sends it no owner's
	// snapshot for snapBusyWait (Shipper.round). Absent: false.
	Pressed bool `msgpack:"p,omitempty"`
}

// Wait is what one write group waits for: every message of it applied by
// its replicas, or given up.
type Wait struct {
	mu      sync.Mutex
	left    int
	failed  map[uint16]string // slot -> why it was not replicated
	done    chan struct{}
	expires time.Time
}

// NewWait returns the wait of a group of n messages, which gives up on
// replicas that have not answered by deadline.
func NewWait(n int, deadline time.Time) *Wait {
	w := &Wait{left: n, done: make(chan struct{}), expires: deadline}
	if n == 0 {
		close(w.done)
	}
	return w
}

// Done is closed once every message is settled.
func (w *Wait) Done() <-chan struct{} { return w.done }

// settle marks one message done; why is empty on success.
func (w *Wait) settle(slot uint16, why string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.left == 0 {
		return
	}
	if why != "" {
		if w.failed == nil {
			w.failed = map[uint16]string{}
		}
		w.failed[slot] = why
	}
	w.left--
	if w.left == 0 {
		close(w.done)
	}
}

// Failed returns the slots that were not replicated and why, after Done.
func (w *Wait) Failed() map[uint16]string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.failed
}
