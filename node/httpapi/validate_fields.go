package httpapi

// The request fields checked one by one for validate.go: ids and flow
// keys, the ACK phase, URLs, headers and labels.

import (
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/chime-scheduler/chime/slots"
	"github.com/chime-scheduler/chime/storage"
	"github.com/oklog/ulid/v2"
)

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

// validateID checks a client-chosen task id (storage.ValidID's characters;
// braces make a hash tag, slots.HashKey).
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
