package client

import (
	"context"
	"net/http"
	"net/url"
	"strings"
)

// Do sends one request of any endpoint and returns the status and body of
// its 2xx answer: the escape hatch for endpoints the typed methods do not
// cover, or for callers that need the node's JSON as it is (the chime
// CLI's export pages and import batches). path is escaped already and
// starts with /v1/; body, when non-nil, is JSON.
//
// The rules of the typed methods apply: the token and TLS options, a
// request for /v1/tasks/{id}… goes to the owner of id's slot, and GET,
// HEAD, PUT and DELETE are retried and fail over (RetryPolicy); other
// methods are sent once. A non-2xx answer is an *Error.
func (c *Client) Do(ctx context.Context, method, path string, query url.Values, body []byte) (status int, answer []byte, err error) {
	cl := call{method: method, path: path, query: query, body: body, id: pathID(path)}
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPut, http.MethodDelete:
		cl.idempotent = true
	}
	a, err := c.do(ctx, cl)
	if err != nil {
		return 0, nil, err
	}
	return a.status, a.body, nil
}

// pathID is the task id of a path under /v1/tasks/ ("" for any other).
func pathID(path string) string {
	rest, ok := strings.CutPrefix(path, "/v1/tasks/")
	if !ok {
		return ""
	}
	rest, _, _ = strings.Cut(rest, "/")
	id, err := url.PathUnescape(rest)
	if err != nil {
		return ""
	}
	return id
}
