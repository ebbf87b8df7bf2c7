package slots

import (
	"errors"
	"fmt"
	"time"
)

// Config configures one node's Machine.
type Config struct {
	// Self is this node's name as it appears in ring.Member.Name.
	Self string
	// NumSlots is how many slots the machine tracks, slots 0..NumSlots-1.
	// Default Count; tests use a handful so scripts stay readable.
	NumSlots int
	// Lease is L: an owner fires a slot only within L of sending a
	// heartbeat its grantor acked (see Machine), and a grantor promotes only
	// L+Margin after the last grant it accepted. Heartbeats go out every
	// L/4. Shorter means faster failover but more stops when acks are slow;
	// it should stay below failure detection time so it adds no latency.
	Lease time.Duration
	// Margin is added to Lease before a grantor promotes; it absorbs clock
	// rate differences between the two nodes.
	Margin time.Duration
	// Settle guards the decisions that rest on "the members I do not see
	// are a minority": promoting after a crash, handing over for a dead
	// owner, forgetting the grant of a follower declared dead (degraded
	// mode), retaking a restarted owner's epoch. They need the view
	// unchanged for Settle (deaths arrive one at a time, and Settle lets a
	// view catch up, like Akka's stable-after) and signs of life from a
	// majority within the last Settle (a view can lag by the detection
	// time; evidence cannot). Members' detection of one change should
	// differ by less than Settle. It adds to failover time, so it stays
	// short of the detection time; a tick gap over Pause is a pause.
	// With Vote, a takeover's view waits only TakeSettle.
	Settle time.Duration
	// TakeSettle, with Vote, is how long the view must stay unchanged
	// before this node acts on a dead leader's grant or release (promotes,
	// hands the epoch on); 0 means Settle, and it must not exceed Settle.
	// Those acts need the leader's lease run out and a majority's consents
	// besides (vote.go), which no flap of a view gives while the leader
	// lives and talks; the view's wait need only cover how far apart the
	// members learn of a death (memberlist gossips it within a few gossip
	// intervals). The other acts on the view (dropping a dead follower,
	// moving a grant, reclaiming an epoch) still wait Settle: a loaded
	// node's failure detector declares a live peer dead for up to ~1.4 s,
	// and a grant moved on such a flap can strand a slot
	// (TestFollowerCrashWithFlaps). Every takeover after a crash waits for
	// it: the local profile's 500 ms puts the takeover ~0.5 s after the
	// detection instead of 1 s. Without Vote every act waits Settle.
	TakeSettle time.Duration
	// Pause is the longest gap between two Ticks that is not a pause (a
	// stalled process whose view may lag): 0 means Settle/4. It must stay
	// below Settle/2. A busy 2-core machine delays goroutines by a few
	// hundred milliseconds, which must not read as a pause every time.
	// After a pause the view is stale until the next table; a pause of
	// Settle or more also voids the grants held (see Machine.Step, Tick).
	// Settle must stay below memberlist's time to declare a node dead.
	Pause time.Duration
	// DeadAfter is the shortest time the failure detector takes to
	// declare a silent node dead (memberlist: a probe timeout plus the
	// minimum suspicion timeout). No node can have declared us dead, and
	// so no grantee of ours promoted nor any owner forgot our grant,
	// unless we were silent to the majority at least this long. A pause
	// or a lapse of the majority evidence shorter than that voids no
	// grant and restores no suspect forgotten as dead (see Tick,
	// updateEvidence): a node whose acks are slowed by load does not stop
	// its slots until that dead node returns. 0 means Settle, the most
	// cautious value; it must not be below Settle.
	DeadAfter time.Duration
	// MaxMoves bounds how many slots this node takes over by a planned
	// move at once (catching up from a snapshot, offering, being handed
	// over); the others stay importing until a place is free. It bounds
	// the snapshots a join puts in flight and the slots sealed, with their
	// writes held, at any moment. A takeover after a crash (the grantor
	// promotes with its replica) needs no place. 0 means no bound.
	MaxMoves int
	// Incarnation tells this run of the node from its earlier ones (node:
	// its boot id): an owner's PairHeartbeats renew only the grants its
	// own incarnation gave. Every start of a node must use a new value;
	// 0 means 1.
	Incarnation uint64
	// Vote turns on the exclusive vote (vote.go): an owner whose suspect's
	// lease ran out fires on while it holds promises from a majority, and
	// a node acts on a dead owner's grant or release only with consents
	// from a majority. It needs the messages of AskConsent and GiveConsent
	// delivered, PairAck.Promise and SendSnapshot.Inc carried, and
	// PersistConsents kept. DefaultConfig turns it on; without it an
	// owner fires degraded on its own evidence of a majority, which both
	// sides of a partition can have (docs/DESIGN.md, "Exclusive vote").
	Vote bool
	// Consents are the consents this node gave (its last PersistConsents),
	// read back at start; with Vote only.
	Consents []Consent
}

