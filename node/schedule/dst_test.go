package schedule

import (
	"slices"
	"testing"
	"time"

	"github.com/chime-scheduler/chime/storage"
)

const (
	shift = storage.DSTGapShift
	skip  = storage.DSTGapSkip
	first = storage.DSTOverlapFirst
	both  = storage.DSTOverlapBoth
)

// TestDSTDailySequences follows "every day at 02:30" (01:30 / 01:45 / 02:15
// where that is the zone's affected hour) for 5 local days around each
// transition, by NextDue from each logical due time (drift-free), under every
// combination of policies, and checks each instant exactly.
func TestDSTDailySequences(t *testing.T) {
	tests := []struct {
		name    string
		expr    string
		tz      string
		gap     storage.DSTGap
		overlap storage.DSTOverlap
		from    string   // the instant before the first fire
		want    []string // UTC
	}{
		// Berlin springs forward on 2026-03-29 at 01:00Z: 02:00 CET → 03:00
		// CEST, so 02:30 does not exist that day.
		{"Berlin spring, shift (default)", "30 2 * * *", "Europe/Berlin", 0, 0, "2026-03-26T12:00:00Z",
			[]string{"2026-03-27T01:30:00Z", "2026-03-28T01:30:00Z", "2026-03-29T01:00:00Z", "2026-03-30T00:30:00Z", "2026-03-31T00:30:00Z"}},
		{"Berlin spring, shift", "30 2 * * *", "Europe/Berlin", shift, first, "2026-03-26T12:00:00Z",
			[]string{"2026-03-27T01:30:00Z", "2026-03-28T01:30:00Z", "2026-03-29T01:00:00Z", "2026-03-30T00:30:00Z", "2026-03-31T00:30:00Z"}},
		{"Berlin spring, skip", "30 2 * * *", "Europe/Berlin", skip, first, "2026-03-26T12:00:00Z",
			[]string{"2026-03-27T01:30:00Z", "2026-03-28T01:30:00Z", "2026-03-30T00:30:00Z", "2026-03-31T00:30:00Z", "2026-04-01T00:30:00Z"}},
		// Berlin falls back on 2026-10-25 at 01:00Z: 03:00 CEST → 02:00 CET,
		// so 02:30 happens at 00:30Z and again at 01:30Z.
		{"Berlin fall, first (default)", "30 2 * * *", "Europe/Berlin", 0, 0, "2026-10-22T12:00:00Z",
			[]string{"2026-10-23T00:30:00Z", "2026-10-24T00:30:00Z", "2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z", "2026-10-27T01:30:00Z"}},
		{"Berlin fall, both", "30 2 * * *", "Europe/Berlin", shift, both, "2026-10-22T12:00:00Z",
			[]string{"2026-10-23T00:30:00Z", "2026-10-24T00:30:00Z", "2026-10-25T00:30:00Z", "2026-10-25T01:30:00Z", "2026-10-26T01:30:00Z", "2026-10-27T01:30:00Z"}},
		{"Berlin fall, skip gap changes nothing", "30 2 * * *", "Europe/Berlin", skip, first, "2026-10-22T12:00:00Z",
			[]string{"2026-10-23T00:30:00Z", "2026-10-24T00:30:00Z", "2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z", "2026-10-27T01:30:00Z"}},
		// New York springs forward on 2026-03-08 at 07:00Z (02:00 EST → 03:00
		// EDT) and falls back on 2026-11-01 at 06:00Z (02:00 EDT → 01:00 EST).
		{"New York spring, shift", "30 2 * * *", "America/New_York", shift, first, "2026-03-05T12:00:00Z",
			[]string{"2026-03-06T07:30:00Z", "2026-03-07T07:30:00Z", "2026-03-08T07:00:00Z", "2026-03-09T06:30:00Z", "2026-03-10T06:30:00Z"}},
		{"New York spring, skip", "30 2 * * *", "America/New_York", skip, first, "2026-03-05T12:00:00Z",
			[]string{"2026-03-06T07:30:00Z", "2026-03-07T07:30:00Z", "2026-03-09T06:30:00Z", "2026-03-10T06:30:00Z", "2026-03-11T06:30:00Z"}},
		{"New York fall, first", "30 1 * * *", "America/New_York", shift, first, "2026-10-29T12:00:00Z",
			[]string{"2026-10-30T05:30:00Z", "2026-10-31T05:30:00Z", "2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z", "2026-11-03T06:30:00Z"}},
		{"New York fall, both", "30 1 * * *", "America/New_York", shift, both, "2026-10-29T12:00:00Z",
			[]string{"2026-10-30T05:30:00Z", "2026-10-31T05:30:00Z", "2026-11-01T05:30:00Z", "2026-11-01T06:30:00Z", "2026-11-02T06:30:00Z", "2026-11-03T06:30:00Z"}},
		{"New York fall, 02:30 is not in the overlap", "30 2 * * *", "America/New_York", shift, both, "2026-10-29T12:00:00Z",
			[]string{"2026-10-30T06:30:00Z", "2026-10-31T06:30:00Z", "2026-11-01T07:30:00Z", "2026-11-02T07:30:00Z", "2026-11-03T07:30:00Z"}},
		// Lord Howe Island shifts by 30 minutes: +11:00 → +10:30 on
		// 2026-04-05 at 02:00 local (15:00Z on the 4th; 01:30-02:00 happens
		// twice), +10:30 → +11:00 on 2026-10-04 at 02:00 local (15:30Z on the
		// 3rd; 02:00-02:30 does not exist).
		{"Lord Howe fall, first", "45 1 * * *", "Australia/Lord_Howe", shift, first, "2026-04-02T00:00:00Z",
			[]string{"2026-04-02T14:45:00Z", "2026-04-03T14:45:00Z", "2026-04-04T14:45:00Z", "2026-04-05T15:15:00Z", "2026-04-06T15:15:00Z"}},
		{"Lord Howe fall, both", "45 1 * * *", "Australia/Lord_Howe", shift, both, "2026-04-02T00:00:00Z",
			[]string{"2026-04-02T14:45:00Z", "2026-04-03T14:45:00Z", "2026-04-04T14:45:00Z", "2026-04-04T15:15:00Z", "2026-04-05T15:15:00Z", "2026-04-06T15:15:00Z"}},
		{"Lord Howe spring, shift", "15 2 * * *", "Australia/Lord_Howe", shift, first, "2026-10-01T00:00:00Z",
			[]string{"2026-10-01T15:45:00Z", "2026-10-02T15:45:00Z", "2026-10-03T15:30:00Z", "2026-10-04T15:15:00Z", "2026-10-05T15:15:00Z"}},
		{"Lord Howe spring, skip", "15 2 * * *", "Australia/Lord_Howe", skip, first, "2026-10-01T00:00:00Z",
			[]string{"2026-10-01T15:45:00Z", "2026-10-02T15:45:00Z", "2026-10-04T15:15:00Z", "2026-10-05T15:15:00Z", "2026-10-06T15:15:00Z"}},
		// Zones without DST: every policy fires every day at the same instant.
		{"Tokyo, skip/both", "30 2 * * *", "Asia/Tokyo", skip, both, "2026-03-26T12:00:00Z",
			[]string{"2026-03-26T17:30:00Z", "2026-03-27T17:30:00Z", "2026-03-28T17:30:00Z", "2026-03-29T17:30:00Z", "2026-03-30T17:30:00Z"}},
		{"UTC, skip/both", "30 2 * * *", "", skip, both, "2026-03-26T12:00:00Z",
			[]string{"2026-03-27T02:30:00Z", "2026-03-28T02:30:00Z", "2026-03-29T02:30:00Z", "2026-03-30T02:30:00Z", "2026-03-31T02:30:00Z"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := dstSpec(tt.expr, tt.tz, tt.gap, tt.overlap)
			due := at(t, tt.from)
			for i, w := range tt.want {
				due = NextDue(spec, due)
				if due != at(t, w) {
					t.Fatalf("fire %d = %s, want %s", i, instant(due), w)
				}
			}
		})
	}
}

