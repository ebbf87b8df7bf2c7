package main

// The HTTP edge of `chime serve`: the exposure check before listening, the
// connection limit, per-request deadlines and the debug server's guard.

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Server limits of `chime serve`.
const (
	// defaultMaxConns is --max-conns: open API connections beyond it are
	// answered 503 and closed.
	defaultMaxConns = 10000
	// maxHeaderBytes bounds a request's header block (net/http's default is
	// 1 MiB); the largest legitimate ones carry a token and a signature.
	maxHeaderBytes = 64 << 10
	// bodyReadTimeout bounds reading one request's body: an 8 MiB batch
	// needs well under a second on any link the API is meant for.
	bodyReadTimeout = 30 * time.Second
	// answerWriteTimeout bounds one answer, from the end of the headers to
	// the last byte. It is above the longest a handler may legitimately
	// take: /v1/test/callback's delay_ms (60 s) and a forward's timeout.
	// The dashboard's websocket (/v1/ws) is exempt: it streams.
	answerWriteTimeout = 90 * time.Second
)

// listFlag is a repeatable flag that also takes comma lists.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(v string) error {
	for s := range strings.SplitSeq(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*l = append(*l, s)
		}
	}
	return nil
}

// isLoopbackAddr reports whether the listen address addr (host:port) is on
// loopback only: localhost, 127.0.0.0/8 or ::1. An empty host (":7070")
// listens everywhere.
func isLoopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// checkExposure refuses to serve the API (or pprof, flag names it) on a
// non-loopback address without an API token, unless --insecure-api.
func checkExposure(flag, addr string, hasToken, insecure bool) error {
	if hasToken || insecure || isLoopbackAddr(addr) {
		return nil
	}
	return fmt.Errorf("%s %s is not on loopback and there is no --api-token: anyone who reaches it could use it; "+
		"set --api-token (or --api-token-file), or --insecure-api on a trusted network", flag, addr)
}

// limitListener admits at most max open connections. Beyond that a new
// connection is answered "503 Service Unavailable" in the API's error
// shape and closed, rather than left waiting in the backlog as
// golang.org/x/net/netutil.LimitListener does: a client learns at once
// that the node is full and may retry elsewhere.
type limitListener struct {
	net.Listener
	sem chan struct{} // one per admitted connection
	// refusing bounds the goroutines answering refused connections; when
	// it is full a refused connection is closed without an answer.
	refusing chan struct{}
	max      int
}

func newLimitListener(l net.Listener, max int) *limitListener {
	return &limitListener{Listener: l, sem: make(chan struct{}, max), refusing: make(chan struct{}, 64), max: max}
}

// Accept returns the next connection within the limit.
func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		select {
		case l.sem <- struct{}{}:
			return &limitConn{Conn: c, release: func() { <-l.sem }}, nil
		default:
		}
		select {
		case l.refusing <- struct{}{}:
			go func() {
				defer func() { <-l.refusing }()
				refuseConn(c, l.max)
			}()
		default:
			c.Close()
		}
	}
}

// refuseConn answers c with a minimal 503 and closes it. It reads what the
// client sent first (briefly), so the close does not reset the connection
// before the client has read the answer.
func refuseConn(c net.Conn, max int) {
	defer c.Close()
	body := `{"error":{"code":"unavailable","message":"too many connections: the node serves at most ` +
		strconv.Itoa(max) + ` (--max-conns); retry later"}}` + "\n"
	msg := "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\nConnection: close\r\n" +
		"Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := io.WriteString(c, msg); err != nil {
		return
	}
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(c, 64<<10))
}

// limitConn gives its slot back once, on the first Close.
type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// withDeadlines bounds reading each request's body (read) and writing its
// answer (write), per request through http.ResponseController, so the
// dashboard's websocket (/v1/ws), which streams for hours, is exempt.
// net/http lifts the read deadline itself once the body is read (its
// background read), so a handler may run longer than read
// (/v1/test/callback?delay_ms=60000) without its context ending.
func withDeadlines(h http.Handler, read, write time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		// Errors mean the writer cannot take deadlines (a test recorder).
		if r.URL.Path == "/v1/ws" {
			// A keep-alive connection may carry an earlier request's.
			_ = rc.SetWriteDeadline(time.Time{})
		} else {
			_ = rc.SetWriteDeadline(time.Now().Add(write))
			if r.Body != nil && r.Body != http.NoBody {
				_ = rc.SetReadDeadline(time.Now().Add(read))
			}
		}
		h.ServeHTTP(w, r)
	})
}

// requireToken serves h only to requests with "Authorization: Bearer
// <token>" (compared as SHA-256 digests in constant time); others get 401
// in the API's error shape. It guards the pprof server.
func requireToken(token string, h http.Handler) http.Handler {
	want := sha256.Sum256([]byte(token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		sum := sha256.Sum256([]byte(got))
		if !ok || subtle.ConstantTimeCompare(sum[:], want[:]) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="chime"`)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, `{"error":{"code":"unauthenticated","message":"the debug server needs the API token","field":"Authorization"}}`+"\n")
			return
		}
		h.ServeHTTP(w, r)
	})
}

// errReadTokenAlone refuses --read-token without --api-token.
var errReadTokenAlone = errors.New("--read-token needs --api-token: without it writes would be open while reads need a token")
