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
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/chime-scheduler/chime/node/schedule"
	"github.com/chime-scheduler/chime/slots"
	"github.com/chime-scheduler/chime/storage"
	"github.com/oklog/ulid/v2"
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

// validateID checks a client-chosen task id (storage.ValidID's characters;
// braces make a hash tag, slots.HashKey).
// validateIDAndFlow checks id and flow_key (API.md "Flow keys") and
// returns the task's id (a new ULID when the request has none; with a
// flow_key, the key as its hash tag: "{key}<ulid>") and its flow key. A
// given id must hash by the flow key (slots.HashKey): every task of a key
// is then in the key's slot, on the one owner that enforces its limits.
func (r *TaskRequest) validateIDAndFlow() (id, key string, e *Error) {
	key = r.FlowKey
	if key != "" {
		if e := validateFlowKey("flow_key", key); e != nil {
			return "", "", e
		}
	}
	id = r.ID
	if id != "" {
		if e := validateID(id); e != nil {
			return "", "", e
		}
		if key != "" && slots.HashKey(id) != key {
			return "", "", Invalid("id", "a task with flow_key %q needs an id whose hash tag is the key, like \"{%s}…\" (API.md \"Hash tags\")", key, key)
		}
		return id, key, nil
	}
	if key == "" {
		return ulid.Make().String(), "", nil
	}
	id = "{" + key + "}" + ulid.Make().String()
	if len(id) > maxIDLen {
		return "", "", Invalid("flow_key", "is too long for a generated id ({key}<ulid> is at most %d characters): give an id with the key as its hash tag, or a key of at most %d characters", maxIDLen, maxIDLen-2-ulid.EncodedSize)
	}
	return id, key, nil
}

// maxChildFlowKey bounds the flow key of a chain's task without an id:
// ChildID's "{key}h<16 hex>.<seq>.<index>" (seq up to 20 digits, index 2)
// fits in maxIDLen.
const maxChildFlowKey = maxIDLen - 2 - 17 - 24

// validateFlowKey checks a flow key given as field.
func validateFlowKey(field, key string) *Error {
	if !storage.ValidFlowKey(key) {
		if len(key) == 0 || len(key) > storage.MaxFlowKeyLen {
			return Invalid(field, "must be 1 to %d characters, got %d", storage.MaxFlowKeyLen, len(key))
		}
		return Invalid(field, "may contain only A-Z a-z 0-9 . _ ~ : -, got %q", clip(key))
	}
	return nil
}

func validateID(id string) *Error {
	if len(id) > maxIDLen {
		return Invalid("id", "must be 1 to %d characters, got %d", maxIDLen, len(id))
	}
	for i := 0; i < len(id); i++ {
		if !isIDChar(id[i]) {
			return Invalid("id", "may contain only A-Z a-z 0-9 . _ ~ : - { }; found %q at byte %d", id[i], i)
		}
	}
	if id == "." || id == ".." {
		// They would be path segments in /v1/tasks/{id}, which HTTP
		// clients and routers resolve away.
		return Invalid("id", "may not be %q", id)
	}
	return nil
}

func isIDChar(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '.' || c == '_' || c == '~' || c == ':' || c == '-' || c == '{' || c == '}'
}

// ACK phase bounds (API.md "The ACK phase").
const (
	defaultAckDelayMs = 1000
	maxAckDelayMs     = 3600000 // 1 h
	defaultAckRetries = 3
	maxAckRetries     = 100
)

// validateAck checks ack_url, ack_delay_ms and ack_retries (API.md "The
// ACK phase") and fills them into spec with their defaults: only on a
// one-shot task, the delay and retries only with an ack_url. The
// address policy checks ack_url like callback_url (parseTask).
func (r *TaskRequest) validateAck(spec *storage.Spec) *Error {
	if r.AckURL == "" {
		if r.AckDelayMs != nil {
			return Invalid("ack_delay_ms", "applies only with ack_url")
		}
		if r.AckRetries != nil {
			return Invalid("ack_retries", "applies only with ack_url")
		}
		return nil
	}
	if spec.Kind != storage.KindOnce {
		return Invalid("ack_url", "applies only to one-shot tasks (delay_ms or due_at)")
	}
	if e := validateURL("ack_url", r.AckURL); e != nil {
		return e
	}
	spec.AckURL = r.AckURL
	spec.AckDelayMs = defaultAckDelayMs
	if r.AckDelayMs != nil {
		if *r.AckDelayMs < 0 || *r.AckDelayMs > maxAckDelayMs {
			return Invalid("ack_delay_ms", "must be between 0 and %d (1 hour), got %d", maxAckDelayMs, *r.AckDelayMs)
		}
		spec.AckDelayMs = *r.AckDelayMs
	}
	spec.AckRetries = defaultAckRetries
	if r.AckRetries != nil {
		if *r.AckRetries < 0 || *r.AckRetries > maxAckRetries {
			return Invalid("ack_retries", "must be between 0 and %d, got %d", maxAckRetries, *r.AckRetries)
		}
		spec.AckRetries = *r.AckRetries
	}
	return nil
}

// validateCallbackURL checks that u is an absolute http or https URL with a host.
func validateCallbackURL(u string) *Error {
	return validateURL("callback_url", u)
}