// TestDSTNextFire checks single steps: several candidates of one gap fire
// once at its end, a real occurrence at the gap's end is not "moved", 6-field
// expressions, every-minute crons across both transitions, and @every.
func TestDSTNextFire(t *testing.T) {
	tests := []struct {
		name      string
		expr, tz  string
		gap       storage.DSTGap
		overlap   storage.DSTOverlap
		after     string
		want      string
		wantMoved Moved
	}{
		{"*/15 in the gap: one shifted fire", "*/15 2 * * *", "Europe/Berlin", shift, first, "2026-03-29T00:00:00Z", "2026-03-29T01:00:00Z", MovedGapShift},
		{"*/15 in the gap: not four", "*/15 2 * * *", "Europe/Berlin", shift, first, "2026-03-29T01:00:00Z", "2026-03-30T00:00:00Z", MovedNone},
		{"*/15 in the gap, skip", "*/15 2 * * *", "Europe/Berlin", skip, first, "2026-03-29T00:00:00Z", "2026-03-30T00:00:00Z", MovedNone},
		{"*/30: 03:00 is real, not moved", "*/30 * * * *", "Europe/Berlin", shift, first, "2026-03-29T00:30:00Z", "2026-03-29T01:00:00Z", MovedNone},
		{"*/30: then 03:30", "*/30 * * * *", "Europe/Berlin", shift, first, "2026-03-29T01:00:00Z", "2026-03-29T01:30:00Z", MovedNone},
		{"6 fields in the gap, shift", "30 30 2 * * *", "Europe/Berlin", shift, first, "2026-03-28T12:00:00Z", "2026-03-29T01:00:00Z", MovedGapShift},
		{"6 fields in the gap, skip", "30 30 2 * * *", "Europe/Berlin", skip, first, "2026-03-28T12:00:00Z", "2026-03-30T00:30:30Z", MovedNone},
		{"6 fields in the overlap, both", "30 30 2 * * *", "Europe/Berlin", shift, both, "2026-10-25T00:30:30Z", "2026-10-25T01:30:30Z", MovedOverlapSecond},
		{"every minute, spring: 01:59 CET then 03:00 CEST", "* * * * *", "Europe/Berlin", shift, first, "2026-03-29T00:59:00Z", "2026-03-29T01:00:00Z", MovedNone},
		{"every minute, fall first: an hour without fires", "* * * * *", "Europe/Berlin", shift, first, "2026-10-25T00:59:00Z", "2026-10-25T02:00:00Z", MovedNone},
		{"every minute, fall both: the hour again", "* * * * *", "Europe/Berlin", shift, both, "2026-10-25T00:59:00Z", "2026-10-25T01:00:00Z", MovedOverlapSecond},
		{"*/15 1 * * *, both: 01:00 EST after 01:45 EDT", "*/15 1 * * *", "America/New_York", shift, both, "2026-11-01T05:45:00Z", "2026-11-01T06:00:00Z", MovedOverlapSecond},
		{"*/15 1 * * *, first: the next day", "*/15 1 * * *", "America/New_York", shift, first, "2026-11-01T05:45:00Z", "2026-11-02T06:00:00Z", MovedNone},
		{"created in the second pass, first: not again", "30 1 * * *", "America/New_York", shift, first, "2026-11-01T06:10:00Z", "2026-11-02T06:30:00Z", MovedNone},
		{"created in the second pass, both", "30 1 * * *", "America/New_York", shift, both, "2026-11-01T06:10:00Z", "2026-11-01T06:30:00Z", MovedOverlapSecond},
		{"@daily is wall clock: shift is no-op at midnight", "@daily", "America/New_York", shift, first, "2026-03-07T12:00:00Z", "2026-03-08T05:00:00Z", MovedNone},
		// Santiago springs forward at midnight (2026-09-06 00:00 -04 → 01:00
		// -03): @daily has no midnight that day.
		{"@daily at a midnight gap, shift", "@daily", "America/Santiago", shift, first, "2026-09-05T12:00:00Z", "2026-09-06T04:00:00Z", MovedGapShift},
		{"@daily at a midnight gap, skip", "@daily", "America/Santiago", skip, first, "2026-09-05T12:00:00Z", "2026-09-07T03:00:00Z", MovedNone},
		{"@every is real time", "@every 1h", "Europe/Berlin", skip, first, "2026-03-29T00:30:00Z", "2026-03-29T01:30:00Z", MovedNone},
		{"@hourly, gap: 02:00 shifts to 03:00, once", "@hourly", "Europe/Berlin", shift, first, "2026-03-29T00:00:00Z", "2026-03-29T01:00:00Z", MovedNone},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Compile(tt.expr, tt.tz)
			if err != nil {
				t.Fatal(err)
			}
			got, moved := c.nextFire(at(t, tt.after), tt.gap, tt.overlap)
			if got != at(t, tt.want) || moved != tt.wantMoved {
				t.Errorf("next after %s = %s %q, want %s %q", tt.after, instant(got), moved, tt.want, tt.wantMoved)
			}
		})
	}
}

