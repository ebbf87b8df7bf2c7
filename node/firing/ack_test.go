package firing

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/chime-scheduler/chime/node/dispatch"
	"github.com/chime-scheduler/chime/storage"
)

// ackTask is a one-shot task with an ACK phase (ack_delay_ms 2000,
// ack_retries 2) whose fire 1 is in flight: its callback attempt (ack
// false) or its ACK attempt (ack true) number attempt.
func ackTask(ack bool, attempt int) *storage.Task {
	t := onceTask(100 * sec)
	t.Spec.AckURL, t.Spec.AckDelayMs, t.Spec.AckRetries = "https://example.com/ack", 2000, 2
	t.FireSeq = 1
	t.Inflight = &storage.Inflight{Seq: 1, Due: 100 * sec, Attempt: attempt, Ack: ack}
	if ack {
		t.Status = storage.StatusAwaitingAck
		t.NextDue = 0
		t.LastFire = &storage.LastFire{FireID: "t:1", Result: []byte("callback")}
	}
	return t
}

// TestFinishFireAck is the ACK phase's state machine (API.md "The ACK
// phase"): a 2xx callback awaits the ACK (the same fire in flight again,
// due ack_delay_ms later), an ACK 2xx makes the task done, ACK failures
// are retried ack_retries times, then the task failed with reason ack.
func TestFinishFireAck(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	started := time.Unix(100, 0)
	const now = 101 * sec
	result := func(o dispatch.Outcome, code, attempt int) *dispatch.Result {
		return &dispatch.Result{Job: &dispatch.Job{TaskID: "t", Seq: 1, Attempt: attempt, Due: 100 * sec}, Outcome: o, StatusCode: code,
			StartedAt: started, FinishedAt: started.Add(time.Millisecond), Body: []byte("ok")}
	}
	tests := []struct {
		name       string
		task       *storage.Task
		res        *dispatch.Result
		want       FinishResult
		wantStatus storage.Status
		wantAck    bool  // the ACK phase is in flight afterwards
		wantAt     int64 // its next attempt, when wantAck (0: a backoff of about 1s)
		wantReason string
		wantExAck  bool
	}{
		{"callback 2xx awaits the ack", ackTask(false, 1), result(dispatch.OutcomeSuccess, 200, 1), FinishAwaitAck, storage.StatusAwaitingAck, true, now + 2*sec, "", false},
		{"callback failure retries the callback", ackTask(false, 1), result(dispatch.OutcomeFailure, 500, 1), FinishRetry, storage.StatusScheduled, false, 0, "", false},
		{"callback failure exhausted: failed, no ack", ackTask(false, 3), result(dispatch.OutcomeFailure, 500, 3), FinishFailed, storage.StatusFailed, false, 0, "", false},
		{"ack 2xx is done", ackTask(true, 1), result(dispatch.OutcomeSuccess, 204, 1), FinishSuccess, storage.StatusDone, false, 0, "", true},
		{"ack failure retries", ackTask(true, 1), result(dispatch.OutcomeFailure, 500, 1), FinishRetry, storage.StatusAwaitingAck, true, 0, "", true},
		{"ack 404 retries", ackTask(true, 2), result(dispatch.OutcomeGone, 404, 2), FinishRetry, storage.StatusAwaitingAck, true, 0, "", true},
		{"ack retries exhausted: failed, reason ack", ackTask(true, 3), result(dispatch.OutcomeFailure, 500, 3), FinishFailed, storage.StatusFailed, false, 0, FailReasonAck, true},
		{"ack address refused: failed at once", ackTask(true, 1), result(dispatch.OutcomeDenied, 0, 1), FinishFailed, storage.StatusFailed, false, 0, FailReasonAck, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ex, got := Finish(tc.task, tc.res, now, rnd)
			if got != tc.want {
				t.Fatalf("Finish = %d, want %d", got, tc.want)
			}
			if ex == nil || ex.FireID != "t:1" || ex.Ack != tc.wantExAck {
				t.Errorf("execution %+v, want fire t:1 with Ack %v", ex, tc.wantExAck)
			}
			task := tc.task
			if task.Status != tc.wantStatus || task.FailReason != tc.wantReason {
				t.Errorf("status %v reason %q, want %v %q", task.Status, task.FailReason, tc.wantStatus, tc.wantReason)
			}
			inf := task.Inflight
			if got := inf != nil && inf.Ack; got != tc.wantAck {
				t.Fatalf("Inflight = %+v, want the ACK phase in flight %v", inf, tc.wantAck)
			}
			if !tc.wantAck {
				return
			}
			if inf.Seq != 1 || inf.Due != 100*sec {
				t.Errorf("ACK phase %+v, want the same fire (seq 1, due 100s)", inf)
			}
			if task.FireWake() != inf.NextAttemptAt {
				t.Errorf("wake %d, want the next ACK attempt %d", task.FireWake(), inf.NextAttemptAt)
			}
			if tc.wantAt != 0 {
				if inf.NextAttemptAt != tc.wantAt || inf.Attempt != 0 {
					t.Errorf("first ACK attempt at %d (attempts %d), want at %d, none yet", inf.NextAttemptAt, inf.Attempt, tc.wantAt)
				}
				return
			}
			base := int64(time.Second) << (inf.Attempt - 1) // the usual backoff: 1s, 2s, … ±20%
			if wait := inf.NextAttemptAt - now; wait < base*8/10 || wait > base*12/10 {
				t.Errorf("ACK retry %d in %v, want the usual backoff (%v ±20%%)", inf.Attempt, time.Duration(wait), time.Duration(base))
			}
		})
	}
}

// TestBeginFireAck: the ACK phase starts its attempts through Begin
// like a retry: not before its time, then attempt 1, 2, … of the same fire,
// and JobFor sends them to the ack_url with the ACK marker.
func TestBeginFireAck(t *testing.T) {
	task := ackTask(true, 0)
	task.Inflight.NextAttemptAt = 103 * sec
	if got := Begin(task, 103*sec-1, int64(5*time.Second)); got != StartNothing {
		t.Fatalf("Begin before the ack delay = %d, want nothing", got)
	}
	if got := Begin(task, 103*sec, int64(5*time.Second)); got != StartFire {
		t.Fatalf("Begin at the ack delay = %d, want a fire", got)
	}
	j := JobFor(task)
	if j.URL != "https://example.com/ack" || !j.Ack || j.Attempt != 1 || j.Seq != 1 || j.Due != 100*sec {
		t.Errorf("job %+v, want ACK attempt 1 of fire 1 to the ack_url", j)
	}
	if task.Status != storage.StatusAwaitingAck {
		t.Errorf("status %v, want awaiting_ack", task.Status)
	}
	cb := ackTask(false, 1)
	if j := JobFor(cb); j.URL != cb.Spec.CallbackURL || j.Ack {
		t.Errorf("callback job %+v, want the callback_url without the ACK marker", j)
	}
}
