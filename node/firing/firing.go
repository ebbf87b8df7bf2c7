// Package firing is the firing state machine of one task record: what
// starts a fire and what a finished attempt does to the record. The
// functions are pure (the record and now in, the record mutated); node's
// writer persists the result. It knows nothing of slots, the writer or the
// network. Reference: docs/API.md "Callback", docs/DESIGN.md §7.
package firing

import (
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/chime-scheduler/chime/node/dispatch"
	"github.com/chime-scheduler/chime/node/schedule"
	"github.com/chime-scheduler/chime/storage"
)

// StartDecision is what Begin decided.
type StartDecision uint8

const (
	StartNothing StartDecision = 1 + iota // nothing is due: the caller re-files the task at t.Wake()
	StartFire                             // an attempt starts now: t.Inflight describes it
	StartSkipped                          // missed occurrences were skipped (misfire=skip); record changed, nothing fires
	StartExpire                           // a final task's retention has passed: the caller deletes it with its history
)

// Begin decides, at now, whether the task fires. It is called when the
// task's wheel entry expires; the entry may be stale, so everything is
// decided from the record. grace is how late a periodic fire may start
// before it counts as missed and the task's misfire policy applies.
func Begin(t *storage.Task, now, grace int64) StartDecision {
	w := t.FireWake() // pending children are the chain outbox's (chain.go)
	if w == 0 || w > now {
		return StartNothing
	}
	if inf := t.Inflight; inf != nil {
		// A retry whose backoff has passed, or a fire that was in flight
		// when the node stopped: repeat it with the same fire id.
		inf.Attempt++
		inf.NextAttemptAt = 0
		inf.StartedAt = now
		return StartFire
	}
	if len(t.Triggers) > 0 && t.Triggers[0] <= now &&
		(t.Status != storage.StatusScheduled || t.NextDue == 0 || t.Triggers[0] <= t.NextDue) {
		due := t.Triggers[0]
		if len(t.TriggerDues) > 0 {
			if t.TriggerDues[0] != 0 {
				due = t.TriggerDues[0] // POST trigger with a due_at
			}
			t.TriggerDues = t.TriggerDues[1:]
			if len(t.TriggerDues) == 0 {
				t.TriggerDues = nil
			}
		}
		t.Triggers = t.Triggers[1:]
		if len(t.Triggers) == 0 {
			t.Triggers = nil
		}
		t.FireSeq++
		t.Inflight = &storage.Inflight{Seq: t.FireSeq, Due: due, Attempt: 1, StartedAt: now, Trigger: true}
		return StartFire
	}
	if t.Status != storage.StatusScheduled || t.NextDue == 0 || t.NextDue > now {
		// Nothing scheduled is due: the wake was the pending backfill's.
		// Its next occurrence fires now as an extra fire, and the backfill
		// moves on in the same write, so a restart repeats this fire (its
		// intent) and neither repeats nor loses an occurrence.
		bf := t.Backfill
		if bf == nil {
			if t.Status.Final() && t.ExpireAt != 0 && t.ExpireAt <= now {
				// Wake is the expiry: no fire in flight, no trigger
				// pending, and the task is still final. A task revived
				// (replaced, resumed) since its entry was filed is not
				// final any more and has no ExpireAt.
				return StartExpire
			}
			return StartNothing
		}
		t.FireSeq++
		t.Inflight = &storage.Inflight{Seq: t.FireSeq, Due: bf.Next, Attempt: 1, StartedAt: now, Trigger: true}
		next := NextBackfill(&t.Spec, bf.Next)
		if bf.Left <= 1 || next == 0 || next > bf.To {
			t.Backfill = nil
		} else {
			bf.Next, bf.Left = next, bf.Left-1
		}
		return StartFire
	}
	// A scheduled fire.
	due := t.NextDue
	missed := t.Spec.Kind != storage.KindOnce && now-due > grace
	if missed && t.Spec.Misfire == storage.MisfireFireAll {
		// Bounded by max_catchup: only the most recent occurrences fire,
		// the earlier ones are counted as skipped.
		start, skipped := schedule.Catchup(&t.Spec, due, now, schedule.MaxCatchup(&t.Spec))
		if skipped > 0 {
			t.SkippedFires += skipped
			t.NextDue, due = start, start
		}
	}
	if missed && t.Spec.Misfire == storage.MisfireSkip {
		t.NextDue = schedule.FirstAfter(&t.Spec, due, now)
		if t.NextDue == 0 {
			t.Status = storage.StatusDone
		} else if schedule.Ended(&t.Spec, t.NextDue, t.Runs) {
			t.Status = storage.StatusCompleted // skipped past end_at
			t.NextDue = 0
		}
		return StartSkipped
	}
	t.FireSeq++
	t.Inflight = &storage.Inflight{Seq: t.FireSeq, Due: due, Attempt: 1, StartedAt: now, Misfired: missed}
	return StartFire
}