func TestNextTransition(t *testing.T) {
	tests := []struct {
		tz, from      string
		want          string // "" = none
		before, after int
	}{
		{"Europe/Berlin", "2026-03-01T00:00:00Z", "2026-03-29T01:00:00Z", 3600, 7200},
		{"Europe/Berlin", "2026-03-29T01:00:00Z", "2026-10-25T01:00:00Z", 7200, 3600},
		{"America/New_York", "2026-03-01T00:00:00Z", "2026-03-08T07:00:00Z", -18000, -14400},
		{"America/New_York", "2026-06-01T00:00:00Z", "2026-11-01T06:00:00Z", -14400, -18000},
		{"Australia/Lord_Howe", "2026-03-01T00:00:00Z", "2026-04-04T15:00:00Z", 39600, 37800},
		{"Australia/Lord_Howe", "2026-06-01T00:00:00Z", "2026-10-03T15:30:00Z", 37800, 39600},
		{"Asia/Tokyo", "2026-03-01T00:00:00Z", "", 0, 0},
		{"", "2026-03-01T00:00:00Z", "", 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.tz+"@"+tt.from, func(t *testing.T) {
			tr, ok, err := NextTransition(tt.tz, time.Unix(0, at(t, tt.from)))
			if err != nil {
				t.Fatal(err)
			}
			if tt.want == "" {
				if ok {
					t.Errorf("transition %+v, want none", tr)
				}
				return
			}
			if !ok || tr.At.UnixNano() != at(t, tt.want) || tr.OffsetBefore != tt.before || tr.OffsetAfter != tt.after {
				t.Errorf("transition %+v %v, want %s %d→%d", tr, ok, tt.want, tt.before, tt.after)
			}
		})
	}
	if _, _, err := NextTransition("Nowhere/City", time.Now()); err == nil {
		t.Error("unknown zone: no error")
	}
}

