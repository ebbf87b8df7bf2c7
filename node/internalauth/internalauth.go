// Package internalauth authenticates the calls between the nodes of one
// cluster: forwarded requests and the /internal/v1/… endpoints. Auth signs
// a call with the cluster secret and checks one from its headers alone;
// Guard is what an internal endpoint runs first: it checks the call, that
// its sender may call this node, and only then reads its bounded body.
//
// It knows nothing of the node: the membership, the clock and the metrics
// are func fields of GuardConfig, so it is tested over net/http alone.
//
// Everything the receiver checks is in the headers, so it authenticates a
// call before it reads a byte of the body:
//
//	X-Chime-From          the sender's member name
//	X-Chime-To            the destination's member name
//	X-Chime-Nonce         16 random bytes, hex: each call is accepted once
//	X-Chime-Body-SHA256   hex SHA-256 of the body
//	X-Chime-Auth          "<unix ms>:<hex HMAC-SHA256(secret, method, URI,
//	                      timestamp, from, to, nonce, Content-Length,
//	                      body SHA-256)>"
//
// The receiver checks, in order: the headers are there and well formed,
// the timestamp is within Skew of its clock, the call is addressed to it,
// the sender is a member, the declared Content-Length is within the
// endpoint's limit, the MAC, and that the nonce is new (then remembers
// it). Only then does it read the body, exactly Content-Length bytes, and
// compare its SHA-256 with the signed one. A captured call can be replayed
// neither to the same node (nonce) nor to another (destination), nor after
// Skew (timestamp).
package internalauth

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Headers of a signed call.
const (
	HdrFrom    = "X-Chime-From"
	HdrTo      = "X-Chime-To"
	HdrNonce   = "X-Chime-Nonce"
	HdrBodySum = "X-Chime-Body-SHA256"
	// HdrAuth authenticates the call: "<unix ms>:<hex HMAC>".
	HdrAuth = "X-Chime-Auth"
)

// Skew is how far the timestamp of a signed call may be from the
// receiver's clock: it bounds how long a captured call can be replayed.
const Skew = 30 * time.Second

// Body limits of the internal endpoints: ownership messages and
// anti-entropy checks are small (a ctl batch is split below it); the
// replication stream carries up to maxSnapBytes of snapshots plus one
// slot's snapshot and the live writes of a round.
const (
	MaxCtlBody  = 1 << 20
	MaxAEBody   = 1 << 20
	MaxReplBody = 512 << 20
)

// maxNonces bounds the replay cache: far above what a cluster sends in two
// skew windows (a few thousand calls a second); beyond it, calls answer
// 503 until old nonces expire.
const maxNonces = 1 << 20

// Reasons a call between nodes is refused (the label of
// chime_internal_rejected_total).
const (
	RejUnsigned  = "unsigned"
	RejMalformed = "malformed"
	RejStale     = "stale"
	RejMisdirect = "misdirected"
	RejNotMember = "not_member"
	RejLength    = "length_required"
	RejTooLarge  = "too_large"
	RejBadMAC    = "bad_mac"
	RejReplayed  = "replayed"
	RejBusy      = "busy"
	RejBadBody   = "bad_body"
	RejNoCert    = "no_client_cert" // mutual TLS: no verified client certificate
)

// Auth signs and checks the calls between nodes of one cluster.
type Auth struct {
	self   string
	secret []byte // empty: --insecure-cluster, nothing signed or checked
	nonces nonceCache
}

// New returns the Auth of member self with the cluster secret (empty: an
// insecure cluster, where calls carry only the sender's and receiver's
// names).
func New(self string, secret []byte) *Auth {
	return &Auth{self: self, secret: secret}
}

// signed is a call's signature headers, parsed.
type signed struct {
	ts, from, to, nonce, sum, mac string
}

// callMAC is the HMAC of one call (see the package comment).
func callMAC(secret []byte, method, uri string, s signed, length int64) []byte {
	h := hmac.New(sha256.New, secret)
	for _, part := range []string{method, uri, s.ts, s.from, s.to, s.nonce, strconv.FormatInt(length, 10), s.sum} {
		io.WriteString(h, part)
		h.Write([]byte{'\n'})
	}
	return h.Sum(nil)
}

