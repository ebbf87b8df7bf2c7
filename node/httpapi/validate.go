package httpapi

// This file turns a task request body (API.md "Task (request body)") into a
// normalized storage.Spec: strict JSON decoding first (decode.go), then field-by-field
// validation. Every problem comes back as an *Error that names the JSON field
// to blame, so a client can point at it.

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/chime-scheduler/chime/node/schedule"
	"github.com/chime-scheduler/chime/storage"
)

// Limits bounds what one request may carry. A zero field means its default.
type Limits struct {
	// MaxPayloadBytes bounds a task's payload (the raw JSON as sent). Default
	// 64 KiB: payloads live in every stored task record and in every callback,
	// so they are kept small; anything bigger belongs in the receiver's store
	// with a reference in the payload.
	MaxPayloadBytes int
	// MaxBatchTasks bounds the tasks of one POST /v1/tasks:batch. Default
	// 10000 (API.md): large enough to amortize HTTP and fsync cost (batches of
	// 1000 already reach the storage ceiling, research/limits.md), small
	// enough that one batch cannot monopolize the write path.
	MaxBatchTasks int
	// MaxBodyBytes bounds a whole request body. Default 8 MiB: 10000 typical
	// tasks of ~500 B fit with room to spare, while a runaway client cannot make
	// a node buffer an unbounded body.
	MaxBodyBytes int64
}

// DefaultLimits returns the limits of API.md.
func DefaultLimits() Limits {
	return Limits{
		MaxPayloadBytes: 64 << 10,
		MaxBatchTasks:   10000,
		MaxBodyBytes:    8 << 20,
	}
}

// withDefaults returns l with every zero or negative field set to its default.
func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	if l.MaxPayloadBytes <= 0 {
		l.MaxPayloadBytes = d.MaxPayloadBytes
	}
	if l.MaxBatchTasks <= 0 {
		l.MaxBatchTasks = d.MaxBatchTasks
	}
	if l.MaxBodyBytes <= 0 {
		l.MaxBodyBytes = d.MaxBodyBytes
	}
	return l
}

// Request limits that are part of the contract rather than configuration.
const (
	maxIDLen          = 128
	maxURLLen         = 4096 // longer callback URLs are rejected; keeps records bounded
	maxHeaders        = 64
	maxHeaderNameLen  = 256
	maxHeaderValueLen = 8 << 10
	maxLabels         = 16
	maxLabelKeyLen    = 63
	maxLabelValueLen  = 255 // characters (runes)
	minEveryMs        = 100
	maxTimeoutMs      = 300000
	defaultTimeoutMs  = 5000
	maxMaxRetries     = 100
	defaultMaxRetries = 3
	maxMaxFails       = 1000000
	maxMaxRuns        = 1 << 53 // exact in a JavaScript number
	maxRetentionMs    = schedule.MaxSpanMs

	// maxSpan bounds how far ahead anything may be scheduled (delay_ms,
	// due_at, start_at, every_ms, @every).
	maxSpan   = schedule.MaxSpan
	maxSpanMs = schedule.MaxSpanMs
)

// MaxRetention is the longest retention a task (retention_ms) or a node
// (Config.Retention) may ask for: 10 years, like every other span.
const MaxRetention = schedule.MaxSpan

// validate checks every field and returns the task id (a new ULID when the
// request has none) and the normalized storage.Spec. now is the request time:
// delay_ms counts from it and future bounds are relative to it. The first
// problem found is returned as an *Error with Code invalid_argument (or
// too_large, Status 400, for an oversized payload) and Field the JSON name of
// the field ("headers.Host", "labels.<key>" for nested ones). Problems are
// looked for in field order, and within headers and labels the smallest
// offending key is reported, so the answer is deterministic.
//
// validate modifies r only to note its chains' callback URLs (chainURLs).
// The returned Spec shares Payload, Headers and Labels with r.
func (r *TaskRequest) validate(now time.Time, lim Limits) (string, storage.Spec, *Error) {
	return r.validateAt(now, lim.withDefaults(), 0)
}

