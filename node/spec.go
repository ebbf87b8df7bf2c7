package node

// This file turns a task request body (API.md "Task (request body)") into a
// normalized storage.Spec: strict JSON decoding first, then field-by-field
// validation. Every problem comes back as an *Error that names the JSON field
// to blame, so a client can point at it.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/chime-scheduler/chime/node/schedule"
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

	// maxSpan bounds how far ahead anything may be scheduled (delay_ms,
	// due_at, start_at, every_ms, @every).
	maxSpan   = schedule.MaxSpan
	maxSpanMs = schedule.MaxSpanMs
)

// TaskRequest is the JSON body of POST /v1/tasks and PUT /v1/tasks/{id}
// (API.md "Task (request body)"). Optional numbers are pointers so that an
// absent field and a zero differ; a JSON null counts as absent. Optional
// strings treat "" as absent, except due_at and cron, where "" is an invalid
// value. The json tags make json.Marshal of a TaskRequest a valid request
// body, for clients and benchmarks.
type TaskRequest struct {
	ID          string            `json:"id,omitempty"`
	CallbackURL string            `json:"callback_url"`
	DelayMs     *int64            `json:"delay_ms,omitempty"`
	DueAt       *string           `json:"due_at,omitempty"`
	EveryMs     *int64            `json:"every_ms,omitempty"`
	Cron        *string           `json:"cron,omitempty"`
	Timezone    string            `json:"timezone,omitempty"`
	StartAt     string            `json:"start_at,omitempty"`
	Payload     json.RawMessage   `json:"payload,omitempty"`
	Headers     map[string]string `json:"headers,omitempty"`
	TimeoutMs   *int64            `json:"timeout_ms,omitempty"`
	MaxRetries  *int              `json:"max_retries,omitempty"`
	Misfire     string            `json:"misfire,omitempty"`
	MaxFails    *int              `json:"max_fails,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	// Status is the state the task starts in: "scheduled" (the default) or
	// "paused", so that `chime import` can restore a paused task without a
	// window in which it could fire.
	Status string `json:"status,omitempty"`

	// decoded is set by decodeTaskRequest: Payload is known to be valid
	// JSON and scheduleKeys is meaningful.
	decoded bool
	// scheduleKeys lists the schedule fields (delay_ms, due_at, every_ms,
	// cron) given with a non-null value, in body order.
	scheduleKeys []string
}

// Schedule field names, in the canonical order used when the request order
// is unknown (a TaskRequest built in Go rather than decoded).
const (
	fieldDelayMs = "delay_ms"
	fieldDueAt   = "due_at"
	fieldEveryMs = "every_ms"
	fieldCron    = "cron"
)

// decodeTaskRequest decodes one JSON object strictly. Field names match
// exactly (encoding/json alone would also accept "Delay_MS"); an unknown or
// repeated field is rejected naming it (e.g. {"dealy_ms":5} -> field
// "dealy_ms"); a value of the wrong type names its field ("headers.X" for a
// header value); an empty body, a body that is not an object and anything
// after the object are errors. All errors have Code invalid_argument.
//
// It runs json.Unmarshal (which also checks the syntax) and then one pass
// over the object's keys for the strict rules (scanRequestKeys): together
// about 1.1× a plain json.Unmarshal, where a token-by-token json.Decoder
// decode measured 1.7× with 4× the allocations.
func decodeTaskRequest(data []byte) (*TaskRequest, *Error) {
	rest := bytes.TrimLeft(data, " \t\r\n")
	if len(rest) == 0 {
		return nil, invalid("", "request body is empty; want a JSON object")
	}
	if rest[0] != '{' {
		return nil, invalid("", "request body must be a JSON object")
	}
	r := &TaskRequest{}
	err := json.Unmarshal(rest, r)
	var te *json.UnmarshalTypeError
	if err != nil && !errors.As(err, &te) {
		return nil, syntaxError(rest, err)
	}
	// The body is valid JSON now (Unmarshal checks that before decoding).
	keys, e := scanRequestKeys(rest)
	if e != nil {
		return nil, e
	}
	if te != nil {
		want, ok := requestFieldTypes[te.Field]
		if !ok {
			want = "of another type"
		}
		return nil, invalid(te.Field, "must be %s, got %s", want, te.Value)
	}
	r.decoded, r.scheduleKeys = true, keys
	if string(r.Payload) == "null" {
		r.Payload = nil
	}
	return r, nil
}

// scheduleSet reports whether key names a schedule field that r has set.
func (r *TaskRequest) scheduleSet(key string) bool {
	switch key {
	case fieldDelayMs:
		return r.DelayMs != nil
	case fieldDueAt:
		return r.DueAt != nil
	case fieldEveryMs:
		return r.EveryMs != nil
	case fieldCron:
		return r.Cron != nil
	}
	return false
}

// requestFieldTypes names each request field's JSON type, for messages.
var requestFieldTypes = map[string]string{
	"id": "a string", "callback_url": "a string", fieldDelayMs: "an integer", fieldDueAt: "an RFC 3339 string",
	fieldEveryMs: "an integer", fieldCron: "a string", "timezone": "a string", "start_at": "an RFC 3339 string",
	"payload": "any JSON value", "headers": "an object of strings", "timeout_ms": "an integer",
	"max_retries": "an integer", "misfire": "a string", "max_fails": "an integer", "labels": "an object of strings",
	"status": "a string",
}

// syntaxError reports why data is not one valid JSON value.
func syntaxError(data []byte, err error) *Error {
	var se *json.SyntaxError
	if !errors.As(err, &se) {
		return invalid("", "malformed JSON: %v", err)
	}
	// Unmarshal rejects "{…} x" as a whole; say so plainly when a complete
	// object does come first.
	dec := json.NewDecoder(bytes.NewReader(data))
	var first json.RawMessage
	if dec.Decode(&first) == nil {
		return invalid("", "unexpected data after the JSON object at byte %d", dec.InputOffset())
	}
	if se.Offset >= int64(len(data)) {
		return invalid("", "malformed JSON: unexpected end of body")
	}
	return invalid("", "malformed JSON at byte %d: %v", se.Offset, se)
}

// scanRequestKeys walks the keys of the valid JSON object data and enforces
// what json.Unmarshal does not: every key is a known field spelled exactly,
// no key repeats, and headers and labels are objects of strings without
// repeated keys and with at most maxHeaders / maxLabels entries. It returns
// the schedule fields given with a non-null value, in body order. It
// allocates only for keys written with escapes and for the returned list.
func scanRequestKeys(data []byte) ([]string, *Error) {
	s := jsonScan{data: data}
	var (
		seen  uint32
		sched []string
	)
	e := s.object(func(key []byte) *Error {
		f, ok := requestFields[string(key)]
		if !ok {
			k := clip(string(key))
			return invalid(k, "unknown field %q", k)
		}
		if seen&f.bit != 0 {
			return invalid(f.name, "field %q given twice", f.name)
		}
		seen |= f.bit
		c := s.peek()
		switch f.name {
		case fieldDelayMs, fieldDueAt, fieldEveryMs, fieldCron:
			if c != 'n' { // null counts as absent
				sched = append(sched, f.name)
			}
		case "headers", "labels":
			if c == '{' {
				limit := maxLabels
				if f.name == "headers" {
					limit = maxHeaders
				}
				return s.stringObject(f.name, limit)
			}
			if c != 'n' {
				return invalid(f.name, "must be an object of strings")
			}
		}
		s.skipValue()
		return nil
	})
	return sched, e
}

// requestField is a known request field: its JSON name and a bit of its
// own, to detect repeats.
type requestField struct {
	name string
	bit  uint32
}

// requestFields indexes the request fields by JSON name.
var requestFields = func() map[string]requestField {
	names := []string{"id", "callback_url", fieldDelayMs, fieldDueAt, fieldEveryMs, fieldCron, "timezone",
		"start_at", "payload", "headers", "timeout_ms", "max_retries", "misfire", "max_fails", "labels", "status"}
	m := make(map[string]requestField, len(names))
	for i, n := range names {
		m[n] = requestField{name: n, bit: 1 << i}
	}
	return m
}()

// jsonScan is a cursor over JSON text that is already known to be one valid
// value, so it checks nothing json.Valid would.
type jsonScan struct {
	data []byte
	i    int
}

// peek skips whitespace and returns the next byte (0 at the end).
func (s *jsonScan) peek() byte {
	for s.i < len(s.data) {
		switch c := s.data[s.i]; c {
		case ' ', '\t', '\r', '\n':
			s.i++
		default:
			return c
		}
	}
	return 0
}

// object walks the object at the cursor, calling member with each key
// (unescaped; it aliases data unless the key has escapes) and the cursor on
// its value; member must consume the value. The first error stops the walk.
func (s *jsonScan) object(member func(key []byte) *Error) *Error {
	s.peek()
	s.i++ // '{'
	if s.peek() == '}' {
		s.i++
		return nil
	}
	for {
		s.peek()
		key := s.key()
		s.peek()
		s.i++ // ':'
		if e := member(key); e != nil {
			return e
		}
		if s.peek() == '}' {
			s.i++
			return nil
		}
		s.i++ // ','
	}
}

// stringObject consumes an object whose values must be strings. A
// non-string or a repeated key is reported as field "<field>.<key>", more
// than limit keys as field.
func (s *jsonScan) stringObject(field string, limit int) *Error {
	var keys [max(maxHeaders, maxLabels)][]byte
	n := 0
	return s.object(func(key []byte) *Error {
		if s.peek() != '"' {
			return invalid(field+"."+clip(string(key)), "must be a string")
		}
		s.skipValue()
		if n == limit {
			return invalid(field, "at most %d %s allowed", limit, field)
		}
		for _, k := range keys[:n] { // n <= 64: a scan beats a map
			if bytes.Equal(k, key) {
				k := clip(string(key))
				return invalid(field+"."+k, "key %q given twice", k)
			}
		}
		keys[n] = key
		n++
		return nil
	})
}

// key consumes the string at the cursor and returns its contents unescaped.
func (s *jsonScan) key() []byte {
	start := s.i
	s.skipString()
	raw := s.data[start+1 : s.i-1]
	if bytes.IndexByte(raw, '\\') < 0 {
		return raw
	}
	var k string
	_ = json.Unmarshal(s.data[start:s.i], &k) // a valid JSON string: cannot fail
	return []byte(k)
}

// skipString moves the cursor past the string that starts at it.
func (s *jsonScan) skipString() {
	s.i++ // opening quote
	for s.i < len(s.data) {
		switch s.data[s.i] {
		case '\\':
			s.i += 2
		case '"':
			s.i++
			return
		default:
			s.i++
		}
	}
}

// skipValue moves the cursor past the value that starts at it.
func (s *jsonScan) skipValue() {
	switch s.peek() {
	case '"':
		s.skipString()
	case '{', '[':
		depth := 0
		for s.i < len(s.data) {
			switch s.data[s.i] {
			case '"':
				s.skipString()
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
			}
			s.i++
			if depth == 0 {
				return
			}
		}
	default: // number, true, false, null
		for s.i < len(s.data) {
			switch s.data[s.i] {
			case ',', '}', ']', ' ', '\t', '\r', '\n':
				return
			}
			s.i++
		}
	}
}

// validate checks every field and returns the task id (a new ULID when the
// request has none) and the normalized storage.Spec. now is the request time:
// delay_ms counts from it and future bounds are relative to it. The first
// problem found is returned as an *Error with Code invalid_argument (or
// too_large, Status 400, for an oversized payload) and Field the JSON name of
// the field ("headers.Host", "labels.<key>" for nested ones). Problems are
// looked for in field order, and within headers and labels the smallest
// offending key is reported, so the answer is deterministic.
//
// validate does not modify r. The returned Spec shares Payload, Headers and
// Labels with r.
func (r *TaskRequest) validate(now time.Time, lim Limits) (string, storage.Spec, *Error) {
	lim = lim.withDefaults()
	id := r.ID
	if id == "" {
		id = ulid.Make().String()
	} else if e := validateID(id); e != nil {
		return "", storage.Spec{}, e
	}

	spec := storage.Spec{CallbackURL: r.CallbackURL}
	if e := validateCallbackURL(r.CallbackURL); e != nil {
		return "", storage.Spec{}, e
	}
	if e := r.validateSchedule(now, &spec); e != nil {
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
			return "", storage.Spec{}, invalid("payload", "must be valid JSON")
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
			return "", storage.Spec{}, invalid("timeout_ms", "must be between 1 and %d, got %d", maxTimeoutMs, *r.TimeoutMs)
		}
		spec.TimeoutMs = *r.TimeoutMs
	}
	spec.MaxRetries = defaultMaxRetries
	if r.MaxRetries != nil {
		if *r.MaxRetries < 0 || *r.MaxRetries > maxMaxRetries {
			return "", storage.Spec{}, invalid("max_retries", "must be between 0 and %d, got %d", maxMaxRetries, *r.MaxRetries)
		}
		spec.MaxRetries = *r.MaxRetries
	}

	periodic := spec.Kind != storage.KindOnce
	spec.Misfire = storage.MisfireFireOnce
	if r.Misfire != "" {
		if !periodic {
			return "", storage.Spec{}, invalid("misfire", "applies only to every_ms or cron tasks")
		}
		m, ok := parseMisfire(r.Misfire)
		if !ok {
			return "", storage.Spec{}, invalid("misfire", "must be one of fire_once, skip, fire_all, got %q", clip(r.Misfire))
		}
		spec.Misfire = m
	}
	if r.MaxFails != nil {
		if !periodic {
			return "", storage.Spec{}, invalid("max_fails", "applies only to every_ms or cron tasks")
		}
		if *r.MaxFails < 0 || *r.MaxFails > maxMaxFails {
			return "", storage.Spec{}, invalid("max_fails", "must be between 0 and %d, got %d", maxMaxFails, *r.MaxFails)
		}
		spec.MaxFails = *r.MaxFails
	}

	if e := validateLabels(r.Labels); e != nil {
		return "", storage.Spec{}, e
	}
	spec.Labels = nonEmpty(r.Labels)
	if _, e := r.initialStatus(); e != nil {
		return "", storage.Spec{}, e
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
	return 0, invalid("status", "must be scheduled or paused, got %q", clip(r.Status))
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
		return invalid("schedule", "one of delay_ms, due_at, every_ms or cron is required")
	case 1:
	default:
		return invalid(given[1], "only one of delay_ms, due_at, every_ms or cron may be set; got %s and %s", given[0], given[1])
	}

	nowNs := now.UnixNano()
	switch given[0] {
	case fieldDelayMs:
		d := *r.DelayMs
		if d < 0 || d > maxSpanMs {
			return invalid(fieldDelayMs, "must be between 0 and %d (10 years), got %d", maxSpanMs, d)
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
			return invalid(fieldEveryMs, "must be between %d and %d (10 years), got %d", minEveryMs, maxSpanMs, e)
		}
		spec.Kind = storage.KindEvery
		spec.EveryMs = e
	case fieldCron:
		expr := *r.Cron
		switch {
		case strings.TrimSpace(expr) == "":
			return invalid(fieldCron, "must not be empty")
		case len(expr) > schedule.MaxCronLen:
			return invalid(fieldCron, "must be at most %d bytes", schedule.MaxCronLen)
		case schedule.HasTZPrefix(expr):
			return invalid(fieldCron, "must not carry a TZ= or CRON_TZ= prefix; use the timezone field")
		}
		spec.Kind = storage.KindCron
		spec.Cron = expr
		spec.Timezone = r.Timezone
		if _, err := schedule.Compile(expr, r.Timezone); err != nil {
			if errors.Is(err, schedule.ErrBadTimezone) {
				return invalid("timezone", "unknown timezone %q; want an IANA name such as Europe/Berlin", clip(r.Timezone))
			}
			return invalid(fieldCron, "%v", err)
		}
	}

	if r.Timezone != "" && spec.Kind != storage.KindCron {
		return invalid("timezone", "applies only to cron tasks")
	}
	if r.StartAt != "" {
		if spec.Kind == storage.KindOnce {
			return invalid("start_at", "applies only to every_ms or cron tasks")
		}
		ns, e := parseInstant("start_at", r.StartAt, now)
		if e != nil {
			return e
		}
		spec.StartAt = ns
	}
	if spec.Kind == storage.KindCron {
		// A cron that never matches (e.g. "0 0 30 2 *") is a mistake to report now,
		// not a task that silently never fires.
		if _, err := schedule.FirstDue(spec, now); err != nil {
			return invalid(fieldCron, "%v", err)
		}
	}
	return nil
}

// parseInstant parses an RFC 3339 instant for field and bounds it to
// (1970-01-01, now + 10 years]. Instants in the past are allowed.
func parseInstant(field, s string, now time.Time) (int64, *Error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return 0, invalid(field, "must be an RFC 3339 time such as 2026-01-02T15:04:05Z, got %q", clip(s))
	}
	if !t.After(time.Unix(0, 0)) {
		return 0, invalid(field, "must be after 1970-01-01T00:00:00Z, got %q", s)
	}
	if t.After(now.Add(maxSpan)) {
		return 0, invalid(field, "must be at most 10 years from now, got %q", s)
	}
	return t.UnixNano(), nil
}

// validateID checks a client-chosen task id.
func validateID(id string) *Error {
	if len(id) > maxIDLen {
		return invalid("id", "must be 1 to %d characters, got %d", maxIDLen, len(id))
	}
	for i := 0; i < len(id); i++ {
		if !isIDChar(id[i]) {
			return invalid("id", "may contain only A-Z a-z 0-9 . _ ~ : -; found %q at byte %d", id[i], i)
		}
	}
	if id == "." || id == ".." {
		// They would be path segments in /v1/tasks/{id}, which HTTP
		// clients and routers resolve away.
		return invalid("id", "may not be %q", id)
	}
	return nil
}

func isIDChar(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '.' || c == '_' || c == '~' || c == ':' || c == '-'
}

// validateCallbackURL checks that u is an absolute http or https URL with a host.
func validateCallbackURL(u string) *Error {
	const field = "callback_url"
	if u == "" {
		return invalid(field, "is required")
	}
	if len(u) > maxURLLen {
		return invalid(field, "must be at most %d bytes", maxURLLen)
	}
	p, err := url.Parse(u)
	if err != nil {
		return invalid(field, "is not a valid URL: %v", err)
	}
	if p.Scheme != "http" && p.Scheme != "https" {
		return invalid(field, "must be an absolute http or https URL, got scheme %q", p.Scheme)
	}
	if p.Hostname() == "" {
		return invalid(field, "must name a host")
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
		return invalid("headers", "at most %d headers allowed, got %d", maxHeaders, len(h))
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
				worst, worstKey = invalid("headers."+clip(n), "header %q given twice (names are case-insensitive)", clip(n)), n
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
		return invalid(field, "header name must be 1 to %d characters", maxHeaderNameLen)
	}
	for i := 0; i < len(name); i++ {
		if !isTokenChar(name[i]) {
			return invalid(field, "header name may contain only token characters (RFC 9110); found %q", name[i])
		}
	}
	l := strings.ToLower(name)
	if forbiddenHeaders[l] {
		return invalid(field, "header %s may not be set", name)
	}
	if strings.HasPrefix(l, "x-chime-") {
		return invalid(field, "X-Chime-* headers are reserved for Chime")
	}
	if len(value) > maxHeaderValueLen {
		return invalid(field, "header value must be at most %d bytes", maxHeaderValueLen)
	}
	for i := 0; i < len(value); i++ {
		if c := value[i]; c < 0x20 && c != '\t' || c == 0x7f {
			return invalid(field, "header value may not contain control characters (CR, LF, NUL, …)")
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
		return invalid("labels", "at most %d labels allowed, got %d", maxLabels, len(labels))
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
		return invalid(field, "label key must be 1 to %d characters", maxLabelKeyLen)
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-' || c == '/') {
			return invalid(field, "label key may contain only A-Z a-z 0-9 . _ - /; found %q", c)
		}
	}
	if n := utf8.RuneCountInString(v); n > maxLabelValueLen {
		return invalid(field, "label value must be at most %d characters, got %d", maxLabelValueLen, n)
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