func TestPreview(t *testing.T) {
	spec := dstSpec("*/15 2 * * *", "Europe/Berlin", shift, first)
	start := at(t, "2026-03-28T01:00:00Z") // 02:00 CET on the 28th
	got := Preview(spec, start, 0, 6)
	want := []Fire{
		{at(t, "2026-03-28T01:00:00Z"), MovedNone},
		{at(t, "2026-03-28T01:15:00Z"), MovedNone},
		{at(t, "2026-03-28T01:30:00Z"), MovedNone},
		{at(t, "2026-03-28T01:45:00Z"), MovedNone},
		{at(t, "2026-03-29T01:00:00Z"), MovedGapShift},
		{at(t, "2026-03-30T00:00:00Z"), MovedNone},
	}
	if len(got) != len(want) {
		t.Fatalf("Preview = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("fire %d = %s %q, want %s %q", i, instant(got[i].At), got[i].Moved, instant(want[i].At), want[i].Moved)
		}
	}
	if got := Preview(spec, start, at(t, "2026-03-28T01:30:00Z"), 6); len(got) != 3 {
		t.Errorf("Preview until 01:30Z = %d fires, want 3 (inclusive)", len(got))
	}
	if got := Preview(spec, start, at(t, "2026-03-28T01:29:59Z"), 6); len(got) != 2 {
		t.Errorf("Preview until 01:29:59Z = %d fires, want 2", len(got))
	}
	if got := Preview(everySpec(1000, 0), start, 0, 3); len(got) != 3 || got[2].At != start+2e9 {
		t.Errorf("Preview every 1s = %v", got)
	}
	// A task's end_at is inclusive: the occurrence at it is previewed.
	ended := everySpec(1000, 0)
	ended.EndAt = start + 2e9
	if got := Preview(ended, start, 0, 10); len(got) != 3 || got[2].At != start+2e9 {
		t.Errorf("Preview every 1s with end_at = start+2s: %v, want 3 fires ending at end_at", got)
	}
}

