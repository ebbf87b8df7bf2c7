package node

import (
	"net/http"

	"github.com/chime-scheduler/chime/node/httpapi"
)

// The node answers in the API's error shape, which package httpapi owns;
// these short names keep the writer's, the ownership driver's and the
// internal endpoints' code as it was.

// Error is an API error (httpapi.Error).
type Error = httpapi.Error

// Error codes (httpapi.Code).
const (
	CodeInvalidArgument      = httpapi.CodeInvalidArgument
	CodeNotFound             = httpapi.CodeNotFound
	CodeConflict             = httpapi.CodeConflict
	CodeUnauthenticated      = httpapi.CodeUnauthenticated
	CodeTooLarge             = httpapi.CodeTooLarge
	CodeOverloaded           = httpapi.CodeOverloaded
	CodeUnavailable          = httpapi.CodeUnavailable
	CodeInternal             = httpapi.CodeInternal
	CodeForbidden            = httpapi.CodeForbidden
	CodeMisdirected          = httpapi.CodeMisdirected
	CodeUnsupportedMediaType = httpapi.CodeUnsupportedMediaType
)

var (
	errNotFound   = httpapi.ErrNotFound
	errExists     = httpapi.ErrExists
	errOverloaded = httpapi.ErrOverloaded
	errStopping   = httpapi.ErrStopping
)

func invalid(field, format string, args ...any) *Error {
	return httpapi.Invalid(field, format, args...)
}

func asError(err error) *Error { return httpapi.AsError(err) }

func writeError(w http.ResponseWriter, e *Error) { httpapi.WriteError(w, e) }

func writeJSON(w http.ResponseWriter, status int, v any) { httpapi.WriteJSON(w, status, v) }
