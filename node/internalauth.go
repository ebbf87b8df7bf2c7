package node

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

	"github.com/chime-scheduler/chime/node/tlsconf"
	"github.com/chime-scheduler/chime/ring/gossip"
)

// Calls between nodes (forwarded requests and /internal/v1/…) are signed
// with the cluster secret. Everything the receiver checks is in the
// headers, so it authenticates a call before it reads a byte of the body:
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
// the timestamp is within authSkew of its clock, the call is addressed to
// it, the sender is a member, the declared Content-Length is within the
// endpoint's limit, the MAC, and that the nonce is new (then remembers
// it). Only then does it read the body, exactly Content-Length bytes, and
// compare its SHA-256 with the signed one. A captured call can be replayed
// neither to the same node (nonce) nor to another (destination), nor
// after authSkew (timestamp).
const (
	hdrFrom    = "X-Chime-From"
	hdrTo      = "X-Chime-To"
	hdrNonce   = "X-Chime-Nonce"
	hdrBodySum = "X-Chime-Body-SHA256"
)

// Body limits of the internal endpoints: ownership messages and
// anti-entropy checks are small (a ctl batch is split below it); the
// replication stream carries up to maxSnapBytes of snapshots plus one
// slot's snapshot and the live writes of a round.
const (
	maxCtlBody  = 1 << 20
	maxAEBody   = 1 << 20
	maxReplBody = 512 << 20
)

// maxNonces bounds the replay cache: far above what a cluster sends in two
// skew windows (a few thousand calls a second); beyond it, calls answer
// 503 until old nonces expire.
const maxNonces = 1 << 20

// Reasons a call between nodes is refused (the label of
// chime_internal_rejected_total).
const (
	rejUnsigned  = "unsigned"
	rejMalformed = "malformed"
	rejStale     = "stale"
	rejMisdirect = "misdirected"
	rejNotMember = "not_member"
	rejLength    = "length_required"
	rejTooLarge  = "too_large"
	rejBadMAC    = "bad_mac"
	rejReplayed  = "replayed"
	rejBusy      = "busy"
	rejBadBody   = "bad_body"
	rejNoCert    = "no_client_cert" // mutual TLS: no verified client certificate
)

// callAuth signs and checks the calls between nodes of one cluster.
type callAuth struct {
	self   string
	secret []byte // empty: --insecure-cluster, nothing signed or checked
	nonces nonceCache
}

// signed is a call's signature headers, parsed.
type signed struct {
	ts, from, to, nonce, sum, mac string
}

// callMAC is the HMAC of one call (see the file comment).
func callMAC(secret []byte, method, uri string, s signed, length int64) []byte {
	h := hmac.New(sha256.New, secret)
	for _, part := range []string{method, uri, s.ts, s.from, s.to, s.nonce, strconv.FormatInt(length, 10), s.sum} {
		io.WriteString(h, part)
		h.Write([]byte{'\n'})
	}
	return h.Sum(nil)
}

// sign sets the signature headers of a call to member to.
func (a *callAuth) sign(h http.Header, method, uri, to string, body []byte, now time.Time) {
	h.Set(hdrFrom, a.self)
	h.Set(hdrTo, to)
	if len(a.secret) == 0 {
		return
	}
	var n [16]byte
	_, _ = rand.Read(n[:])
	sum := sha256.Sum256(body)
	s := signed{ts: strconv.FormatInt(now.UnixMilli(), 10), from: a.self, to: to, nonce: hex.EncodeToString(n[:]), sum: hex.EncodeToString(sum[:])}
	h.Set(hdrNonce, s.nonce)
	h.Set(hdrBodySum, s.sum)
	h.Set(hdrAuth, s.ts+":"+hex.EncodeToString(callMAC(a.secret, method, uri, s, int64(len(body)))))
}

// check authenticates r's headers for a body of at most limit bytes, and
// remembers its nonce. member reports whether a name may call this node.
// It returns the sender, or why the call is refused.
func (a *callAuth) check(r *http.Request, limit int64, now time.Time, member func(string) bool) (from, reason string) {
	from = r.Header.Get(hdrFrom)
	if len(a.secret) == 0 {
		// Insecure on purpose: the sender is who it says it is.
		if r.ContentLength > limit {
			return "", rejTooLarge
		}
		return from, ""
	}
	auth := r.Header.Get(hdrAuth)
	if auth == "" {
		return "", rejUnsigned
	}
	s := signed{from: from, to: r.Header.Get(hdrTo), nonce: r.Header.Get(hdrNonce), sum: r.Header.Get(hdrBodySum)}
	var ok bool
	if s.ts, s.mac, ok = strings.Cut(auth, ":"); !ok || s.from == "" || s.to == "" || len(s.nonce) != 32 || len(s.sum) != 64 {
		return "", rejMalformed
	}
	ms, err := strconv.ParseInt(s.ts, 10, 64)
	if err != nil {
		return "", rejMalformed
	}
	if d := now.Sub(time.UnixMilli(ms)); d > authSkew || d < -authSkew {
		return "", rejStale
	}
	if s.to != a.self {
		return "", rejMisdirect
	}
	if !member(s.from) {
		return "", rejNotMember
	}
	switch {
	case r.ContentLength < 0:
		return "", rejLength
	case r.ContentLength > limit:
		return "", rejTooLarge
	}
	// Compared as lower-case hex: one spelling per signature.
	if !hmac.Equal([]byte(s.mac), []byte(hex.EncodeToString(callMAC(a.secret, r.Method, r.URL.RequestURI(), s, r.ContentLength)))) {
		return "", rejBadMAC
	}
	switch a.nonces.add(s.nonce, now) {
	case nonceSeen:
		return "", rejReplayed
	case nonceFull:
		return "", rejBusy
	}
	return s.from, ""
}

