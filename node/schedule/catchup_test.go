package schedule

import (
	"testing"
	"time"

	"github.com/chime-scheduler/chime/storage"
)

func TestCatchup(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	min := int64(time.Minute)
	every := &storage.Spec{Kind: storage.KindEvery, EveryMs: 60000}
	cronMin := &storage.Spec{Kind: storage.KindCron, Cron: "* * * * *"}
	cronEnd := &storage.Spec{Kind: storage.KindCron, Cron: "* * * * *", EndAt: t0 + 10*min}
	for _, tc := range []struct {
		name        string
		spec        *storage.Spec
		due, now    int64
		limit       int
		start       int64
		skipped     uint64
		approximate bool
	}{
		{"every within cap", every, t0, t0 + 4*min, 5, t0, 0, false},
		{"every at cap", every, t0, t0 + 4*min + 1, 5, t0, 0, false},
		{"every over cap", every, t0, t0 + 9*min, 5, t0 + 5*min, 5, false},
		{"cron within cap", cronMin, t0, t0 + 4*min, 5, t0, 0, false},
		{"cron over cap", cronMin, t0, t0 + 9*min + 30e9, 5, t0 + 5*min, 5, false},
		{"cron end_at bounds the count", cronEnd, t0, t0 + 100*min, 5, t0 + 6*min, 6, false},
		{"cron just over the walk", cronMin, t0, t0 + (16384+49)*min, 100, t0 + (16384+50-100)*min, 16384 + 50 - 100, false},
		{"cron long outage", cronMin, t0, t0 + 200*24*60*min, 3, t0 + (200*24*60-2)*min, 200*24*60 - 2, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start, skipped := Catchup(tc.spec, tc.due, tc.now, tc.limit)
			if start != tc.start {
				t.Errorf("start = %v, want %v", time.Unix(0, start).UTC(), time.Unix(0, tc.start).UTC())
			}
			if tc.approximate {
				// Beyond maxCatchupWalk the count is estimated: within 1%.
				if d := float64(skipped) - float64(tc.skipped); d > float64(tc.skipped)/100 || -d > float64(tc.skipped)/100 {
					t.Errorf("skipped = %d, want about %d", skipped, tc.skipped)
				}
				return
			}
			if skipped != tc.skipped {
				t.Errorf("skipped = %d, want %d", skipped, tc.skipped)
			}
		})
	}
}

func TestOccurrences(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	min := int64(time.Minute)
	every := &storage.Spec{Kind: storage.KindEvery, EveryMs: 60000}
	cronMin := &storage.Spec{Kind: storage.KindCron, Cron: "* * * * *"}
	for _, tc := range []struct {
		name             string
		spec             *storage.Spec
		anchor, from, to int64
		limit            int
		first, last      int64
		n                uint64
	}{
		{"every on the anchor's grid, anchor after", every, t0 + 100*min + 7, t0, t0 + 3*min, 10, t0 + 7, t0 + 2*min + 7, 3},
		{"every anchor before", every, t0 - 50*min + 7, t0, t0 + 3*min, 10, t0 + 7, t0 + 2*min + 7, 3},
		{"every exact count over the cap", every, t0, t0, t0 + 99*min, 10, t0, t0 + 99*min, 100},
		{"every none", every, t0 + 30e9, t0, t0 + 20e9, 10, 0, 0, 0},
		{"cron inclusive", cronMin, 0, t0, t0 + 3*min, 10, t0, t0 + 3*min, 4},
		{"cron counts to cap+1", cronMin, 0, t0, t0 + 99*min, 10, t0, t0 + 10*min, 11},
	} {
		t.Run(tc.name, func(t *testing.T) {
			first, last, n := Occurrences(tc.spec, tc.anchor, tc.from, tc.to, tc.limit)
			if first != tc.first || last != tc.last || n != tc.n {
				t.Errorf("got %d %d %d, want %d %d %d", first-t0, last-t0, n, tc.first-t0, tc.last-t0, tc.n)
			}
		})
	}
}
