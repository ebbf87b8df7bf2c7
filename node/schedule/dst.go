package schedule

import (
	"time"

	"github.com/chime-scheduler/chime/storage"
	"github.com/robfig/cron/v3"
)

// Daylight saving (API.md "Daylight saving"). A cron expression matches
// local wall-clock times; a zone's transitions make some wall-clock times
// not exist (spring forward: a gap) and some occur twice (fall back: an
// overlap). The cron library, asked in the task's zone, skips the first and
// fires the second twice, and searches the hours of the day in a way that
// does not say which happened. So the library is asked in UTC instead, where
// wall clock and real time coincide, for the candidate wall-clock times, and
// each candidate is mapped to real instants in the zone here:
//
//   - a wall time that exists once fires once;
//   - a wall time in a gap fires, with gap "shift" (the default), at the
//     first instant after the gap, the transition itself (02:30 on a day
//     that jumps 02:00→03:00 fires at 03:00 new time); with "skip" it does
//     not fire. Several candidates of one gap (*/15 2 * * *) shift to the
//     same instant, and that instant fires once: the fire sequence is the
//     increasing sequence of distinct instants;
//   - a wall time in an overlap fires, with overlap "first" (the default),
//     at its first occurrence only (old offset); with "both" at both.
//
// The same mapping serves 5- and 6-field expressions and the wall-clock
// descriptors (@daily, @hourly, …). "@every d" is not wall clock (fixed rate
// in real time) and the policy does not apply to it. A zone without
// transitions maps every wall time to one instant.

// Moved says how a DST rule moved a fire from the wall-clock time the
// expression names; "" for a fire at its own time.
type Moved string

// Moved values.
const (
	MovedNone          Moved = ""
	MovedGapShift      Moved = "gap-shift"      // the named time did not exist; fired at the gap's end
	MovedOverlapSecond Moved = "overlap-second" // the second of a repeated time (overlap "both")
)

// maxWallSteps bounds the candidates examined for one next occurrence: a
// 6-field expression firing every second across a 2-hour overlap examines
// 7,200. It is a safety net, never hit by a real zone.
const maxWallSteps = 100_000

// day is the window around an instant in which zone offsets are looked up:
// real zones never have two transitions within it.
const day = 24 * 60 * 60

// offsetAt returns loc's UTC offset in seconds at the Unix second sec.
func offsetAt(loc *time.Location, sec int64) int64 {
	_, off := time.Unix(sec, 0).In(loc).Zone()
	return int64(off)
}

// nearOffsets returns the smallest and largest offset of loc within a day of
// the Unix second sec.
func nearOffsets(loc *time.Location, sec int64) (lo, hi int64) {
	a, b, c := offsetAt(loc, sec-day), offsetAt(loc, sec), offsetAt(loc, sec+day)
	return min(a, b, c), max(a, b, c)
}

// wallInstants maps a wall-clock time (Unix seconds of the same fields read
// as UTC, plus nanoseconds) to the real instants (Unix ns) it names in loc,
// first one first, under the policy: none, one (possibly the shifted gap
// end) or two (overlap "both").
func wallInstants(loc *time.Location, wallSec int64, ns int64, gap storage.DSTGap, overlap storage.DSTOverlap) (out [2]int64, moved [2]Moved, n int) {
	before, after := offsetAt(loc, wallSec-day), offsetAt(loc, wallSec+day)
	for _, off := range []int64{before, after} {
		t := wallSec - off
		if offsetAt(loc, t) != off || (n == 1 && out[0] == t*1e9+ns) {
			continue
		}
		out[n], n = t*1e9+ns, n+1
	}
	switch n {
	case 2:
		if out[1] < out[0] {
			out[0], out[1] = out[1], out[0]
		}
		if overlap != storage.DSTOverlapBoth {
			return out, moved, 1
		}
		moved[1] = MovedOverlapSecond
		return out, moved, 2
	case 1:
		return out, moved, 1
	}
	// A gap: the wall time lies between the last instant of the old offset
	// and the transition. The transition is the end of the zone period in
	// effect just before it.
	if gap == storage.DSTGapSkip {
		return out, moved, 0
	}
	_, end := time.Unix(wallSec-max(before, after), 0).In(loc).ZoneBounds()
	if end.IsZero() {
		return out, moved, 0
	}
	out[0], moved[0] = end.UnixNano(), MovedGapShift
	return out, moved, 1
}

