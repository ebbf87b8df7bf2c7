package slots

import (
	"fmt"
	"time"
)

// Effect is an output of Machine.Step that node must carry out, in order.
// Effects naming To are messages, sent best effort (they may be lost,
// repeated or reordered); the receiver turns them into the event named in
// each effect's doc. A Persist must be durable before any later effect of
// the same Step is carried out: it records an epoch or a grant before
// anyone can hear of it.
type Effect interface {
	isEffect()
	fmt.Stringer
}

// StartFiring: node may fire the slot's due tasks at Epoch (every fire
// intent and callback carries it as X-Chime-Slot-Epoch).
type StartFiring struct {
	Slot  Slot
	Epoch Epoch
}

// StopFiring: node must stop firing the slot now. In-flight fires may finish.
type StopFiring struct{ Slot Slot }

// Persist: write State to the slot's metadata, synchronously. State.Seq is
// the machine's view; node never lowers the applied seq it stores with the
// ops (see Applied).
type Persist struct {
	Slot  Slot
	State SlotState
}

// Heartbeat: the owner sends a replication heartbeat to To; received as
// Replicated (Sent = the owner's now). Grant offers To the lease: if To
// accepts, it may promote once this owner is declared dead and Lease+Margin
// passed, and its acks let this owner fire until Sent+Lease. Heartbeats go
// out every Lease/4 to the follower and to every node that may still hold
// a grant.
type Heartbeat struct {
	Slot  Slot
	Epoch Epoch
	Seq   uint64
	To    string
	Sent  time.Time
	Grant bool
	// Release, when Grant is false, names the importer the receiver may
	// hand the slot to should this owner die: the grant in transit from
	// the receiver to the importer (see lease.go).
	Release string
	// Inc is the sender's Config.Incarnation: only PairHeartbeats of the
	// same incarnation renew a grant this heartbeat gives. Term is its
	// vote term (Config.Vote, vote.go): a grant this heartbeat gives
	// is taken over only with consents for that term.
	Inc, Term uint64
}

// Ack: acknowledge a heartbeat or snapshot from To; received as ReplAck.
// Sent echoes the message's Sent. Grant: this node holds To's grant now.
// Synced: this node holds a valid replica from To at Epoch.
type Ack struct {
	Slot   Slot
	Epoch  Epoch
	Seq    uint64
	To     string
	Sent   time.Time
	Grant  bool
	Synced bool
	// Released names the importer the sender holds a release for
	// (Heartbeat.Release), "" for none.
	Released string
	// Inc is the Heartbeat.Inc of the grant held (0: none, or the grant
	// came with a snapshot); Gen is this node's pair generation (see
	// PairAck). Together they tell the owner whether PairAcks renew it.
	// Term is the vote term of the grant or release held (Config.Vote).
	Inc, Gen, Term uint64
}

// PairHeartbeat renews, in one message to To, every grant this owner gave
// To at incarnation Inc (see lease.go, "Pairs"); received as
// PairReplicated. An owner sends one to every other member every Lease/4.
type PairHeartbeat struct {
	To   string
	Sent time.Time
	Inc  uint64
}

// PairAck answers a PairHeartbeat from To, echoing Sent and Inc; received
// as PairReplAck. Gen is this node's pair generation: it changes whenever
// a grant or release this node held ends or changes hands (given up,
// acted on, replaced), so that the owner extends only the grants whose
// ack carried the same Gen.
type PairAck struct {
	To   string
	Sent time.Time
	Inc  uint64
	Gen  uint64
	// Promise (Config.Vote): this node promises not to consent to a
	// takeover of To's incarnation Inc until Lease+Margin after the
	// PairHeartbeat arrived. Floors: for the grants of the nodes named,
	// only those of To's vote terms Floor and up (it consented to those
	// nodes' takeovers of the older ones, vote.go).
	Promise bool
	Floors  []Floor
}

// Floor is the least vote term of an owner's grants to Taker that a
// promise covers (PairAck.Floors).
type Floor struct {
	Taker string
	Term  uint64
}

// SendSnapshot: stream a full copy of the slot at (Epoch, Seq) to To, then
// the live tail (every later op of the slot, until To is no longer the
// follower or the epoch changes); To receives SnapshotComplete with Sent and
// Grant when it has the copy. Grant works as on a Heartbeat.
type SendSnapshot struct {
	Slot  Slot
	Epoch Epoch
	Seq   uint64
	To    string
	Sent  time.Time
	Grant bool
	// Owner says the sender owns Epoch (an owner's or sealing node's
	// copy); false for a follower's copy.
	Owner bool
	// Inc and Term are the sender's incarnation and vote term
	// (Config.Vote): a grant in the copy is theirs, as on a Heartbeat.
	Inc, Term uint64
	// Final: the copy is the complete one of epoch Epoch-1, which the
	// sender owned (slotInfo.finalOf), for the importer of Epoch; its
	// data keeps that epoch's position.
	Final bool
}