func BenchmarkNextFireBerlin(b *testing.B) {
	spec := dstSpec("*/5 * * * *", "Europe/Berlin", shift, first)
	due := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	for b.Loop() {
		due = NextDue(spec, due)
	}
}

// TestDSTAgainstOracle compares NextDue sequences with a brute-force
// reading of the rules, minute by minute, over 3 days around each 2026
// transition of each zone, for several expressions and all four policies:
// a real instant fires when its wall time matches and it is not the second
// occurrence of a repeated wall time (unless overlap is both); the end of
// a gap fires when a wall time inside the gap matches (unless gap is skip).
func TestDSTAgainstOracle(t *testing.T) {
	exprs := []string{"@daily", "30 2 * * *", "*/15 * * * *", "0 * * * *", "*/7 1-3 * * *", "45 1 * * *", "10,20 2 * * *", "59 1 * * *", "0 3 * * *"}
	zones := []string{"Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "America/Santiago", "Asia/Tokyo"}
	differ, total, cases := 0, 0, 0 // cases where the policies disagree; fires compared; cases
	for _, tz := range zones {
		loc, err := time.LoadLocation(tz)
		if err != nil {
			t.Fatal(err)
		}
		var windows []time.Time
		from := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		for range 2 {
			tr, ok, err := NextTransition(tz, from)
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				windows = append(windows, time.Date(2026, 3, 29, 0, 0, 0, 0, time.UTC))
				break
			}
			windows = append(windows, tr.At)
			from = tr.At
		}
		for _, center := range windows {
			a, b := center.Add(-36*time.Hour), center.Add(36*time.Hour)
			for _, expr := range exprs {
				c, err := Compile(expr, "")
				if err != nil {
					t.Fatal(err)
				}
				matches := func(wall time.Time) bool { return c.sched.Next(wall.Add(-time.Second)).Equal(wall) }
				cases++
				if !slices.Equal(oracle(loc, a, b, matches, shift, first), oracle(loc, a, b, matches, skip, both)) {
					differ++
				}
				for _, gap := range []storage.DSTGap{shift, skip} {
					for _, overlap := range []storage.DSTOverlap{first, both} {
						want := oracle(loc, a, b, matches, gap, overlap)
						spec := dstSpec(expr, tz, gap, overlap)
						var got []int64
						for due := NextDue(spec, a.UnixNano()-1); due != 0 && due < b.UnixNano(); due = NextDue(spec, due) {
							got = append(got, due)
						}
						total += len(got)
						if !slices.Equal(got, want) {
							t.Errorf("%s %q gap %s overlap %s around %s:\ngot  %v\nwant %v", tz, expr, gap, overlap,
								center.Format(time.RFC3339), instants(got), instants(want))
						}
					}
				}
			}
		}
	}
	// The oracle is not vacuous: the policies disagree around transitions.
	if differ < 20 || total < 10000 {
		t.Errorf("policies differ in %d cases over %d fires; the windows miss the transitions", differ, total)
	}
	t.Logf("%d fires compared; the policies disagree in %d of %d expression windows", total, differ, cases)
}

