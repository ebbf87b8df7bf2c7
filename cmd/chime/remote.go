package main

// How the client commands (task, cluster, export, import, backup) reach a
// node: through the Go SDK, github.com/chime-scheduler/chime/client, built
// from the common flags. This file maps the SDK's errors to the CLI's
// messages.

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/chime-scheduler/chime/client"
)

// defaultAddr is the node a client command talks to when neither --addr
// nor CHIME_ADDR is given: the default `chime serve` HTTP address.
const defaultAddr = "http://127.0.0.1:7070"

// remote is the SDK client of one command, with the seeds it was built
// from (base URLs, for messages and for backup's manifest).
type remote struct {
	*client.Client
	seeds   []string
	timeout time.Duration
}

// newRemote returns a client of the nodes in addrs: one address, or a
// comma-separated list of seeds of one cluster, each a URL
// (http://host:port, https://host:port/prefix) or a bare host:port.
// timeout bounds each attempt of each request; tc, when non-nil, is the
// TLS configuration of https nodes.
//
// A request that fails on a connection error or a 503 goes to the next
// seed (and a 429 waits): every seed is tried once, and one node twice.
func newRemote(addrs, token string, timeout time.Duration, tc *tls.Config) (*remote, error) {
	if timeout <= 0 {
		return nil, fmt.Errorf("--timeout must be positive, got %s", timeout)
	}
	r := &remote{timeout: timeout}
	for a := range strings.SplitSeq(addrs, ",") {
		base, err := normalizeAddr(a)
		if err != nil {
			return nil, err
		}
		r.seeds = append(r.seeds, base)
	}
	retry := client.DefaultRetryPolicy()
	retry.MaxAttempts = len(r.seeds) + 1
	c, err := client.New(r.seeds, client.WithToken(token), client.WithTimeout(timeout), client.WithTLS(tc), client.WithRetry(retry))
	if err != nil {
		return nil, err
	}
	r.Client = c
	return r, nil
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

// normalizeAddr turns one --addr value into a base URL without a trailing
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

// fail turns an error of the SDK into the CLI's message: an error answer
// becomes an *apiError ("400 invalid_argument: cron: expected 5 or 6
// fields"), a transport failure names the node ("chime node at URL: …"),
// an answer that does not decode says so. nil stays nil.
func (r *remote) fail(err error) error {
	var ce *client.Error
	var ue *url.Error
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ce):
		return &apiError{ce}
	case errors.As(err, &ue):
		node := r.nodeOf(ue.URL)
		if ue.Timeout() {
			return fmt.Errorf("chime node at %s: no answer within %s (see --timeout)", node, r.timeout)
		}
		return fmt.Errorf("chime node at %s: %w", node, ue.Err)
	case errors.As(err, &se) || errors.As(err, &te):
		return fmt.Errorf("unexpected answer from server: %w", err)
	}
	return err
}

// nodeOf is the seed that target (a request URL) went to, or its scheme
// and host when it went to another node (an owner from the slot map).
func (r *remote) nodeOf(target string) string {
	for _, s := range r.seeds {
		if strings.HasPrefix(target, s+"/") {
			return s
		}
	}
	if u, err := url.Parse(target); err == nil {
		return u.Scheme + "://" + u.Host
	}
	return target
}

// apiError is an error answer as the CLI prints it: "400
// invalid_argument: cron: expected 5 or 6 fields", with "(retry after 2s)"
// when the node said when to try again. It unwraps to the *client.Error,
// whose fields it has.
type apiError struct{ *sdkError }

// sdkError names client.Error for embedding (a field named Error would
// clash with the method).
type sdkError = client.Error

// Error implements error.
func (e *apiError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d", e.Status)
	code, msg := e.Code, e.Message
	if code == fmt.Sprintf("http_%d", e.Status) {
		// The SDK's code for an answer without the API's error body;
		// its message is an excerpt of that body.
		code, msg = http.StatusText(e.Status), excerpt([]byte(msg), 200)
	}
	if code != "" {
		b.WriteString(" " + code)
	}
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
	if e.RetryAfter > 0 {
		b.WriteString(" (retry after " + e.RetryAfter.Round(time.Second).String() + ")")
	}
	return b.String()
}

// Unwrap makes errors.As and errors.Is see the SDK's error (and its
// sentinels, client.ErrNotFound …).
func (e *apiError) Unwrap() error { return e.sdkError }

// excerpt returns at most n bytes of b as a single trimmed line, for error
// messages about unexpected server output.
func excerpt(b []byte, n int) string {
	s := strings.TrimSpace(string(b))
	if len(s) > n {
		s = strings.ToValidUTF8(s[:n], "") + "…"
	}
	return strings.Join(strings.Fields(s), " ")
}