// RequestSnapshot: ask From for a copy; received as SnapshotRequest.
type RequestSnapshot struct {
	Slot  Slot
	Epoch Epoch // the requester's epoch
	From  string
}

// SendNoReplica: tell To that this node holds no valid replica (at Epoch);
// received as NoReplica.
type SendNoReplica struct {
	Slot  Slot
	Epoch Epoch
	To    string
	// Census: the answer to a census (HandoverOffer.Census); only such
	// an answer counts for one (NoReplica.Census).
	Census bool
}

// OfferHandover: ask the holder To to hand the slot over; received as
// HandoverOffer.
type OfferHandover struct {
	Slot     Slot
	Epoch    Epoch
	Seq      uint64
	To       string
	WasOwner bool
	Grantee  string
	// Census, Copy: see HandoverOffer.
	Census, Copy bool
}

// AskOffer: ask To, the node a release this node holds names, to offer
// for the slot at Epoch; received as OfferAsked. The holder of a release
// acts on it only at its target's offer, and the target may not import
// the slot (its table gives the slot to another node, or to the holder).
type AskOffer struct {
	Slot  Slot
	Epoch Epoch
	To    string
}

// Seal: stop firing (already done by a preceding StopFiring), wait for
// in-flight fires, hold writes; then deliver Sealed with the slot's final
// seq. If instead the machine later says the node fires the slot again or
// steps down, node releases or rejects the held writes accordingly.
type Seal struct{ Slot Slot }

// SendHandover: give the final (Epoch, Seq) to the importer To; received as
// HandoverDone. Writes held by Seal are forwarded to To from now on.
type SendHandover struct {
	Slot  Slot
	Epoch Epoch
	Seq   uint64
	To    string
	// Grant: the sender holds To's grant at Epoch+1 (it kept a copy and
	// sees a majority): should To not take the epoch, the sender may
	// promote or hand it on. Received as HandoverDone.Grant.
	Grant bool
	// Dropped names the nodes a sealed owner had forgotten as dead while
	// they may still hold its grant at Epoch (degraded mode): the importer
	// keeps them as its own dropped suspects (see canSeal).
	Dropped []string
}

// Announce: tell every member that this node owns the slot at Epoch (when
// it takes the epoch, and when a new follower caught up: Replicated);
// received as EpochSeen with Owner set. Best effort: the epoch rules do
// not depend on it arriving.
type Announce struct {
	Slot       Slot
	Epoch      Epoch
	Replicated bool // the owner's follower holds the replica
}

// RejectLowerEpoch: tell To that its message carried an epoch below Epoch;
// received as EpochSeen (Owner unset). The rejected message was not applied.
type RejectLowerEpoch struct {
	Slot  Slot
	Epoch Epoch
	To    string
}

// AskConsent: ask To to consent to our takeover of Owner's incarnation
// Inc (Config.Vote, vote.go); received as ConsentAsked.
type AskConsent struct {
	To, Owner string
	Inc, Term uint64
}

// GiveConsent: tell To that we consent to its takeover of Owner's
// incarnation Inc; received as ConsentGiven. Sent after the
// PersistConsents that records it.
type GiveConsent struct {
	To, Owner string
	Inc, Term uint64
	Quiet     time.Duration // see ConsentGiven
}

// PersistConsents: store Consents durably (replacing what was stored)
// before carrying out any later effect; New gets them back as
// Config.Consents.
type PersistConsents struct {
	Consents []Consent
}

// DropSlot: delete the slot's data (storage.Batch.DropSlot); the slot metadata
// stays (the following Persist keeps its epoch).
type DropSlot struct{ Slot Slot }

// MarkUnderReplicated: the owner has no caught-up follower (On) or has one
// again (!On). Exposed as a metric and in /v1/cluster.
type MarkUnderReplicated struct {
	Slot Slot
	On   bool
}

// MarkUnavailable: this node should own the slot but cannot take it or fire
// it, and no other node will (On), or that ended (!On); see
// Machine.Unavailable. Exposed in /v1/cluster, /readyz and as a metric.
type MarkUnavailable struct {
	Slot Slot
	On   bool
}