// nextFire returns the first instant strictly after ns (Unix ns) at which
// the wall-clock schedule c fires under the DST policy, and how it was
// moved; 0 when there is none (as next).
func (c Compiled) nextFire(ns int64, gap storage.DSTGap, overlap storage.DSTOverlap) (int64, Moved) {
	if c.loc == time.UTC {
		return c.next(ns), MovedNone
	}
	if _, ok := c.sched.(cron.ConstantDelaySchedule); ok {
		return c.next(ns), MovedNone // fixed rate: real time, no DST
	}
	sec := floorDiv(ns, 1e9)
	// Every wall time whose instant is after ns is after ns + the smallest
	// offset nearby (offsets differ by hours, so far-away candidates are far
	// later anyway).
	lo, _ := nearOffsets(c.loc, sec)
	w := time.Unix(0, ns).UTC().Add(time.Duration(lo) * time.Second)
	best, bestMoved := int64(0), MovedNone
	for range maxWallSteps {
		w = c.sched.Next(w)
		if w.IsZero() {
			break
		}
		wallSec := w.Unix()
		if best != 0 {
			// No later wall time maps before wallSec - (largest offset nearby).
			if _, hi := nearOffsets(c.loc, wallSec); (wallSec-hi)*1e9 > best {
				break
			}
		}
		ts, moved, n := wallInstants(c.loc, wallSec, int64(w.Nanosecond()), gap, overlap)
		for i := range n {
			t := ts[i]
			if t <= ns {
				continue
			}
			// A real occurrence at the same instant as a shifted one wins.
			if best == 0 || t < best || (t == best && moved[i] == MovedNone) {
				best, bestMoved = t, moved[i]
			}
		}
	}
	if best == 0 || best > lastInstant.UnixNano() {
		return 0, MovedNone
	}
	return best, bestMoved
}

// floorDiv is a/b rounded toward minus infinity, for b > 0.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b < 0 {
		q--
	}
	return q
}

// Transition is a change of a zone's UTC offset.
type Transition struct {
	At                        time.Time
	OffsetBefore, OffsetAfter int // seconds east of UTC
}

// NextTransition returns the first change of tz's UTC offset strictly after
// from, within 10 years; ok is false for a zone without one (UTC, Asia/Tokyo,
// a zone that abolished DST). Changes of only the abbreviation or the DST
// flag are passed over.
func NextTransition(tz string, from time.Time) (tr Transition, ok bool, err error) {
	loc, err := loadZone(tz)
	if err != nil {
		return Transition{}, false, err
	}
	t := from.In(loc)
	_, before := t.Zone()
	limit := from.Add(MaxSpan)
	for range 100 {
		_, end := t.ZoneBounds()
		if end.IsZero() || end.After(limit) {
			return Transition{}, false, nil
		}
		t = end.In(loc)
		if _, off := t.Zone(); off != before {
			return Transition{At: end.UTC(), OffsetBefore: before, OffsetAfter: off}, true, nil
		}
	}
	return Transition{}, false, nil
}

// Fire is one occurrence of a preview.
type Fire struct {
	At    int64 // Unix ns
	Moved Moved
}

// Preview returns up to n occurrences of spec starting with first (an
// occurrence, e.g. FirstDue's answer or a stored task's NextDue) and before
// until (Unix ns, 0 = no bound), each flagged with how a DST rule moved it.
// It is what the task would fire, by NextDue from each logical due time.
func Preview(spec *storage.Spec, first, until int64, n int) []Fire {
	var out []Fire
	for due := first; due != 0 && len(out) < n && (until == 0 || due < until); {
		f := Fire{At: due}
		next := NextDue(spec, due)
		if spec.Kind == storage.KindCron {
			f.Moved = movedAt(spec, due)
		}
		out = append(out, f)
		if next <= due {
			break
		}
		due = next
	}
	return out
}

// movedAt returns how the DST policy moved the cron occurrence at.
func movedAt(spec *storage.Spec, at int64) Moved {
	c, err := Compile(spec.Cron, spec.Timezone)
	if err != nil {
		return MovedNone
	}
	if got, m := c.nextFire(at-1, spec.DSTGap, spec.DSTOverlap); got == at {
		return m
	}
	return MovedNone
}

// AppliesDST reports whether a DST policy means anything for a cron
// expression: false for "@every d" (fixed rate in real time). It does not
// validate the expression.
func AppliesDST(expr string) bool {
	c, err := parseCron(expr)
	if err != nil {
		return true
	}
	_, fixed := c.(cron.ConstantDelaySchedule)
	return !fixed
}
