package client

// Task and Execution as JSON values of their own: for programs that store,
// print or read tasks in the API's shape (the chime CLI's --json and
// --file).

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// MarshalJSON renders t with the field names of API.md. A task with a
// Status (one a node answered) is rendered as the node answers it, state
// included; one without is rendered as the request that would create it.
func (t Task) MarshalJSON() ([]byte, error) {
	w := t.request()
	if t.Status == "" {
		return json.Marshal(w)
	}
	if t.Delay == 0 {
		w.DelayMs = nil // a node answers delay_ms only for a delay
	}
	w.Status = string(t.Status)
	w.NextDueAt, w.CreatedAt, w.UpdatedAt = instant(t.NextDueAt), instant(t.CreatedAt), instant(t.UpdatedAt)
	w.Owner = t.Owner
	w.ParentID, w.ParentFire, w.Pending = t.ParentID, t.ParentFireID, t.PendingChildren
	w.Notices = t.PendingNotices
	w.Finished, w.Expires = instant(t.FinishedAt), instant(t.ExpiresAt)
	w.NextAckAt, w.FailReason = instant(t.NextAckAt), t.FailReason
	if t.MaxRuns > 0 || t.Runs > 0 {
		w.Runs = &t.Runs // a node answers runs with max_runs, 0 included
	}
	if lf := t.LastFire; lf != nil {
		w.LastFire = &lastFireJSON{FireID: lf.FireID, DueAt: instant(lf.DueAt), FinishedAt: instant(lf.FinishedAt),
			Attempts: lf.Attempts, StatusCode: lf.StatusCode, Error: lf.Error, Result: lf.Result}
	}
	// The counters a node always answers, zero included.
	return json.Marshal(struct {
		taskJSON
		Slot      uint16 `json:"slot"`
		FireCount uint64 `json:"fire_count"`
		FailCount uint64 `json:"fail_count"`
	}{w, t.Slot, t.FireCount, t.FailCount})
}

// UnmarshalJSON reads a task in the API's shape, a request or an answer,
// as leniently as the client reads answers: unknown fields are ignored and
// an instant that does not parse is the zero time. ParseTask is the strict
// reading of a request.
func (t *Task) UnmarshalJSON(b []byte) error {
	var w taskJSON
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*t = w.task()
	return nil
}

// MarshalJSON renders e with the field names of API.md.
func (e Execution) MarshalJSON() ([]byte, error) {
	return json.Marshal(executionJSON{FireID: e.FireID, DueAt: instant(e.DueAt), StartedAt: instant(e.StartedAt),
		FinishedAt: instant(e.FinishedAt), Attempt: e.Attempt, StatusCode: e.StatusCode, Error: e.Error, Result: e.Result,
		Children: e.Children, Phase: e.Phase})
}

// scheduleFields are the request fields that set a task's schedule.
var scheduleFields = []string{"delay_ms", "due_at", "every_ms", "cron"}

// ParseTask reads a task request body (API.md "Task (request body)"), e.g.
// a file a user wrote, into a Task as strictly as a node would take it, so
// that nothing in it is silently lost on the way: one JSON object, no
// unknown fields, exactly one schedule field, RFC 3339 instants. The state
// fields of a task answer (slot, next_due_at, fire_count, …) are allowed and
// ignored, so that a task as a node answered it can be sent again. Errors
// match ErrInvalid.
func ParseTask(body []byte) (Task, error) {
	invalid := func(format string, a ...any) (Task, error) {
		return Task{}, fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, a...))
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	var w taskJSON
	if err := dec.Decode(&w); err != nil {
		return invalid("%v", err)
	}
	if dec.More() {
		return invalid("more than one JSON value")
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil {
		return invalid("%v", err)
	}
	given := func(name string) bool {
		v, ok := fields[name]
		return ok && string(bytes.TrimSpace(v)) != "null"
	}
	var sched []string
	for _, f := range scheduleFields {
		if given(f) {
			sched = append(sched, f)
		}
	}
	switch {
	case len(sched) == 0:
		return invalid("no schedule: want one of %s", strings.Join(scheduleFields, ", "))
	case len(sched) > 1:
		return invalid("only one schedule may be given, got %s", strings.Join(sched, " and "))
	case sched[0] == "every_ms" && w.EveryMs <= 0:
		return invalid("every_ms: must be positive, got %d", w.EveryMs)
	case sched[0] == "cron" && strings.TrimSpace(w.Cron) == "":
		return invalid("cron: empty")
	case w.RetentionMs != nil && *w.RetentionMs < 0:
		return invalid("retention_ms: must be at least 0, got %d", *w.RetentionMs)
	case given("max_runs") && w.MaxRuns < 1:
		// 0 would be sent as "no limit".
		return invalid("max_runs: must be at least 1, got %d", w.MaxRuns)
	}
	for name, v := range map[string]string{"due_at": w.DueAt, "start_at": w.StartAt, "end_at": w.EndAt} {
		if _, err := time.Parse(time.RFC3339Nano, v); given(name) && err != nil {
			return invalid("%s: %q is not an RFC 3339 time", name, v)
		}
	}
	return w.task(), nil
}
