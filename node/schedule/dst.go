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
// wall clock and real time coincide, for the next matching wall-clock time
// within each of the zone's periods of constant offset, and nextFire maps
// it to a real instant by these rules:
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
// The same rules serve 5- and 6-field expressions and the wall-clock
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

// maxSegments bounds the zone periods (stretches of one UTC offset) one
// next occurrence may cross: a real zone has about two a year, and the cron
// library gives up after 5 years anyway.
const maxSegments = 1000

// nextFire returns the first instant strictly after ns (Unix ns) at which
// the wall-clock schedule c fires under the DST policy, and how it was
// moved; 0 when there is none (as next).
//
// It walks the zone's periods of constant offset from the one holding ns.
// Within a period the wall times map one to one onto instants (wall - offset),
// so the cron library's Next, asked in UTC for the first wall time after a
// point, answers the period's next occurrence. If that falls beyond the
// period's end, the search moves to the next period; on the way it passes
// a gap (the offset grows: the wall times [end+old, end+new) do not exist),
// where a match fires at end with gap shift. A period that began by falling
// back repeats the wall times [start+new, start+old) of the previous one:
// with overlap first they are skipped, with both they fire flagged
// overlap-second. Each step costs one Next and one zone lookup, so the cost
// does not depend on how often the expression matches.
func (c Compiled) nextFire(ns int64, gap storage.DSTGap, overlap storage.DSTOverlap) (int64, Moved) {
	if c.loc == time.UTC {
		return c.next(ns), MovedNone
	}
	if _, ok := c.sched.(cron.ConstantDelaySchedule); ok {
		return c.next(ns), MovedNone // fixed rate: real time, no DST
	}
	t := time.Unix(0, ns).In(c.loc)
	_, off := t.Zone()
	start, end := t.ZoneBounds()
	from := wallAt(t, off) // the wall time of ns; occurrences are strictly after it
	for range maxSegments {
		// Wall times before repeatedUntil occurred in the previous period.
		var repeatedUntil time.Time
		if !start.IsZero() {
			if _, prev := start.Add(-time.Second).In(c.loc).Zone(); prev > off {
				repeatedUntil = wallAt(start, prev)
				if overlap != storage.DSTOverlapBoth && from.Before(repeatedUntil) {
					from = repeatedUntil.Add(-time.Nanosecond)
				}
			}
		}
		w := c.sched.Next(from)
		if w.IsZero() {
			return 0, MovedNone
		}
		at := w.Add(-time.Duration(off) * time.Second) // w is in UTC: the instant in this period
		if end.IsZero() || at.Before(end) {
			if at.After(lastInstant) {
				return 0, MovedNone
			}
			if w.Before(repeatedUntil) {
				return at.UnixNano(), MovedOverlapSecond
			}
			return at.UnixNano(), MovedNone
		}
		// Nothing left in this period: the next one starts at end.
		next := end.In(c.loc)
		_, nextOff := next.Zone()
		if nextOff > off && w.Before(wallAt(end, nextOff)) && gap != storage.DSTGapSkip {
			// w lies in the gap. The gap's end fires, flagged unless the
			// expression names the gap's end itself.
			if end.After(lastInstant) {
				return 0, MovedNone
			}
			first := wallAt(end, nextOff)
			if c.sched.Next(first.Add(-time.Nanosecond)).Equal(first) {
				return end.UnixNano(), MovedNone
			}
			return end.UnixNano(), MovedGapShift
		}
		off = nextOff
		start, end = next.ZoneBounds()
		from = wallAt(start, off).Add(-time.Nanosecond)
	}
	return 0, MovedNone
}

// wallAt returns the wall-clock time of the instant t at UTC offset off
// (seconds), as a time in UTC with the same fields.
func wallAt(t time.Time, off int) time.Time {
	return t.UTC().Add(time.Duration(off) * time.Second)
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
// occurrence, e.g. FirstDue's answer or a stored task's NextDue) and at or
// before until (Unix ns, 0 = no bound; inclusive like a task's end_at),
// each flagged with how a DST rule moved it.
// It is what the task would fire, by NextDue from each logical due time,
// and like the task it stops after spec.EndAt (inclusive: an occurrence at
// EndAt is in).
func Preview(spec *storage.Spec, first, until int64, n int) []Fire {
	var out []Fire
	for due := first; due != 0 && len(out) < n && (until == 0 || due <= until) && (spec.EndAt == 0 || due <= spec.EndAt); {
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
