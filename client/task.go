package client

import (
	"encoding/json"
	"time"
)

// Status is a task's state.
type Status string

// Task statuses (API.md "Task answer"). A task is created scheduled or
// paused; the others are states the node moves it to.
const (
	StatusScheduled Status = "scheduled"
	StatusPaused    Status = "paused"
	StatusDone      Status = "done"      // a one-shot that fired
	StatusFailed    Status = "failed"    // a one-shot whose fire failed
	StatusInactive  Status = "inactive"  // a periodic task stopped by max_fails or a gone endpoint
	StatusCompleted Status = "completed" // a periodic task that reached its EndAt or MaxRuns (final)
	// StatusAwaitingAck: a one-shot task with an AckURL whose callback
	// succeeded; its ACK is pending (then done, or failed with
	// FailReason "ack").
	StatusAwaitingAck Status = "awaiting_ack"
)

// FailReasonAck is Task.FailReason of a task failed by its ACK phase.
const FailReasonAck = "ack"

// Misfire is what a periodic task does about fires missed while no node
// could fire it.
type Misfire string

// Misfire policies.
const (
	MisfireFireOnce Misfire = "fire_once" // the default: fire once, resume at the next occurrence
	MisfireSkip     Misfire = "skip"      // drop them
	MisfireFireAll  Misfire = "fire_all"  // fire each
)

// DST is a cron task's daylight-saving policy (API.md "Daylight saving").
// A zero member takes its default: Gap "shift", Overlap "first".
type DST struct {
	Gap     DSTGap     `json:"gap,omitempty"`
	Overlap DSTOverlap `json:"overlap,omitempty"`
}

// DSTGap is what a local time that does not exist (spring forward) does.
type DSTGap string

// DSTOverlap is what a local time that occurs twice (fall back) does.
type DSTOverlap string

// DST policies.
const (
	GapShift     DSTGap     = "shift" // the default: fire at the first instant after the gap
	GapSkip      DSTGap     = "skip"  // do not fire
	OverlapFirst DSTOverlap = "first" // the default: fire at the first occurrence only
	OverlapBoth  DSTOverlap = "both"  // fire at both occurrences
)

