package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
)

// Code is the machine-readable error code of the API's error body.
type Code string

// Error codes of the HTTP contract (API.md "Errors").
const (
	CodeInvalidArgument Code = "invalid_argument" // 400
	CodeNotFound        Code = "not_found"        // 404
	CodeConflict        Code = "conflict"         // 409
	CodeUnauthenticated Code = "unauthenticated"  // 401
	CodeTooLarge        Code = "too_large"        // 413
	CodeOverloaded      Code = "overloaded"       // 429
	CodeUnavailable     Code = "unavailable"      // 503
	CodeInternal        Code = "internal"         // 500

	CodeForbidden            Code = "forbidden"              // 403
	CodeMisdirected          Code = "misdirected_request"    // 421
	CodeUnsupportedMediaType Code = "unsupported_media_type" // 415
)

// HTTPStatus returns the status code that carries c.
func (c Code) HTTPStatus() int {
	switch c {
	case CodeInvalidArgument:
		return http.StatusBadRequest
	case CodeNotFound:
		return http.StatusNotFound
	case CodeConflict:
		return http.StatusConflict
	case CodeUnauthenticated:
		return http.StatusUnauthorized
	case CodeTooLarge:
		return http.StatusRequestEntityTooLarge
	case CodeOverloaded:
		return http.StatusTooManyRequests
	case CodeUnavailable:
		return http.StatusServiceUnavailable
	case CodeForbidden:
		return http.StatusForbidden
	case CodeMisdirected:
		return http.StatusMisdirectedRequest
	case CodeUnsupportedMediaType:
		return http.StatusUnsupportedMediaType
	}
	return http.StatusInternalServerError
}

// Error is an API error: a code, a human message and, when one input field
// is to blame, its name (JSON name, dotted for nested fields, e.g.
// "headers.Host" or "tasks[3].cron").
type Error struct {
	Code    Code   `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field,omitempty"`
	// Status overrides Code.HTTPStatus when non-zero (a field that is too
	// large is a 400 with code too_large, a whole body too large a 413).
	Status int `json:"-"`
}

// HTTPStatus is the status code the error is answered with.
func (e *Error) HTTPStatus() int {
	if e.Status != 0 {
		return e.Status
	}
	return e.Code.HTTPStatus()
}

func (e *Error) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("%s: %s: %s", e.Code, e.Field, e.Message)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

// Invalid returns an invalid_argument error naming field.
func Invalid(field, format string, args ...any) *Error {
	return &Error{Code: CodeInvalidArgument, Field: field, Message: fmt.Sprintf(format, args...)}
}

// Errors every layer of the node returns for the common cases.
var (
	ErrNotFound = &Error{Code: CodeNotFound, Message: "task not found"}
	// ErrFlowNotFound answers for a flow key without a definition.
	ErrFlowNotFound = &Error{Code: CodeNotFound, Message: "flow not found"}
	ErrExists       = &Error{Code: CodeConflict, Message: "a task with this id exists"}
	ErrOverloaded   = &Error{Code: CodeOverloaded, Message: "write queue is full; retry later"}
	ErrStopping     = &Error{Code: CodeUnavailable, Message: "node is shutting down"}
)

// AsError converts any error into an *Error, wrapping unknown ones as internal.
func AsError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{Code: CodeInternal, Message: err.Error()}
}

// WriteJSON answers v as JSON with status.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// WriteError answers e in the error shape {"error":{code,message,field}};
// overloaded and unavailable carry Retry-After: 1.
func WriteError(w http.ResponseWriter, e *Error) {
	switch e.Code {
	case CodeOverloaded, CodeUnavailable:
		w.Header().Set("Retry-After", "1")
	}
	WriteJSON(w, e.HTTPStatus(), struct {
		Error *Error `json:"error"`
	}{e})
}
