package client

import (
	"crypto/tls"
	"log/slog"
	"net/http"
	"time"
)

// Option configures a Client (New).
type Option func(*config)

// config is what the options set.
type config struct {
	token   string
	tls     *tls.Config
	timeout time.Duration
	log     *slog.Logger
	retry   RetryPolicy
	hc      *http.Client
	noRoute bool // WithOwnerRouting(false)
}

// RetryPolicy bounds the automatic retries of idempotent requests.
type RetryPolicy struct {
	// MaxAttempts is how many times one request is sent at most, the
	// first included (1: no retries).
	MaxAttempts int
	// BackoffBase is the wait before the first retry; each next one
	// doubles it, up to BackoffMax. A Retry-After in the answer (429,
	// 503) waits at least that long.
	BackoffBase time.Duration
	BackoffMax  time.Duration
}

// DefaultRetryPolicy retries an idempotent request up to 12 attempts in
// all, waiting 100 ms, 200 ms, … doubling up to 2 s between them (the
// upper half of each jittered; longer when the answer asks with
// Retry-After): 7.5–15 s in all, enough to ride over the crash of a
// node, which takes the failure detector about 2.5 s to declare and
// its follower a few more to take over (measured in
// TestSDKAgainstThreeProcesses: the last create across a SIGKILL went
// through 4–8 s after it), without hiding an outage for long.
func DefaultRetryPolicy() RetryPolicy {
	return RetryPolicy{MaxAttempts: 12, BackoffBase: 100 * time.Millisecond, BackoffMax: 2 * time.Second}
}

// DefaultTimeout bounds one attempt of one request, answer included.
const DefaultTimeout = 10 * time.Second

// WithToken sends the API token (or the read token) as a bearer token.
func WithToken(token string) Option { return func(c *config) { c.token = token } }

// WithTLS sets the TLS configuration of https seeds and nodes (e.g. the
// RootCAs of a cluster with its own CA).
func WithTLS(tc *tls.Config) Option { return func(c *config) { c.tls = tc } }

// WithTimeout bounds each attempt of each request (DefaultTimeout). The
// caller's context bounds the request as a whole, retries included.
func WithTimeout(d time.Duration) Option { return func(c *config) { c.timeout = d } }

// WithLogger logs retries, failovers and slot map reloads at debug level,
// and failed reloads at warn (default: nothing is logged).
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.log = l } }

// WithRetry sets the retry policy (DefaultRetryPolicy).
func WithRetry(p RetryPolicy) Option { return func(c *config) { c.retry = p } }

// WithHTTPClient sends the requests with hc instead of a client of its own.
// WithTLS and WithTimeout then do not apply: hc's transport and timeout do.
func WithHTTPClient(hc *http.Client) Option { return func(c *config) { c.hc = hc } }
