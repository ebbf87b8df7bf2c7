package slots

import (
	"time"

	"github.com/chime-scheduler/chime/ring"
)

// Event is an input to Machine.Step. Each event is a small struct; messages
// from other nodes carry the sender in From (any message also counts as a
// sign of life of From, see MemberAlive). Time-dependent rules use the time
// of the latest Tick. Messages between two nodes may be lost, duplicated or
// reordered; the machine copes.
type Event interface{ isEvent() }

// TableChanged is a new slot table from the membership view.
type TableChanged struct {
	// Table is ring.Assign over the eligible members (alive or suspect,
	// state=active) as this node sees them.
	Table ring.Table
	// StableSize is the last stable cluster size (members that were active
	// before the current change). Majority means Sees > StableSize/2.
	StableSize int
	// Sees is how many members, this node included, it can reach. Node
	// should count conservatively (alive, not suspect): firing depends on it.
	Sees int
	// Voters are the members Sees and StableSize count among (node:
	// Voters.Members()); promises and consents (Config.Vote) count only
	// theirs. Nil: anyone's count.
	Voters []string
	// Bootstrap says this is the first table of a brand-new cluster: node has
	// established that no member holds data for any slot. Only then may a
	// slot go from epoch 0 to 1 without a replica or a handover.
	Bootstrap bool
}

// MemberDead reports that memberlist declared Name dead (not merely
// suspect), or that Name left the cluster (Left). The machine stops
// counting Name towards its majority at once. It is forgotten when Name
// appears in a later table. A node declared dead comes back with any sign
// of life (a message, MemberAlive), since failure detection can be wrong;
// one that left does not: it sends its last messages while it leaves, and
// comes back only by restarting (MemberAlive.Restarted) or in a table.
// An owner forgets a node that left as a suspect at once: node stops a
// node's ownership machine before it leaves, so it acts on no grant after.
//
// Forgot says an operator declared Name gone for good (node: chime
// cluster forget): its data is lost with it. Then the table owner of a
// slot whose epoch Name owned and whose grant nobody holds may take it
// with the best copy the live members hold, or empty (census.go).
type MemberDead struct {
	Name   string
	Left   bool
	Forgot bool
}

// MemberAlive reports a sign of life from Name: node sends it when
// memberlist sees Name join or refute (including members that are not
// eligible, such as draining ones), and for every probe ack or message from
// a member it believes alive, at least every Settle/2 per reachable member.
// The machine acts on the belief that the members it does not see are a
// minority only if it heard from a majority within Settle (see
// Config.Settle). Restarted says Name came back with a new boot id
// (research/cluster-design §1.3): the old process is gone with its volatile
// state, so as an owner it fires nothing any more.
type MemberAlive struct {
	Name      string
	Restarted bool
	// Empty (with Restarted): the new run started with no stored state, a
	// new or wiped data dir (node: gossip.Meta.Empty). It kept none of the
	// consents an earlier run gave, so its promises may cover a grant that
	// run consented to take over: this machine counts none of that node's
	// promises for the rest of its life (vote.go). Nor can it speak of a
	// grant of ours the earlier run held: one whose lease had run out is
	// lost (markLost), and no ack of the new run clears it. Nor does it
	// hold the final copy of a slot the earlier run handed us: we take it
	// with our own copy, as if that run had stayed dead (tryTake).
	Empty bool
}

// Tick sets the machine's notion of now (monotonic) and runs timed rules:
// lease expiry, promotion after the lease, heartbeats and retries. Node
// sends it at least every Lease/8 (heartbeats go every Lease/4) and as the
// first event after any stall: a gap over Config.Pause counts as a pause,
// after which the machine distrusts its view until the next TableChanged;
// a pause of Config.DeadAfter or more also voids the grants it holds.
//
// Stalled, when StallKnown, is the longest the node's process was stalled
// since the previous Tick (node measures it with a goroutine that beats
// independently of the machine's): a long gap of the machine's own loop
// (a long persist, a backlog of events) while the process and its failure
// detector kept running cannot have let the others declare it dead, so
// only Stalled is held against DeadAfter. Without it the whole gap counts.
type Tick struct {
	Now        time.Time
	Stalled    time.Duration
	StallKnown bool
}

