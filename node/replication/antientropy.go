package replication

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/chime-scheduler/chime/node/clock"
	"github.com/chime-scheduler/chime/slots"
)

// Anti-entropy: the owner of a slot periodically sends each of the slot's
// replicas its checksum of the slot (storage.Store.SlotChecksum: an
// order-independent digest of the slot's data keys, kept by every commit)
// together with the position it was taken at, (epoch, seq). Both sides
// read checksum and position on their writer goroutine right after a
// group's commit, where no write to the slot can fall between the two
// (Sums.Sums, Sums.Check). A replica compares only when it is at exactly that
// position: then the two copies must be equal, whatever was in flight
// before or after. A replica elsewhere (behind, ahead, resyncing) answers
// "not comparable" and the slot is tried again in a later pass.
//
// A mismatch resyncs the replica's copy through the path a replication gap
// takes: the owner posts GapSeen for (slot, replica) to its ctl, whose
// machine sends the replica a snapshot (slots.SnapshotRequest ->
// SendSnapshot). If the same replica mismatches again, the owner first
// recomputes its own checksum (storage.RepairSlotChecksum): a replica's
// checksum right after a snapshot is exact, so a second mismatch may be
// the owner's own checksum gone wrong; only if the repair changes nothing
// is the replica resynced again.
//
// A pass over all slots takes AntiEntropyInterval (a little less on the
// beat: CheckerConfig.Beat), in aeRounds ticks of a slice each. A slot
// whose position has not moved since it was verified against a replica
// is skipped for aeRecheck intervals, so an idle node
// sends almost nothing; after that it is verified again (a copy can change
// without its position moving: a write that raced a move, a bug).

// aeRounds is how many ticks one pass over all slots is spread over: a
// tick checks slots.Count/aeRounds slots (1024), so one request per replica
// carries at most that many items (~40 KB), every AntiEntropyInterval/16.
const aeRounds = 16

// aeRecheck is how many passes a slot verified at an unchanged position is
// skipped: 10 × 30 s re-verifies every idle slot every 5 minutes, for the
// divergences that do not move a position.
const aeRecheck = 10

// Results of comparing one slot, as the replica answers them.
const (
	Match         uint8 = 1 + iota // same position, same checksum
	Mismatch                       // same position, different checksum: resync
	NotComparable                  // not at that position (or not a replica now, or another checksum version)
)

// Item is a slot's checksum at a position of its owner.
type Item struct {
	Slot  uint16
	Epoch uint64
	Seq   uint64
	// HasAlt: the owner took its epoch Epoch and has written nothing to
	// the slot since, so a replica still at (AltEpoch, Seq), the position
	// before, holds the same data (see writerRepl.bumpPrev).
	HasAlt   bool
	AltEpoch uint64
	Sum      uint64
	Count    uint64
}

// aeRequest is POST /internal/v1/antientropy (antientropy_wire.go).
type aeRequest struct {
	From string
	// Version is the sender's storage.ChecksumVersion: checksums of
	// different schemes do not compare.
	Version byte
	Items   []Item
}

// aeAnswer has one result per item, and the replica's epoch of each slot
// (the resync request carries it, as a gap's does).
type aeAnswer struct {
	Results []uint8
	Epochs  []uint64
}

// Compare compares the owner's item with this node's copy of the slot:
// its data position (epoch, seq) and checksum sum, read together.
func Compare(epoch, seq uint64, sum Checksum, it Item) uint8 {
	if seq != it.Seq || (epoch != it.Epoch && !(it.HasAlt && epoch == it.AltEpoch)) {
		return NotComparable
	}
	if sum != (Checksum{Sum: it.Sum, Count: it.Count}) {
		return Mismatch
	}
	return Match
}

// aeVerified is the position at which a slot last matched a replica.
type aeVerified struct {
	epoch, seq uint64
	at         time.Time
}

// aeAction is what the owner does after a replica's answer.
type aeAction uint8

const (
	aeNone             aeAction = iota
	aeResync                    // ask for the replica's resync
	aeRepairThenResync          // check the owner's own checksum; resync if it was right
)

// aeState is the owner's memory of its checks, per (slot, replica): pure
// (time comes in as a value), owned by the antiEntropy goroutine.
type aeState struct {
	recheck time.Duration // a verified, unmoved pair is checked again after this
	hold    time.Duration // a resynced pair is not checked again within this
	// verified: where each pair last matched; held: pairs resynced, until
	// when; misses: mismatches in a row.
	verified map[slotNode]aeVerified
	held     map[slotNode]time.Time
	misses   map[slotNode]int
}

func newAEState(recheck, hold time.Duration) *aeState {
	return &aeState{recheck: recheck, hold: hold, verified: map[slotNode]aeVerified{},
		held: map[slotNode]time.Time{}, misses: map[slotNode]int{}}
}

