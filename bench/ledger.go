package bench

import (
	"sync/atomic"
	"time"
)

// fireLedger remembers, per task of one run, when its first delivery
// arrived and how many 2xx deliveries it got, so a run can split its fires
// by owner and by due-time window after the fact. Tasks are the indexes of
// ids prefix<i>. It is safe for concurrent use: Receiver handlers call
// observe, the workload reads once the fires are in.
type fireLedger struct {
	prefix string
	first  []atomic.Int64  // unix ns of the first 2xx delivery; 0 = none yet
	count  []atomic.Uint32 // 2xx deliveries
}

func newFireLedger(prefix string, n int) *fireLedger {
	return &fireLedger{prefix: prefix, first: make([]atomic.Int64, n), count: make([]atomic.Uint32, n)}
}

// observe is a ReceiverConfig.Observe: it records a delivery of one of the
// ledger's fires and ignores everything else.
func (l *fireLedger) observe(fireID string, arrival time.Time, delivered bool) {
	if !delivered {
		return
	}
	i, ok := fireIndex(fireID, l.prefix, len(l.first))
	if !ok {
		return
	}
	l.count[i].Add(1)
	l.first[i].CompareAndSwap(0, arrival.UnixNano())
}

// arrival returns when task i was first delivered; ok is false if never.
func (l *fireLedger) arrival(i int) (time.Time, bool) {
	ns := l.first[i].Load()
	return time.Unix(0, ns), ns != 0
}

// WindowStats are the fires of a set of tasks whose dues fall in one time
// window, e.g. the survivors' tasks due while a killed node was being
// detected.
type WindowStats struct {
	// From and To bound the due times, [From, To), in seconds relative to
	// the run's event (the kill, the join); FromTime and ToTime are the
	// same instants.
	From     float64   `json:"from_seconds"`
	To       float64   `json:"to_seconds"`
	FromTime time.Time `json:"from"`
	ToTime   time.Time `json:"to"`
	// Tasks is how many tasks of the set were due in the window; Fired
	// how many of them were delivered, Missed how many were not.
	Tasks  int `json:"tasks"`
	Fired  int `json:"fired"`
	Missed int `json:"missed"`
	// Duplicates counts 2xx deliveries beyond the first.
	Duplicates int `json:"duplicates"`
	// Late counts fires that arrived more than the run's late threshold
	// after their due.
	Late int `json:"late"`
	// Lateness summarizes first arrival − due of the fired tasks
	// (early arrivals as 0; the receiver counts them apart).
	Lateness Summary `json:"lateness"`
}

// window summarizes the tasks i < n selected by in whose due (dueOf) lies
// in [from, to). event is the instant From and To are relative to.
func (l *fireLedger) window(from, to, event time.Time, dueOf func(int) time.Time, in func(int) bool, lateAfter time.Duration) WindowStats {
	ws := WindowStats{From: from.Sub(event).Seconds(), To: to.Sub(event).Seconds(), FromTime: from, ToTime: to}
	var h Histogram
	for i := range l.first {
		due := dueOf(i)
		if due.Before(from) || !due.Before(to) || !in(i) {
			continue
		}
		ws.Tasks++
		at, ok := l.arrival(i)
		if !ok {
			ws.Missed++
			continue
		}
		ws.Fired++
		ws.Duplicates += int(l.count[i].Load()) - 1
		late := at.Sub(due)
		if late > lateAfter {
			ws.Late++
		}
		h.RecordDuration(late)
	}
	ws.Lateness = h.Summary()
	return ws
}

// firstAfter returns the earliest first delivery among the tasks selected
// by in; ok is false when none was delivered.
func (l *fireLedger) firstAfter(in func(int) bool) (time.Time, bool) {
	var best int64
	for i := range l.first {
		if ns := l.first[i].Load(); ns != 0 && in(i) && (best == 0 || ns < best) {
			best = ns
		}
	}
	return time.Unix(0, best), best != 0
}
