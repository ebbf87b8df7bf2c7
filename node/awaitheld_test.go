package node

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/chime-scheduler/chime/slots"
)

// TestAwaitHeld: a request for a slot moving to this node waits for the
// handover (up to moveWait), then gives up; a standalone node holds every
// slot.
func TestAwaitHeld(t *testing.T) {
	hold := func(c *ctl, s uint16, epoch uint64) {
		c.pub[s].Store(epoch<<8 | uint64(slots.RoleOwner))
	}
	synctest.Test(t, func(t *testing.T) {
		if !(api{&Node{}}).awaitHeld(context.Background(), 7) {
			t.Error("a standalone node does not hold slot 7")
		}
		n := &Node{ctl: &ctl{}}
		hold(n.ctl, 1, 3)
		start := time.Now()
		if !(api{n}).awaitHeld(context.Background(), 1) || time.Since(start) != 0 {
			t.Errorf("a held slot waited %v", time.Since(start))
		}
		go func() {
			time.Sleep(300 * time.Millisecond)
			hold(n.ctl, 2, 4) // the handover completes
		}()
		if !(api{n}).awaitHeld(context.Background(), 1, 2) {
			t.Error("slot 2 taken over after 300 ms: awaitHeld gave up")
		}
		if d := time.Since(start); d < 300*time.Millisecond || d > 310*time.Millisecond {
			t.Errorf("awaitHeld returned %v after the start, want just after the handover at 300 ms", d)
		}
		start = time.Now()
		if (api{n}).awaitHeld(context.Background(), 2, 5) {
			t.Error("slot 5 is not held, yet awaitHeld reports it is")
		}
		if d := time.Since(start); d != moveWait {
			t.Errorf("awaitHeld gave up after %v, want %v", d, moveWait)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		start = time.Now()
		if (api{n}).awaitHeld(ctx, 5) || time.Since(start) != 100*time.Millisecond {
			t.Errorf("a cancelled request waited %v", time.Since(start))
		}
	})
}