// Replicated is a heartbeat from the owner From (its Heartbeat effect) at
// (Epoch, Seq). Sent is the owner's monotonic time of sending, echoed in the
// Ack; it must not go backwards within an epoch. Grant offers this node the
// lease (see Heartbeat). Node delivers heartbeats only: replicated ops are
// applied by node (from Leader(Slot) at State(Slot).Epoch) and need no event.
type Replicated struct {
	Slot    Slot
	Epoch   Epoch
	Seq     uint64
	From    string
	Sent    time.Time
	Grant   bool
	Release string // see Heartbeat.Release
	Inc     uint64 // see Heartbeat.Inc
	Term    uint64 // see Heartbeat.Term
}

// ReplAck is From's Ack of a heartbeat or snapshot this owner sent at Sent.
// Grant says From holds this owner's grant, which renews the owner's lease
// until Sent+Lease (the owner's own clock); Synced says From holds a valid
// replica of the slot from this owner at Epoch.
type ReplAck struct {
	Slot           Slot
	Epoch          Epoch
	Seq            uint64
	From           string
	Sent           time.Time
	Grant          bool
	Synced         bool
	Released       string // see Ack.Released
	Inc, Gen, Term uint64 // see Ack.Inc
}

// PairReplicated is From's PairHeartbeat, sent at Sent (From's clock) by
// its incarnation Inc: every grant this node holds from that incarnation
// counts as accepted now (see lease.go, "Pairs").
type PairReplicated struct {
	From string
	Sent time.Time
	Inc  uint64
}

// PairReplAck is From's PairAck of a PairHeartbeat this owner sent at
// Sent: the grants From acked with pair generation Gen are renewed until
// Sent+Lease, as by a ReplAck with Grant.
type PairReplAck struct {
	From string
	Sent time.Time
	Inc  uint64
	Gen  uint64
	// Promise: From promises not to consent to a takeover of our grants
	// of vote terms Floor and up until Sent+Lease (see PairAck.Promise).
	Promise bool
	Floors  []Floor
}

// SnapshotRequest asks this node for a full copy of Slot (From imports or
// resyncs).
type SnapshotRequest struct {
	Slot Slot
	// Epoch is the requester's (possibly stale) epoch for Slot: a holder
	// below it steps down, and an owner learns its grantor did not promote.
	Epoch Epoch
	From  string
}

// SnapshotComplete tells the receiving node that it holds a full copy of Slot
// from From at (Epoch, Seq), sent at Sent (From's clock); the live tail
// follows. Grant offers the lease as on a heartbeat (see SendSnapshot).
type SnapshotComplete struct {
	Slot  Slot
	Epoch Epoch
	Seq   uint64
	From  string
	Sent  time.Time
	Grant bool
	// Owner: From owned Epoch when it sent the copy (SendSnapshot.Owner).
	// A copy from a follower tells the receiver that From will never seal
	// the slot at Epoch (nobody but the owner of an epoch seals it).
	Owner     bool
	Inc, Term uint64 // see SendSnapshot.Inc
	// Final: the copy is the complete one of epoch Epoch-1, its owner's
	// data (SendSnapshot.Final).
	Final bool
}

// NoReplica is From's answer to a SnapshotRequest or HandoverOffer when it
// holds no valid replica of Slot; Epoch is its epoch for Slot then.
type NoReplica struct {
	Slot  Slot
	Epoch Epoch
	From  string
	// Census: From answers our census (HandoverOffer.Census). A NoReplica
	// to a snapshot request or a plain offer does not count for one: it
	// says nothing of a census From has not seen, and may run itself (sim
	// seed 1696: two nodes each counted the other's answer to a snapshot
	// request and both took epoch+censusJump).
	Census bool
}

// HandoverOffer comes from an importer (From) that holds a caught-up replica
// at (Epoch, Seq) and asks this node, the holder, to hand the slot over.
// WasOwner says From owned Epoch before it restarted; Grantee is then the
// persisted SlotState.Grantee, the one node that may hold its grant.
type HandoverOffer struct {
	Slot     Slot
	Epoch    Epoch
	Seq      uint64
	From     string
	WasOwner bool
	Grantee  string
	// Census: From asks for our position instead (census.go): the owner
	// of Epoch was forgotten and nobody handed the slot over. Copy: From
	// holds a valid copy at (Epoch, Seq).
	Census, Copy bool
}

