package node

import (
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/chime-scheduler/chime/slots"
)

// TestJoinMovesSlotsWithTheirTasks: tasks stored on a lone node; a second
// node joins before they are due and takes about half of the slots. The
// joiner catches up on those slots as the first node's follower and takes
// each by a sealed handover; every task fires exactly once, never early,
// on whichever node held its slot at its due time: the joiner's slots by
// the joiner once the join was done before the due time (in fake time it
// takes 1-4 s, and the tasks are due 6 s after it started). Then tasks
// are created through the first node (the joiner's part forwarded to it
// and replicated back) and the joiner leaves before they are due (its
// drain takes 3-6 s; they are due in 7): the first node (its follower,
// holding the replicas) fires all of them, each once.
func TestJoinMovesSlotsWithTheirTasks(t *testing.T) {
	t.Parallel() // fake time: it runs beside the fault tests without timing out
	synctest.Test(t, func(t *testing.T) {
		c := newFaultCluster(t, 1, 31)
		const n = 200
		// The join takes 1-4 s of fake time (gossip, settle, catch-up,
		// handovers).
		due := time.Now().Add(6 * time.Second)
		if ok := c.createVia(0, ids("m", n, c.table(0), nil), due, 0); ok != n {
			t.Fatalf("%d of %d creates acknowledged", ok, n)
		}
		b := c.add()
		c.start(b, c.seeds(1))
		c.waitReady(0, b)
		joined := time.Now()
		want := map[string]int{}
		for i := range n {
			o, _ := c.nodes[0].n.view.Load().Owner(slots.Of(fmt.Sprintf("m-%d", i)))
			want[o.Name]++
		}
		if want["n1"] == 0 || want["n2"] == 0 {
			t.Fatalf("owners %v; the test needs both", want)
		}
		// Every task fired, and a moment more for repeats (the last settle
		// listens longer).
		for len(c.rcv.all()) < n && time.Now().Before(due.Add(10*time.Second)) {
			time.Sleep(100 * time.Millisecond)
		}
		time.Sleep(500 * time.Millisecond)
		checkOnce(t, c.rcv.all(), n)
		// Until n2 has taken its slots over (sealed handovers), n1 fires
		// them: each task fires once, on whichever node held its slot at
		// its due time. Only a join done before the due time says which.
		fa, fb := fired(c, 0), fired(c, b)
		if joined.Before(due) {
			t.Logf("n2 was ready %v before the due time: each task fires on its slot's new owner", due.Sub(joined))
			if fa != want["n1"] || fb != want["n2"] {
				t.Errorf("n1 fired %d and n2 %d; their slots hold %d and %d", fa, fb, want["n1"], want["n2"])
			}
			for _, f := range c.rcv.all() {
				if o, _ := c.table(0).Owner(f.Slot); f.Node != o.Name {
					t.Errorf("%s fired by %s, its slot's owner is %s", f, f.Node, o.Name)
				}
			}
		} else {
			t.Logf("n2 was ready %v after the due time", joined.Sub(due))
			if fa+fb != n {
				t.Errorf("n1 fired %d and n2 %d, want %d in all", fa, fb, n)
			}
		}

		// Tasks created through n1, then n2 leaves before they are due.
		left := time.Now().Add(7 * time.Second)
		if ok := c.createVia(0, ids("l", n, c.table(0), nil), left, 0); ok != n {
			t.Fatalf("%d of %d creates acknowledged", ok, n)
		}
		c.stop(b)
		stopped := time.Now()
		c.settle(left.Add(10 * time.Second))
		all := c.rcv.all()
		checkOnce(t, all, 2*n)
		// n2 hands its slots back while it drains, and fires those it
		// still owns: only a leave done before the due time says that n1
		// fires all of them.
		if stopped.Before(left) {
			for _, f := range all {
				if strings.HasPrefix(f.TaskID, "l-") && f.Node != "n1" {
					t.Errorf("%s: sent by %s, which left before the due time", f, f.Node)
				}
			}
		} else {
			t.Logf("n2 left %v after the due time", stopped.Sub(left))
		}
		report(t, c.check(checkOpts{}))
		c.close()
	})
}

// fired returns how many callbacks node i sent successfully.
func fired(c *faultCluster, i int) int {
	return int(testutil.ToFloat64(c.nodes[i].n.metrics.FiresSuccess))
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
