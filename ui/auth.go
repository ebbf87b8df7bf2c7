package ui

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"

	"github.com/gorilla/websocket"
)

// Websocket subprotocols. A browser cannot set headers on a websocket, so
// the page offers its token as the subprotocol "bearer.<token>" next to
// protoV1; the server selects protoV1 and never echoes the token: a client
// that offers only "bearer.<token>" gets no Sec-WebSocket-Protocol answer
// (a browser then fails the handshake, so browsers must offer protoV1).
const (
	protoV1     = "chime.v1"
	protoBearer = "bearer."
)

// tokenCheck compares presented tokens with the configured ones (the API
// token and the read token: either opens the dashboard) in constant time.
// Both sides are hashed first, so the comparison does not even leak the
// tokens' lengths, and every presented token is compared with both.
type tokenCheck struct {
	enabled bool
	sums    [][sha256.Size]byte
}

func newTokenCheck(tokens ...string) tokenCheck {
	var tc tokenCheck
	for _, t := range tokens {
		if t != "" {
			tc.enabled = true
			tc.sums = append(tc.sums, sha256.Sum256([]byte(t)))
		}
	}
	return tc
}

func (tc tokenCheck) match(got string) bool {
	s := sha256.Sum256([]byte(got))
	ok := 0
	for i := range tc.sums {
		ok |= subtle.ConstantTimeCompare(s[:], tc.sums[i][:])
	}
	return ok == 1
}

// authorized reports whether r carries a token, in any of the three
// accepted places, or no token is configured.
func (tc tokenCheck) authorized(r *http.Request) bool {
	if !tc.enabled {
		return true
	}
	ok := false
	if got, found := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); found {
		ok = tc.match(got) || ok
	}
	if got := r.URL.Query().Get("access_token"); got != "" {
		ok = tc.match(got) || ok
	}
	for _, p := range websocket.Subprotocols(r) {
		if got, found := strings.CutPrefix(p, protoBearer); found {
			ok = tc.match(got) || ok
		}
	}
	return ok
}

// subprotocol picks the Sec-WebSocket-Protocol answer for r: protoV1 when
// offered, else none. A bearer protocol is never selected: it would echo
// the token in the answer.
func subprotocol(r *http.Request) string {
	for _, p := range websocket.Subprotocols(r) {
		if p == protoV1 {
			return p
		}
	}
	return ""
}