func (StartFiring) isEffect()         {}
func (AskConsent) isEffect()          {}
func (GiveConsent) isEffect()         {}
func (PersistConsents) isEffect()     {}
func (StopFiring) isEffect()          {}
func (Persist) isEffect()             {}
func (Heartbeat) isEffect()           {}
func (Ack) isEffect()                 {}
func (PairHeartbeat) isEffect()       {}
func (PairAck) isEffect()             {}
func (SendSnapshot) isEffect()        {}
func (RequestSnapshot) isEffect()     {}
func (SendNoReplica) isEffect()       {}
func (OfferHandover) isEffect()       {}
func (AskOffer) isEffect()            {}
func (Seal) isEffect()                {}
func (SendHandover) isEffect()        {}
func (Announce) isEffect()            {}
func (RejectLowerEpoch) isEffect()    {}
func (DropSlot) isEffect()            {}
func (MarkUnderReplicated) isEffect() {}
func (MarkUnavailable) isEffect()     {}

// The String forms are compact and stable: golden tests print them.

func (e StartFiring) String() string { return fmt.Sprintf("StartFiring s=%d e=%d", e.Slot, e.Epoch) }
func (e StopFiring) String() string  { return fmt.Sprintf("StopFiring s=%d", e.Slot) }
func (e Persist) String() string     { return fmt.Sprintf("Persist s=%d %v", e.Slot, e.State) }
func (e Heartbeat) String() string {
	return fmt.Sprintf("Heartbeat s=%d e=%d q=%d to=%s%s%s", e.Slot, e.Epoch, e.Seq, e.To, mark(e.Grant, " grant"), mark(e.Release != "", " release>"+e.Release))
}
func (e Ack) String() string {
	return fmt.Sprintf("Ack s=%d e=%d q=%d to=%s%s%s%s", e.Slot, e.Epoch, e.Seq, e.To, mark(e.Grant, " grant"), mark(!e.Synced, " unsynced"), mark(e.Released != "", " released>"+e.Released))
}
func (e PairHeartbeat) String() string {
	return fmt.Sprintf("PairHeartbeat to=%s inc=%d", e.To, e.Inc)
}
func (e PairAck) String() string {
	return fmt.Sprintf("PairAck to=%s inc=%d gen=%d%s", e.To, e.Inc, e.Gen, mark(e.Promise, " promise"))
}
func (e AskConsent) String() string {
	return fmt.Sprintf("AskConsent to=%s owner=%s inc=%d", e.To, e.Owner, e.Inc)
}
func (e GiveConsent) String() string {
	return fmt.Sprintf("GiveConsent to=%s owner=%s inc=%d", e.To, e.Owner, e.Inc)
}
func (e PersistConsents) String() string { return fmt.Sprintf("PersistConsents %v", e.Consents) }
func (e SendSnapshot) String() string {
	return fmt.Sprintf("SendSnapshot s=%d e=%d q=%d to=%s%s%s", e.Slot, e.Epoch, e.Seq, e.To, mark(e.Grant, " grant"), mark(e.Final, " final"))
}
func (e RequestSnapshot) String() string {
	return fmt.Sprintf("RequestSnapshot s=%d e=%d from=%s", e.Slot, e.Epoch, e.From)
}
func (e SendNoReplica) String() string {
	return fmt.Sprintf("SendNoReplica s=%d e=%d to=%s", e.Slot, e.Epoch, e.To)
}
func (e OfferHandover) String() string {
	return fmt.Sprintf("OfferHandover s=%d e=%d q=%d to=%s%s", e.Slot, e.Epoch, e.Seq, e.To, mark(e.WasOwner, " was-owner>"+e.Grantee))
}
func (e AskOffer) String() string {
	return fmt.Sprintf("AskOffer s=%d e=%d to=%s", e.Slot, e.Epoch, e.To)
}
func (e Seal) String() string { return fmt.Sprintf("Seal s=%d", e.Slot) }
func (e SendHandover) String() string {
	d := ""
	if len(e.Dropped) > 0 {
		d = fmt.Sprintf(" dropped=%v", e.Dropped)
	}
	return fmt.Sprintf("SendHandover s=%d e=%d q=%d to=%s%s%s", e.Slot, e.Epoch, e.Seq, e.To, mark(e.Grant, " grant"), d)
}
func (e Announce) String() string {
	return fmt.Sprintf("Announce s=%d e=%d%s", e.Slot, e.Epoch, mark(e.Replicated, " replicated"))
}
func (e RejectLowerEpoch) String() string {
	return fmt.Sprintf("RejectLowerEpoch s=%d e=%d to=%s", e.Slot, e.Epoch, e.To)
}
func (e DropSlot) String() string { return fmt.Sprintf("DropSlot s=%d", e.Slot) }
func (e MarkUnderReplicated) String() string {
	return fmt.Sprintf("MarkUnderReplicated s=%d %v", e.Slot, e.On)
}
func (e MarkUnavailable) String() string { return fmt.Sprintf("MarkUnavailable s=%d %v", e.Slot, e.On) }

// mark returns s if on, else "".
func mark(on bool, s string) string {
	if on {
		return s
	}
	return ""
}
