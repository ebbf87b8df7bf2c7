package dispatch

// Building a callback request (URL checks, headers, signature) and
// exchanging it on a pooled connection.

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/chime-scheduler/chime/client/signature"
	"github.com/valyala/fasthttp"
)

// buildRequest writes the callback request of j into req (API.md
// "Callback"). The user's headers come before the X-Chime-* ones so that
// nothing can replace those; they may replace Content-Type and User-Agent.
// The values are copied into req, so s.hdr is reused.
func (d *Dispatcher) buildRequest(req *fasthttp.Request, j *Job, s *scratch) {
	req.SetRequestURI(j.URL)
	req.Header.SetMethod(fasthttp.MethodPost)
	req.Header.SetContentType("application/json")
	req.Header.SetUserAgent(d.cfg.UserAgent)
	for k, v := range j.Headers {
		if reservedHeader(k) {
			continue // rejected by validation; never sent
		}
		req.Header.Set(k, v)
	}

	b := append(s.hdr[:0], j.TaskID...)
	b = append(b, ':')
	b = strconv.AppendUint(b, j.Seq, 10)
	fireEnd := len(b)
	b = time.Unix(0, j.Due).UTC().AppendFormat(b, time.RFC3339Nano)
	dueEnd := len(b)
	b = strconv.AppendInt(b, int64(j.Attempt), 10)
	attemptEnd := len(b)
	if j.Epoch > 0 {
		b = strconv.AppendUint(b, j.Epoch, 10)
	}
	s.hdr = b[:0] // keep the buffer if it grew

	req.Header.Set("X-Chime-Task-Id", j.TaskID)
	if d.node != "" {
		req.Header.Set("X-Chime-Node", d.node)
	}
	req.Header.SetBytesV("X-Chime-Fire-Id", b[:fireEnd])
	req.Header.SetBytesV("X-Chime-Due-At", b[fireEnd:dueEnd])
	req.Header.SetBytesV("X-Chime-Attempt", b[dueEnd:attemptEnd])
	if j.Epoch > 0 {
		req.Header.SetBytesV("X-Chime-Slot-Epoch", b[attemptEnd:])
	}
	if j.Ack {
		req.Header.Set("X-Chime-Ack", "1")
	}
	if len(s.macs) > 0 {
		s.sig = signature.Append(s.sig[:0], s.macs, &s.sum, d.clock.Now().Unix(), b[:fireEnd], j.Payload)
		req.Header.SetBytesV("X-Chime-Signature", s.sig)
	}
	req.SetBodyRaw(j.Payload) // not copied: j is ours until done
}

// reservedHeader reports whether a user header k must not be sent:
// Host routes the request, the framing headers would corrupt it (Trailer
// would make fasthttp chunk the body), and X-Chime-* are ours. Case
// insensitive; allocation free.
func reservedHeader(k string) bool {
	const prefix = "x-chime-"
	if len(k) >= len(prefix) && strings.EqualFold(k[:len(prefix)], prefix) {
		return true
	}
	for _, r := range [...]string{"host", "content-length", "transfer-encoding", "connection", "trailer"} {
		if strings.EqualFold(k, r) {
			return true
		}
	}
	return false
}

// poolKey appends "scheme://host:port" of u to dst (fasthttp
// lower-cases both), the default port filled in: the connection pool's key
// and, after the "://", the address dialed.
func poolKey(dst []byte, u *fasthttp.URI) []byte {
	dst = append(dst, u.Scheme()...)
	dst = append(dst, "://"...)
	host := u.Host()
	dst = append(dst, host...)
	if bytes.LastIndexByte(host, ':') <= bytes.LastIndexByte(host, ']') { // no port ("[::1]" has colons but no port)
		if string(u.Scheme()) == "https" {
			dst = append(dst, ":443"...)
		} else {
			dst = append(dst, ":80"...)
		}
	}
	return dst
}

// checkURL returns why rawURL cannot be called ("" if it can).
// Task validation has already required an absolute http(s) URL with a
// host; this guards the dispatcher itself. fasthttp accepts nearly
// anything, so the common shape — a scheme of http or https, a host name
// or IP literal, an optional numeric port, printable ASCII with valid
// escapes — is checked here without allocating, and only anything else is
// handed to net/url, whose verdict (and wording) decides.
func checkURL(rawURL string) string {
	if plainURL(rawURL) {
		return ""
	}
	u, err := url.Parse(rawURL)
	switch {
	case err != nil:
		return errText(err)
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Sprintf("unsupported protocol scheme %q", u.Scheme)
	case u.Host == "":
		return "no Host in request URL"
	}
	return ""
}

