package node

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/chime-scheduler/chime/node/clock"
)

// TestEveryOnTheMultiples: Node.every runs f on the multiples of its
// period since the Unix epoch whenever it starts (the beat an idle node's
// other periodic work keeps), and stops with the node.
func TestEveryOnTheMultiples(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := &Node{cfg: Config{Clock: clock.Real}, stopBG: make(chan struct{})}
		every := 2 * time.Second
		time.Sleep(370 * time.Millisecond) // start off the beat
		runs := make(chan time.Time, 8)
		n.every(every, func() bool { runs <- time.Now(); return true })
		for range 3 {
			if at := <-runs; at.UnixNano()%int64(every) != 0 {
				t.Errorf("a run at %v, %v past a multiple of %v", at, time.Duration(at.UnixNano()%int64(every)), every)
			}
		}
		close(n.stopBG)
		n.bg.Wait()
	})
}
