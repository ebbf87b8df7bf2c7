package ownership

import (
	"testing"
	"time"

	"github.com/chime-scheduler/chime/node/clock"
)

// TestStallWatchTake: take reports the longest gap between beats, or the
// time since the last beat if longer, less one beat, and starts over.
func TestStallWatchTake(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	var w stallWatch
	w.last.Store(now.Add(-20 * time.Millisecond).UnixNano())
	if got := w.take(now); got != 0 {
		t.Errorf("beats on time: %v, want 0", got)
	}
	w.maxGap.Store(int64(3 * time.Second))
	if got := w.take(now); got != 3*time.Second-stallBeat {
		t.Errorf("a 3 s gap between beats: %v", got)
	}
	if got := w.take(now); got != 0 {
		t.Errorf("after a take: %v, want 0", got)
	}
	w.last.Store(now.Add(-2 * time.Second).UnixNano())
	if got := w.take(now); got != 2*time.Second-stallBeat {
		t.Errorf("no beat for 2 s: %v", got)
	}
	// A real watch beats on time in a test that does nothing else.
	stop := make(chan struct{})
	var r stallWatch
	r.last.Store(time.Now().UnixNano())
	go r.run(clock.Real, stop)
	time.Sleep(300 * time.Millisecond)
	close(stop)
	if got := r.take(time.Now()); got > 250*time.Millisecond {
		t.Errorf("an idle process stalled %v", got)
	}
}
