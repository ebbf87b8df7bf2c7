package schedule

import (
	"github.com/chime-scheduler/chime/storage"
	"github.com/robfig/cron/v3"
)

// Bounds of max_catchup (API.md "Task request body").
const (
	DefaultMaxCatchup = 100
	MaxMaxCatchup     = 10000
)

// MaxCatchup returns spec's effective max_catchup: its own, or the default
// for a record stored before the field existed (0).
func MaxCatchup(spec *storage.Spec) int {
	if spec.MaxCatchup > 0 {
		return int(min(spec.MaxCatchup, MaxMaxCatchup))
	}
	return DefaultMaxCatchup
}

// maxCatchupWalk bounds how many cron occurrences Catchup enumerates one by
// one; beyond it the number skipped is estimated (see Catchup).
const maxCatchupWalk = 1 << 14

// fixedPeriod returns the period of a fixed-rate schedule whose grid goes
// through anchor (every_ms, and cron "@every d" as NextDue steps it), or
// false for a calendar cron.
func fixedPeriod(spec *storage.Spec, anchor int64) (int64, bool) {
	switch spec.Kind {
	case storage.KindEvery:
		p, err := everyNs(spec)
		return p, err == nil
	case storage.KindCron:
		c, err := Compile(spec.Cron, spec.Timezone)
		if err != nil {
			return 0, false
		}
		if d, ok := c.sched.(cron.ConstantDelaySchedule); ok && anchor >= spec.StartAt && d.Delay > 0 {
			return int64(d.Delay), true
		}
	}
	return 0, false
}

// Catchup bounds misfire fire_all (API.md "max_catchup"): due is the
// task's first missed occurrence, now the time its fire starts and limit
// its max_catchup. Of the occurrences from due up to now (and not after
// end_at), only the limit most recent fire: Catchup returns the first of
// them and how many earlier ones are skipped (0, due when there are at most
// limit). For fixed-rate schedules the count is exact arithmetic; a
// calendar cron is walked occurrence by occurrence, and beyond
// maxCatchupWalk occurrences (16384, about 25 ms) the rest of the skipped count is estimated from
// the walked part's mean interval (the fires are still exactly the most
// recent limit).
func Catchup(spec *storage.Spec, due, now int64, limit int) (start int64, skipped uint64) {
	end := now
	if spec.EndAt != 0 && spec.EndAt < end {
		end = spec.EndAt
	}
	if due <= 0 || due > end || limit <= 0 {
		return due, 0
	}
	if p, ok := fixedPeriod(spec, due); ok {
		n := uint64((end-due)/p) + 1
		if n <= uint64(limit) {
			return due, 0
		}
		skipped = n - uint64(limit)
		return due + int64(skipped)*p, skipped
	}
	// A calendar cron: the common case, at most limit missed, costs at most
	// limit+1 steps and no allocation.
	cur, steps := due, 0
	for cur != 0 && cur <= end && steps <= limit {
		steps++
		cur = advanceOcc(spec, cur)
	}
	if steps <= limit {
		return due, 0
	}
	// More than limit: keep the last limit occurrences in a ring.
	ring := make([]int64, limit)
	// walk records the occurrences from from up to end in the ring, the
	// k-th at (off+k)%limit; it stops early at bound (>0) and returns the
	// occurrence it stopped at, else 0.
	walk := func(from int64, bound, off int) (stop int64, n int) {
		for at := from; at != 0 && at <= end; at = advanceOcc(spec, at) {
			if bound > 0 && n >= bound {
				return at, n
			}
			ring[(off+n)%limit] = at
			n++
		}
		return 0, n
	}
	stop, n := walk(due, maxCatchupWalk, 0)
	if stop == 0 {
		return ring[n%limit], uint64(n - limit)
	}
	// Too many to enumerate: find the most recent limit in a window before
	// end, doubled until it holds limit of them, and estimate how many lie
	// between the walked part and the window.
	interval := max((stop-due)/int64(n), 1)
	w := interval * int64(limit) * 2
	for {
		ws := end - w
		if ws <= stop {
			// The window reaches the walked part: finish the walk.
			_, m := walk(stop, 0, n)
			return ring[(n+m)%limit], uint64(n + m - limit)
		}
		first := advanceOcc(spec, ws-1)
		if _, m := walk(first, 0, 0); m >= limit {
			between := uint64(max((first-stop)/interval, 0))
			return ring[m%limit], uint64(n) + between + uint64(m-limit)
		}
		w *= 2
	}
}

// advanceOcc is NextDue: the occurrence after at.
func advanceOcc(spec *storage.Spec, at int64) int64 {
	next := NextDue(spec, at)
	if next <= at {
		return 0
	}
	return next
}

// Occurrences returns the occurrences of spec in [from, to] (not before
// start_at) for a backfill: the first, the last and how many, counting at
// most limit+1 for a calendar cron (n > limit means "more than limit");
// fixed-rate schedules are counted exactly, on the grid through anchor (the
// task's next or last due time; 0 = start_at, else from). n is 0 when there
// is none.
func Occurrences(spec *storage.Spec, anchor, from, to int64, limit int) (first, last int64, n uint64) {
	if spec.StartAt > from {
		from = spec.StartAt
	}
	if from > to {
		return 0, 0, 0
	}
	if anchor == 0 {
		anchor = spec.StartAt
	}
	if anchor == 0 {
		anchor = from
	}
	if p, ok := fixedPeriod(spec, anchor); ok {
		// The first grid point anchor + k·p at or after from (k may be
		// negative). Instants are within ±10 years of each other here, so
		// nothing overflows.
		d := from - anchor
		k := d / p
		if d > 0 && d%p != 0 {
			k++
		}
		first = anchor + k*p
		if first > to {
			return 0, 0, 0
		}
		n = uint64((to-first)/p) + 1
		return first, first + int64(n-1)*p, n
	}
	first = advanceOcc(spec, from-1)
	if first == 0 || first > to {
		return 0, 0, 0
	}
	for at := first; at != 0 && at <= to && n <= uint64(limit); at = advanceOcc(spec, at) {
		last = at
		n++
	}
	return first, last, n
}