// due reports whether pair k, its slot now at (epoch, seq) on the owner,
// is to be checked at now: not while a resync of it may be in flight, and
// not when it matched at this very position less than recheck ago.
func (st *aeState) due(k slotNode, epoch, seq uint64, now time.Time) bool {
	if until, ok := st.held[k]; ok {
		if now.Before(until) {
			return false
		}
		delete(st.held, k)
	}
	v, ok := st.verified[k]
	return !ok || v.epoch != epoch || v.seq != seq || now.Sub(v.at) >= st.recheck
}

// record notes the replica's answer res for item it of pair k and returns
// what to do.
func (st *aeState) record(k slotNode, it Item, res uint8, now time.Time) aeAction {
	switch res {
	case Match:
		st.verified[k] = aeVerified{epoch: it.Epoch, seq: it.Seq, at: now}
		delete(st.misses, k)
	case Mismatch:
		delete(st.verified, k)
		st.held[k] = now.Add(st.hold)
		st.misses[k]++
		if st.misses[k] >= 2 {
			return aeRepairThenResync
		}
		return aeResync
	}
	return aeNone
}

// CheckerConfig sets the checker up.
type CheckerConfig struct {
	Self string // this node's name
	// Interval is the time of one pass over all slots.
	Interval time.Duration
	// Hold is how long a resynced pair is not checked again. Twice the
	// lease: ctl asks for one snapshot per (slot, replica) within a
	// lease, so a check sooner could count a resync that is not made.
	Hold time.Duration
	// Version is this node's storage.ChecksumVersion: checksums of
	// different schemes do not compare.
	Version byte
	// Beat, when set, is the period the ticks fall on (node: the gossip
	// interval): a tick every Interval/aeRounds rounded down to a multiple
	// of Beat, at the multiples of that since the Unix epoch, so that an
	// idle node's checks wake it with its other periodic work and not on
	// their own (issue 17 item 1).
	Beat time.Duration
}

// CheckerDeps is what the checker needs of the node.
type CheckerDeps struct {
	Transport Transport
	Ownership Ownership
	Sums      Sums
	Clock     clock.Clock // nil: clock.Real
	Metrics   Metrics
	Log       *slog.Logger
}

// Checker runs the owner's side of the checks (see the top of this file)
// on one goroutine.
type Checker struct {
	d    CheckerDeps
	cfg  CheckerConfig
	st   *aeState
	next int // the first slot of the next tick
	stop chan struct{}
	done chan struct{}
}

// NewChecker returns the checker; Run runs it.
func NewChecker(cfg CheckerConfig, deps CheckerDeps) *Checker {
	deps.Clock = clock.Or(deps.Clock)
	return &Checker{d: deps, cfg: cfg, st: newAEState(aeRecheck*cfg.Interval, cfg.Hold),
		stop: make(chan struct{}), done: make(chan struct{})}
}

// Run is the checker's goroutine, until Close.
func (a *Checker) Run() {
	defer close(a.done)
	every := a.period()
	tm := a.d.Clock.NewTimer(untilBeat(a.d.Clock.Now(), every))
	defer tm.Stop()
	for {
		select {
		case <-a.stop:
			return
		case <-tm.C:
		}
		now := a.d.Clock.Now()
		tm.Reset(untilBeat(now, every))
		a.tick(now)
	}
}

// period is the time between two ticks: Interval/aeRounds, rounded down
// to a multiple of Config.Beat when set (one Beat at least).
func (a *Checker) period() time.Duration {
	p := max(a.cfg.Interval/aeRounds, time.Millisecond)
	if b := a.cfg.Beat; b > 0 {
		p = max(p-p%b, b)
	}
	return p
}

// untilBeat is how long from now until the next multiple of every since
// the Unix epoch: gossip.UntilBeat, which this package may not import
// (scripts/check-deps.sh: it reaches the membership only through its
// interfaces).
func untilBeat(now time.Time, every time.Duration) time.Duration {
	return every - time.Duration(now.UnixNano()%int64(every))
}

// Close stops Run and waits for it.
func (a *Checker) Close() {
	close(a.stop)
	<-a.done
}

