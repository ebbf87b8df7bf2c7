package node

// Result callbacks (API.md "Result callbacks", DESIGN.md "Result
// callbacks"): when a fire of a task with success_url or failure_url
// finishes with that outcome (after its retries), the writer records a
// notification in the task's record, in the same write as the outcome
// (storage.Task.Notices), so it replicates with it. The first pending
// notice is part of the task's wake (storage.Task.Wake), so a restart or
// the slot's next owner finds it in the due index and resumes it. When it
// is due the writer hands it to the dispatcher as a job of its own (same
// address policy, signing and per-host limits as a callback, same fire
// id); a 2xx removes it in a replicated write, a failure is retried with
// the callback backoff up to maxNoticeAttempts attempts. A notice never
// counts as the task's fire in flight: it does not delay the next fire.
// Notices of one task go out one at a time, oldest first; at most
// maxNotices wait, and a newer one drops the oldest (counted).

import (
	"bytes"
	"encoding/json"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/chime-scheduler/chime/node/dispatch"
	"github.com/chime-scheduler/chime/node/firing"
	"github.com/chime-scheduler/chime/node/schedule"
	"github.com/chime-scheduler/chime/storage"
)

const (
	// maxNotices bounds a task's pending notifications.
	maxNotices = 16
	// maxNoticeAttempts bounds the delivery attempts of one notification.
	maxNoticeAttempts = 10
)

// noticeBody is the JSON a result callback POSTs.
type noticeBody struct {
	TaskID     string `json:"task_id"`
	FireID     string `json:"fire_id"`
	DueAt      string `json:"due_at"`
	Status     string `json:"status"` // "success" or "failure"
	Attempts   int    `json:"attempts"`
	StatusCode int    `json:"status_code"`
	Response   string `json:"response"`
	FinishedAt string `json:"finished_at"`
}

// addNotice records, on t whose fire just finished (lf, t.LastFire, as
// written by firing.Finish) with outcome failed at now, the notification for
// its matching URL, if it has one.
func (w *writer) addNotice(t *storage.Task, seq uint64, failed bool, now int64) {
	url, status := t.Spec.SuccessURL, "success"
	if failed {
		url, status = t.Spec.FailureURL, "failure"
	}
	lf := t.LastFire
	if url == "" || lf == nil {
		return
	}
	resp := lf.Result
	if len(resp) > firing.MaxResultBytes {
		resp = resp[:firing.MaxResultBytes]
	}
	body, err := json.Marshal(noticeBody{
		TaskID:     t.ID,
		FireID:     firing.FireID(t.ID, seq),
		DueAt:      noticeInstant(lf.DueAt),
		Status:     status,
		Attempts:   lf.Attempts,
		StatusCode: lf.StatusCode,
		Response:   noticeText(resp),
		FinishedAt: noticeInstant(lf.FinishedAt),
	})
	if err != nil {
		return // cannot happen: strings and integers
	}
	ns := t.Notices
	if len(ns) >= maxNotices {
		drop := len(ns) - maxNotices + 1
		w.metrics.NoticesDropped.WithLabelValues("overflow").Add(float64(drop))
		w.log.Warn("result callback dropped: too many pending", "task", t.ID, "fire", firing.FireID(t.ID, ns[0].Seq))
		ns = ns[drop:]
	}
	// A new slice: the old one may be shared with a copy being encoded.
	out := make([]storage.PendingNotice, 0, len(ns)+1)
	out = append(out, ns...)
	t.Notices = append(out, storage.PendingNotice{Seq: seq, Failure: failed, URL: url, DueAt: lf.DueAt, Body: body, At: now})
}

func noticeInstant(ns int64) string {
	return time.Unix(0, ns).UTC().Format(time.RFC3339Nano)
}

// noticeText is a kept response prefix as a string: invalid UTF-8 (a
// cut sequence, a binary body) becomes U+FFFD.
func noticeText(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}

// noticeBusy reports whether a notice of task id is at the dispatcher.
func (w *writer) noticeBusy(id string) bool {
	_, ok := w.noticing[id]
	return ok
}

// noticeWake is the wake of t's first pending notice, 0 if none or while
// one is at the dispatcher (its result re-files the task).
func (w *writer) noticeWake(t *storage.Task) int64 {
	if len(t.Notices) == 0 || w.noticeBusy(t.ID) {
		return 0
	}
	return t.Notices[0].At
}