// validateAt is validate of a task at depth in a chain (0: the request's
// own task; API.md "Chains"). lim has its defaults.
func (r *TaskRequest) validateAt(now time.Time, lim Limits, depth int) (string, storage.Spec, *Error) {
	id, key, e := r.validateIDAndFlow()
	if e != nil {
		return "", storage.Spec{}, e
	}
	if depth > 0 && r.ID == "" && len(key) > maxChildFlowKey {
		// ChildID: "{key}h<16 hex>.<seq>.<index>" must fit in an id.
		return "", storage.Spec{}, Invalid("flow_key", "a chain's task without an id takes a flow key of at most %d characters (its id is made from it); give it an id", maxChildFlowKey)
	}

	spec := storage.Spec{CallbackURL: r.CallbackURL, FlowKey: key}
	if e := validateCallbackURL(r.CallbackURL); e != nil {
		return "", storage.Spec{}, e
	}
	if e := r.validateSchedule(now, &spec); e != nil {
		return "", storage.Spec{}, e
	}
	if e := r.validateAck(&spec); e != nil {
		return "", storage.Spec{}, e
	}

	if len(r.Payload) > lim.MaxPayloadBytes {
		return "", storage.Spec{}, &Error{
			Code:    CodeTooLarge,
			Field:   "payload",
			Message: fmt.Sprintf("payload is %d bytes; at most %d allowed", len(r.Payload), lim.MaxPayloadBytes),
			Status:  http.StatusBadRequest,
		}
	}
	if len(r.Payload) > 0 && string(r.Payload) != "null" {
		if !r.decoded && !json.Valid(r.Payload) { // decoded payloads are known valid
			return "", storage.Spec{}, Invalid("payload", "must be valid JSON")
		}
		spec.Payload = r.Payload
	}

	if e := validateHeaders(r.Headers); e != nil {
		return "", storage.Spec{}, e
	}
	spec.Headers = nonEmpty(r.Headers)

	spec.TimeoutMs = defaultTimeoutMs
	if r.TimeoutMs != nil {
		if *r.TimeoutMs < 1 || *r.TimeoutMs > maxTimeoutMs {
			return "", storage.Spec{}, Invalid("timeout_ms", "must be between 1 and %d, got %d", maxTimeoutMs, *r.TimeoutMs)
		}
		spec.TimeoutMs = *r.TimeoutMs
	}
	spec.MaxRetries = defaultMaxRetries
	if r.MaxRetries != nil {
		if *r.MaxRetries < 0 || *r.MaxRetries > maxMaxRetries {
			return "", storage.Spec{}, Invalid("max_retries", "must be between 0 and %d, got %d", maxMaxRetries, *r.MaxRetries)
		}
		spec.MaxRetries = *r.MaxRetries
	}

	periodic := spec.Kind != storage.KindOnce
	spec.Misfire = storage.MisfireFireOnce
	if r.Misfire != "" {
		if !periodic {
			return "", storage.Spec{}, Invalid("misfire", "applies only to every_ms or cron tasks")
		}
		m, ok := parseMisfire(r.Misfire)
		if !ok {
			return "", storage.Spec{}, Invalid("misfire", "must be one of fire_once, skip, fire_all, got %q", clip(r.Misfire))
		}
		spec.Misfire = m
	}
	if r.MaxFails != nil {
		if !periodic {
			return "", storage.Spec{}, Invalid("max_fails", "applies only to every_ms or cron tasks")
		}
		if *r.MaxFails < 0 || *r.MaxFails > maxMaxFails {
			return "", storage.Spec{}, Invalid("max_fails", "must be between 0 and %d, got %d", maxMaxFails, *r.MaxFails)
		}
		spec.MaxFails = *r.MaxFails
	}

	if e := validateLabels(r.Labels); e != nil {
		return "", storage.Spec{}, e
	}
	spec.Labels = nonEmpty(r.Labels)
	if r.RetentionMs != nil {
		if *r.RetentionMs < 0 || *r.RetentionMs > maxRetentionMs {
			return "", storage.Spec{}, Invalid("retention_ms", "must be between 0 (keep forever) and %d (10 years), got %d", maxRetentionMs, *r.RetentionMs)
		}
		spec.RetentionMs, spec.RetentionSet = *r.RetentionMs, true
	}
	if _, e := r.initialStatus(); e != nil {
		return "", storage.Spec{}, e
	}
	if e := r.validateChains(now, lim, depth, &spec); e != nil {
		return "", storage.Spec{}, e
	}
	// Result callbacks (API.md "Result callbacks"): checked like
	// callback_url, and against the address policy with the chains' URLs.
	for _, u := range []struct {
		field, url string
		out        *string
	}{{"success_url", r.SuccessURL, &spec.SuccessURL}, {"failure_url", r.FailureURL, &spec.FailureURL}} {
		if u.url == "" {
			continue
		}
		if e := validateURL(u.field, u.url); e != nil {
			return "", storage.Spec{}, e
		}
		*u.out = u.url
		r.chainURLs = append(r.chainURLs, chainURL{u.field, u.url})
	}
	return id, spec, nil
}