// Task is a task as the API takes and answers it (API.md "Tasks").
//
// The schedule is one of Delay, DueAt, Every and Cron. With none of DueAt,
// Every and Cron set, the task is a one-shot due Delay after the node
// receives it: at once when Delay is 0. Durations are sent in whole
// milliseconds.
//
// The fields after Labels are the task's state: the node fills them in
// its answers and ignores them in a request, except Status: a task sent
// with StatusPaused is created (or replaced) paused.
type Task struct {
	// ID is 1 to 128 characters of A-Z a-z 0-9 . _ ~ : - { } (a {tag}
	// places ids that share it in one slot: slots.HashKey); the node makes
	// up a ULID when a create has none. Its slot is slots.Of(ID).
	ID string
	// CallbackURL is where each fire is POSTed (http or https).
	CallbackURL string

	Delay time.Duration // one-shot: due this long after the request
	DueAt time.Time     // one-shot: due at this instant
	Every time.Duration // periodic at a fixed rate, at least 100 ms
	Cron  string        // periodic: a cron expression (5 or 6 fields, or @daily, @every 1h, …)
	// Timezone is the IANA zone of Cron (UTC when empty).
	Timezone string
	// StartAt delays the first fire of a periodic task.
	StartAt time.Time
	// DST is the daylight-saving policy of Cron (nil: the node's default,
	// gap shift and overlap first). Not for "@every".
	DST *DST

	// Payload is the callback's body, any JSON.
	Payload json.RawMessage
	// Headers are extra callback headers (not X-Chime-*).
	Headers map[string]string
	// Timeout is one attempt's timeout (0: the node's default, 5 s).
	Timeout time.Duration
	// MaxRetries is the number of retries of a fire after its first
	// attempt (nil: the node's default, 3).
	MaxRetries *int
	// Misfire is a periodic task's misfire policy ("": fire_once).
	Misfire Misfire
	// MaxFails: a periodic task becomes inactive after this many
	// consecutive failed fires (0: never).
	MaxFails int
	// Labels are filterable key/values (List's Label).
	Labels map[string]string
	// EndAt ends a periodic task: no fire is due after it (one due exactly
	// at EndAt fires), then its status is StatusCompleted. Zero: no end.
	EndAt time.Time
	// MaxRuns ends a periodic task once this many scheduled fires (not
	// triggers) have finished, counted from its create or last replace.
	// 0: no limit.
	MaxRuns int
	// MaxCatchup (periodic tasks) bounds misfire fire_all after downtime to
	// the most recent MaxCatchup missed occurrences, and one Backfill to
	// that many. 0: the node's default (100); answered with its effective
	// value.
	MaxCatchup int
	// Retention is how long the task is kept, with its executions, once
	// it is final (done, failed, inactive, completed); then the node
	// deletes it. nil: the node's default (chime serve --retention, 7 days
	// unless changed); a pointer to 0: kept forever. Milliseconds on the
	// wire (retention_ms).
	Retention *time.Duration
	// OnSuccess and OnFailure are the task's chains (API.md "Chains"):
	// at most 16 tasks each, created when a fire of this task finishes
	// with that outcome (after its retries), each exactly once. A child's
	// ID defaults to "<parent id>.<fire seq>.<index>", its Delay counts
	// from the parent fire's finish; chains nest at most 4 deep.
	OnSuccess []Task
	OnFailure []Task
	// PayloadFromParent (a task in OnSuccess or OnFailure, without
	// Payload): its payload is its parent's answer body.
	PayloadFromParent bool
	// SuccessURL and FailureURL (API.md "Result callbacks") receive a POST
	// when a fire of this task finishes with that outcome (after its
	// retries): a JSON summary of the fire, with its fire id in
	// X-Chime-Fire-Id, signed like a callback. Empty: none.
	SuccessURL string
	FailureURL string
	// AckURL gives a one-shot task an ACK phase (API.md "The ACK
	// phase"): after its callback's 2xx the task awaits its ACK, and
	// AckDelay later the node POSTs AckURL with the same body and
	// X-Chime-* headers plus X-Chime-Ack: 1; a 2xx makes it done,
	// anything else is retried AckRetries times, then it is failed with
	// FailReason "ack". "": no ACK phase. Not for periodic tasks.
	AckURL string
	// AckDelay is the wait before the first ACK attempt (nil: 1 s; at
	// most 1 h); milliseconds on the wire (ack_delay_ms).
	AckDelay *time.Duration
	// AckRetries is the ACK attempts after the first (nil: 3; at most 100).
	AckRetries *int
	// FlowKey holds the task's fires to the limits of that flow key
	// (API.md "Flow keys"); the task's ID must then have the key as its
	// hash tag ("{key}…"), or be empty ("{key}<ulid>" is made up).
	FlowKey string

	// Status is the task's state; in a request only StatusPaused counts.
	Status    Status
	Slot      uint16    // slots.Of(ID)
	NextDueAt time.Time // zero when nothing is due
	CreatedAt time.Time
	UpdatedAt time.Time
	FireCount uint64 // successful fires
	FailCount uint64 // consecutive failed fires
	Runs      uint64 // with MaxRuns: scheduled fires finished so far
	// SkippedFires (periodic tasks): missed occurrences fire_all skipped
	// because of MaxCatchup.
	SkippedFires uint64
	Owner        string    // the node that answered: the owner of the slot
	LastFire     *LastFire // the last finished fire, if any
	// FinishedAt is when the task became final; ExpiresAt when the node
	// deletes it (zero: kept forever, or not final).
	FinishedAt time.Time
	ExpiresAt  time.Time
	// ParentID and ParentFireID link a task a chain created to its parent
	// and the parent's fire; PendingChildren are the ids of children of
	// this task's finished fires still being created.
	ParentID        string
	ParentFireID    string
	PendingChildren []string
	// PendingNotices counts the result callbacks still to be delivered.
	PendingNotices int
	// NextAckAt is when the next ACK attempt starts (StatusAwaitingAck);
	// FailReason is "ack" (FailReasonAck) on a task failed by its ACK.
	NextAckAt  time.Time
	FailReason string
}

// LastFire summarizes a task's most recent finished fire.
type LastFire struct {
	FireID     string
	DueAt      time.Time
	FinishedAt time.Time
	Attempts   int
	StatusCode int    // 0 when no HTTP answer arrived
	Error      string // timeout, connection error, refused address
	Result     string // the first 512 bytes of the callback's answer
}

// Execution is one attempt of one fire (Client.Executions).
type Execution struct {
	FireID     string
	DueAt      time.Time
	StartedAt  time.Time
	FinishedAt time.Time
	Attempt    int
	StatusCode int
	Error      string
	Result     string
	// Children: on the attempt that finished the fire, the ids of the
	// tasks its chain creates.
	Children []string
	// Phase is "ack" on an attempt of the fire's ACK phase (Attempt
	// counts the ACK attempts), "" on a callback attempt.
	Phase string
}

