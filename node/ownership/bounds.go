package ownership

import "time"

// The firing slots' bounds (slots/horizon.go) reach the data path in two
// halves around the firing bits of a step: what the machine lowered
// before them (a slot that starts firing is bounded before its bit goes
// up), what it raised after them (a slot whose right ended stops before
// its bound is lifted). Board.Fires reads them.

// unixNano returns t in Unix ns, 0 for the zero time.
func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// lowerBounds publishes the machine's bounds where they are lower than
// the board's, and queues the near bounds it changed for raiseBounds.
func (e *Executor) lowerBounds() {
	if h := unixNano(e.m.Horizon()); h < e.b.horizon.Load() {
		e.b.horizon.Store(h)
	}
	n := len(e.nearRaise)
	e.nearRaise = e.m.TakeNearChanges(e.nearRaise)
	for _, s := range e.nearRaise[n:] {
		v, old := unixNano(e.m.Near(s)), e.b.near[s].Load()
		if v != 0 && (old == 0 || v < old) {
			e.b.near[s].Store(v)
		}
	}
}

// raiseBounds publishes the machine's bounds as they are, once the firing
// bits of the step are out.
func (e *Executor) raiseBounds() {
	e.b.horizon.Store(unixNano(e.m.Horizon()))
	for _, s := range e.nearRaise {
		e.b.near[s].Store(unixNano(e.m.Near(s)))
	}
	e.nearRaise = e.nearRaise[:0]
}
