package httpapi

// The API's edge: who may call what, from which page. Three checks run in
// front of every handler (withCommon), in this order:
//
//   - Host: a node without an API token answers only requests whose Host
//     header names loopback (localhost, 127.0.0.0/8, ::1), the host of its
//     own HTTP address, or a Config.PublicHosts name; others get 421
//     misdirected_request. A web page that rebinds its own DNS name to
//     127.0.0.1 can then neither read the API nor the dashboard: the
//     browser sends that name as Host. /internal/ is exempt (signed calls
//     between nodes, addressed by IP:port).
//   - Token: with Config.APIToken, /v1/ and /metrics need a bearer token
//     (401). Config.ReadToken allows GET and HEAD only; anything else, and
//     the admin endpoints /v1/cluster/keys and /v1/admin/, needs the full token (403).
//   - Content-Type: a POST or PUT on /v1/ must say application/json, even
//     with an empty body (415 unsupported_media_type). Browsers send such
//     a request to another origin only after a CORS preflight, which the
//     node never grants, so a page cannot create, change or trigger tasks
//     on a node the operator can reach (a form or a "simple" fetch sends
//     text/plain, a form encoding or no Content-Type at all).

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"mime"
	"net"
	"net/http"
	"strings"
)

// role is what a request's bearer token allows.
type role uint8

const (
	roleNone role = iota // no token, or a wrong one
	roleRead             // the read token: GET and HEAD
	roleFull             // the API token, or no token configured
)

// apiTokens compares presented bearer tokens with the configured ones.
// Both sides are hashed with SHA-256 first and the digests compared with
// subtle.ConstantTimeCompare, so neither the content nor the length of a
// token leaks through timing; both tokens are always compared.
type apiTokens struct {
	full, read       [sha256.Size]byte
	hasFull, hasRead bool
}

func newAPITokens(full, read string) apiTokens {
	return apiTokens{
		full: sha256.Sum256([]byte(full)), hasFull: full != "",
		read: sha256.Sum256([]byte(read)), hasRead: read != "",
	}
}

// role returns what the bearer token got allows.
func (t *apiTokens) role(got string) role {
	if !t.hasFull {
		return roleFull
	}
	sum := sha256.Sum256([]byte(got))
	full := subtle.ConstantTimeCompare(sum[:], t.full[:]) == 1
	read := subtle.ConstantTimeCompare(sum[:], t.read[:]) == 1 && t.hasRead
	switch {
	case full:
		return roleFull
	case read:
		return roleRead
	}
	return roleNone
}

// requestRole returns the role of r's "Authorization: Bearer" header.
func (t *apiTokens) requestRole(r *http.Request) role {
	if !t.hasFull {
		return roleFull
	}
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return roleNone
	}
	return t.role(got)
}

// needsFull reports whether a request needs the full token: anything but
// GET and HEAD, and with any method the admin endpoints: the gossip keys
// and /v1/admin/ (a backup holds every task, headers and payloads
// unredacted).
func needsFull(r *http.Request) bool {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return true
	}
	return strings.HasPrefix(r.URL.Path, "/v1/cluster/keys") || strings.HasPrefix(r.URL.Path, "/v1/admin/")
}

// roleKey carries a request's role in its context, for the handlers that
// answer read-token holders differently (redacted callback URLs).
type roleKey struct{}

// readOnly reports whether r was authorized with the read token.
func readOnly(r *http.Request) bool {
	ro, _ := r.Context().Value(roleKey{}).(role)
	return ro == roleRead
}

// hostGuard is the DNS rebinding guard: the Host names a node without an
// API token answers.
type hostGuard struct {
	off   bool            // a token is configured: any Host
	names map[string]bool // lower case, without port or brackets
}

func newHostGuard(apiToken, httpAddr string, publicHosts []string) hostGuard {
	g := hostGuard{off: apiToken != "", names: map[string]bool{}}
	add := func(h string) {
		if h = hostOnly(h); h != "" && !net.ParseIP(h).IsUnspecified() {
			g.names[h] = true
		}
	}
	for _, h := range publicHosts {
		add(h)
	}
	// Other members forward to this node by the address it advertises.
	add(httpAddr)
	return g
}

// hostOnly returns the host of a Host header or host[:port] value, lower
// case, without brackets or a trailing dot.
func hostOnly(h string) string {
	h = strings.TrimSpace(h)
	if host, _, err := net.SplitHostPort(h); err == nil {
		h = host
	}
	h = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
	return strings.ToLower(strings.TrimSuffix(h, "."))
}

