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
// protoV1; the server selects protoV1 and so never echoes the token. A
// client that offers only "bearer.<token>" gets that value echoed, as
// browsers require the server to select one of the offered protocols.
const (
	protoV1     = "chime.v1"
	protoBearer = "bearer."
)

// tokenCheck compares presented tokens with the configured one in constant
// time. Both sides are hashed first, so the comparison does not even leak
// the token's length.
type tokenCheck struct {
	enabled bool
	sum     [sha256.Size]byte
}

func newTokenCheck(token string) tokenCheck {
	return tokenCheck{enabled: token != "", sum: sha256.Sum256([]byte(token))}
}

func (tc tokenCheck) match(got string) bool {
	s := sha256.Sum256([]byte(got))
	return subtle.ConstantTimeCompare(s[:], tc.sum[:]) == 1
}

// authorized reports whether r carries the token, in any of the three
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
// offered, else the first offered bearer protocol, else none.
func subprotocol(r *http.Request) string {
	bearer := ""
	for _, p := range websocket.Subprotocols(r) {
		if p == protoV1 {
			return p
		}
		if bearer == "" && strings.HasPrefix(p, protoBearer) {
			bearer = p
		}
	}
	return bearer
}