// taskJSON is Task on the wire: the field names of API.md.
type taskJSON struct {
	ID          string            `json:"id,omitempty"`
	CallbackURL string            `json:"callback_url"`
	DelayMs     *int64            `json:"delay_ms,omitempty"`
	DueAt       string            `json:"due_at,omitempty"`
	EveryMs     int64             `json:"every_ms,omitempty"`
	Cron        string            `json:"cron,omitempty"`
	Timezone    string            `json:"timezone,omitempty"`
	StartAt     string            `json:"start_at,omitempty"`
	Payload     json.RawMessage   `json:"payload,omitempty"`
	Headers     map[string]string `json:"headers,omitempty"`
	TimeoutMs   int64             `json:"timeout_ms,omitempty"`
	MaxRetries  *int              `json:"max_retries,omitempty"`
	Misfire     string            `json:"misfire,omitempty"`
	MaxFails    int               `json:"max_fails,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	DST         *DST              `json:"dst,omitempty"`
	EndAt       string            `json:"end_at,omitempty"`
	MaxRuns     int               `json:"max_runs,omitempty"`
	MaxCatchup  int               `json:"max_catchup,omitempty"`
	RetentionMs *int64            `json:"retention_ms,omitempty"`
	Status      string            `json:"status,omitempty"`
	OnSuccess   []taskJSON        `json:"on_success,omitempty"`
	OnFailure   []taskJSON        `json:"on_failure,omitempty"`
	FromParent  bool              `json:"payload_from_parent,omitempty"`
	SuccessURL  string            `json:"success_url,omitempty"`
	FailureURL  string            `json:"failure_url,omitempty"`
	AckURL      string            `json:"ack_url,omitempty"`
	AckDelayMs  *int64            `json:"ack_delay_ms,omitempty"`
	AckRetries  *int              `json:"ack_retries,omitempty"`
	FlowKey     string            `json:"flow_key,omitempty"`

	// The answer's state; never sent.
	Slot       uint16        `json:"slot,omitempty"`
	NextDueAt  string        `json:"next_due_at,omitempty"`
	CreatedAt  string        `json:"created_at,omitempty"`
	UpdatedAt  string        `json:"updated_at,omitempty"`
	FireCount  uint64        `json:"fire_count,omitempty"`
	FailCount  uint64        `json:"fail_count,omitempty"`
	Runs       *uint64       `json:"runs,omitempty"` // answered with max_runs, 0 included
	Skipped    uint64        `json:"skipped_fires,omitempty"`
	Finished   string        `json:"finished_at,omitempty"`
	Expires    string        `json:"expires_at,omitempty"`
	Owner      string        `json:"owner,omitempty"`
	LastFire   *lastFireJSON `json:"last_fire,omitempty"`
	ParentID   string        `json:"parent_id,omitempty"`
	ParentFire string        `json:"parent_fire_id,omitempty"`
	Pending    []string      `json:"pending_children,omitempty"`
	Notices    int           `json:"pending_notices,omitempty"`
	NextAckAt  string        `json:"next_ack_at,omitempty"`
	FailReason string        `json:"fail_reason,omitempty"`
}

type lastFireJSON struct {
	FireID     string `json:"fire_id"`
	DueAt      string `json:"due_at,omitempty"`
	FinishedAt string `json:"finished_at,omitempty"`
	Attempts   int    `json:"attempts"`
	StatusCode int    `json:"status_code"`
	Error      string `json:"error,omitempty"`
	Result     string `json:"result,omitempty"`
}

type executionJSON struct {
	FireID     string   `json:"fire_id"`
	DueAt      string   `json:"due_at,omitempty"`
	StartedAt  string   `json:"started_at,omitempty"`
	FinishedAt string   `json:"finished_at,omitempty"`
	Attempt    int      `json:"attempt"`
	StatusCode int      `json:"status_code"`
	Error      string   `json:"error,omitempty"`
	Result     string   `json:"result,omitempty"`
	Children   []string `json:"children,omitempty"`
	Phase      string   `json:"phase,omitempty"`
}

// request renders t as a request body: the request fields only.
func (t *Task) request() taskJSON {
	w := taskJSON{
		ID: t.ID, CallbackURL: t.CallbackURL, EveryMs: t.Every.Milliseconds(), Cron: t.Cron,
		DueAt: instant(t.DueAt), Timezone: t.Timezone, StartAt: instant(t.StartAt),
		Payload: t.Payload, Headers: t.Headers, TimeoutMs: t.Timeout.Milliseconds(),
		MaxRetries: t.MaxRetries, Misfire: string(t.Misfire), MaxFails: t.MaxFails, Labels: t.Labels,
		DST: t.DST, EndAt: instant(t.EndAt), MaxRuns: t.MaxRuns,
		MaxCatchup: t.MaxCatchup, FromParent: t.PayloadFromParent,
		SuccessURL: t.SuccessURL, FailureURL: t.FailureURL,
		AckURL: t.AckURL, AckRetries: t.AckRetries, FlowKey: t.FlowKey,
	}
	if t.AckDelay != nil {
		d := t.AckDelay.Milliseconds()
		w.AckDelayMs = &d
	}
	for _, c := range t.OnSuccess {
		w.OnSuccess = append(w.OnSuccess, c.request())
	}
	for _, c := range t.OnFailure {
		w.OnFailure = append(w.OnFailure, c.request())
	}
	if t.Delay != 0 || t.DueAt.IsZero() && t.Every == 0 && t.Cron == "" {
		d := t.Delay.Milliseconds()
		w.DelayMs = &d
	}
	if t.Status == StatusPaused {
		w.Status = string(StatusPaused)
	}
	if t.Retention != nil {
		r := t.Retention.Milliseconds()
		w.RetentionMs = &r
	}
	return w
}

// task reads a task answer (API.md "Task answer").
func (w *taskJSON) task() Task {
	t := Task{
		ID: w.ID, CallbackURL: w.CallbackURL, Every: ms(w.EveryMs), Cron: w.Cron,
		DueAt: parseInstant(w.DueAt), Timezone: w.Timezone, StartAt: parseInstant(w.StartAt),
		Payload: w.Payload, Headers: w.Headers, Timeout: ms(w.TimeoutMs), MaxRetries: w.MaxRetries,
		Misfire: Misfire(w.Misfire), MaxFails: w.MaxFails, Labels: w.Labels, DST: w.DST,
		Status: Status(w.Status), Slot: w.Slot, NextDueAt: parseInstant(w.NextDueAt),
		CreatedAt: parseInstant(w.CreatedAt), UpdatedAt: parseInstant(w.UpdatedAt),
		FireCount: w.FireCount, FailCount: w.FailCount, Owner: w.Owner,
		EndAt: parseInstant(w.EndAt), MaxRuns: w.MaxRuns,
		MaxCatchup: w.MaxCatchup, SkippedFires: w.Skipped,
		PayloadFromParent: w.FromParent, ParentID: w.ParentID, ParentFireID: w.ParentFire, PendingChildren: w.Pending,
		SuccessURL: w.SuccessURL, FailureURL: w.FailureURL, PendingNotices: w.Notices,
		AckURL: w.AckURL, AckRetries: w.AckRetries, NextAckAt: parseInstant(w.NextAckAt), FailReason: w.FailReason,
		FlowKey: w.FlowKey,
	}
	if w.AckDelayMs != nil {
		d := ms(*w.AckDelayMs)
		t.AckDelay = &d
	}
	for i := range w.OnSuccess {
		t.OnSuccess = append(t.OnSuccess, w.OnSuccess[i].task())
	}
	for i := range w.OnFailure {
		t.OnFailure = append(t.OnFailure, w.OnFailure[i].task())
	}
	if w.Runs != nil {
		t.Runs = *w.Runs
	}
	if w.RetentionMs != nil {
		r := ms(*w.RetentionMs)
		t.Retention = &r
	}
	t.FinishedAt, t.ExpiresAt = parseInstant(w.Finished), parseInstant(w.Expires)
	if w.DelayMs != nil {
		t.Delay = ms(*w.DelayMs)
	}
	if lf := w.LastFire; lf != nil {
		t.LastFire = &LastFire{FireID: lf.FireID, DueAt: parseInstant(lf.DueAt), FinishedAt: parseInstant(lf.FinishedAt),
			Attempts: lf.Attempts, StatusCode: lf.StatusCode, Error: lf.Error, Result: lf.Result}
	}
	return t
}

// execution reads one execution record.
func (w *executionJSON) execution() Execution {
	return Execution{FireID: w.FireID, DueAt: parseInstant(w.DueAt), StartedAt: parseInstant(w.StartedAt),
		FinishedAt: parseInstant(w.FinishedAt), Attempt: w.Attempt, StatusCode: w.StatusCode, Error: w.Error, Result: w.Result,
		Children: w.Children, Phase: w.Phase}
}

// instant renders t as the API does: RFC 3339 in UTC, "" for the zero time.
func instant(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// parseInstant reads an RFC 3339 instant; "" (or garbage) is the zero time.
func parseInstant(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}
	}
	return t
}

func ms(n int64) time.Duration { return time.Duration(n) * time.Millisecond }