// plainURL reports whether rawURL has the common shape that
// checkURL accepts without net/url. False means "ask net/url",
// not "invalid".
func plainURL(rawURL string) bool {
	for i := 0; i < len(rawURL); i++ {
		switch c := rawURL[i]; {
		case c <= ' ' || c >= 0x7f:
			return false
		case c == '%':
			if i+2 >= len(rawURL) || !isHex(rawURL[i+1]) || !isHex(rawURL[i+2]) {
				return false
			}
		}
	}
	i := strings.Index(rawURL, "://")
	if i < 0 {
		return false
	}
	if scheme := rawURL[:i]; !strings.EqualFold(scheme, "http") && !strings.EqualFold(scheme, "https") {
		return false
	}
	auth := rawURL[i+3:]
	if k := strings.IndexAny(auth, "/?#"); k >= 0 {
		auth = auth[:k]
	}
	if k := strings.LastIndexByte(auth, '@'); k >= 0 {
		auth = auth[k+1:]
	}
	host, port := auth, ""
	if strings.HasPrefix(auth, "[") {
		k := strings.IndexByte(auth, ']')
		if k < 0 {
			return false
		}
		host, port = auth[1:k], auth[k+1:]
		if port != "" && port[0] != ':' {
			return false
		}
		for j := 0; j < len(host); j++ {
			if c := host[j]; !isHex(c) && c != ':' && c != '.' {
				return false
			}
		}
	} else {
		if k := strings.LastIndexByte(auth, ':'); k >= 0 {
			host, port = auth[:k], auth[k:]
		}
		for j := 0; j < len(host); j++ {
			if c := host[j]; !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_') {
				return false
			}
		}
	}
	if host == "" {
		return false
	}
	for j := 1; j < len(port); j++ { // port[0] is ':'
		if port[j] < '0' || port[j] > '9' {
			return false
		}
	}
	return true
}

// isHex reports whether c is an ASCII hexadecimal digit.
func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// roundTrip writes req on a pooled connection and reads the response
// header into resp, leaving the body to stream from s.br. On success the
// caller owns the returned connection and must put or discard it; on error
// it is already discarded.
//
// A kept-alive connection may have been closed by the receiver while idle.
// That shows as a failure to write, or an end of stream before the first
// response byte; then the request is sent once more on a new connection.
// The receiver cannot have answered the first copy, but it may (rarely:
// it crashed mid-request) have processed it — harmless under at-least-once
// delivery, since the fire id is the same.
func (d *Dispatcher) roundTrip(req *fasthttp.Request, resp *fasthttp.Response, s *scratch, deadline time.Time) (*poolConn, error) {
	fresh := false
	for {
		c, err := d.pool.get(s.key, fresh, deadline)
		if err != nil {
			return nil, err
		}
		stale, err := d.exchange(c, req, resp, s, deadline)
		if err == nil {
			return c, nil
		}
		d.pool.discard(c)
		if !stale || !c.reused || fresh || d.stop.Err() != nil || !d.clock.Now().Before(deadline) {
			return nil, err
		}
		d.pool.dropIdle(c.key)
		fresh = true
	}
}

// exchange writes req to c and reads the response header. stale reports
// an error that leaves the request unanswered: a failed write, or the
// connection ending before the first response byte.
func (d *Dispatcher) exchange(c *poolConn, req *fasthttp.Request, resp *fasthttp.Response, s *scratch, deadline time.Time) (stale bool, err error) {
	if err := c.conn.SetDeadline(deadline); err != nil {
		return false, err
	}
	s.bw.Reset(c.conn)
	if err := req.Write(s.bw); err != nil {
		return !isTimeout(err), err
	}
	if err := s.bw.Flush(); err != nil {
		return !isTimeout(err), err
	}
	s.br.Reset(c.conn)
	resp.StreamBody = true
	if err := resp.ReadLimitBody(s.br, 0); err != nil {
		// fasthttp reports any failure to read the first byte, other than
		// a timeout, as io.EOF.
		return errors.Is(err, io.EOF), err
	}
	return false, nil
}
