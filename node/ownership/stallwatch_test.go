package ownership

import (
	"testing"
	"time"

	"github.com/chime-scheduler/chime/node/clock"
)

// TestStallWatchTake: take reports the longest gap between beats, or the
// time since the last beat if longer (an upper bound of the stall), and
// starts over; the watch offers every beat as a tick and drops the beats
// nobody took.
func TestStallWatchTake(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	var w stallWatch
	w.last.Store(now.Add(-20 * time.Millisecond).UnixNano())
	if got := w.take(now); got != 20*time.Millisecond {
		t.Errorf("beats on time, the last 20 ms ago: %v, want 20ms", got)
	}
	w.maxGap.Store(int64(3 * time.Second))
	if got := w.take(now); got != 3*time.Second {
		t.Errorf("a 3 s gap between beats: %v", got)
	}
	if got := w.take(now); got != 20*time.Millisecond {
		t.Errorf("after a take: %v, want the 20 ms since the last beat", got)
	}
	w.last.Store(now.Add(-2 * time.Second).UnixNano())
	if got := w.take(now); got != 2*time.Second {
		t.Errorf("no beat for 2 s: %v", got)
	}
	// A real watch beats on time in a test that does nothing else, and
	// offers its beats as ticks without waiting for them to be taken.
	stop := make(chan struct{})
	ticks := make(chan struct{}, 1)
	done := make(chan struct{})
	var r stallWatch
	r.last.Store(time.Now().UnixNano())
	go func() { defer close(done); r.run(clock.Real, 20*time.Millisecond, ticks, stop) }()
	time.Sleep(300 * time.Millisecond)
	select {
	case <-ticks:
	default:
		t.Error("no tick offered in 300 ms of 20 ms beats")
	}
	close(stop)
	<-done
	if got := r.take(time.Now()); got > 250*time.Millisecond {
		t.Errorf("an idle process stalled %v", got)
	}
}