// claimNotice hands t's first pending notice to the dispatcher (after the
// group's commit) if it is due and none is out. Writer goroutine; t's slot
// is active.
func (w *writer) claimNotice(g *syncGroup, t *storage.Task, now int64) {
	if len(t.Notices) == 0 || w.noticeBusy(t.ID) || t.Notices[0].At > now {
		return
	}
	nt := &t.Notices[0]
	if w.noticing == nil {
		w.noticing = make(map[string]uint64)
	}
	w.noticing[t.ID] = nt.Seq
	j := &dispatch.Job{
		TaskID:  t.ID,
		Slot:    t.Slot,
		Seq:     nt.Seq,
		Due:     nt.DueAt,
		Attempt: nt.Attempts + 1,
		URL:     nt.URL,
		Payload: nt.Body,
		Timeout: time.Duration(t.Spec.TimeoutMs) * time.Millisecond,
		Notice:  true,
	}
	j.Epoch, _ = w.holds(t.Slot)
	g.jobs = append(g.jobs, j)
}

// noticeUndispatched handles a notice the dispatcher refused: it is tried
// again shortly.
func (w *writer) noticeUndispatched(j *dispatch.Job) {
	if seq, ok := w.noticing[j.TaskID]; ok && seq == j.Seq {
		delete(w.noticing, j.TaskID)
	}
	w.notify([]wakeChange{{ID: j.TaskID, At: w.now().UnixNano() + int64(fireRetryDelay)}})
}

// applyNoticeDone applies the result of one delivery attempt: a 2xx, a
// 404/410 or a refused address settles the notice (it leaves the record),
// another failure is retried after the backoff, up to maxNoticeAttempts.
func (w *writer) applyNoticeDone(b *storage.Batch, g *syncGroup, r *dispatch.Result, now int64) int {
	id := r.Job.TaskID
	if seq, ok := w.noticing[id]; ok && seq == r.Job.Seq {
		delete(w.noticing, id)
	}
	t, err := w.get(id)
	if err != nil || t == nil {
		return 0
	}
	if r.StatusCode == 0 && r.Err == dispatch.Shutdown {
		return 0 // not answered: the next start repeats it
	}
	if _, ok := w.holds(t.Slot); !ok {
		return 0 // its new owner delivers it
	}
	i := -1
	for k := range t.Notices {
		// The body too: a task deleted and created again starts its
		// fire sequence anew, and a late result must not settle its notice.
		if t.Notices[k].Seq == r.Job.Seq && bytes.Equal(t.Notices[k].Body, r.Job.Payload) {
			i = k
			break
		}
	}
	if i < 0 {
		g.wakes = append(g.wakes, wakeChange{ID: t.ID, At: w.wakeOf(t)})
		return 0 // dropped meanwhile
	}
	prev := t.Wake()
	ns := make([]storage.PendingNotice, 0, len(t.Notices))
	ns = append(ns, t.Notices...)
	nt := &ns[i]
	settled := true
	switch r.Outcome {
	case dispatch.OutcomeSuccess:
		w.metrics.NoticesDelivered.Inc()
	case dispatch.OutcomeGone, dispatch.OutcomeDenied:
		w.metrics.NoticesDropped.WithLabelValues(r.Outcome.String()).Inc()
		w.log.Warn("result callback dropped", "task", id, "fire", firing.FireID(id, nt.Seq), "status", r.StatusCode, "err", r.Err)
	default:
		nt.Attempts++
		if nt.Attempts >= maxNoticeAttempts {
			w.metrics.NoticesDropped.WithLabelValues("attempts").Inc()
			w.log.Warn("result callback dropped after its attempts", "task", id, "fire", firing.FireID(id, nt.Seq), "status", r.StatusCode, "err", r.Err)
		} else {
			settled = false
			nt.At = now + int64(schedule.Backoff(nt.Attempts, r.RetryAfter, w.rnd))
		}
	}
	if settled {
		ns = append(ns[:i], ns[i+1:]...)
	}
	if len(ns) == 0 {
		ns = nil
	}
	t.Notices = ns
	w.put(b, g, t, prev, now)
	return 1
}