// Sign sets the signature headers of a call to member to.
func (a *Auth) Sign(h http.Header, method, uri, to string, body []byte, now time.Time) {
	h.Set(HdrFrom, a.self)
	h.Set(HdrTo, to)
	if len(a.secret) == 0 {
		return
	}
	var n [16]byte
	_, _ = rand.Read(n[:])
	sum := sha256.Sum256(body)
	s := signed{ts: strconv.FormatInt(now.UnixMilli(), 10), from: a.self, to: to, nonce: hex.EncodeToString(n[:]), sum: hex.EncodeToString(sum[:])}
	h.Set(HdrNonce, s.nonce)
	h.Set(HdrBodySum, s.sum)
	h.Set(HdrAuth, s.ts+":"+hex.EncodeToString(callMAC(a.secret, method, uri, s, int64(len(body)))))
}

// Check authenticates r's headers for a body of at most limit bytes, and
// remembers its nonce. member reports whether a name may call this node.
// It returns the sender, or why the call is refused (a Rej… reason).
func (a *Auth) Check(r *http.Request, limit int64, now time.Time, member func(string) bool) (from, reason string) {
	from = r.Header.Get(HdrFrom)
	if len(a.secret) == 0 {
		// Insecure on purpose: the sender is who it says it is.
		if r.ContentLength > limit {
			return "", RejTooLarge
		}
		return from, ""
	}
	auth := r.Header.Get(HdrAuth)
	if auth == "" {
		return "", RejUnsigned
	}
	s := signed{from: from, to: r.Header.Get(HdrTo), nonce: r.Header.Get(HdrNonce), sum: r.Header.Get(HdrBodySum)}
	var ok bool
	if s.ts, s.mac, ok = strings.Cut(auth, ":"); !ok || s.from == "" || s.to == "" || len(s.nonce) != 32 || len(s.sum) != 64 {
		return "", RejMalformed
	}
	ms, err := strconv.ParseInt(s.ts, 10, 64)
	if err != nil {
		return "", RejMalformed
	}
	if d := now.Sub(time.UnixMilli(ms)); d > Skew || d < -Skew {
		return "", RejStale
	}
	if s.to != a.self {
		return "", RejMisdirect
	}
	if !member(s.from) {
		return "", RejNotMember
	}
	switch {
	case r.ContentLength < 0:
		return "", RejLength
	case r.ContentLength > limit:
		return "", RejTooLarge
	}
	// Compared as lower-case hex: one spelling per signature.
	if !hmac.Equal([]byte(s.mac), []byte(hex.EncodeToString(callMAC(a.secret, r.Method, r.URL.RequestURI(), s, r.ContentLength)))) {
		return "", RejBadMAC
	}
	switch a.nonces.add(s.nonce, now) {
	case nonceSeen:
		return "", RejReplayed
	case nonceFull:
		return "", RejBusy
	}
	return s.from, ""
}

// CheckBody reports whether body is the one r's signature covers.
func (a *Auth) CheckBody(r *http.Request, body []byte) bool {
	if len(a.secret) == 0 {
		return true
	}
	sum := sha256.Sum256(body)
	return hmac.Equal([]byte(hex.EncodeToString(sum[:])), []byte(r.Header.Get(HdrBodySum)))
}

// nonceCache remembers the nonces of accepted calls for at least two skew
// windows (a call is accepted only within Skew of its timestamp), in two
// generations: a nonce is looked up in both and added to the current one,
// which becomes the previous one every 2×Skew.
type nonceCache struct {
	mu        sync.Mutex
	cur, prev map[string]struct{}
	rotated   time.Time
}

type nonceResult uint8

const (
	nonceNew nonceResult = iota
	nonceSeen
	nonceFull
)

func (c *nonceCache) add(nonce string, now time.Time) nonceResult {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cur == nil || now.Sub(c.rotated) >= 2*Skew || now.Before(c.rotated) {
		c.prev, c.cur, c.rotated = c.cur, make(map[string]struct{}), now
	}
	if _, ok := c.cur[nonce]; ok {
		return nonceSeen
	}
	if _, ok := c.prev[nonce]; ok {
		return nonceSeen
	}
	if len(c.cur)+len(c.prev) >= maxNonces {
		return nonceFull
	}
	c.cur[nonce] = struct{}{}
	return nonceNew
}