// NextBackfill is the occurrence a backfill fires after at: the schedule's
// next one, 0 if there is none.
func NextBackfill(spec *storage.Spec, at int64) int64 {
	next := schedule.NextDue(spec, at)
	if next <= at {
		return 0
	}
	return next
}

// SettleFinal keeps FinishedAt and ExpireAt in step with t's status, on
// every write of the record: a task that just became final is stamped
// finished at now and expires after its retention (its own retention_ms,
// else def; 0 = never), which makes its expiry its wake and so puts it in
// the due index; a task that is not final (created, replaced, resumed) has
// neither. A task final already keeps its stamps. A record written before
// retention existed and final already is stamped at its next write: until
// then it does not expire.
func SettleFinal(t *storage.Task, now int64, def time.Duration) {
	if !t.Status.Final() {
		t.FinishedAt, t.ExpireAt = 0, 0
		return
	}
	if t.FinishedAt != 0 {
		return
	}
	t.FinishedAt = now
	ret := int64(def)
	if t.Spec.RetentionSet {
		ret = t.Spec.RetentionMs * int64(time.Millisecond)
	}
	t.ExpireAt = 0
	if ret > 0 {
		t.ExpireAt = now + ret
	}
}

// FireID is the receiver's dedupe key of one fire: task id ":" sequence.
func FireID(id string, seq uint64) string {
	return id + ":" + strconv.FormatUint(seq, 10)
}

// FinishResult is what one finished attempt did to the record.
type FinishResult uint8

const (
	FinishStale   FinishResult = 1 + iota // the record no longer has this fire in flight (replaced or deleted): ignore
	FinishRetry                           // the attempt failed and will be retried at Inflight.NextAttemptAt
	FinishSuccess                         // the fire succeeded
	FinishFailed                          // the fire failed for good (retries exhausted, or the endpoint is gone)
)

// FinishAwaitAck: the callback succeeded and the fire's ACK phase starts
// (Inflight.Ack); the fire has not finished.
const FinishAwaitAck FinishResult = 64

// MaxResultBytes is how much of a callback's response body is kept.
const MaxResultBytes = 512

// Finish applies the result of one attempt to the record and returns
// the execution record to append (nil when stale). Periodic schedules
// advance from the fire's logical due time, never from now, so they do not
// drift; a fire that started late enough to be "missed" under misfire
// fire_once resumes at the first occurrence after now.
func Finish(t *storage.Task, r *dispatch.Result, now int64, rnd *rand.Rand) (*storage.Execution, FinishResult) {
	return FinishAttempt(t, r, now, rnd, false)
}

// FinishAttempt is Finish; spare says the attempt was a circuit
// breaker's probe that failed (dispatch.CircuitProbeFailed): it does not
// spend one of the fire's retries, so a plain failure is retried whatever
// the attempt number (the outage's probes never exhaust a task).
func FinishAttempt(t *storage.Task, r *dispatch.Result, now int64, rnd *rand.Rand, spare bool) (*storage.Execution, FinishResult) {
	inf := t.Inflight
	if inf == nil || inf.Seq != r.Job.Seq || inf.Attempt != r.Job.Attempt {
		return nil, FinishStale
	}
	body := r.Body
	if len(body) > MaxResultBytes {
		body = body[:MaxResultBytes]
	}
	ex := &storage.Execution{
		FireID:     FireID(t.ID, inf.Seq),
		DueAt:      inf.Due,
		StartedAt:  r.StartedAt.UnixNano(),
		FinishedAt: r.FinishedAt.UnixNano(),
		Attempt:    inf.Attempt,
		StatusCode: r.StatusCode,
		Error:      r.Err,
		Result:     body,
		Ack:        inf.Ack,
	}
	if inf.Ack {
		return ex, finishAck(t, r, now, rnd)
	}
	// Only a plain failure is retried: gone and denied (a refused callback
	// address: retrying cannot help, and must not dial it) end the fire.
	if r.Outcome == dispatch.OutcomeFailure && (inf.Attempt <= t.Spec.MaxRetries || spare) {
		inf.NextAttemptAt = now + int64(schedule.Backoff(inf.Attempt, r.RetryAfter, rnd))
		return ex, FinishRetry
	}
	t.LastFire = &storage.LastFire{
		FireID:     ex.FireID,
		DueAt:      inf.Due,
		FinishedAt: ex.FinishedAt,
		Attempts:   inf.Attempt,
		StatusCode: r.StatusCode,
		Error:      r.Err,
		Result:     body,
	}
	t.Inflight = nil
	periodic := t.Spec.Kind != storage.KindOnce
	if periodic && !inf.Trigger {
		t.Runs++ // a scheduled fire finished, whatever its outcome (max_runs)
	}
	switch r.Outcome {
	case dispatch.OutcomeSuccess:
		t.FireCount++
		t.FailCount = 0
		if !inf.Trigger {
			if startAck(t, inf, now) {
				return ex, FinishAwaitAck
			}
			advance(t, inf, now)
		}
		return ex, FinishSuccess
	case dispatch.OutcomeGone:
		// The endpoint is gone: the task stops, whatever kind of fire this was.
		t.FailCount++
		t.NextDue = 0
		if periodic {
			t.Status = storage.StatusInactive
		} else {
			t.Status = storage.StatusFailed
		}
		return ex, FinishFailed
	}
	t.FailCount++
	if inf.Trigger {
		return ex, FinishFailed // an extra fire does not move the schedule
	}
	if !periodic {
		t.Status = storage.StatusFailed
		t.NextDue = 0
		return ex, FinishFailed
	}
	if t.Spec.MaxFails > 0 && t.FailCount >= uint64(t.Spec.MaxFails) {
		t.Status = storage.StatusInactive
		t.NextDue = 0
		return ex, FinishFailed
	}
	advance(t, inf, now)
	return ex, FinishFailed
}

