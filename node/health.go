package node

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/chime-scheduler/chime/node/ownership"
	"github.com/chime-scheduler/chime/storage"
)

// This file is the safety net (issue 18): what an operator must see within
// seconds when acknowledged tasks stop firing, whatever the cause.
//
//   - Stalled slots: slots the table names this node owner that have not
//     been firing for Config.OverdueAfter or longer (no lease, not taken
//     over, unavailable). The ownership executor checks every slot each
//     few ticks (node/ownership, stalls.go).
//   - Overdue tasks: tasks in the slots this node owns that were due more
//     than OverdueAfter ago and have not fired: a due index scan of the
//     overdue part only, every overdueScanEvery (watchOverdue). Normally
//     it finds nothing and costs one index seek per owned slot that holds
//     keys.
//
// Both are metrics (chime_slots_stalled, chime_tasks_overdue), fields of
// GET /v1/stats, a red figure and red slots on the dashboard, and reasons
// in /readyz.

// overdueScanEvery is how often the overdue scan runs.
const overdueScanEvery = 2 * time.Second

// overdueMax caps the overdue count: the scan stops there.
const overdueMax = 1_000_000

// stallReport is the last stall check (the ownership executor's).
type stallReport = ownership.StallReport

// health holds the safety net's last readings.
type health struct {
	stalled atomic.Pointer[stallReport]
	overdue atomic.Int64 // -1 before the first scan
}

// stalledSlots returns the last stall report (empty for a standalone node).
func (n *Node) stalledSlots() *stallReport {
	if r := n.health.stalled.Load(); r != nil {
		return r
	}
	return &stallReport{}
}

// every runs f every d on a background goroutine until the node stops or
// f returns false.
func (n *Node) every(d time.Duration, f func() bool) {
	n.bg.Add(1)
	go func() {
		defer n.bg.Done()
		t := n.cfg.Clock.NewTicker(d)
		defer t.Stop()
		for {
			select {
			case <-n.stopBG:
				return
			case <-t.C:
			}
			if !f() {
				return
			}
		}
	}()
}

// watchOverdue counts the overdue tasks every overdueScanEvery until the
// node stops.
func (n *Node) watchOverdue() {
	n.every(overdueScanEvery, func() bool {
		c, err := n.countOverdue(n.now())
		if err != nil {
			if err != storage.ErrClosed {
				n.log.Warn("overdue scan", "err", err)
			}
			return true
		}
		old := n.health.overdue.Swap(c)
		if c > 0 && old <= 0 {
			n.log.Error("acknowledged tasks overdue: due and not fired", "tasks", c, "for_over", n.cfg.OverdueAfter)
		}
		return true
	})
}

// countOverdue counts the due index entries of the slots this node owns
// whose wake time is more than OverdueAfter before now (at most overdueMax).
func (n *Node) countOverdue(now time.Time) (int64, error) {
	to := now.Add(-n.cfg.OverdueAfter).UnixNano()
	var c int64
	err := n.store.ScanDue(n.view.Load().owns, 0, to, func(uint16, string, int64) bool {
		c++
		return c < overdueMax
	})
	return c, err
}

// healthReasons says why this node is degraded ("" reasons: it is not):
// stalled slots and overdue tasks.
func (n *Node) healthReasons() []string {
	var out []string
	if r := n.stalledSlots(); len(r.Slots) > 0 {
		var why []string
		for _, k := range slices.Sorted(maps.Keys(r.Reasons)) {
			why = append(why, fmt.Sprintf("%d %s", r.Reasons[k], k))
		}
		out = append(out, fmt.Sprintf("%d owned slots not firing for over %v (%s; e.g. slot %d)",
			len(r.Slots), n.cfg.OverdueAfter, strings.Join(why, ", "), r.Slots[0]))
	}
	if c := n.health.overdue.Load(); c > 0 {
		out = append(out, fmt.Sprintf("%d tasks due over %v ago not fired", c, n.cfg.OverdueAfter))
	}
	return out
}
