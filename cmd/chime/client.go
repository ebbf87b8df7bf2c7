package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
)

// defaultAddr is the node a client command talks to when neither --addr
// nor CHIME_ADDR is given: the default `chime serve` HTTP address.
const defaultAddr = "http://127.0.0.1:7070"

// maxAnswerBytes bounds how much of one HTTP answer the client reads. A list
// page of a few thousand tasks is well under 16 MiB; anything larger is a
// misbehaving server, and reading it all would only exhaust memory.
const maxAnswerBytes = 64 << 20

// client talks to one Chime node's HTTP API (docs/API.md).
//
// It is a thin request/answer helper: it sets the bearer token and JSON
// headers, turns a non-2xx answer into an *apiError and a transport failure
// into an error that names the address. It keeps no state between calls, so
// one client may be used from several goroutines.
type client struct {
	base  string // normalized base URL without a trailing slash, e.g. http://127.0.0.1:7070
	token string // bearer token; empty sends no Authorization header
	hc    *http.Client
}

// newClient returns a client for the node at addr. addr may be a URL
// (http://host:port, https://host:port/prefix) or a bare host:port. timeout
// bounds each request, including reading the answer.
func newClient(addr, token string, timeout time.Duration) (*client, error) {
	base, err := normalizeAddr(addr)
	if err != nil {
		return nil, err
	}
	if timeout <= 0 {
		return nil, fmt.Errorf("--timeout must be positive, got %s", timeout)
	}
	return &client{base: base, token: token, hc: &http.Client{Timeout: timeout}}, nil
}

// caConfig is a TLS client config that trusts the CA bundle in file (PEM).
func caConfig(file string) (*tls.Config, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("--ca: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("--ca: %s holds no PEM certificate", file)
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

// normalizeAddr turns the --addr value into a base URL without a trailing
// slash. A bare "host:port" gets the http scheme; a bare ":port" means
// 127.0.0.1:port.
func normalizeAddr(addr string) (string, error) {
	addr = strings.TrimSpace(addr)
	if addr == "" {
		return "", errors.New("empty --addr")
	}
	if !strings.Contains(addr, "://") {
		if strings.HasPrefix(addr, ":") {
			addr = "127.0.0.1" + addr
		}
		addr = "http://" + addr
	}
	u, err := url.Parse(addr)
	if err != nil {
		return "", fmt.Errorf("bad --addr %q: %w", addr, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", fmt.Errorf("bad --addr %q: scheme must be http or https", addr)
	}
	if u.Host == "" {
		return "", fmt.Errorf("bad --addr %q: no host", addr)
	}
	if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return "", fmt.Errorf("bad --addr %q: only scheme, host, port and path are allowed", addr)
	}
	return strings.TrimRight(u.String(), "/"), nil
}

// answer is one successful (2xx) HTTP answer.
type answer struct {
	status int
	body   []byte
}

// do sends one request and returns the 2xx answer. path must already be
// escaped (see taskPath); query may be nil; body, when non-nil, is sent as
// application/json, and a POST or PUT says application/json even without
// one. A non-2xx answer returns an *apiError; a transport failure returns
// an error naming the address.
func (c *client) do(ctx context.Context, method, path string, query url.Values, body []byte) (answer, error) {
	target := c.base + path
	if len(query) > 0 {
		target += "?" + query.Encode()
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, rd)
	if err != nil {
		return answer{}, fmt.Errorf("build request %s %s: %w", method, target, err)
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "chime-cli")
	if body != nil || method == http.MethodPost || method == http.MethodPut {
		// The node wants it on every POST and PUT, even without a body
		// (its CSRF guard: a browser cannot send it cross-site unasked).
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return answer{}, c.transportError(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes+1))
	if err != nil {
		return answer{}, c.transportError(err)
	}
	if len(data) > maxAnswerBytes {
		return answer{}, fmt.Errorf("chime node at %s: answer to %s %s is larger than %d bytes", c.base, method, path, maxAnswerBytes)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return answer{}, newAPIError(resp.StatusCode, resp.Header.Get("Retry-After"), data)
	}
	return answer{status: resp.StatusCode, body: data}, nil
}

// transportError says which address failed, without repeating the full
// request URL that *url.Error would add.
func (c *client) transportError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		if ue.Timeout() {
			return fmt.Errorf("chime node at %s: no answer within %s (see --timeout)", c.base, c.hc.Timeout)
		}
		err = ue.Err
	}
	return fmt.Errorf("chime node at %s: %w", c.base, err)
}

// apiError is a non-2xx answer. Its message has the form
// "400 invalid_argument: cron: expected 5 or 6 fields", built from the
// API's {"error":{"code","message","field"}} body, so main can print it as is.
type apiError struct {
	Status     int    // HTTP status code
	Code       string // API error code, e.g. "not_found"; empty when the body had none
	Message    string // API error message, or an excerpt of a non-JSON body
	Field      string // offending request field, when the server named one
	RetryAfter string // Retry-After header of a 429/503, verbatim
}

// newAPIError decodes an error answer. It never fails: a body that is not
// the documented shape becomes the message (trimmed and shortened).
func newAPIError(status int, retryAfter string, body []byte) *apiError {
	e := &apiError{Status: status, RetryAfter: retryAfter}
	var wire struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
			Field   string `json:"field"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &wire); err == nil && (wire.Error.Code != "" || wire.Error.Message != "") {
		e.Code, e.Message, e.Field = wire.Error.Code, wire.Error.Message, wire.Error.Field
		return e
	}
	e.Message = excerpt(body, 200)
	return e
}

// Error implements error.
func (e *apiError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d", e.Status)
	if e.Code != "" {
		b.WriteString(" " + e.Code)
	} else if txt := http.StatusText(e.Status); txt != "" {
		b.WriteString(" " + txt)
	}
	msg := e.Message
	if e.Field != "" && !strings.HasPrefix(msg, e.Field) {
		if msg == "" {
			msg = e.Field
		} else {
			msg = e.Field + ": " + msg
		}
	}
	if msg != "" {
		b.WriteString(": " + msg)
	}
	if e.RetryAfter != "" {
		ra := e.RetryAfter
		if _, err := strconv.Atoi(ra); err == nil {
			ra += "s" // delay-seconds form; an HTTP-date is printed as is
		}
		b.WriteString(" (retry after " + ra + ")")
	}
	return b.String()
}

// excerpt returns at most n bytes of b as a single trimmed line, for error
// messages about unexpected server output.
func excerpt(b []byte, n int) string {
	s := strings.TrimSpace(string(b))
	if len(s) > n {
		s = strings.ToValidUTF8(s[:n], "") + "…"
	}
	return strings.Join(strings.Fields(s), " ")
}
