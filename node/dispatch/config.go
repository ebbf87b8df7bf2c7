package dispatch

// The dispatcher's configuration: its limits, transport, signing keys and
// address rules, their defaults and validation.

import (
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Shutdown is the Result.Err of attempts cut off by Close, the same for
// every one (a caller tells them from real failures by it, with StatusCode
// 0).
const Shutdown = "shutdown"

// Config tunes the callback dispatcher. A zero field means its
// default (DefaultConfig); Validate rejects negative values.
type Config struct {
	// Concurrency is the number of callbacks in flight overall, which is
	// also the most worker goroutines: they start on demand and exit after
	// 10 s without a job, so an idle dispatcher has none. Default 512: a
	// loopback receiver saturates this machine at 64 in flight (~22k/s,
	// limits.md), but remote receivers with 20-30 ms of latency need
	// rate × latency ≈ 15k/s × 30 ms ≈ 450 in flight to keep up. Each
	// live worker costs a goroutine stack and ~25 KiB of buffers (a 16 KiB
	// response reader, a 4 KiB request writer, 4.5 KiB to keep and drain
	// the response body), so 512 are ~14-16 MiB; connections cost no
	// goroutines.
	Concurrency int

	// PerHost is the number of callbacks in flight per callback host
	// (scheme://host:port), and so the number of connections per host
	// (each attempt holds one; idle ones are reused before a new one is
	// dialed). Default 64: enough to reach the measured loopback ceiling
	// from one host, while one slow host can hold at most 1/8 of the
	// default pool.
	PerHost int

	// LateAfter: a job submitted more than this long after its due waits
	// in its host's late lane, behind the jobs still on time (see
	// Dispatcher). Default 1 s: far above a node's lateness in normal
	// running (p99 tens of ms), below the detection time of a failover,
	// whose taken-over fires are all later than that.
	LateAfter time.Duration

	// MaxQueued bounds the jobs waiting (submitted, not yet running);
	// Submit refuses beyond it, which is the node's backpressure signal.
	// Default 100000: about 6 s of work at 15k callbacks/s, and ~16 B of
	// queue plus the job itself (a few hundred bytes) per entry.
	MaxQueued int

	// UserAgent is sent as User-Agent unless the task sets its own.
	// Default "chime".
	UserAgent string

	// IdleTimeout closes keep-alive connections unused for this long.
	// Default 30 s: long enough that a host called every few seconds
	// keeps its connections (a new one costs a TCP, maybe a TLS,
	// handshake), short enough that a host no longer called does not pin
	// sockets for long. A connection the receiver closed earlier (Node.js
	// closes idle ones after 5 s) is noticed when it is next used and the
	// request is sent again on a new one, once (see attempt).
	IdleTimeout time.Duration

	// TLSConfig configures https callbacks; nil means crypto/tls defaults
	// (system roots). It is cloned for each connection, with ServerName
	// set from the URL when empty and NextProtos cleared (only HTTP/1.1
	// is spoken); it must not be modified after New.
	TLSConfig *tls.Config

	// SigningKey, when set, signs every callback: X-Chime-Signature is
	// "t=<unix seconds>,v1=<hex HMAC-SHA256(key, t + "." + fire id + "." +
	// body)>". SigningKeyNext, set during a rotation, adds a second v1=
	// (current key first), so a receiver that knows either key accepts the
	// callback. Each must be at least MinSigningKey bytes; SigningKeyNext
	// needs SigningKey.
	SigningKey     []byte
	SigningKeyNext []byte

	// CallbackAllow and CallbackDeny refine the callback address policy
	// (Policy, policy.go): each entry is a CIDR, an IP, a host name, or one of them
	// with ":port". By default link-local, cloud metadata, unspecified,
	// multicast and broadcast addresses (and the metadata host names) are
	// refused; CallbackDenyPrivate also refuses loopback, RFC 1918 and ULA
	// (fc00::/7) addresses and the name localhost. A deny entry wins over an
	// allow entry, which wins over the defaults. The policy is checked on
	// every address a callback host resolves to, right before it is dialed.
	CallbackAllow       []string
	CallbackDeny        []string
	CallbackDenyPrivate bool
}

// DefaultConfig returns the production defaults; the field docs
// give the reasons.
func DefaultConfig() Config {
	return Config{
		Concurrency: 512,
		PerHost:     64,
		LateAfter:   time.Second,
		MaxQueued:   100_000,
		UserAgent:   "chime",
		IdleTimeout: 30 * time.Second,
	}
}

// Validate reports every problem of c (errors.Join). Zero fields are valid
// and mean "default".
func (c Config) Validate() error {
	var errs []error
	if c.Concurrency < 0 {
		errs = append(errs, errors.New("node: dispatch: Concurrency must be >= 0 (0 = default)"))
	}
	if c.PerHost < 0 {
		errs = append(errs, errors.New("node: dispatch: PerHost must be >= 0 (0 = default)"))
	}
	if c.LateAfter < 0 {
		errs = append(errs, errors.New("node: dispatch: LateAfter must be >= 0 (0 = default)"))
	}
	if c.MaxQueued < 0 {
		errs = append(errs, errors.New("node: dispatch: MaxQueued must be >= 0 (0 = default)"))
	}
	if strings.ContainsFunc(c.UserAgent, func(r rune) bool { return r < ' ' || r == 0x7f }) {
		errs = append(errs, errors.New("node: dispatch: UserAgent must not contain control characters"))
	}
	if c.IdleTimeout < 0 {
		errs = append(errs, errors.New("node: dispatch: IdleTimeout must be >= 0 (0 = default)"))
	}
	if err := c.ValidateTrust(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// MinSigningKey is the shortest callback signing key, in bytes: 16 bytes
// (128 bits) of randomness is out of reach of guessing; longer keys are
// fine (openssl rand -hex 32 gives 64).
const MinSigningKey = 16

// ValidateTrust checks the signing keys and the address rules alone: the
// part of Validate that the node's own Config.Validate adds to its checks
// of the limits.
func (c Config) ValidateTrust() error {
	var errs []error
	if n := len(c.SigningKey); n > 0 && n < MinSigningKey {
		errs = append(errs, fmt.Errorf("node: dispatch: the signing key has %d bytes: it needs at least %d (e.g. openssl rand -hex 32)", n, MinSigningKey))
	}
	if n := len(c.SigningKeyNext); n > 0 && n < MinSigningKey {
		errs = append(errs, fmt.Errorf("node: dispatch: the next signing key has %d bytes: it needs at least %d (e.g. openssl rand -hex 32)", n, MinSigningKey))
	}
	if len(c.SigningKeyNext) > 0 && len(c.SigningKey) == 0 {
		errs = append(errs, errors.New("node: dispatch: a next signing key needs a current signing key"))
	}
	if _, err := NewPolicy(c.CallbackAllow, c.CallbackDeny, c.CallbackDenyPrivate); err != nil {
		errs = append(errs, fmt.Errorf("node: dispatch: %w", err))
	}
	return errors.Join(errs...)
}

// Late reports whether a job due at due (Unix ns; 0: none) and submitted at
// now is late: it waits in its host's late lane (LateAfter). The node's
// loop holds such fires back the same way (node/loop.go).
func (c Config) Late(due, now int64) bool {
	after := c.LateAfter
	if after <= 0 {
		after = DefaultConfig().LateAfter
	}
	return due != 0 && now-due > int64(after)
}

// withDefaults returns c with every zero or negative field set to its
// default.
func (c Config) withDefaults() Config {
	def := DefaultConfig()
	if c.Concurrency <= 0 {
		c.Concurrency = def.Concurrency
	}
	if c.PerHost <= 0 {
		c.PerHost = def.PerHost
	}
	if c.LateAfter <= 0 {
		c.LateAfter = def.LateAfter
	}
	if c.MaxQueued <= 0 {
		c.MaxQueued = def.MaxQueued
	}
	if c.UserAgent == "" {
		c.UserAgent = def.UserAgent
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = def.IdleTimeout
	}
	return c
}

const (
	// bodyKeep is how much of a response body a result keeps
	// (API.md: last_fire.result is the first 512 bytes).
	bodyKeep = 512
	// drainLimit is how much more of a response body is read and
	// discarded so the connection can go back to the pool; a longer body
	// costs the connection instead.
	drainLimit = 64 << 10
	// defaultTimeout applies to a job without a timeout (the
	// API's default timeout_ms), so no attempt can hold a worker forever.
	defaultTimeout = 5 * time.Second
	// maxRetryAfter clamps absurd Retry-After values (and keeps the
	// arithmetic from overflowing); the retry policy applies its own cap.
	maxRetryAfter = 24 * time.Hour
	// dialTimeout bounds the TCP connect, and connectTimeout
	// the connect plus the TLS handshake; the attempt's deadline may cut
	// either shorter.
	dialTimeout    = 5 * time.Second
	connectTimeout = 10 * time.Second
	// readBuffer is a worker's response reader. A response header
	// block must fit in it: a larger one fails the attempt. 16 KiB is 4×
	// fasthttp's default, which real receivers rarely come near.
	readBuffer = 16 << 10
	// writeBuffer is a worker's request writer; a payload larger
	// than it is written straight through.
	writeBuffer = 4 << 10
)