// OfferAsked comes from a node (From) that holds a release to this node
// at (Slot, Epoch) from an owner it saw die (AskOffer): this node may take
// the epoch by offering to From.
type OfferAsked struct {
	Slot  Slot
	Epoch Epoch
	From  string
}

// Sealed reports that node finished a Seal effect: no fire is in flight and
// writes are held. Seq is the slot's final sequence number.
type Sealed struct {
	Slot Slot
	Seq  uint64
}

// HandoverDone carries the old holder's final (Epoch, Seq) to the importer.
type HandoverDone struct {
	Slot  Slot
	Epoch Epoch
	Seq   uint64
	From  string
	Grant bool // From holds our grant at Epoch+1 (SendHandover.Grant)
	// Dropped: nodes that may hold From's grant at Epoch, forgotten as
	// dead (SendHandover.Dropped).
	Dropped []string
}

// EpochSeen reports Epoch for Slot observed from From: its Announce
// (Owner: From owns Epoch; Replicated: its follower caught up) or its
// RejectLowerEpoch. A node that fires the slot at a lower epoch stops at
// once.
type EpochSeen struct {
	Slot       Slot
	Epoch      Epoch
	From       string
	Owner      bool
	Replicated bool
}

// Applied reports that node committed (as owner) or applied (as replica)
// every op of Slot up to Seq at the slot's current epoch. Node persists Seq
// with the ops; the machine uses it in heartbeats, snapshots and the
// handover's final-seq check, and emits no Persist for it.
type Applied struct {
	Slot Slot
	Seq  uint64
}

// ConsentAsked comes from a node (From) that would act on a grant or
// release of vote term Term of Owner's incarnation Inc, whose owner it saw
// die (Config.Vote, vote.go).
type ConsentAsked struct {
	From, Owner string
	Inc, Term   uint64
}

// ConsentGiven is From's consent to our takeover of the grants of Owner's
// incarnation Inc up to vote term Term: From persisted it, and its
// promises to that incarnation no longer cover those terms.
type ConsentGiven struct {
	From, Owner string
	Inc, Term   uint64
	// Quiet is how long From had heard nothing from Owner (any
	// incarnation, any message) when it answered, at most its uptime
	// (restoreGrant).
	Quiet time.Duration
}

// Restarted says this node lost its volatile state while keeping its data
// (an in-place restart of node's components). Every slot must resync before
// it fires or promotes again. New with persisted state implies the same.
type Restarted struct{}

// Disowned says an operator forgot an earlier run of this node (node:
// gossip.Membership.RunForgotten): the cluster took that run's slots
// without it, so what this node's data says it owned, handed over or
// granted no longer stands. Every slot becomes a stale replica at its
// epoch, as after a restart, without the claims a restart keeps
// (WasOwner, the grantee, a handover record). Node sends it before the
// first table of a run whose earlier run was forgotten (the join tells it).
type Disowned struct{}

func (TableChanged) isEvent()     {}
func (MemberDead) isEvent()       {}
func (MemberAlive) isEvent()      {}
func (Tick) isEvent()             {}
func (Replicated) isEvent()       {}
func (ReplAck) isEvent()          {}
func (PairReplicated) isEvent()   {}
func (PairReplAck) isEvent()      {}
func (SnapshotRequest) isEvent()  {}
func (SnapshotComplete) isEvent() {}
func (NoReplica) isEvent()        {}
func (HandoverOffer) isEvent()    {}
func (OfferAsked) isEvent()       {}
func (Sealed) isEvent()           {}
func (HandoverDone) isEvent()     {}
func (EpochSeen) isEvent()        {}
func (Applied) isEvent()          {}
func (Restarted) isEvent()        {}
func (Disowned) isEvent()         {}
func (ConsentAsked) isEvent()     {}
func (ConsentGiven) isEvent()     {}