// tick checks the next slice of slots: those this node owns with a
// replica that is not under-replicated (its follower is catching up: a
// new follower, a resync in flight), and of them the ones due
// (aeState.due).
func (a *Checker) tick(now time.Time) {
	c := a.d.Ownership
	per := slots.Count / aeRounds
	from := a.next
	a.next = (from + per) % slots.Count
	var cand []uint16
	due := map[uint16][]string{}
	under, _ := c.Flagged() // ascending
	for s := uint16(from); int(s) < from+per; s++ {
		if role, _, _ := c.State(s); role != slots.RoleOwner {
			continue
		}
		if _, ok := slices.BinarySearch(under, s); ok {
			continue // its follower is being fed a snapshot: nothing to compare yet
		}
		epoch, seq := a.d.Sums.Position(s)
		reps, _ := c.Replicas(s)
		for _, r := range reps {
			if a.st.due(slotNode{s, r}, epoch, seq, now) {
				due[s] = append(due[s], r)
			}
		}
		if len(due[s]) > 0 {
			cand = append(cand, s)
		}
	}
	if len(cand) == 0 {
		return
	}
	items, err := a.d.Sums.Sums(a.stop, cand)
	if err != nil {
		return
	}
	byNode := map[string][]Item{}
	for _, it := range items {
		for _, r := range due[it.Slot] {
			byNode[r] = append(byNode[r], it)
		}
	}
	type outcome struct {
		to    string
		items []Item
		ans   aeAnswer
		err   error
	}
	outs := make(chan outcome, len(byNode))
	var wg sync.WaitGroup
	for to, items := range byNode {
		wg.Go(func() {
			ans, err := a.call(to, &aeRequest{From: a.cfg.Self, Version: a.cfg.Version, Items: items},
				min(a.cfg.Interval, 5*time.Second))
			outs <- outcome{to, items, ans, err}
		})
	}
	wg.Wait()
	close(outs)
	for o := range outs {
		if errors.Is(o.err, ErrUnknownMember) {
			continue
		}
		if o.err != nil {
			a.d.Log.Debug("anti-entropy check", "to", o.to, "err", o.err)
			continue
		}
		for k, it := range o.items {
			a.answered(slotNode{it.Slot, o.to}, it, o.ans.Results[k], o.ans.Epochs[k], now)
		}
	}
}

// answered acts on replica k.node's answer res for item it.
func (a *Checker) answered(k slotNode, it Item, res uint8, epoch uint64, now time.Time) {
	a.d.Metrics.Checked(res)
	switch a.st.record(k, it, res, now) {
	case aeNone:
		return
	case aeRepairThenResync:
		was, is, err := a.d.Sums.Repair(k.slot)
		if err != nil {
			a.d.Log.Warn("anti-entropy: recompute own checksum", "slot", k.slot, "err", err)
			return
		}
		if was != is {
			a.d.Log.Warn("anti-entropy: this owner's checksum of a slot was wrong; repaired, not resyncing its replica",
				"slot", k.slot, "replica", k.node, "was", was.String(), "now", is.String())
			return
		}
	}
	a.d.Log.Warn("anti-entropy: a replica's copy of a slot differs; resyncing it", "slot", k.slot, "replica", k.node,
		"epoch", it.Epoch, "seq", it.Seq, "owner_checksum", Checksum{Sum: it.Sum, Count: it.Count}.String())
	a.d.Metrics.Resynced()
	// The path a replication gap takes: the machine streams the replica a
	// snapshot of the slot.
	a.d.Ownership.GapSeen(k.slot, epoch, k.node)
}

// call sends one check request to node to.
func (a *Checker) call(to string, req *aeRequest, timeout time.Duration) (aeAnswer, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	out, err := a.d.Transport.Call(ctx, to, PathAntiEntropy, "application/octet-stream", encodeAERequest(req))
	if err != nil {
		return aeAnswer{}, fmt.Errorf("anti-entropy check at %s: %w", to, err)
	}
	ans, err := decodeAEAnswer(out)
	if err != nil {
		return aeAnswer{}, err
	}
	if len(ans.Results) != len(req.Items) || len(ans.Epochs) != len(req.Items) {
		return aeAnswer{}, fmt.Errorf("anti-entropy check at %s: %d results for %d items", to, len(ans.Results), len(req.Items))
	}
	return ans, nil
}

// AnswerSums is the replica's side of POST PathAntiEntropy: compare the
// owner's checksums with this node's, on the writer goroutine (s), and
// answer one result per item. The caller has authenticated the call and
// bounded the body.
func AnswerSums(ctx context.Context, s Sums, body []byte) ([]byte, error) {
	req, err := decodeAERequest(body)
	if err != nil {
		return nil, &BadRequest{"body", err}
	}
	for _, it := range req.Items {
		if int(it.Slot) >= slots.Count {
			return nil, &BadRequest{"slot", fmt.Errorf("antientropy: slot %d is not below %d", it.Slot, slots.Count)}
		}
	}
	results, epochs, err := s.Check(ctx.Done(), req.Version, req.Items)
	if err != nil {
		return nil, err
	}
	return encodeAEAnswer(&aeAnswer{Results: results, Epochs: epochs}), nil
}
