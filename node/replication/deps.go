package replication

import (
	"context"
	"errors"
	"fmt"

	"github.com/chime-scheduler/chime/slots"
)

// Transport makes signed calls to other members (the node's internal
// forwarder).
type Transport interface {
	// Call posts body to member to at path and returns the answer's body.
	// An answer other than 200 is an error; ErrUnknownMember means to is
	// not in this node's view.
	Call(ctx context.Context, to, path, contentType string, body []byte) ([]byte, error)
}

// ErrUnknownMember is Transport.Call's error for a node that is not in the
// view: nothing was sent, and the messages for it wait without a backoff.
var ErrUnknownMember = errors.New("not a member of this node's view")

// Ownership is the ownership state the executor publishes (its Board),
// and the events the replication reports back to it.
type Ownership interface {
	// State returns this node's role and epoch of slot s, and whether it
	// fires s.
	State(s uint16) (role slots.Role, epoch uint64, firing bool)
	// Holds returns the epoch at which this node holds s as owner; 0: it
	// does not.
	Holds(s uint16) uint64
	// Replicas returns the nodes a write of s must reach, and whether a
	// write all of them acknowledged is safe (false: none of them could
	// take the slot over yet, slots.Machine.FollowerPending; wait).
	Replicas(s uint16) (nodes []string, safe bool)
	// Flagged returns the under-replicated and the unavailable slots,
	// ascending.
	Flagged() (under, unavail []uint16)
	// Post hands the machine events (Applied, EpochSeen).
	Post(evs ...slots.Event)
	// GapSeen asks for a snapshot of slot for replica from, which is at
	// epoch.
	GapSeen(slot uint16, epoch uint64, from string)
	// SnapshotApplied reports a snapshot made durable here, which
	// replaced the slot's data as generation gen.
	SnapshotApplied(ev slots.SnapshotComplete, gen uint64)
}

// Copies is the writer's side of the shipper: a slot's snapshot, and the
// apply of what a slot's owner sent.
type Copies interface {
	// Snapshots returns a Reset message of each slot of slots at its
	// current position (the data pinned where it matches the slot's seq,
	// in one round trip to the writer): in order, until the data
	// read reaches maxBytes (so possibly fewer than asked: the rest wait),
	// at least one. A slot that could not be read has its error instead.
	Snapshots(slots []uint16, maxBytes int) []SnapResult
	// Apply applies the messages of from as a replica, durably; done
	// abandons the wait.
	Apply(done <-chan struct{}, from string, msgs []Msg) (Applied, error)
	// AdmitSnapshots waits (a bounded time, or until done) until the
	// store has room for a request's snapshots (is not close to stopping
	// writes), in arrival order; false when it had none in time.
	AdmitSnapshots(done <-chan struct{}) bool
	// Pressed reports whether the store is close to a write stall now
	// (storage.Store.Pressed): the answer says so (Answer.Pressed).
	Pressed() bool
}

// SnapResult is one slot's snapshot (Copies.Snapshots), or why it could not
// be read.
type SnapResult struct {
	Msg Msg
	Err error
}

// Applied is the outcome of Copies.Apply, one entry per message.
type Applied struct {
	Results []uint8  // OK, Stale or Gap
	Epochs  []uint64 // this node's epoch of the message's slot
	Gens    []uint64 // the data generation a snapshot made
	Held    []uint64 // the seq a snapshot's slot holds after it (its own, or a newer one kept)
}

// Sums is the writer's side of anti-entropy.
type Sums interface {
	// Position returns slot's data position.
	Position(slot uint16) (epoch, seq uint64)
	// Sums returns the items of slots ss: each one's position and
	// checksum, read together right after a commit.
	Sums(done <-chan struct{}, ss []uint16) ([]Item, error)
	// Check compares an owner's items with this node's copies (Compare)
	// and returns one result per item and this node's epoch of its slot.
	Check(done <-chan struct{}, version byte, items []Item) (results []uint8, epochs []uint64, err error)
	// Repair recomputes this node's checksum of slot from its data and
	// returns it before and after.
	Repair(slot uint16) (was, now Checksum, err error)
}

// Checksum is a slot's checksum (storage.Checksum).
type Checksum struct{ Sum, Count uint64 }

func (c Checksum) String() string { return fmt.Sprintf("%016x/%d", c.Sum, c.Count) }

// Metrics counts the checker's outcomes.
type Metrics interface {
	// Checked counts a replica's answer: Match, Mismatch or NotComparable.
	Checked(result uint8)
	// Resynced counts a replica's copy sent for a resync.
	Resynced()
}

// BadRequest is a request refused for what it says: Field names what.
type BadRequest struct {
	Field string
	Err   error
}

func (e *BadRequest) Error() string { return e.Err.Error() }
func (e *BadRequest) Unwrap() error { return e.Err }