// FailReasonAck is Task.FailReason of a task whose ACK phase failed.
const FailReasonAck = "ack"

// startAck starts the ACK phase of fire inf, whose callback just
// succeeded, if the task has one (a one-shot task with an ack_url; not an
// extra fire): the task awaits its ACK, and the same fire is in flight
// again, its first ACK attempt due ack_delay_ms from now. It is the
// task's wake, so a restart or the slot's next owner resumes it.
func startAck(t *storage.Task, inf *storage.Inflight, now int64) bool {
	if t.Spec.Kind != storage.KindOnce || t.Spec.AckURL == "" || inf.Trigger {
		return false
	}
	t.Status = storage.StatusAwaitingAck
	t.NextDue = 0
	t.Inflight = &storage.Inflight{
		Seq:           inf.Seq,
		Due:           inf.Due,
		NextAttemptAt: now + t.Spec.AckDelayMs*int64(time.Millisecond),
		Ack:           true,
	}
	return true
}

// finishAck applies the result of one ACK attempt: a 2xx makes the task
// done; anything else is retried with the usual backoff until ack_retries
// are spent (a refused address at once), then the task failed with reason
// "ack". Either way this ends the fire: its chain starts now.
func finishAck(t *storage.Task, r *dispatch.Result, now int64, rnd *rand.Rand) FinishResult {
	inf := t.Inflight
	if r.Outcome != dispatch.OutcomeSuccess && r.Outcome != dispatch.OutcomeDenied && inf.Attempt <= t.Spec.AckRetries {
		inf.NextAttemptAt = now + int64(schedule.Backoff(inf.Attempt, r.RetryAfter, rnd))
		return FinishRetry
	}
	t.Inflight = nil
	t.NextDue = 0
	if r.Outcome == dispatch.OutcomeSuccess {
		t.Status = storage.StatusDone
		return FinishSuccess
	}
	t.Status = storage.StatusFailed
	t.FailReason = FailReasonAck
	t.FailCount++
	return FinishFailed
}

// advance moves the schedule past the fire inf: a one-shot task is done, a
// periodic one is due at its next occurrence.
func advance(t *storage.Task, inf *storage.Inflight, now int64) {
	if t.Spec.Kind == storage.KindOnce {
		t.Status = storage.StatusDone // even if paused while its fire was in flight
		t.NextDue = 0
		return
	}
	if inf.Misfired && t.Spec.Misfire == storage.MisfireFireOnce {
		t.NextDue = schedule.FirstAfter(&t.Spec, inf.Due, now)
	} else {
		t.NextDue = schedule.NextDue(&t.Spec, inf.Due)
	}
	if t.NextDue == 0 && t.Status == storage.StatusScheduled {
		t.Status = storage.StatusDone // a cron expression with no further occurrence
	}
	if t.NextDue != 0 && schedule.Ended(&t.Spec, t.NextDue, t.Runs) {
		// end_at or max_runs reached: final, even if paused meanwhile.
		t.Status = storage.StatusCompleted
		t.NextDue = 0
	}
}

// JobFor builds the dispatcher job for the attempt described by t.Inflight.
func JobFor(t *storage.Task) *dispatch.Job {
	inf := t.Inflight
	j := &dispatch.Job{
		TaskID:  t.ID,
		Slot:    t.Slot,
		Seq:     inf.Seq,
		Due:     inf.Due,
		Attempt: inf.Attempt,
		URL:     t.Spec.CallbackURL,
		Payload: t.Spec.Payload,
		Headers: t.Spec.Headers,
		Timeout: time.Duration(t.Spec.TimeoutMs) * time.Millisecond,
	}
	if inf.Ack {
		j.URL, j.Ack = t.Spec.AckURL, true
	}
	return j
}