// checkBody reports whether body is the one r's signature covers.
func (a *callAuth) checkBody(r *http.Request, body []byte) bool {
	if len(a.secret) == 0 {
		return true
	}
	sum := sha256.Sum256(body)
	return hmac.Equal([]byte(hex.EncodeToString(sum[:])), []byte(r.Header.Get(hdrBodySum)))
}

// nonceCache remembers the nonces of accepted calls for at least two skew
// windows (a call is accepted only within authSkew of its timestamp), in
// two generations: a nonce is looked up in both and added to the current
// one, which becomes the previous one every 2×authSkew.
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
	if c.cur == nil || now.Sub(c.rotated) >= 2*authSkew || now.Before(c.rotated) {
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

// rejection is the API error for a refused call.
func rejection(reason string) *Error {
	msg := "internal endpoint: "
	switch reason {
	case rejUnsigned:
		return &Error{Code: CodeUnauthenticated, Message: msg + "unsigned: a call between nodes needs " + hdrAuth}
	case rejMalformed:
		return &Error{Code: CodeUnauthenticated, Message: msg + "malformed signature headers"}
	case rejStale:
		return &Error{Code: CodeUnauthenticated, Message: msg + "timestamp outside ±" + authSkew.String() + " of this node's clock (a replay, or clocks apart)"}
	case rejMisdirect:
		return &Error{Code: CodeUnauthenticated, Message: msg + "the call is addressed to another node"}
	case rejNotMember:
		return &Error{Code: CodeUnauthenticated, Status: http.StatusForbidden, Message: msg + "the sender is not a member of this node's cluster"}
	case rejLength:
		return &Error{Code: CodeInvalidArgument, Status: http.StatusLengthRequired, Field: "Content-Length", Message: msg + "a call between nodes declares its Content-Length"}
	case rejTooLarge:
		return &Error{Code: CodeTooLarge, Field: "Content-Length", Message: msg + "the body is over this endpoint's limit"}
	case rejNoCert:
		return &Error{Code: CodeUnauthenticated, Message: msg + "this node runs mutual TLS: a call between nodes needs a client certificate signed by the cluster's CA"}
	case rejBadMAC:
		return &Error{Code: CodeUnauthenticated, Message: msg + "bad signature: another cluster secret, or the call was altered"}
	case rejReplayed:
		return &Error{Code: CodeUnauthenticated, Message: msg + "replayed: this call was accepted once already"}
	case rejBusy:
		return &Error{Code: CodeUnavailable, Message: msg + "too many calls to remember; retry"}
	case rejBadBody:
		return &Error{Code: CodeUnauthenticated, Message: msg + "the body is not the one signed"}
	}
	return &Error{Code: CodeUnauthenticated, Message: msg + reason}
}

// readSigned authenticates an internal call to endpoint (a metrics label)
// from its headers, then reads its body of at most limit bytes. It
// returns the sender's member name and the body.
func (n *Node) readSigned(r *http.Request, endpoint string, limit int64) (string, []byte, *Error) {
	if n.fwd == nil {
		return "", nil, &Error{Code: CodeNotFound, Message: "not a cluster member"}
	}
	reject := func(reason string) (string, []byte, *Error) {
		n.metrics.internalRejected.WithLabelValues(endpoint, reason).Inc()
		return "", nil, rejection(reason)
	}
	if n.cfg.TLS != nil && n.cfg.TLS.Mutual() && !tlsconf.VerifiedPeer(r) {
		return reject(rejNoCert)
	}
	from, reason := n.fwd.auth.check(r, limit, n.now(), n.mayCall)
	if reason != "" {
		return reject(reason)
	}
	if r.ContentLength <= 0 {
		return from, nil, nil
	}
	body := make([]byte, r.ContentLength)
	if _, err := io.ReadFull(r.Body, body); err != nil {
		return reject(rejBadBody)
	}
	if !n.fwd.auth.checkBody(r, body) {
		return reject(rejBadBody)
	}
	return from, body, nil
}

// mayCall reports whether name may call this node: a member of its view
// that did not leave, or left within the last lease (its last messages).
func (n *Node) mayCall(name string) bool {
	if name == n.cfg.Name || n.cfg.Cluster == nil {
		// Itself; or a standalone node, which has no membership to check
		// (it serves internal calls only in tests that give it a
		// forwarder by hand).
		return true
	}
	m, ok := n.view.Load().member(name)
	if !ok {
		return false
	}
	if m.Status != gossip.StatusLeft {
		return true
	}
	n.leftMu.Lock()
	at, ok := n.leftAt[name]
	n.leftMu.Unlock()
	return ok && n.now().Sub(at) < n.lease
}