// validateURL checks that u, request field field, is an absolute http or
// https URL with a host.
func validateURL(field, u string) *Error {
	if u == "" {
		return Invalid(field, "is required")
	}
	if len(u) > maxURLLen {
		return Invalid(field, "must be at most %d bytes", maxURLLen)
	}
	p, err := url.Parse(u)
	if err != nil {
		return Invalid(field, "is not a valid URL: %v", err)
	}
	if p.Scheme != "http" && p.Scheme != "https" {
		return Invalid(field, "must be an absolute http or https URL, got scheme %q", p.Scheme)
	}
	if p.Hostname() == "" {
		return Invalid(field, "must name a host")
	}
	return nil
}

// forbiddenHeaders are callback headers a task may not set: Host routes the
// request, and the framing headers would corrupt it. X-Chime-* is checked
// separately. Keys are lower case.
var forbiddenHeaders = map[string]bool{
	"host":              true,
	"content-length":    true,
	"transfer-encoding": true,
	"connection":        true,
}

// validateHeaders checks the extra callback headers.
func validateHeaders(h map[string]string) *Error {
	if len(h) > maxHeaders {
		return Invalid("headers", "at most %d headers allowed, got %d", maxHeaders, len(h))
	}
	var (
		worst    *Error
		worstKey string
	)
	lower := make(map[string]string, len(h))
	for name, value := range h {
		if worst != nil && name >= worstKey {
			continue
		}
		if e := validateHeader(name, value); e != nil {
			worst, worstKey = e, name
			continue
		}
		l := strings.ToLower(name)
		if other, dup := lower[l]; dup {
			// Report on the larger of the two names, so the answer does not
			// depend on map order.
			n := max(name, other)
			if worst == nil || n < worstKey {
				worst, worstKey = Invalid("headers."+clip(n), "header %q given twice (names are case-insensitive)", clip(n)), n
			}
			continue
		}
		lower[l] = name
	}
	return worst
}

// validateHeader checks one header.
func validateHeader(name, value string) *Error {
	field := "headers." + clip(name)
	if name == "" || len(name) > maxHeaderNameLen {
		return Invalid(field, "header name must be 1 to %d characters", maxHeaderNameLen)
	}
	for i := 0; i < len(name); i++ {
		if !isTokenChar(name[i]) {
			return Invalid(field, "header name may contain only token characters (RFC 9110); found %q", name[i])
		}
	}
	l := strings.ToLower(name)
	if forbiddenHeaders[l] {
		return Invalid(field, "header %s may not be set", name)
	}
	if strings.HasPrefix(l, "x-chime-") {
		return Invalid(field, "X-Chime-* headers are reserved for Chime")
	}
	if len(value) > maxHeaderValueLen {
		return Invalid(field, "header value must be at most %d bytes", maxHeaderValueLen)
	}
	for i := 0; i < len(value); i++ {
		if c := value[i]; c < 0x20 && c != '\t' || c == 0x7f {
			return Invalid(field, "header value may not contain control characters (CR, LF, NUL, …)")
		}
	}
	return nil
}

// isTokenChar reports whether c may appear in an HTTP field name (tchar).
func isTokenChar(c byte) bool {
	if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' {
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// validateLabels checks the user labels.
func validateLabels(labels map[string]string) *Error {
	if len(labels) > maxLabels {
		return Invalid("labels", "at most %d labels allowed, got %d", maxLabels, len(labels))
	}
	var (
		worst    *Error
		worstKey string
	)
	for k, v := range labels {
		if worst != nil && k >= worstKey {
			continue
		}
		if e := validateLabel(k, v); e != nil {
			worst, worstKey = e, k
		}
	}
	return worst
}

// validateLabel checks one label. Keys exclude ':' because the list filter is
// label=k:v.
func validateLabel(k, v string) *Error {
	field := "labels." + clip(k)
	if k == "" || len(k) > maxLabelKeyLen {
		return Invalid(field, "label key must be 1 to %d characters", maxLabelKeyLen)
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-' || c == '/') {
			return Invalid(field, "label key may contain only A-Z a-z 0-9 . _ - /; found %q", c)
		}
	}
	if n := utf8.RuneCountInString(v); n > maxLabelValueLen {
		return Invalid(field, "label value must be at most %d characters, got %d", maxLabelValueLen, n)
	}
	return nil
}

// parseMisfire is the inverse of storage.Misfire.String.
func parseMisfire(s string) (storage.Misfire, bool) {
	for m := storage.MisfireFireOnce; m <= storage.MisfireFireAll; m++ {
		if m.String() == s {
			return m, true
		}
	}
	return 0, false
}

// nonEmpty returns m, or nil when it is empty, so stored records carry no
// empty maps.
func nonEmpty(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	return m
}

// maxEcho bounds how much of a client's input an error message repeats.
const maxEcho = 128

// clip returns s cut to at most maxEcho bytes (on a rune boundary, with "…"
// appended when cut), for echoing client input in error messages and field
// names.
func clip(s string) string {
	if len(s) <= maxEcho {
		return s
	}
	i := maxEcho
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "…"
}