// pause returns the tick gap over which the machine assumes it was paused.
func (c Config) pause() time.Duration {
	if c.Pause > 0 {
		return c.Pause
	}
	return c.Settle / 4
}

// takeSettle returns the view's wait before a takeover: TakeSettle with
// Vote (Settle if unset), Settle without.
func (c Config) takeSettle() time.Duration {
	if c.Vote && c.TakeSettle > 0 {
		return c.TakeSettle
	}
	return c.Settle
}

// deadAfter returns Config.DeadAfter, Settle if unset.
func (c Config) deadAfter() time.Duration {
	return max(c.DeadAfter, c.Settle)
}

// DefaultConfig returns the production settings (research/cluster-design.md
// §5): L = 4 s, margin 1 s, below the ~6 s median detection time of
// memberlist's LAN profile, so the lease never delays failover; settle 2 s,
// a few probe intervals (1 s each), within which memberlist declares the
// members on the far side of a partition dead. The exclusive vote is on.
func DefaultConfig(self string) Config {
	return Config{Self: self, NumSlots: Count, Lease: 4 * time.Second, Margin: time.Second, Settle: 2 * time.Second,
		MaxMoves: DefaultMaxMoves, Vote: true}
}

// DefaultMaxMoves is DefaultConfig's MaxMoves: 1,024 slots, so a node that
// joins three takes its 4,096 slots in four waves.
const DefaultMaxMoves = Count / 16

// DefaultLocalConfig is DefaultConfig with the local profile's timing:
// L = 2 s, margin 0.5 s, which run out before its ~2.5 s detection time
// plus the settle, and settle 1 s (two 500 ms probe intervals) with a
// takeover's settle of 500 ms (five 100 ms gossip intervals): a crash is
// acted on ~0.5 s after its detection (~2.5 s), ~3 s after it happens.
func DefaultLocalConfig(self string) Config {
	c := DefaultConfig(self)
	c.Lease, c.Margin, c.Settle, c.TakeSettle = 2*time.Second, 500*time.Millisecond, time.Second, 500*time.Millisecond
	return c
}

// Validate reports every problem with c.
func (c Config) Validate() error {
	var errs []error
	if c.Self == "" {
		errs = append(errs, errors.New("slots: Config.Self is empty"))
	}
	if c.NumSlots < 1 || c.NumSlots > Count {
		errs = append(errs, fmt.Errorf("slots: Config.NumSlots %d outside [1, %d]", c.NumSlots, Count))
	}
	if c.Lease <= 0 {
		errs = append(errs, fmt.Errorf("slots: Config.Lease %v must be positive", c.Lease))
	}
	if c.Margin < 0 {
		errs = append(errs, fmt.Errorf("slots: Config.Margin %v must not be negative", c.Margin))
	}
	if c.Settle < 0 {
		errs = append(errs, fmt.Errorf("slots: Config.Settle %v must not be negative", c.Settle))
	}
	if c.TakeSettle < 0 || c.TakeSettle > c.Settle {
		errs = append(errs, fmt.Errorf("slots: Config.TakeSettle %v outside [0, Settle (%v)]", c.TakeSettle, c.Settle))
	}
	if c.Pause < 0 || (c.Pause > 0 && c.Pause >= c.Settle/2) {
		errs = append(errs, fmt.Errorf("slots: Config.Pause %v must be below Settle/2 (%v)", c.Pause, c.Settle/2))
	}
	if c.DeadAfter != 0 && c.DeadAfter < c.Settle {
		errs = append(errs, fmt.Errorf("slots: Config.DeadAfter %v must not be below Settle (%v)", c.DeadAfter, c.Settle))
	}
	if c.MaxMoves < 0 {
		errs = append(errs, fmt.Errorf("slots: Config.MaxMoves %d must not be negative", c.MaxMoves))
	}
	return errors.Join(errs...)
}
