package node

// The writer's side of the circuit breaker per callback host
// (dispatch.Breakers; API.md "Circuit breaker", DESIGN.md): holding the
// fires of a host whose circuit is open, and releasing them, ramped, when
// it closes.
//
// A held fire changes nothing in its record: no attempt is counted, no
// retry spent, no intent written. Its wheel entry is filed again at the
// circuit's next probe time, and its record stays due in the store, so a
// restart while it is held fires it (the breaker starts closed). The
// writer remembers the held fires (bounded) to release them as soon as the
// circuit closes instead of at their next probe time.

import (
	"fmt"
	"slices"
	"time"

	"github.com/chime-scheduler/chime/node/dispatch"
	"github.com/chime-scheduler/chime/storage"
)

// maxHeld bounds the fires the writer remembers as held; one beyond it is
// still held (re-filed at the next probe time) but not released early.
const maxHeld = 100_000

// maxCircuitLabels bounds the hosts the circuit gauges carry: beyond it
// the closed ones are dropped.
const maxCircuitLabels = 256

// heldFires is the fires held per host: task id -> its due wake.
type heldFires struct {
	by     map[string]map[string]int64
	n      int
	labels map[string]bool // hosts with circuit gauges: open or not
}

// gate decides, for a fire that firing.Begin has just started on t (a copy
// of the record), whether it may go. When it may not, it remembers the
// fire as held and returns the time to file the task's entry at.
func (w *writer) gate(host string, t *storage.Task, due, now int64) (ok bool, retry int64) {
	inf := t.Inflight
	ok, at := w.breakers.Allow(host, dispatch.AttemptID{Task: t.ID, Seq: inf.Seq, Attempt: inf.Attempt}, time.Unix(0, now))
	if ok {
		w.unhold(t.ID, host)
		return true, 0
	}
	w.metrics.CircuitHolds.Inc()
	if w.held.by == nil {
		w.held.by = make(map[string]map[string]int64)
	}
	m := w.held.by[host]
	if _, there := m[t.ID]; !there && w.held.n < maxHeld {
		if m == nil {
			m = make(map[string]int64)
			w.held.by[host] = m
		}
		m[t.ID] = due
		w.held.n++
		w.breakers.SetHeld(host, len(m))
		w.metrics.CircuitHeld.WithLabelValues(host).Set(float64(len(m)))
	}
	return false, w.heldWake(at.UnixNano(), now)
}

// heldWake is when a held fire's entry is filed for at: no earlier than
// just after now, and inside the loop's loaded window (a wake beyond it is
// left to the loader, which scans forward from the frontier and so would
// not see a record whose due time has passed).
func (w *writer) heldWake(at, now int64) int64 {
	return min(max(at, now+1), now+int64(w.cfg.Window/2))
}

// unhold forgets a held fire that goes now (as the probe).
func (w *writer) unhold(id, host string) {
	m := w.held.by[host]
	if _, ok := m[id]; !ok {
		return
	}
	delete(m, id)
	w.held.n--
	w.breakers.SetHeld(host, len(m))
	w.metrics.CircuitHeld.WithLabelValues(host).Set(float64(len(m)))
}

// recordCircuit tells the breaker the result r and acts on its change: an
// opening is noted; a failed probe wakes the earliest held fire at the
// next probe time (the others wait for the closing) and reports spare: the
// probe's attempt spends no retry; a closing is noted and releases the
// host's held fires, earliest due first, ramped (dispatch.ReleaseDelay).
func (w *writer) recordCircuit(g *syncGroup, r *dispatch.Result, now int64) (spare bool) {
	if r.Outcome == dispatch.OutcomeDenied || r.Err == dispatch.Shutdown {
		return false // never sent: says nothing about the host
	}
	host := dispatch.HostKey(r.Job.URL)
	id := dispatch.AttemptID{Task: r.Job.TaskID, Seq: r.Job.Seq, Attempt: r.Job.Attempt}
	switch w.breakers.Record(host, id, r.FinishedAt, dispatch.IsOutage(r)) {
	case dispatch.CircuitOpened:
		w.labelCircuit(host, true)
		w.log.Warn("callback circuit opened: holding the host's fires", "host", host)
		if w.circuitEvent != nil {
			w.circuitEvent("circuit", "circuit of "+host+" opened: its fires are held")
		}
	case dispatch.CircuitProbeFailed:
		if next := w.breakers.NextProbe(host); !next.IsZero() {
			first, firstDue := "", int64(0)
			for id, due := range w.held.by[host] {
				if first == "" || due < firstDue || due == firstDue && id < first {
					first, firstDue = id, due
				}
			}
			if first != "" {
				g.wakes = append(g.wakes, wakeChange{ID: first, At: w.heldWake(next.UnixNano(), now)})
			}
		}
		return true
	case dispatch.CircuitClosedAgain:
		m := w.held.by[host]
		delete(w.held.by, host)
		w.held.n -= len(m)
		w.labelCircuit(host, false)
		w.log.Info("callback circuit closed: releasing the held fires", "host", host, "held", len(m))
		if w.circuitEvent != nil {
			w.circuitEvent("circuit", fmt.Sprintf("circuit of %s closed: %d held fires released", host, len(m)))
		}
		ids := make([]string, 0, len(m))
		for id := range m {
			ids = append(ids, id)
		}
		slices.SortFunc(ids, func(a, b string) int {
			if m[a] != m[b] {
				if m[a] < m[b] {
					return -1
				}
				return 1
			}
			if a < b {
				return -1
			}
			return 1
		})
		first := w.breakers.Config().RampStart
		for i, id := range ids {
			g.wakes = append(g.wakes, wakeChange{ID: id, At: w.heldWake(now+int64(dispatch.ReleaseDelay(i, first)), now)})
		}
	}
	return false
}

// labelCircuit sets host's circuit gauges: open (held counted from 0) or
// closed (0 held), dropping closed hosts' labels beyond maxCircuitLabels.
func (w *writer) labelCircuit(host string, open bool) {
	if w.held.labels == nil {
		w.held.labels = make(map[string]bool)
	}
	w.held.labels[host] = open
	v := 0.0
	if open {
		v = 1
	}
	w.metrics.CircuitOpen.WithLabelValues(host).Set(v)
	w.metrics.CircuitHeld.WithLabelValues(host).Set(0)
	w.breakers.SetHeld(host, 0)
	if len(w.held.labels) <= maxCircuitLabels {
		return
	}
	for h, o := range w.held.labels {
		if !o {
			delete(w.held.labels, h)
			w.metrics.CircuitOpen.DeleteLabelValues(h)
			w.metrics.CircuitHeld.DeleteLabelValues(h)
		}
	}
}
