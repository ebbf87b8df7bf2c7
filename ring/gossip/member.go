package gossip

import (
	"fmt"
	"time"
)

// Status is a member's liveness as memberlist sees it.
type Status uint8

// The statuses. Enumerated from 1; the zero value is not a status.
const (
	// StatusAlive: the member answers probes (or has not been found
	// failing yet).
	StatusAlive Status = 1 + iota
	// StatusSuspect: the member missed probes and may be declared dead
	// unless it refutes. memberlist v0.7.0 raises no callback when a member
	// becomes suspect and its Members list cannot be read without a data
	// race, so Membership never reports this value today: a suspect member
	// stays StatusAlive until it is declared dead, which matches DESIGN §2
	// (alive and suspect members are equally eligible).
	StatusSuspect
	// StatusDead: other members declared it failed (it may come back).
	StatusDead
	// StatusLeft: it left on purpose (Leave): its leave intent arrived
	// before or after its death.
	StatusLeft
)

// String returns "alive", "suspect", "dead", "left" or "status(N)".
func (s Status) String() string {
	switch s {
	case StatusAlive:
		return "alive"
	case StatusSuspect:
		return "suspect"
	case StatusDead:
		return "dead"
	case StatusLeft:
		return "left"
	default:
		return fmt.Sprintf("status(%d)", uint8(s))
	}
}

// Member is one node of the cluster as this node sees it. It is a value:
// copies share nothing with the Membership.
type Member struct {
	// Name is the member's unique, stable name.
	Name string
	// Addr is the member's gossip address (host:port).
	Addr string
	// Meta is the member's last metadata. If it could not be decoded (a
	// newer or broken peer), Meta is zero, so Meta.State is StateUnknown
	// and the member is not eligible for slots; Stats.MetaErrors counts it.
	Meta Meta
	// Status is the member's liveness.
	Status Status
	// Forgotten: StatusLeft because an operator declared this run gone
	// for good (Membership.Forget), not by leaving itself.
	Forgotten bool
}

// Up reports whether the member is alive or suspect.
func (m Member) Up() bool { return m.Status == StatusAlive || m.Status == StatusSuspect }

// EventKind says what happened to a member.
type EventKind uint8

// The event kinds. Enumerated from 1; the zero value is not a kind.
const (
	// EventJoin: a member became alive: new, or back after dead or left.
	// The local node's own join is the first event after Start.
	EventJoin EventKind = 1 + iota
	// EventUpdate: an alive member's Meta changed (SetState, a restart
	// with a new boot id).
	EventUpdate
	// EventLeave: a member was declared dead (Status StatusDead) or left
	// (Status StatusLeft).
	EventLeave
)

// String returns "join", "update", "leave" or "kind(N)".
func (k EventKind) String() string {
	switch k {
	case EventJoin:
		return "join"
	case EventUpdate:
		return "update"
	case EventLeave:
		return "leave"
	default:
		return fmt.Sprintf("kind(%d)", uint8(k))
	}
}

// Event is one membership change, copied out of memberlist's callback.
type Event struct {
	// Kind is what happened.
	Kind EventKind
	// Member is the member's view right after the change.
	Member Member
	// Seq numbers the changes of this Membership's view from 1, without
	// gaps: an event dropped on overflow leaves a gap the consumer can see.
	// After a resync, events with Seq <= the Snapshot's seq are already
	// reflected in it and must be skipped.
	Seq uint64
	// At is when memberlist reported the change (this node's clock).
	At time.Time
}