// initialStatus returns the status a new task starts in (request field
// status): scheduled unless "paused" is asked for.
func (r *TaskRequest) initialStatus() (storage.Status, *Error) {
	switch r.Status {
	case "", storage.StatusScheduled.String():
		return storage.StatusScheduled, nil
	case storage.StatusPaused.String():
		return storage.StatusPaused, nil
	}
	return 0, Invalid("status", "must be scheduled or paused, got %q", clip(r.Status))
}

// validateSchedule checks the schedule fields (exactly one of delay_ms,
// due_at, every_ms, cron; then timezone and start_at) and fills them into spec.
func (r *TaskRequest) validateSchedule(now time.Time, spec *storage.Spec) *Error {
	given := r.scheduleKeys
	if !r.decoded {
		// Built in Go, not decoded: canonical order.
		for _, f := range [...]string{fieldDelayMs, fieldDueAt, fieldEveryMs, fieldCron} {
			if r.scheduleSet(f) {
				given = append(given, f)
			}
		}
	}
	switch len(given) {
	case 0:
		return Invalid("schedule", "one of delay_ms, due_at, every_ms or cron is required")
	case 1:
	default:
		return Invalid(given[1], "only one of delay_ms, due_at, every_ms or cron may be set; got %s and %s", given[0], given[1])
	}

	nowNs := now.UnixNano()
	switch given[0] {
	case fieldDelayMs:
		d := *r.DelayMs
		if d < 0 || d > maxSpanMs {
			return Invalid(fieldDelayMs, "must be between 0 and %d (10 years), got %d", maxSpanMs, d)
		}
		spec.Kind = storage.KindOnce
		spec.DelayMs = d
		spec.DueAt = nowNs + d*int64(time.Millisecond)
	case fieldDueAt:
		ns, e := parseInstant(fieldDueAt, *r.DueAt, now)
		if e != nil {
			return e
		}
		spec.Kind = storage.KindOnce
		spec.DueAt = ns
	case fieldEveryMs:
		e := *r.EveryMs
		if e < minEveryMs || e > maxSpanMs {
			return Invalid(fieldEveryMs, "must be between %d and %d (10 years), got %d", minEveryMs, maxSpanMs, e)
		}
		spec.Kind = storage.KindEvery
		spec.EveryMs = e
	case fieldCron:
		expr := *r.Cron
		switch {
		case strings.TrimSpace(expr) == "":
			return Invalid(fieldCron, "must not be empty")
		case len(expr) > schedule.MaxCronLen:
			return Invalid(fieldCron, "must be at most %d bytes", schedule.MaxCronLen)
		case schedule.HasTZPrefix(expr):
			return Invalid(fieldCron, "must not carry a TZ= or CRON_TZ= prefix; use the timezone field")
		}
		spec.Kind = storage.KindCron
		spec.Cron = expr
		spec.Timezone = r.Timezone
		if _, err := schedule.Compile(expr, r.Timezone); err != nil {
			if errors.Is(err, schedule.ErrBadTimezone) {
				return Invalid("timezone", "unknown timezone %q; want an IANA name such as Europe/Berlin", clip(r.Timezone))
			}
			return Invalid(fieldCron, "%v", err)
		}
	}

	if r.Timezone != "" && spec.Kind != storage.KindCron {
		return Invalid("timezone", "applies only to cron tasks")
	}
	if r.StartAt != "" {
		if spec.Kind == storage.KindOnce {
			return Invalid("start_at", "applies only to every_ms or cron tasks")
		}
		ns, e := parseInstant("start_at", r.StartAt, now)
		if e != nil {
			return e
		}
		spec.StartAt = ns
	}
	if e := r.validateDST(spec); e != nil {
		return e
	}
	if e := r.validateEnd(now, spec); e != nil {
		return e
	}
	if spec.Kind == storage.KindCron {
		// A cron that never matches (e.g. "0 0 30 2 *") is a mistake to report now,
		// not a task that silently never fires.
		if _, err := schedule.FirstDue(spec, now); err != nil {
			return Invalid(fieldCron, "%v", err)
		}
	}
	return nil
}

