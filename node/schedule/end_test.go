package schedule

import (
	"testing"

	"github.com/chime-scheduler/chime/storage"
)

func TestEnded(t *testing.T) {
	every := func(endAt, maxRuns int64) *storage.Spec {
		return &storage.Spec{Kind: storage.KindEvery, EveryMs: 1000, EndAt: endAt, MaxRuns: maxRuns}
	}
	cron := &storage.Spec{Kind: storage.KindCron, Cron: "* * * * *", EndAt: 100, MaxRuns: 2}
	tests := []struct {
		name string
		spec *storage.Spec
		next int64
		runs uint64
		want bool
	}{
		{"no limits", every(0, 0), 1 << 60, 1 << 40, false},
		{"before end_at", every(100, 0), 99, 0, false},
		{"at end_at fires (inclusive)", every(100, 0), 100, 0, false},
		{"past end_at", every(100, 0), 101, 0, true},
		{"no next, end_at", every(100, 0), 0, 0, false},
		{"runs below max_runs", every(0, 3), 5, 2, false},
		{"runs reach max_runs", every(0, 3), 5, 3, true},
		{"runs past max_runs", every(0, 3), 5, 4, true},
		{"max_runs 1 after one run", every(0, 1), 5, 1, true},
		{"max_runs 1 before any run", every(0, 1), 5, 0, false},
		{"both, runs first", every(100, 2), 50, 2, true},
		{"both, end_at first", every(100, 2), 150, 1, true},
		{"both, neither", every(100, 2), 100, 1, false},
		{"cron past end_at", cron, 101, 0, true},
		{"cron runs reached", cron, 10, 2, true},
		{"one-shot never", &storage.Spec{Kind: storage.KindOnce, EndAt: 1, MaxRuns: 1}, 5, 5, false},
	}
	for _, tt := range tests {
		if got := Ended(tt.spec, tt.next, tt.runs); got != tt.want {
			t.Errorf("%s: Ended(end_at %d, max_runs %d; next %d, runs %d) = %v, want %v",
				tt.name, tt.spec.EndAt, tt.spec.MaxRuns, tt.next, tt.runs, got, tt.want)
		}
	}
}
