package ownership

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/chime-scheduler/chime/slots"
)

// TestAwaitHeld: a request for a slot moving to this node waits for the
// handover: it wakes when the executor publishes the slot held, not on a
// poll, and gives up when its context ends.
func TestAwaitHeld(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := NewBoard()
		hold := func(s uint16, epoch uint64) {
			if b.setPub(s, epoch<<8|uint64(slots.RoleOwner)) {
				b.notify()
			}
		}
		hold(1, 3)
		start := time.Now()
		if !b.AwaitHeld(context.Background(), 1) || time.Since(start) != 0 {
			t.Errorf("a held slot waited %v", time.Since(start))
		}
		go func() {
			time.Sleep(300 * time.Millisecond)
			hold(9, 1) // another slot: the waiter checks again and waits on
			time.Sleep(300 * time.Millisecond)
			hold(2, 4) // the handover completes
		}()
		if !b.AwaitHeld(context.Background(), 1, 2) {
			t.Error("slot 2 taken over after 600 ms: AwaitHeld gave up")
		}
		if d := time.Since(start); d != 600*time.Millisecond {
			t.Errorf("AwaitHeld returned %v after the start, want at the handover at 600 ms", d)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		start = time.Now()
		if b.AwaitHeld(ctx, 2, 5) {
			t.Error("slot 5 is not held, yet AwaitHeld reports it is")
		}
		if d := time.Since(start); d != 2*time.Second {
			t.Errorf("AwaitHeld gave up after %v, want 2s", d)
		}
	})
}

// TestBoardState: the published role, epoch and firing gate round-trip;
// out-of-range slots read as nothing.
func TestBoardState(t *testing.T) {
	b := NewBoard()
	b.setPub(7, uint64(MaxEpoch)<<8|1<<7|uint64(slots.RoleSealing))
	if r, e, f := b.State(7); r != slots.RoleSealing || e != MaxEpoch || !f {
		t.Errorf("State(7) = %v %d %v", r, e, f)
	}
	if b.Holds(7) != MaxEpoch || b.Holds(8) != 0 {
		t.Errorf("Holds = %d, %d", b.Holds(7), b.Holds(8))
	}
	if r, e, f := b.State(slots.Count); r != 0 || e != 0 || f {
		t.Error("a slot out of range has a state")
	}
}
