package firing

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/chime-scheduler/chime/node/dispatch"
	"github.com/chime-scheduler/chime/storage"
)

// TestFireEndsTask: end_at and max_runs on the fire path (Begin,
// Finish), with a 10 s every task due at 100 s.
func TestFireEndsTask(t *testing.T) {
	limited := func(misfire storage.Misfire, endAt, maxRuns int64, runs uint64) *storage.Task {
		task := everyTask(100*sec, misfire)
		task.Spec.EndAt, task.Spec.MaxRuns, task.Runs = endAt, maxRuns, runs
		return task
	}
	tests := []struct {
		name       string
		task       *storage.Task
		trigger    bool // the fire is a manual trigger
		outcome    dispatch.Outcome
		now        int64 // when the fire starts (finishes 1 s later)
		wantStatus storage.Status
		wantNext   int64
		wantRuns   uint64
	}{
		{"next at end_at stays scheduled", limited(storage.MisfireFireOnce, 110*sec, 0, 0), false, dispatch.OutcomeSuccess, 100 * sec, storage.StatusScheduled, 110 * sec, 1},
		{"next past end_at completes", limited(storage.MisfireFireOnce, 109*sec, 0, 0), false, dispatch.OutcomeSuccess, 100 * sec, storage.StatusCompleted, 0, 1},
		{"last run completes", limited(storage.MisfireFireOnce, 0, 3, 2), false, dispatch.OutcomeSuccess, 100 * sec, storage.StatusCompleted, 0, 3},
		{"a failed run counts", limited(storage.MisfireFireOnce, 0, 3, 2), false, dispatch.OutcomeFailure, 100 * sec, storage.StatusCompleted, 0, 3},
		{"run below the limit", limited(storage.MisfireFireOnce, 0, 3, 1), false, dispatch.OutcomeSuccess, 100 * sec, storage.StatusScheduled, 110 * sec, 2},
		{"a trigger does not count", limited(storage.MisfireFireOnce, 0, 3, 2), true, dispatch.OutcomeSuccess, 50 * sec, storage.StatusScheduled, 100 * sec, 2},
		{"gone wins over the last run", limited(storage.MisfireFireOnce, 0, 3, 2), false, dispatch.OutcomeGone, 100 * sec, storage.StatusInactive, 0, 3},
		{"fire_once misfire past end_at completes", limited(storage.MisfireFireOnce, 130*sec, 0, 0), false, dispatch.OutcomeSuccess, 135 * sec, storage.StatusCompleted, 0, 1},
		{"fire_all fires each missed one up to end_at", limited(storage.MisfireFireAll, 130*sec, 0, 0), false, dispatch.OutcomeSuccess, 135 * sec, storage.StatusScheduled, 110 * sec, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			task := tc.task
			if tc.trigger {
				task.Triggers = []int64{tc.now}
			}
			if d := Begin(task, tc.now, 5*sec); d != StartFire {
				t.Fatalf("Begin = %d, want StartFire", d)
			}
			res := &dispatch.Result{Job: JobFor(task), Outcome: tc.outcome, StatusCode: 200,
				StartedAt: time.Unix(0, tc.now), FinishedAt: time.Unix(0, tc.now+sec)}
			if tc.outcome == dispatch.OutcomeFailure {
				task.Inflight.Attempt = task.Spec.MaxRetries + 1 // retries exhausted
				res.Job.Attempt = task.Inflight.Attempt
			}
			Finish(task, res, tc.now+sec, rand.New(rand.NewPCG(1, 1)))
			if task.Status != tc.wantStatus || task.NextDue != tc.wantNext || task.Runs != tc.wantRuns {
				t.Errorf("status %v next %d runs %d, want %v %d %d", task.Status, task.NextDue/sec, task.Runs,
					tc.wantStatus, tc.wantNext/sec, tc.wantRuns)
			}
		})
	}
}

// TestSkipPastEndCompletes: misfire skip jumping past end_at completes the
// task without a fire.
func TestSkipPastEndCompletes(t *testing.T) {
	task := everyTask(100*sec, storage.MisfireSkip)
	task.Spec.EndAt = 130 * sec
	if d := Begin(task, 135*sec, 5*sec); d != StartSkipped {
		t.Fatalf("Begin = %d, want StartSkipped", d)
	}
	if task.Status != storage.StatusCompleted || task.NextDue != 0 || task.Runs != 0 {
		t.Errorf("status %v next %d runs %d, want completed, 0, 0", task.Status, task.NextDue, task.Runs)
	}
	task = everyTask(100*sec, storage.MisfireSkip)
	task.Spec.EndAt = 140 * sec
	if Begin(task, 135*sec, 5*sec); task.Status != storage.StatusScheduled || task.NextDue != 140*sec {
		t.Errorf("skip to end_at: status %v next %d, want scheduled at 140", task.Status, task.NextDue/sec)
	}
}
