package node

import (
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/chime-scheduler/chime/node/clock"
)

// TestSnapAdmission: a replica's snapshots are admitted at once while the
// store has room; while it is pressed they wait, and are admitted when
// room comes within snapAdmitWait, refused when it does not (or when the
// request ends first); requests wait their turn in arrival order, and the
// turn's wait counts against the same bound.
func TestSnapAdmission(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var pressed atomic.Bool
		a := newSnapAdmission(pressed.Load, clock.Real)
		if !a.admit(nil) {
			t.Fatal("refused with room")
		}
		pressed.Store(true)
		start := time.Now()
		if a.admit(nil) {
			t.Fatal("admitted while pressed")
		}
		if waited := time.Since(start); waited != snapAdmitWait {
			t.Errorf("refused after %v, want %v", waited, snapAdmitWait)
		}
		go func() {
			time.Sleep(120 * time.Millisecond)
			pressed.Store(false)
		}()
		start = time.Now()
		if !a.admit(nil) {
			t.Fatal("refused although room came within the bound")
		}
		if waited := time.Since(start); waited < 120*time.Millisecond || waited > 120*time.Millisecond+snapAdmitPoll {
			t.Errorf("admitted after %v, want 120 ms plus at most a poll", waited)
		}
		pressed.Store(true)
		done := make(chan struct{})
		go func() {
			time.Sleep(30 * time.Millisecond)
			close(done)
		}()
		start = time.Now()
		if a.admit(done) || time.Since(start) != 30*time.Millisecond {
			t.Errorf("a request that ended after 30 ms: admitted, or answered after %v", time.Since(start))
		}
		// Two requests while pressed: the second waits for the first's
		// turn, and its bound counts from its own start.
		took := make(chan time.Duration, 2)
		start = time.Now()
		for range 2 {
			go func() {
				if a.admit(nil) {
					t.Error("admitted while pressed")
				}
				took <- time.Since(start)
			}()
			time.Sleep(time.Millisecond)
		}
		if first, second := <-took, <-took; first != snapAdmitWait || second != snapAdmitWait+time.Millisecond {
			t.Errorf("two refused requests answered after %v and %v, want %v and %v", first, second, snapAdmitWait, snapAdmitWait+time.Millisecond)
		}
		// Room comes while two wait: they are admitted in arrival order.
		admitted := make(chan int, 2)
		for i := range 2 {
			go func() {
				if a.admit(nil) {
					admitted <- i
				}
			}()
			time.Sleep(time.Millisecond)
		}
		time.Sleep(100 * time.Millisecond)
		pressed.Store(false)
		if first, second := <-admitted, <-admitted; first != 0 || second != 1 {
			t.Errorf("admitted in the order %d, %d; want 0, 1", first, second)
		}
	})
}

// TestSnapAdmissionPressedLately: the pressure every replication answer
// carries asks the store at most once per snapAdmitPoll, and follows it
// after that.
func TestSnapAdmissionPressedLately(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var pressed atomic.Bool
		var asked atomic.Int64
		a := newSnapAdmission(func() bool { asked.Add(1); return pressed.Load() }, clock.Real)
		if a.pressedLately() {
			t.Fatal("pressed with room")
		}
		pressed.Store(true)
		for range 100 {
			if a.pressedLately() {
				t.Fatal("asked the store again within snapAdmitPoll")
			}
		}
		time.Sleep(snapAdmitPoll)
		if !a.pressedLately() {
			t.Error("missed the pressure after snapAdmitPoll")
		}
		if n := asked.Load(); n != 2 {
			t.Errorf("asked the store %d times, want 2", n)
		}
	})
}
