package node

import (
	"sync/atomic"
	"time"
)

// stallBeat is how often the stall watch beats.
const stallBeat = 50 * time.Millisecond

// stallWatch measures how long this process was stalled, as opposed to the
// ownership loop alone: a goroutine that does nothing but beat every
// stallBeat. The longest gap between two beats is how long the runtime ran
// none of its goroutines on time (a stop-the-world pause, a frozen VM, a
// machine so loaded that the whole process starved), memberlist's
// included. A long step of the ownership loop itself (persisting thousands
// of slot states, a backlog of events) leaves the beats on time: the
// others kept hearing from this node, so nobody can have declared it dead
// meanwhile (slots.Tick.Stalled).
type stallWatch struct {
	last   atomic.Int64 // unix nanos of the last beat
	maxGap atomic.Int64 // the longest gap since the last take
}

// run beats until stop is closed.
func (w *stallWatch) run(stop <-chan struct{}) {
	t := time.NewTicker(stallBeat)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case now := <-t.C:
			n := now.UnixNano()
			if gap := n - w.last.Swap(n); gap > w.maxGap.Load() {
				w.maxGap.Store(gap)
			}
		}
	}
}

// take returns the longest stall since the previous take, up to now: the
// longest gap between beats, or the time since the last beat if longer.
func (w *stallWatch) take(now time.Time) time.Duration {
	g := w.maxGap.Swap(0)
	if since := now.UnixNano() - w.last.Load(); since > g {
		g = since
	}
	return max(0, time.Duration(g)-stallBeat)
}
