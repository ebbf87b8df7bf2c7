package httpapi

// This file renders stored records as the API's response bodies (API.md
// "Task (response body)" and the executions listing).

import (
	"encoding/json"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/chime-scheduler/chime/node/schedule"
	"github.com/chime-scheduler/chime/storage"
)

// TaskResponse is the JSON body that describes one task: the request fields
// echoed back as given, plus the task's state. Instants are RFC 3339 in UTC
// with as many fractional digits as needed (up to nanoseconds); absent
// instants are omitted.
//
// Echo rules: exactly one of delay_ms, due_at, every_ms, cron is present.
// delay_ms is echoed when it was given and non-zero; a one-shot task created
// with delay_ms 0 shows its due_at instead (the stored spec cannot tell the
// two apart). timezone and start_at appear only when given; misfire and
// max_fails only for periodic tasks, where they always appear with their
// effective value. dst appears when it was given, with both members. end_at
// and max_runs appear when given; runs (scheduled fires finished since the
// task was created or replaced) with max_runs. retention_ms appears when
// given; finished_at once the task is final, expires_at when it will be
// deleted (not when it is kept forever).
type TaskResponse struct {
	ID          string            `json:"id"`
	CallbackURL string            `json:"callback_url"`
	DelayMs     int64             `json:"delay_ms,omitempty"`
	DueAt       string            `json:"due_at,omitempty"`
	EveryMs     int64             `json:"every_ms,omitempty"`
	Cron        string            `json:"cron,omitempty"`
	Timezone    string            `json:"timezone,omitempty"`
	StartAt     string            `json:"start_at,omitempty"`
	Payload     json.RawMessage   `json:"payload,omitempty"`
	Headers     map[string]string `json:"headers,omitempty"`
	TimeoutMs   int64             `json:"timeout_ms"`
	MaxRetries  int               `json:"max_retries"`
	Misfire     string            `json:"misfire,omitempty"`
	MaxFails    *int              `json:"max_fails,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	DST         *DSTResponse      `json:"dst,omitempty"`
	EndAt       string            `json:"end_at,omitempty"`
	MaxRuns     int64             `json:"max_runs,omitempty"`
	MaxCatchup  int               `json:"max_catchup,omitempty"`
	RetentionMs *int64            `json:"retention_ms,omitempty"`
	// OnSuccess and OnFailure are the task's chains as given (compact).
	OnSuccess []json.RawMessage `json:"on_success,omitempty"`
	OnFailure []json.RawMessage `json:"on_failure,omitempty"`
	// SuccessURL and FailureURL are the task's result callbacks.
	SuccessURL string `json:"success_url,omitempty"`
	FailureURL string `json:"failure_url,omitempty"`

	Slot      uint16  `json:"slot"`
	Status    string  `json:"status"`
	NextDueAt string  `json:"next_due_at,omitempty"`
	CreatedAt string  `json:"created_at,omitempty"`
	UpdatedAt string  `json:"updated_at,omitempty"`
	FireCount uint64  `json:"fire_count"`
	FailCount uint64  `json:"fail_count"`
	Runs      *uint64 `json:"runs,omitempty"`
	// SkippedFires (periodic tasks): missed occurrences dropped by
	// max_catchup under misfire fire_all.
	SkippedFires *uint64          `json:"skipped_fires,omitempty"`
	Backfill     *BackfillPending `json:"backfill,omitempty"`
	// FinishedAt is when the task became final; ExpiresAt when it and its
	// executions are deleted (API.md "Retention").
	FinishedAt string            `json:"finished_at,omitempty"`
	ExpiresAt  string            `json:"expires_at,omitempty"`
	Owner      string            `json:"owner,omitempty"`
	LastFire   *LastFireResponse `json:"last_fire,omitempty"`
	// ParentID and ParentFireID link a task a chain created to its parent
	// and the parent's fire. PendingChildren are the ids of the children
	// of this task's finished fires still being created.
	ParentID        string   `json:"parent_id,omitempty"`
	ParentFireID    string   `json:"parent_fire_id,omitempty"`
	PendingChildren []string `json:"pending_children,omitempty"`
	// PendingNotices counts the result callbacks still to deliver.
	PendingNotices int `json:"pending_notices,omitempty"`
	// AckURL, AckDelayMs and AckRetries are the ACK phase (API.md "The
	// ACK phase"), with their effective values, when the task has one.
	// NextAckAt is when its next ACK attempt starts (awaiting_ack);
	// FailReason is "ack" on a task failed by its ACK phase.
	AckURL     string `json:"ack_url,omitempty"`
	AckDelayMs *int64 `json:"ack_delay_ms,omitempty"`
	AckRetries *int   `json:"ack_retries,omitempty"`
	NextAckAt  string `json:"next_ack_at,omitempty"`
	FailReason string `json:"fail_reason,omitempty"`
	// FlowKey is the task's flow key (API.md "Flow keys").
	FlowKey string `json:"flow_key,omitempty"`
}

// BackfillPending is a task's pending backfill: the next occurrence to
// fire, the last one, and how many are left (the next included).
type BackfillPending struct {
	Next string `json:"next"`
	To   string `json:"to"`
	Left uint64 `json:"left"`
}

// DSTResponse is a cron task's daylight-saving policy.
type DSTResponse struct {
	Gap     string `json:"gap"`
	Overlap string `json:"overlap"`
}

// LastFireResponse summarizes a task's most recent finished fire.
// StatusCode is 0 when no HTTP response arrived (timeout, connection error);
// Result is the start of the callback's response body as text.
type LastFireResponse struct {
	FireID     string `json:"fire_id"`
	DueAt      string `json:"due_at,omitempty"`
	FinishedAt string `json:"finished_at,omitempty"`
	Attempts   int    `json:"attempts"`
	StatusCode int    `json:"status_code"`
	Error      string `json:"error,omitempty"`
	Result     string `json:"result,omitempty"`
}

// ExecutionResponse is one attempt of one fire in GET
// /v1/tasks/{id}/executions. Field meanings as in LastFireResponse.
type ExecutionResponse struct {
	FireID     string `json:"fire_id"`
	DueAt      string `json:"due_at,omitempty"`
	StartedAt  string `json:"started_at,omitempty"`
	FinishedAt string `json:"finished_at,omitempty"`
	Attempt    int    `json:"attempt"`
	StatusCode int    `json:"status_code"`
	Error      string `json:"error,omitempty"`
	Result     string `json:"result,omitempty"`
	// Children are the ids of the tasks the fire's chain created, on the
	// execution that finished the fire (API.md "Chains").
	Children []string `json:"children,omitempty"`
	// Phase is "ack" on an attempt of the fire's ACK phase (POST
	// ack_url; Attempt counts the ACK attempts); absent on a callback's.
	Phase string `json:"phase,omitempty"`
}

// taskResponse renders t, served by the node named owner. The response
// shares Payload, Headers and Labels with t, so t must not be modified until
// the response has been encoded. t.Spec.Payload must be valid JSON (validate
// guarantees it), or encoding the response fails.
func taskResponse(t *storage.Task, owner string) TaskResponse {
	s := &t.Spec
	r := TaskResponse{
		ID:          t.ID,
		CallbackURL: s.CallbackURL,
		Timezone:    s.Timezone,
		StartAt:     formatInstant(s.StartAt),
		Headers:     s.Headers,
		TimeoutMs:   s.TimeoutMs,
		MaxRetries:  s.MaxRetries,
		Labels:      s.Labels,

		Slot:      t.Slot,
		Status:    t.Status.String(),
		NextDueAt: formatInstant(t.NextDue),
		CreatedAt: formatInstant(t.CreatedAt),
		UpdatedAt: formatInstant(t.UpdatedAt),
		FireCount: t.FireCount,
		FailCount: t.FailCount,
		Owner:     owner,
	}
	if len(s.Payload) > 0 {
		r.Payload = s.Payload
	}
	switch s.Kind {
	case storage.KindOnce:
		if s.DelayMs != 0 {
			r.DelayMs = s.DelayMs
		} else {
			r.DueAt = formatInstant(s.DueAt)
		}
	case storage.KindEvery:
		r.EveryMs = s.EveryMs
	case storage.KindCron:
		r.Cron = s.Cron
		if s.DSTGap != storage.DSTGapDefault || s.DSTOverlap != storage.DSTOverlapDefault {
			r.DST = &DSTResponse{Gap: s.DSTGap.String(), Overlap: s.DSTOverlap.String()}
		}
	}
	if s.Kind == storage.KindEvery || s.Kind == storage.KindCron {
		r.Misfire = s.Misfire.String()
		maxFails := s.MaxFails
		r.MaxFails = &maxFails
		r.EndAt = formatInstant(s.EndAt)
		r.MaxRuns = s.MaxRuns
		if s.MaxRuns > 0 {
			runs := t.Runs
			r.Runs = &runs
		}
		r.MaxCatchup = schedule.MaxCatchup(s)
		skipped := t.SkippedFires
		r.SkippedFires = &skipped
	}
	if bf := t.Backfill; bf != nil {
		r.Backfill = &BackfillPending{Next: formatInstant(bf.Next), To: formatInstant(bf.To), Left: bf.Left}
	}
	if s.RetentionSet {
		ret := s.RetentionMs
		r.RetentionMs = &ret
	}
	if t.Status.Final() {
		r.FinishedAt = formatInstant(t.FinishedAt)
		r.ExpiresAt = formatInstant(t.ExpireAt)
	}
	r.OnSuccess, r.OnFailure = rawList(s.OnSuccess), rawList(s.OnFailure)
	r.SuccessURL, r.FailureURL = s.SuccessURL, s.FailureURL
	r.PendingNotices = len(t.Notices)
	r.ParentID, r.ParentFireID = t.ParentID, t.ParentFire
	for _, c := range t.Children {
		r.PendingChildren = append(r.PendingChildren, c.ID)
	}
	if s.AckURL != "" {
		delay, retries := s.AckDelayMs, s.AckRetries
		r.AckURL, r.AckDelayMs, r.AckRetries = s.AckURL, &delay, &retries
	}
	if inf := t.Inflight; inf != nil && inf.Ack && inf.NextAttemptAt != 0 {
		r.NextAckAt = formatInstant(inf.NextAttemptAt)
	}
	r.FailReason = t.FailReason
	r.FlowKey = s.FlowKey
	if lf := t.LastFire; lf != nil {
		r.LastFire = &LastFireResponse{
			FireID:     lf.FireID,
			DueAt:      formatInstant(lf.DueAt),
			FinishedAt: formatInstant(lf.FinishedAt),
			Attempts:   lf.Attempts,
			StatusCode: lf.StatusCode,
			Error:      lf.Error,
			Result:     resultText(lf.Result),
		}
	}
	return r
}

// executionResponse renders one execution record.
func executionResponse(e *storage.Execution) ExecutionResponse {
	return ExecutionResponse{
		FireID:     e.FireID,
		DueAt:      formatInstant(e.DueAt),
		StartedAt:  formatInstant(e.StartedAt),
		FinishedAt: formatInstant(e.FinishedAt),
		Attempt:    e.Attempt,
		StatusCode: e.StatusCode,
		Error:      e.Error,
		Result:     resultText(e.Result),
		Children:   e.Children,
		Phase:      phase(e),
	}
}

// phase is the phase of the attempt e: "ack" or "" (the callback).
func phase(e *storage.Execution) string {
	if e.Ack {
		return "ack"
	}
	return ""
}

// rawList returns stored JSON bodies as raw messages (nil for none).
func rawList(bodies [][]byte) []json.RawMessage {
	if len(bodies) == 0 {
		return nil
	}
	out := make([]json.RawMessage, len(bodies))
	for i, b := range bodies {
		out[i] = b
	}
	return out
}

// formatInstant renders Unix nanoseconds as RFC 3339 in UTC with up to nine
// fractional digits (trailing zeros dropped), or "" for 0 ("none").
func formatInstant(ns int64) string {
	if ns == 0 {
		return ""
	}
	return time.Unix(0, ns).UTC().Format(time.RFC3339Nano)
}

// resultText returns a stored callback response prefix as a string. The
// prefix is cut at 512 bytes and may end inside a UTF-8 sequence, and the
// body need not be text at all: invalid bytes become U+FFFD.
func resultText(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}