// oracle lists the instants in [a, b) at which an expression matching
// wall times by matches fires in loc under the policy, minute by minute.
func oracle(loc *time.Location, a, b time.Time, matches func(time.Time) bool, gap storage.DSTGap, overlap storage.DSTOverlap) []int64 {
	wallOf := func(t time.Time) time.Time {
		_, off := t.In(loc).Zone()
		return t.UTC().Add(time.Duration(off) * time.Second)
	}
	set := map[int64]bool{}
	for t := a; t.Before(b); t = t.Add(time.Minute) {
		wall := wallOf(t)
		if matches(wall) {
			second := false
			for _, d := range []time.Duration{-24 * time.Hour, 24 * time.Hour} {
				_, o := t.Add(d).In(loc).Zone()
				if t2 := wall.Add(-time.Duration(o) * time.Second); t2.Before(t) && wallOf(t2).Equal(wall) {
					second = true
				}
			}
			if !second || overlap == storage.DSTOverlapBoth {
				set[t.UnixNano()] = true
			}
		}
		// t is the first instant after a gap: the walls between the last
		// wall before t and t's wall did not exist.
		if prev := wallOf(t.Add(-time.Minute)); gap != storage.DSTGapSkip && wall.Sub(prev) > time.Minute {
			for w := prev.Add(time.Minute); w.Before(wall); w = w.Add(time.Minute) {
				if matches(w) {
					set[t.UnixNano()] = true
				}
			}
		}
	}
	out := make([]int64, 0, len(set))
	for ns := range set {
		out = append(out, ns)
	}
	slices.Sort(out)
	return out
}

func instants(ns []int64) []string {
	out := make([]string, len(ns))
	for i, v := range ns {
		out[i] = instant(v)
	}
	return out
}

// TestDSTEverySecond follows a 6-field every-second expression through New
// York's fall-back hour (2026-11-01, 05:00Z-07:00Z): with overlap both it
// fires 7,200 times (01:00-01:59:59 twice), with first 3,600 (then 02:00
// EST at 07:00Z). Each step crosses at most one period boundary, so this
// also shows the cost does not grow with the overlap's length.
func TestDSTEverySecond(t *testing.T) {
	for _, tt := range []struct {
		overlap storage.DSTOverlap
		want    int
		moved   int
	}{{both, 7200, 3600}, {first, 3600, 0}} {
		spec := dstSpec("* * * * * *", "America/New_York", shift, tt.overlap)
		a, b := at(t, "2026-11-01T05:00:00Z"), at(t, "2026-11-01T07:00:00Z")
		n, moved := 0, 0
		for due := NextDue(spec, a-1); due < b; due = NextDue(spec, due) {
			n++
			if movedAt(spec, due) == MovedOverlapSecond {
				moved++
			}
		}
		if n != tt.want || moved != tt.moved {
			t.Errorf("overlap %s: %d fires (%d overlap-second) in the 2 hours, want %d (%d)", tt.overlap, n, moved, tt.want, tt.moved)
		}
		if got := NextDue(spec, at(t, "2026-11-01T05:59:59Z")); tt.overlap == first && got != b {
			t.Errorf("overlap first: after 01:59:59 EDT comes %s, want 02:00 EST", instant(got))
		}
	}
}
