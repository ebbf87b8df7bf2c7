package internalauth

import (
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/chime-scheduler/chime/node/httpapi"
)

// GuardConfig is what a Guard needs of the node, given at construction.
type GuardConfig struct {
	// Auth checks the signatures (the node's forwarder signs with the same
	// one).
	Auth *Auth
	// Self is this node's member name: it may always call itself.
	Self string
	// Now is the node's clock.
	Now func() time.Time
	// Member looks name up in the node's current view: known reports
	// whether the view holds it, left whether it left the cluster.
	Member func(name string) (known, left bool)
	// Lease is how long a member that left may still call: its last
	// messages (the ownership lease).
	Lease time.Duration
	// ClientCert, when set (mutual TLS), reports whether r carries a
	// verified client certificate; a call without one is refused first.
	ClientCert func(r *http.Request) bool
	// Rejected, when set, counts a refused call by endpoint and reason.
	Rejected func(endpoint, reason string)
}

// Guard is what every internal endpoint runs before anything else: it
// authenticates the call from its headers, checks that the sender may call
// this node, and only then reads its body, bounded.
type Guard struct {
	cfg GuardConfig

	mu sync.Mutex
	// leftAt is when each member that left was first seen so (NoteView).
	leftAt map[string]time.Time
}

// NewGuard returns the guard of a cluster member's internal endpoints.
func NewGuard(cfg GuardConfig) *Guard {
	return &Guard{cfg: cfg, leftAt: map[string]time.Time{}}
}

// Member is one member of a view as NoteView needs it.
type Member struct {
	Name string
	Left bool
}

// NoteView records, from a new view's members, since when the ones that
// left are gone: they may still call for a lease (MayCall).
func (g *Guard) NoteView(members []Member) {
	now := g.cfg.Now()
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, m := range members {
		if !m.Left {
			delete(g.leftAt, m.Name)
		} else if _, ok := g.leftAt[m.Name]; !ok {
			g.leftAt[m.Name] = now
		}
	}
}

// MayCall reports whether name may call this node: a member of its view
// that did not leave, or left within the last lease (its last messages).
func (g *Guard) MayCall(name string) bool {
	if name == g.cfg.Self {
		return true
	}
	known, left := g.cfg.Member(name)
	if !known {
		return false
	}
	if !left {
		return true
	}
	g.mu.Lock()
	at, ok := g.leftAt[name]
	g.mu.Unlock()
	return ok && g.cfg.Now().Sub(at) < g.cfg.Lease
}

// Read authenticates an internal call to endpoint (a metrics label) from
// its headers, then reads its body of at most limit bytes. It returns the
// sender's member name and the body. A nil Guard is a node outside any
// cluster: it refuses every call, 404.
func (g *Guard) Read(r *http.Request, endpoint string, limit int64) (string, []byte, *httpapi.Error) {
	if g == nil {
		return "", nil, &httpapi.Error{Code: httpapi.CodeNotFound, Message: "not a cluster member"}
	}
	reject := func(reason string) (string, []byte, *httpapi.Error) {
		if g.cfg.Rejected != nil {
			g.cfg.Rejected(endpoint, reason)
		}
		return "", nil, Rejection(reason)
	}
	if g.cfg.ClientCert != nil && !g.cfg.ClientCert(r) {
		return reject(RejNoCert)
	}
	from, reason := g.cfg.Auth.Check(r, limit, g.cfg.Now(), g.MayCall)
	if reason != "" {
		return reject(reason)
	}
	if r.ContentLength <= 0 {
		return from, nil, nil
	}
	body := make([]byte, r.ContentLength)
	if _, err := io.ReadFull(r.Body, body); err != nil {
		return reject(RejBadBody)
	}
	if !g.cfg.Auth.CheckBody(r, body) {
		return reject(RejBadBody)
	}
	return from, body, nil
}

// Signed reports whether r, whose body was read already, is a signed call
// from a member with that body. It counts nothing: a forwarded public
// request that is not signed is a client's, not an attack. The nonce is
// remembered, as by Read.
func (g *Guard) Signed(r *http.Request, body []byte) bool {
	if g == nil {
		return false
	}
	_, reason := g.cfg.Auth.Check(r, int64(len(body)), g.cfg.Now(), g.MayCall)
	return reason == "" && g.cfg.Auth.CheckBody(r, body)
}

// Rejection is the API error for a call refused for reason.
func Rejection(reason string) *httpapi.Error {
	msg := "internal endpoint: "
	unauth := func(m string) *httpapi.Error {
		return &httpapi.Error{Code: httpapi.CodeUnauthenticated, Message: msg + m}
	}
	switch reason {
	case RejUnsigned:
		return unauth("unsigned: a call between nodes needs " + HdrAuth)
	case RejMalformed:
		return unauth("malformed signature headers")
	case RejStale:
		return unauth("timestamp outside ±" + Skew.String() + " of this node's clock (a replay, or clocks apart)")
	case RejMisdirect:
		return unauth("the call is addressed to another node")
	case RejNotMember:
		return &httpapi.Error{Code: httpapi.CodeUnauthenticated, Status: http.StatusForbidden, Message: msg + "the sender is not a member of this node's cluster"}
	case RejLength:
		return &httpapi.Error{Code: httpapi.CodeInvalidArgument, Status: http.StatusLengthRequired, Field: "Content-Length", Message: msg + "a call between nodes declares its Content-Length"}
	case RejTooLarge:
		return &httpapi.Error{Code: httpapi.CodeTooLarge, Field: "Content-Length", Message: msg + "the body is over this endpoint's limit"}
	case RejNoCert:
		return unauth("this node runs mutual TLS: a call between nodes needs a client certificate signed by the cluster's CA")
	case RejBadMAC:
		return unauth("bad signature: another cluster secret, or the call was altered")
	case RejReplayed:
		return unauth("replayed: this call was accepted once already")
	case RejBusy:
		return &httpapi.Error{Code: httpapi.CodeUnavailable, Message: msg + "too many calls to remember; retry"}
	case RejBadBody:
		return unauth("the body is not the one signed")
	}
	return unauth(reason)
}
