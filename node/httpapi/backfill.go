package httpapi

// Trigger with a due time, and backfill (API.md "Task endpoints",
// "Backfill").

import (
	"bytes"
	"encoding/json"
	"net/http"
	"time"

	"github.com/chime-scheduler/chime/slots"
	"github.com/chime-scheduler/chime/storage"
)

// maxSmallBody bounds the body of trigger and backfill.
const maxSmallBody = 4 << 10

// BackfillResult is what a backfill queued: how many fires, the first and
// last occurrence (Unix ns; 0 when none).
type BackfillResult struct {
	Queued      uint64
	First, Last int64
}

// BackfillResponse is the answer of POST /v1/tasks/{id}/backfill.
type BackfillResponse struct {
	Queued uint64       `json:"queued"`
	First  string       `json:"first,omitempty"`
	Last   string       `json:"last,omitempty"`
	Task   TaskResponse `json:"task"`
}

// decodeInstants decodes a body that is one JSON object whose members are
// among fields, each an RFC 3339 string or null, none repeated. An empty
// body (or only white space) is an empty object when emptyOK.
func decodeInstants(body []byte, fields []string, emptyOK bool) (map[string]string, *Error) {
	out := map[string]string{}
	if len(bytes.TrimSpace(body)) == 0 {
		if emptyOK {
			return out, nil
		}
		return nil, Invalid("", "a JSON object body is required")
	}
	if !json.Valid(body) {
		var v any
		return nil, syntaxError(body, json.Unmarshal(body, &v))
	}
	if b := bytes.TrimSpace(body); b[0] != '{' {
		return nil, Invalid("", "the body must be a JSON object")
	}
	s := jsonScan{data: body}
	e := s.object(func(key []byte) *Error {
		k := string(key)
		known := false
		for _, f := range fields {
			known = known || f == k
		}
		if !known {
			return Invalid(clip(k), "unknown field %q", clip(k))
		}
		if _, ok := out[k]; ok {
			return Invalid(k, "field %q given twice", k)
		}
		switch s.peek() {
		case 'n':
			out[k] = ""
		case '"':
			start := s.i
			s.skipValue()
			var v string
			if err := json.Unmarshal(body[start:s.i], &v); err != nil {
				return Invalid(k, "must be an RFC 3339 string")
			}
			out[k] = v
			return nil
		default:
			return Invalid(k, "must be an RFC 3339 string")
		}
		s.skipValue()
		return nil
	})
	if e != nil {
		return nil, e
	}
	for k, v := range out {
		if v == "" {
			delete(out, k) // null counts as absent
		}
	}
	return out, nil
}

// parseRangeInstant parses an instant of trigger or backfill: RFC 3339,
// within 10 years of now either way.
func parseRangeInstant(field, v string, now time.Time) (int64, *Error) {
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return 0, Invalid(field, "must be an RFC 3339 time such as 2026-01-02T15:04:05Z, got %q", clip(v))
	}
	if t.Before(now.Add(-maxSpan)) || t.After(now.Add(maxSpan)) {
		return 0, Invalid(field, "must be within 10 years of now, got %q", clip(v))
	}
	if !t.After(time.Unix(0, 0)) {
		return 0, Invalid(field, "must be after 1970-01-01T00:00:00Z, got %q", clip(v))
	}
	return t.UnixNano(), nil
}

// parseTriggerBody reads trigger's optional {"due_at": …}: 0 = now.
func parseTriggerBody(body []byte, now time.Time) (int64, *Error) {
	m, e := decodeInstants(body, []string{"due_at"}, true)
	if e != nil {
		return 0, e
	}
	v, ok := m["due_at"]
	if !ok {
		return 0, nil
	}
	return parseRangeInstant("due_at", v, now)
}

// parseBackfillBody reads backfill's {"from": …, "to": …}.
func parseBackfillBody(body []byte, now time.Time) (from, to int64, e *Error) {
	m, e := decodeInstants(body, []string{"from", "to"}, false)
	if e != nil {
		return 0, 0, e
	}
	for _, f := range []string{"from", "to"} {
		if _, ok := m[f]; !ok {
			return 0, 0, Invalid(f, "is required")
		}
	}
	if from, e = parseRangeInstant("from", m["from"], now); e != nil {
		return 0, 0, e
	}
	if to, e = parseRangeInstant("to", m["to"], now); e != nil {
		return 0, 0, e
	}
	if from > to {
		return 0, 0, Invalid("from", "must not be after to")
	}
	if to-from > int64(maxSpan) {
		return 0, 0, Invalid("to", "the range is over 10 years")
	}
	return from, to, nil
}

// taskIDWithBody is taskID for a request with a (small) body: the body is
// read first so that a request for another node's slot is forwarded with it.
func (s *Server) taskIDWithBody(w http.ResponseWriter, r *http.Request) (string, []byte, bool) {
	id := r.PathValue("id")
	if e := validateID(id); e != nil {
		WriteError(w, e)
		return "", nil, false
	}
	body, e := ReadBody(w, r, maxSmallBody)
	if e != nil {
		WriteError(w, e)
		return "", nil, false
	}
	if v := s.b.View(); !v.Owns(slots.Of(id)) {
		s.routed(w, r, v, id, body)
		return "", nil, false
	}
	return id, body, true
}

func (s *Server) handleTrigger(w http.ResponseWriter, r *http.Request) {
	id, body, ok := s.taskIDWithBody(w, r)
	if !ok {
		return
	}
	var e *Error
	due, e := parseTriggerBody(body, s.b.Now())
	if e != nil {
		WriteError(w, e)
		return
	}
	t, err := s.b.Trigger(r.Context(), id, due)
	if err != nil {
		WriteError(w, AsError(err))
		return
	}
	WriteJSON(w, http.StatusAccepted, taskResponse(t, s.cfg.Name))
}

func (s *Server) handleBackfill(w http.ResponseWriter, r *http.Request) {
	id, body, ok := s.taskIDWithBody(w, r)
	if !ok {
		return
	}
	var e *Error
	from, to, e := parseBackfillBody(body, s.b.Now())
	if e != nil {
		WriteError(w, e)
		return
	}
	t, res, err := s.b.Backfill(r.Context(), id, from, to)
	if err != nil {
		WriteError(w, AsError(err))
		return
	}
	WriteJSON(w, http.StatusAccepted, backfillResponse(t, res, s.cfg.Name))
}

func backfillResponse(t *storage.Task, res BackfillResult, node string) BackfillResponse {
	return BackfillResponse{Queued: res.Queued, First: formatInstant(res.First), Last: formatInstant(res.Last), Task: taskResponse(t, node)}
}
