package client

import (
	"errors"
	"fmt"
	"net/http"
	"time"
)

// Sentinel errors to match with errors.Is. An *Error matches the one of its
// status (and code); a request that no node answered matches ErrUnavailable.
var (
	ErrNotFound        = errors.New("chime: not found")         // 404
	ErrConflict        = errors.New("chime: conflict")          // 409: the id exists, or the task's state refuses the change
	ErrInvalid         = errors.New("chime: invalid request")   // 400, 405, 413, 415
	ErrUnauthorized    = errors.New("chime: unauthorized")      // 401 and 403
	ErrUnavailable     = errors.New("chime: unavailable")       // 503, or no node answered
	ErrTooManyRequests = errors.New("chime: too many requests") // 429
)

// Error is an error answer of the API: its HTTP status and the body
// {"error":{"code","message","field"}} (API.md "Errors").
type Error struct {
	Status  int    // the HTTP status
	Code    string // e.g. "invalid_argument", "not_found"
	Message string // for humans
	Field   string // the request field or header to blame, if one is
	// RetryAfter is the answer's Retry-After (a 429 or 503 says when to
	// try again), 0 when it had none.
	RetryAfter time.Duration
}

func (e *Error) Error() string {
	s := fmt.Sprintf("chime: %d %s", e.Status, e.Code)
	if e.Field != "" {
		s += " (" + e.Field + ")"
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// Is matches e against the sentinel errors by status.
func (e *Error) Is(target error) bool {
	switch target {
	case ErrNotFound:
		return e.Status == http.StatusNotFound
	case ErrConflict:
		return e.Status == http.StatusConflict
	case ErrInvalid:
		switch e.Status {
		case http.StatusBadRequest, http.StatusMethodNotAllowed, http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType:
			return true
		}
	case ErrUnauthorized:
		return e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden
	case ErrUnavailable:
		return e.Status == http.StatusServiceUnavailable
	case ErrTooManyRequests:
		return e.Status == http.StatusTooManyRequests
	}
	return false
}
