package node

import (
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/chime-scheduler/chime/slots"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestJoinMovesSlotsWithTheirTasks: tasks stored on a lone node; a second
// node joins before they are due and takes about half of the slots. The
// joiner catches up on those slots as the first node's follower and takes
// each by a sealed handover; every task fires exactly once, never early,
// and by the node that owns its slot once the join is done (the handovers
// end before the due time: fake time makes that certain). Then tasks are
// created through the first node (the joiner's part forwarded to it and
// replicated back) and the joiner leaves before they are due: the first
// node (its follower, holding the replicas) fires all of them, each once.
func TestJoinMovesSlotsWithTheirTasks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newFaultCluster(t, 1, 31)
		const n = 200
		// The join takes ~1.5 s of fake time (gossip, settle, catch-up,
		// handovers).
		due := time.Now().Add(4 * time.Second)
		if ok := c.createVia(0, ids("m", n, c.table(0), nil), due, 0); ok != n {
			t.Fatalf("%d of %d creates acknowledged", ok, n)
		}
		b := c.add()
		c.start(b, c.seeds(1))
		c.waitReady(0, b)
		joined := time.Now()
		if !joined.Before(due) {
			t.Fatalf("n2 ready at %v, after the due time %v: the handovers were not over", sinceEpoch(joined), sinceEpoch(due))
		}
		want := map[string]int{}
		for i := range n {
			o, _ := c.nodes[0].n.view.Load().owner(slots.Of(fmt.Sprintf("m-%d", i)))
			want[o.Name]++
		}
		if want["n1"] == 0 || want["n2"] == 0 {
			t.Fatalf("owners %v; the test needs both", want)
		}
		c.settle(due.Add(10 * time.Second))
		checkOnce(t, c.rcv.all(), n)
		// Each task fired on the node that held its slot at its due time:
		// after the join, its table owner.
		fa, fb := fired(c, 0), fired(c, b)
		if fa != want["n1"] || fb != want["n2"] {
			t.Errorf("n1 fired %d and n2 %d; their slots hold %d and %d", fa, fb, want["n1"], want["n2"])
		}
		for _, f := range c.rcv.all() {
			if o, _ := c.table(0).Owner(f.Slot); f.Node != o.Name {
				t.Errorf("%s fired by %s, its slot's owner is %s", f, f.Node, o.Name)
			}
		}

		// Tasks created through n1, then n2 leaves before they are due (its
		// drain and leave take ~3 s of fake time).
		left := time.Now().Add(5 * time.Second)
		if ok := c.createVia(0, ids("l", n, c.table(0), nil), left, 0); ok != n {
			t.Fatalf("%d of %d creates acknowledged", ok, n)
		}
		c.stop(b)
		if !time.Now().Before(left) {
			t.Errorf("n2 left at %v, after the due time %v", fakeClock{}, sinceEpoch(left))
		}
		c.settle(left.Add(10 * time.Second))
		all := c.rcv.all()
		checkOnce(t, all, 2*n)
		for _, f := range all {
			if strings.HasPrefix(f.TaskID, "l-") && f.Node != "n1" {
				t.Errorf("%s: sent by %s after n2 left", f, f.Node)
			}
		}
		report(t, c.check(checkOpts{}))
		c.close()
	})
}

// fired returns how many callbacks node i sent successfully.
func fired(c *faultCluster, i int) int {
	return int(testutil.ToFloat64(c.nodes[i].n.metrics.firesSuccess))
}

// checkOnce checks that the fires are n distinct tasks, each fired once
// and none before its due time.
func checkOnce(t *testing.T, fs []fire, n int) {
	t.Helper()
	seen := map[string]int{}
	for _, f := range fs {
		seen[f.TaskID]++
		if f.At.Before(f.Due) {
			t.Errorf("%s fired %v early", f.TaskID, f.Due.Sub(f.At))
		}
	}
	for id, k := range seen {
		if k != 1 {
			var how []string
			for _, f := range fs {
				if f.TaskID == id {
					how = append(how, fmt.Sprintf("%s attempt %d", f, f.Attempt))
				}
			}
			t.Errorf("%s fired %d times: %v", id, k, how)
		}
	}
	if len(seen) != n {
		t.Errorf("%d distinct tasks fired, want %d", len(seen), n)
	}
}
