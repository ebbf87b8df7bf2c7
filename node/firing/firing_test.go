package firing

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/chime-scheduler/chime/node/dispatch"
	"github.com/chime-scheduler/chime/storage"
)

const sec = int64(time.Second)

func onceTask(due int64) *storage.Task {
	return &storage.Task{ID: "t", Status: storage.StatusScheduled, NextDue: due,
		Spec: storage.Spec{Kind: storage.KindOnce, DueAt: due, MaxRetries: 2, TimeoutMs: 1000}}
}

func everyTask(due int64, misfire storage.Misfire) *storage.Task {
	return &storage.Task{ID: "t", Status: storage.StatusScheduled, NextDue: due,
		Spec: storage.Spec{Kind: storage.KindEvery, EveryMs: 10000, MaxRetries: 1, Misfire: misfire, TimeoutMs: 1000}}
}

func TestBeginFire(t *testing.T) {
	const grace = 5 * sec
	tests := []struct {
		name     string
		task     func() *storage.Task
		now      int64
		want     StartDecision
		wantSeq  uint64
		wantDue  int64
		wantNext int64
		missed   bool
	}{
		{"not due yet", func() *storage.Task { return onceTask(100 * sec) }, 99 * sec, StartNothing, 0, 0, 100 * sec, false},
		{"due now", func() *storage.Task { return onceTask(100 * sec) }, 100 * sec, StartFire, 1, 100 * sec, 100 * sec, false},
		{"one-shot late fires however late", func() *storage.Task { return onceTask(100 * sec) }, 1000 * sec, StartFire, 1, 100 * sec, 100 * sec, false},
		{"paused does not fire", func() *storage.Task {
			t := onceTask(100 * sec)
			t.Status = storage.StatusPaused
			return t
		}, 200 * sec, StartNothing, 0, 0, 100 * sec, false},
		{"periodic within grace", func() *storage.Task { return everyTask(100*sec, storage.MisfireFireOnce) }, 104 * sec, StartFire, 1, 100 * sec, 100 * sec, false},
		{"periodic missed, fire_once", func() *storage.Task { return everyTask(100*sec, storage.MisfireFireOnce) }, 135 * sec, StartFire, 1, 100 * sec, 100 * sec, true},
		{"periodic missed, fire_all", func() *storage.Task { return everyTask(100*sec, storage.MisfireFireAll) }, 135 * sec, StartFire, 1, 100 * sec, 100 * sec, true},
		{"periodic missed, skip", func() *storage.Task { return everyTask(100*sec, storage.MisfireSkip) }, 135 * sec, StartSkipped, 0, 0, 140 * sec, false},
		{"trigger on a paused task", func() *storage.Task {
			t := onceTask(100 * sec)
			t.Status = storage.StatusPaused
			t.Triggers = []int64{50 * sec}
			return t
		}, 60 * sec, StartFire, 1, 50 * sec, 100 * sec, false},
		{"in-flight fire repeats with the same seq", func() *storage.Task {
			t := onceTask(100 * sec)
			t.FireSeq = 7
			t.Inflight = &storage.Inflight{Seq: 7, Due: 100 * sec, Attempt: 1}
			return t
		}, 300 * sec, StartFire, 7, 100 * sec, 100 * sec, false},
		{"retry waits for its backoff", func() *storage.Task {
			t := onceTask(100 * sec)
			t.FireSeq = 1
			t.Inflight = &storage.Inflight{Seq: 1, Due: 100 * sec, Attempt: 1, NextAttemptAt: 102 * sec}
			return t
		}, 101 * sec, StartNothing, 1, 100 * sec, 100 * sec, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			task := tc.task()
			got := Begin(task, tc.now, grace)
			if got != tc.want {
				t.Fatalf("Begin = %d, want %d", got, tc.want)
			}
			if task.NextDue != tc.wantNext {
				t.Errorf("NextDue = %d, want %d", task.NextDue, tc.wantNext)
			}
			if tc.want != StartFire {
				return
			}
			inf := task.Inflight
			if inf.Seq != tc.wantSeq || inf.Due != tc.wantDue || inf.Misfired != tc.missed || inf.StartedAt != tc.now {
				t.Errorf("Inflight = %+v, want seq %d due %d misfired %v", inf, tc.wantSeq, tc.wantDue, tc.missed)
			}
			if task.Wake() != inf.Due {
				t.Errorf("Wake = %d while in flight, want the fire's due %d (so a restart repeats it)", task.Wake(), inf.Due)
			}
		})
	}
}