// validateEnd checks end_at and max_runs (API.md "End dates and run
// limits") and fills them into spec: periodic tasks only, end_at an instant
// bounded like start_at and not before it, max_runs >= 1. That end_at is not
// before the first fire is checked by newTask, which knows the first due.
func (r *TaskRequest) validateEnd(now time.Time, spec *storage.Spec) *Error {
	if r.EndAt != "" {
		if spec.Kind == storage.KindOnce {
			return Invalid("end_at", "applies only to every_ms or cron tasks")
		}
		ns, e := parseInstant("end_at", r.EndAt, now)
		if e != nil {
			return e
		}
		if spec.StartAt != 0 && ns < spec.StartAt {
			return Invalid("end_at", "must not be before start_at")
		}
		spec.EndAt = ns
	}
	if r.MaxRuns != nil {
		if spec.Kind == storage.KindOnce {
			return Invalid("max_runs", "applies only to every_ms or cron tasks")
		}
		if *r.MaxRuns < 1 || *r.MaxRuns > maxMaxRuns {
			return Invalid("max_runs", "must be between 1 and %d, got %d", maxMaxRuns, *r.MaxRuns)
		}
		spec.MaxRuns = *r.MaxRuns
	}
	if r.MaxCatchup != nil {
		if spec.Kind == storage.KindOnce {
			return Invalid("max_catchup", "applies only to every_ms or cron tasks")
		}
		if *r.MaxCatchup < 1 || *r.MaxCatchup > schedule.MaxMaxCatchup {
			return Invalid("max_catchup", "must be between 1 and %d, got %d", schedule.MaxMaxCatchup, *r.MaxCatchup)
		}
		spec.MaxCatchup = *r.MaxCatchup
	}
	return nil
}

// validateDST checks the dst object (API.md "Daylight saving") and fills it
// into spec: only for cron expressions that name wall-clock times (not
// "@every", which runs in real time); absent members take their defaults.
// An explicit dst is stored resolved, so it is echoed back in full.
func (r *TaskRequest) validateDST(spec *storage.Spec) *Error {
	if r.DST == nil {
		return nil
	}
	if spec.Kind != storage.KindCron {
		return Invalid("dst", "applies only to cron tasks")
	}
	if !schedule.AppliesDST(spec.Cron) {
		return Invalid("dst", "does not apply to @every, which runs in real time; remove dst")
	}
	gap, overlap, e := ParseDST(r.DST.Gap, r.DST.Overlap)
	if e != nil {
		return e
	}
	spec.DSTGap, spec.DSTOverlap = gap, overlap
	return nil
}

// ParseDST parses the members of a dst policy ("" = default) into their
// stored form, resolved (never the zero "default" value), or an error naming
// dst.gap or dst.overlap.
func ParseDST(gap, overlap string) (storage.DSTGap, storage.DSTOverlap, *Error) {
	g, o := storage.DSTGapShift, storage.DSTOverlapFirst
	switch gap {
	case "", "shift":
	case "skip":
		g = storage.DSTGapSkip
	default:
		return 0, 0, Invalid("dst.gap", "must be shift or skip, got %q", clip(gap))
	}
	switch overlap {
	case "", "first":
	case "both":
		o = storage.DSTOverlapBoth
	default:
		return 0, 0, Invalid("dst.overlap", "must be first or both, got %q", clip(overlap))
	}
	return g, o, nil
}

// parseInstant parses an RFC 3339 instant for field and bounds it to
// (1970-01-01, now + 10 years]. Instants in the past are allowed.
func parseInstant(field, s string, now time.Time) (int64, *Error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return 0, Invalid(field, "must be an RFC 3339 time such as 2026-01-02T15:04:05Z, got %q", clip(s))
	}
	if !t.After(time.Unix(0, 0)) {
		return 0, Invalid(field, "must be after 1970-01-01T00:00:00Z, got %q", s)
	}
	if t.After(now.Add(maxSpan)) {
		return 0, Invalid(field, "must be at most 10 years from now, got %q", s)
	}
	return t.UnixNano(), nil
}
