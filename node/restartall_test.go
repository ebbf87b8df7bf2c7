package node

import (
	"testing"
	"testing/synctest"
	"time"
)

// The whole cluster stops, one node after another as scripts/cluster.sh
// down does (each drains before the next stops, so the last holds every
// slot and saves no voter but itself, or none), and starts again on its
// disks, with tasks due after the restart: every node must be ready again
// and every acknowledged task fire. It found two bugs: a node that saved
// no voter counted 0 of 0, never a majority, and never acted
// (slots.Voters); and the last node held every slot's epoch as a
// restarted owner that gave no grant, while the new table gave most slots
// to others, which asked only their table follower for a copy, never it:
// unavailable for good (slots/rules.go, advance: such an owner now takes
// the epoch back wherever the table puts it, and hands it on). Without
// either fix the nodes are not ready after a minute.
func TestFaultWholeClusterRestart(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c := newFaultCluster(t, 3, 31)
		first := time.Now().Add(60 * time.Second) // after the restart
		c.create(ids("restart", 60, c.table(0), nil), first, 50*time.Millisecond)
		for i := range 3 {
			c.stop(i)
		}
		for i := range 3 {
			c.start(i, c.seeds(3))
		}
		c.waitReady(0, 1, 2)
		sleepUntil(first)
		c.settle(first.Add(3*time.Second + faultsSettle))
		report(t, c.check(checkOpts{}))
		c.close()
	})
}
