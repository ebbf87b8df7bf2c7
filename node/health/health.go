// Package health is the safety net (issue 18): what an operator must see within
// seconds when acknowledged tasks stop firing, whatever the cause.
//
//   - Stalled slots: slots the table names this node owner that have not
//     been firing for Config.OverdueAfter or longer (no lease, not taken
//     over, unavailable). The ownership executor checks every slot each
//     second (node/ownership, stalls.go).
//   - Overdue tasks: tasks in the slots this node owns that were due more
//     than OverdueAfter ago and have not fired: a due index scan of the
//     overdue part only, every ScanEvery (Monitor.Scan). Normally
//     it finds nothing and costs one index seek per owned slot that may
//     hold due keys (the store's in-memory marks; none on an idle node).
//
// Both are metrics (chime_slots_stalled, chime_tasks_overdue), fields of
// GET /v1/stats, a red figure and red slots on the dashboard, and reasons
// in /readyz. GET /v1/stats (Stats) reports them with the node's metrics.
// The Monitor reaches the node only through the Deps it is built with.

package health

import (
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/chime-scheduler/chime/node/ownership"
)

// ScanEvery is how often the overdue scan runs.
const ScanEvery = 2 * time.Second

// overdueMax caps the overdue count: the scan stops there.
const overdueMax = 1_000_000

// StallReport is the last stall check (the ownership executor's).
type StallReport = ownership.StallReport

// Deps is the node as the Monitor sees it.
type Deps struct {
	// ScanDue calls f for each due index entry of the slots this node
	// owns whose wake time is at most to (Unix ns), until f returns false.
	ScanDue func(to int64, f func() bool) error
	// Quiet reports whether a scan's error is not worth a warning (the
	// store is closing).
	Quiet func(error) bool
	Now   func() time.Time
	Log   *slog.Logger
}

// Monitor holds the safety net's last readings.
type Monitor struct {
	after   time.Duration // Config.OverdueAfter
	d       Deps
	stalled atomic.Pointer[StallReport]
	overdue atomic.Int64 // -1 before the first scan
}

// New builds a Monitor for tasks overdue by more than after.
func New(after time.Duration, d Deps) *Monitor {
	m := &Monitor{after: after, d: d}
	m.overdue.Store(-1)
	return m
}

// NoteStalls records the ownership executor's last stall check.
func (m *Monitor) NoteStalls(r *StallReport) { m.stalled.Store(r) }

// Stalled returns the last stall report (empty for a standalone node).
func (m *Monitor) Stalled() *StallReport {
	if r := m.stalled.Load(); r != nil {
		return r
	}
	return &StallReport{}
}

// Overdue returns the last overdue count: -1 before the first scan.
func (m *Monitor) Overdue() int64 { return m.overdue.Load() }

// Scan counts the overdue tasks; the node runs it every ScanEvery.
func (m *Monitor) Scan() {
	c, err := m.countOverdue(m.d.Now())
	if err != nil {
		if !m.d.Quiet(err) {
			m.d.Log.Warn("overdue scan", "err", err)
		}
		return
	}
	old := m.overdue.Swap(c)
	if c > 0 && old <= 0 {
		m.d.Log.Error("acknowledged tasks overdue: due and not fired", "tasks", c, "for_over", m.after)
	}
}

// countOverdue counts the due index entries of the slots this node owns
// whose wake time is more than OverdueAfter before now (at most overdueMax).
func (m *Monitor) countOverdue(now time.Time) (int64, error) {
	to := now.Add(-m.after).UnixNano()
	var c int64
	err := m.d.ScanDue(to, func() bool {
		c++
		return c < overdueMax
	})
	return c, err
}

// Reasons says why this node is degraded (no reasons: it is not):
// stalled slots and overdue tasks.
func (m *Monitor) Reasons() []string {
	var out []string
	if r := m.Stalled(); len(r.Slots) > 0 {
		var why []string
		for _, k := range slices.Sorted(maps.Keys(r.Reasons)) {
			why = append(why, fmt.Sprintf("%d %s", r.Reasons[k], k))
		}
		out = append(out, fmt.Sprintf("%d owned slots not firing for over %v (%s; e.g. slot %d)",
			len(r.Slots), m.after, strings.Join(why, ", "), r.Slots[0]))
	}
	if c := m.overdue.Load(); c > 0 {
		out = append(out, fmt.Sprintf("%d tasks due over %v ago not fired", c, m.after))
	}
	return out
}