func TestFinishFire(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	started := time.Unix(100, 0)
	result := func(o dispatch.Outcome, code int, attempt int, seq uint64) *dispatch.Result {
		return &dispatch.Result{Job: &dispatch.Job{TaskID: "t", Seq: seq, Attempt: attempt, Due: 100 * sec}, Outcome: o, StatusCode: code,
			StartedAt: started, FinishedAt: started.Add(time.Millisecond), Body: []byte("ok")}
	}
	inflight := func(task *storage.Task, attempt int) *storage.Task {
		task.FireSeq = 1
		task.Inflight = &storage.Inflight{Seq: 1, Due: 100 * sec, Attempt: attempt}
		return task
	}
	tests := []struct {
		name       string
		task       *storage.Task
		res        *dispatch.Result
		want       FinishResult
		wantStatus storage.Status
		wantNext   int64
		wantRetry  bool
		wantFails  uint64
	}{
		{"one-shot success", inflight(onceTask(100*sec), 1), result(dispatch.OutcomeSuccess, 200, 1, 1), FinishSuccess, storage.StatusDone, 0, false, 0},
		{"one-shot failure retries", inflight(onceTask(100*sec), 1), result(dispatch.OutcomeFailure, 500, 1, 1), FinishRetry, storage.StatusScheduled, 100 * sec, true, 0},
		{"one-shot retries exhausted", inflight(onceTask(100*sec), 3), result(dispatch.OutcomeFailure, 500, 3, 1), FinishFailed, storage.StatusFailed, 0, false, 1},
		{"one-shot gone", inflight(onceTask(100*sec), 1), result(dispatch.OutcomeGone, 410, 1, 1), FinishFailed, storage.StatusFailed, 0, false, 1},
		{"periodic success advances from due", inflight(everyTask(100*sec, storage.MisfireFireOnce), 1), result(dispatch.OutcomeSuccess, 200, 1, 1), FinishSuccess, storage.StatusScheduled, 110 * sec, false, 0},
		{"periodic gone is inactive", inflight(everyTask(100*sec, storage.MisfireFireOnce), 1), result(dispatch.OutcomeGone, 404, 1, 1), FinishFailed, storage.StatusInactive, 0, false, 1},
		{"one-shot denied is not retried", inflight(onceTask(100*sec), 1), result(dispatch.OutcomeDenied, 0, 1, 1), FinishFailed, storage.StatusFailed, 0, false, 1},
		{"periodic denied advances, not retried", inflight(everyTask(100*sec, storage.MisfireFireOnce), 1), result(dispatch.OutcomeDenied, 0, 1, 1), FinishFailed, storage.StatusScheduled, 110 * sec, false, 1},
		{"periodic failure advances", inflight(everyTask(100*sec, storage.MisfireFireOnce), 2), result(dispatch.OutcomeFailure, 500, 2, 1), FinishFailed, storage.StatusScheduled, 110 * sec, false, 1},
		{"stale seq is ignored", inflight(onceTask(100*sec), 1), result(dispatch.OutcomeSuccess, 200, 1, 9), FinishStale, storage.StatusScheduled, 100 * sec, true, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ex, got := Finish(tc.task, tc.res, 101*sec, rnd)
			if got != tc.want {
				t.Fatalf("Finish = %d, want %d", got, tc.want)
			}
			if got == FinishStale {
				if ex != nil {
					t.Error("a stale result produced an execution record")
				}
				return
			}
			if ex == nil || ex.FireID != "t:1" || string(ex.Result) != "ok" {
				t.Errorf("execution %+v, want fire t:1 with the body", ex)
			}
			if tc.task.Status != tc.wantStatus || tc.task.NextDue != tc.wantNext || tc.task.FailCount != tc.wantFails {
				t.Errorf("task status %v next %d fails %d, want %v %d %d", tc.task.Status, tc.task.NextDue, tc.task.FailCount, tc.wantStatus, tc.wantNext, tc.wantFails)
			}
			if (tc.task.Inflight != nil) != tc.wantRetry {
				t.Errorf("Inflight = %+v, want retry pending %v", tc.task.Inflight, tc.wantRetry)
			}
			if tc.wantRetry {
				wait := tc.task.Inflight.NextAttemptAt - 101*sec
				if wait < 800*int64(time.Millisecond) || wait > 1200*int64(time.Millisecond) {
					t.Errorf("first retry in %v, want 1s ±20%%", time.Duration(wait))
				}
			}
		})
	}
}

func TestFinishFireMisfireFireOnceResumesAfterNow(t *testing.T) {
	task := everyTask(100*sec, storage.MisfireFireOnce)
	if Begin(task, 135*sec, 5*sec) != StartFire {
		t.Fatal("did not fire")
	}
	res := &dispatch.Result{Job: JobFor(task), Outcome: dispatch.OutcomeSuccess, StatusCode: 200, StartedAt: time.Unix(135, 0), FinishedAt: time.Unix(135, 0)}
	Finish(task, res, 136*sec, rand.New(rand.NewPCG(1, 1)))
	if task.NextDue != 140*sec {
		t.Errorf("NextDue = %d, want %d (first occurrence after now on the 10 s grid)", task.NextDue/sec, 140)
	}
	task = everyTask(100*sec, storage.MisfireFireAll)
	Begin(task, 135*sec, 5*sec)
	Finish(task, &dispatch.Result{Job: JobFor(task), Outcome: dispatch.OutcomeSuccess, StartedAt: time.Unix(135, 0), FinishedAt: time.Unix(135, 0)}, 136*sec, rand.New(rand.NewPCG(1, 1)))
	if task.NextDue != 110*sec {
		t.Errorf("fire_all NextDue = %d, want 110 (every missed occurrence fires)", task.NextDue/sec)
	}
}
