package ownership

import (
	"math/bits"
	"sync/atomic"
	"time"

	"github.com/chime-scheduler/chime/node/clock"
	"github.com/chime-scheduler/chime/ring/gossip"
	"github.com/chime-scheduler/chime/slots"
)

// StallReport is the last stall check: the owned slots that have not been
// firing for Config.OverdueAfter or longer, ascending, and how many of
// them are stalled for each reason.
type StallReport struct {
	Slots   []uint16
	Reasons map[string]int
}

// Reasons a slot is stalled, as in StallReport.Reasons and /readyz.
const (
	StallUnavailable = "unavailable"    // no live node holds a copy it may take over from
	StallImporting   = "not_taken_over" // the table gives it here; the handover or promotion has not happened
	StallNoLease     = "owner_not_firing"
	StallNoClaim     = "no_claim" // the table names this node; the ownership machine holds nothing yet
)

// stallCheckEvery is how often checkStalls runs: a stall shows within
// OverdueAfter + stallCheckEvery, as overdue tasks show within OverdueAfter
// + the overdue scan's period (health.ScanEvery, 2 s). Every 4 ticks (533
// ms with the local profile) cost an idle node ~0.1 % of a core (issue 17).
const stallCheckEvery = time.Second

// checkStalls reports the stalls from the machine and the table: the run
// goroutine's, every stallCheckEvery. It walks the table's slots that are
// not firing (slotSets), and reads the machine only for the stalled ones.
func (e *Executor) checkStalls(now time.Time) {
	v := e.view
	if v == nil {
		return
	}
	if e.notFiring == nil {
		e.notFiring = make([]time.Time, slots.Count)
	}
	after := e.cfg.OverdueAfter
	rep := &StallReport{Reasons: map[string]int{}}
	t := &e.sets
	for i := range e.notFiringSet {
		cand := t.tabled[i] &^ t.firing[i]
		for w := e.notFiringSet[i] &^ cand; w != 0; w &= w - 1 {
			e.notFiring[i*64+bits.TrailingZeros64(w)] = time.Time{}
		}
		e.notFiringSet[i] = cand
	}
	each(func(i int) uint64 { return e.notFiringSet[i] }, func(s uint16) {
		if e.notFiring[s].IsZero() {
			e.notFiring[s] = now
		}
		if now.Sub(e.notFiring[s]) < after {
			return
		}
		rep.Slots = append(rep.Slots, s)
		sl := slots.Slot(s)
		switch r := e.m.State(sl).Role; {
		case e.m.Unavailable(sl):
			rep.Reasons[StallUnavailable]++
		case r == slots.RoleImporting:
			rep.Reasons[StallImporting]++
		case r == slots.RoleOwner || r == slots.RoleSealing:
			rep.Reasons[StallNoLease]++
		default:
			rep.Reasons[StallNoClaim]++
		}
	})
	if len(rep.Slots) > 0 && (e.lastStalls == nil || len(e.lastStalls.Slots) == 0) {
		s := rep.Slots[0]
		e.d.Log.Error("owned slots stalled: not firing", "slots", len(rep.Slots), "reasons", rep.Reasons,
			"for_over", after, "example", s, "machine", e.m.Debug(slots.Slot(s)))
	}
	e.lastStalls = rep
	e.d.Stalled(rep)
}

// stallWatch measures how long this process was stalled, as opposed to the
// ownership loop alone: a goroutine that does nothing but beat every
// tickEvery and pass each beat on to the loop as its Tick (dropped when the
// loop has one pending, like a time.Ticker's). The longest gap between two
// beats is how long the runtime ran none of its goroutines on time (a
// stop-the-world pause, a frozen VM, a machine so loaded that the whole
// process starved), memberlist's included. A long step of the ownership
// loop itself (persisting thousands of slot states, a backlog of events)
// leaves the beats on time: the others kept hearing from this node, so
// nobody can have declared it dead meanwhile (slots.Tick.Stalled).
//
// The watch beats with the loop's ticks, not on a timer of its own: an
// idle node's CPU goes mostly to waking up (issue 17 item 1), and a beat of
// its own every 50 ms was 20 of an idle node's ~75 wake-ups a second.
type stallWatch struct {
	last   atomic.Int64 // unix nanos of the last beat
	maxGap atomic.Int64 // the longest gap since the last take
}

// run beats every every, offering each beat on tick, until stop is
// closed. The beats fall on the multiples of every since the Unix epoch
// (gossip.UntilBeat), so the nodes of a cluster tick at the same
// instants: a node's ticks send its pings and pair beats, and its peers'
// arrive within a round trip of its own tick, so an idle process wakes
// once for all of them rather than once for its tick and once for each
// peer's.
func (w *stallWatch) run(c clock.Clock, every time.Duration, tick chan<- struct{}, stop <-chan struct{}) {
	tm := c.NewTimer(gossip.UntilBeat(c.Now(), every))
	defer tm.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tm.C:
			tm.Reset(gossip.UntilBeat(c.Now(), every))
			// The time it ran, not the tick's: a timer fired late after a
			// stall carries the time it was due.
			n := c.Now().UnixNano()
			if gap := n - w.last.Swap(n); gap > w.maxGap.Load() {
				w.maxGap.Store(gap)
			}
			select {
			case tick <- struct{}{}:
			default:
			}
		}
	}
}

// take returns how long the process may have stalled since the previous
// take, up to now: the longest gap between beats, or the time since the
// last beat if longer. It is an upper bound (a stall of d between two beats
// makes a gap of at least d), one beat period above the stall at most, so
// a stall is never held against DeadAfter as shorter than it was.
func (w *stallWatch) take(now time.Time) time.Duration {
	g := w.maxGap.Swap(0)
	if since := now.UnixNano() - w.last.Load(); since > g {
		g = since
	}
	return max(0, time.Duration(g))
}