// allowed reports whether the Host header host may reach this node.
func (g *hostGuard) allowed(host string) bool {
	if g.off {
		return true
	}
	return hostAllowed(host, g.names)
}

// hostAllowed reports whether host (a Host header: name or IP, with or
// without port) names loopback or one of names.
func hostAllowed(host string, names map[string]bool) bool {
	h := hostOnly(host)
	if h == "" {
		return false
	}
	if h == "localhost" || names[h] {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// errHost answers a request whose Host the guard refuses.
func errHost(host string) *Error {
	return &Error{Code: CodeMisdirected, Field: "Host", Message: "this node answers only Host names that are loopback or given with --public-host " +
		"(it has no API token, so it guards against DNS rebinding); got " + strings.TrimSpace(host)}
}

// GuardHost wraps h (the dashboard) in the node's Host check: without an API
// token, a request whose Host is not loopback, the node's own address or
// a Config.PublicHosts name gets 421 in the error shape.
func (s *Server) GuardHost(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.guard.allowed(r.Host) {
			WriteError(w, errHost(r.Host))
			return
		}
		h.ServeHTTP(w, r)
	})
}

// checkEdge runs the edge checks on r (see the top of this file) and
// returns the refusal, or r with its role in the context.
func (s *Server) checkEdge(r *http.Request) (*http.Request, *Error) {
	p := r.URL.Path
	if strings.HasPrefix(p, "/internal/") {
		return r, nil
	}
	if !s.guard.allowed(r.Host) {
		return r, errHost(r.Host)
	}
	if !strings.HasPrefix(p, "/v1/") && p != "/metrics" {
		return r, nil
	}
	ro := s.tokens.requestRole(r)
	switch {
	case ro == roleNone:
		return r, &Error{Code: CodeUnauthenticated, Field: "Authorization", Message: "missing or wrong bearer token"}
	case ro == roleRead && needsFull(r):
		return r, &Error{Code: CodeForbidden, Field: "Authorization",
			Message: "the read token allows GET and HEAD only (not the gossip keys); " + r.Method + " " + p + " needs the API token"}
	}
	if e := checkContentType(r); e != nil {
		return r, e
	}
	if ro == roleRead {
		r = r.WithContext(context.WithValue(r.Context(), roleKey{}, ro))
	}
	return r, nil
}

// checkContentType refuses a POST or PUT on /v1/ that is not declared
// application/json (parameters such as charset allowed), with or without
// a body. The built-in callback receiver /v1/test/callback takes any body.
func checkContentType(r *http.Request) *Error {
	if r.Method != http.MethodPost && r.Method != http.MethodPut || r.URL.Path == "/v1/test/callback" {
		return nil
	}
	ct := r.Header.Get("Content-Type")
	mt, _, err := mime.ParseMediaType(ct)
	if err == nil && mt == "application/json" {
		return nil
	}
	got := "none"
	if ct != "" {
		got = ct
	}
	return &Error{Code: CodeUnsupportedMediaType, Field: "Content-Type",
		Message: "a " + r.Method + " needs Content-Type: application/json (got " + got + ")"}
}

// RedactURL returns u with any user:password replaced by "***"
// (https://***@host/path), for answers to those who may not see it. It
// works on the text, so a URL that does not parse is masked as well.
func RedactURL(u string) string {
	i := strings.Index(u, "://")
	if i < 0 {
		return u
	}
	rest := u[i+3:]
	at := strings.LastIndex(rest[:authorityEnd(rest)], "@")
	if at < 0 {
		return u
	}
	return u[:i+3] + "***" + rest[at:]
}

// authorityEnd returns where the authority of rest (a URL after "://")
// ends: at its first '/', '?' or '#', else at its end.
func authorityEnd(rest string) int {
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		return i
	}
	return len(rest)
}

// redactOpt is RedactURL of an optional URL ("" stays "").
func redactOpt(u string) string {
	if u == "" {
		return ""
	}
	return RedactURL(u)
}

// redactTasks masks the callback URLs' userinfo in ts (read-token answers).
func redactTasks(ts []TaskResponse) {
	for i := range ts {
		ts[i].CallbackURL = RedactURL(ts[i].CallbackURL)
		ts[i].SuccessURL, ts[i].FailureURL = redactOpt(ts[i].SuccessURL), redactOpt(ts[i].FailureURL)
		ts[i].AckURL = RedactURL(ts[i].AckURL)
	}
}
