package node

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/chime-scheduler/chime/node/ownership"
)

// TestAwaitHeld: a standalone node holds every slot; in a cluster a
// request for a slot that does not arrive waits moveWait, or until its
// request ends, then gives up. (The wake-up on the handover:
// ownership.TestAwaitHeld.)
func TestAwaitHeld(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		if !(api{&Node{}}).awaitHeld(context.Background(), 7) {
			t.Error("a standalone node does not hold slot 7")
		}
		n := &Node{ctl: ownership.NewBoard()}
		start := time.Now()
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
