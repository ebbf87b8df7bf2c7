package dispatch

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chime-scheduler/chime/node/clock"
)

// dispCountConns makes srv count the connections it accepts; call before
// srv.Start.
func dispCountConns(srv *httptest.Server) *atomic.Int64 {
	var n atomic.Int64
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			n.Add(1)
		}
	}
	return &n
}

// TestDispatchLargeBody checks that the status decides the outcome however
// long the body is: Body keeps the first 512 bytes, and a body longer than
// the drain limit costs the connection instead of failing the callback.
func TestDispatchLargeBody(t *testing.T) {
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	tests := []struct {
		name      string
		status    int
		size      int
		chunked   bool
		want      Outcome
		wantConns int64 // for two sequential callbacks
	}{
		{name: "1 MiB with length", status: 200, size: len(big), want: OutcomeSuccess, wantConns: 2},
		{name: "1 MiB chunked", status: 200, size: len(big), chunked: true, want: OutcomeSuccess, wantConns: 2},
		{name: "1 MiB on 500", status: 500, size: len(big), want: OutcomeFailure, wantConns: 2},
		{name: "at the drain limit", status: 200, size: bodyKeep + drainLimit - 1, want: OutcomeSuccess, wantConns: 1},
		{name: "40 KiB chunked", status: 201, size: 40 << 10, chunked: true, want: OutcomeSuccess, wantConns: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dispNoLeaks(t)
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if !tt.chunked {
					w.Header().Set("Content-Length", strconv.Itoa(tt.size))
				}
				w.WriteHeader(tt.status)
				for rest := big[:tt.size]; len(rest) > 0; {
					n := min(len(rest), 8<<10)
					if _, err := w.Write(rest[:n]); err != nil {
						return // the client went away after what it needed
					}
					if tt.chunked {
						w.(http.Flusher).Flush()
					}
					rest = rest[n:]
				}
			}))
			conns := dispCountConns(srv)
			srv.Start()
			t.Cleanup(srv.Close)
			d, results := newDispTest(t, Config{Concurrency: 1}, Deps{})
			d.Submit(dispJob("a", srv.URL))
			d.Submit(dispJob("b", srv.URL))
			d.Start()
			for _, r := range dispRecv(t, results, 2) {
				if r.Outcome != tt.want || r.StatusCode != tt.status || r.Err != "" {
					t.Errorf("result %s = %v %d %q, want %v %d", r.Job.TaskID, r.Outcome, r.StatusCode, r.Err, tt.want, tt.status)
				}
				if !bytes.Equal(r.Body, big[:bodyKeep]) {
					t.Errorf("Body of %s = %d bytes %.20q…, want the first %d", r.Job.TaskID, len(r.Body), r.Body, bodyKeep)
				}
			}
			if n := conns.Load(); n != tt.wantConns {
				t.Errorf("connections = %d, want %d", n, tt.wantConns)
			}
		})
	}
}

// TestDispatchTLS checks https callbacks: the configured roots are used,
// the default ones reject a test certificate, and connections are kept.
func TestDispatchTLS(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil || r.Header.Get("X-Chime-Task-Id") == "" {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		_, _ = io.WriteString(w, "secure "+r.Header.Get("X-Chime-Task-Id"))
	}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the rejected handshakes
	conns := dispCountConns(srv)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())

	tests := []struct {
		name    string
		cfg     *tls.Config
		want    Outcome
		wantErr string // substring; "" = none
	}{
		{name: "trusted", cfg: &tls.Config{RootCAs: roots}, want: OutcomeSuccess},
		{name: "trusted by name", cfg: &tls.Config{RootCAs: roots, ServerName: "example.com"}, want: OutcomeSuccess},
		{name: "system roots", cfg: nil, want: OutcomeFailure, wantErr: "certificate"},
		{name: "wrong name", cfg: &tls.Config{RootCAs: roots, ServerName: "other.example"}, want: OutcomeFailure, wantErr: "certificate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dispNoLeaks(t)
			before := conns.Load()
			d, results := newDispTest(t, Config{Concurrency: 1, TLSConfig: tt.cfg}, Deps{})
			d.Submit(dispJob("a", srv.URL+"/hook"))
			d.Submit(dispJob("b", srv.URL+"/hook"))
			d.Start()
			for _, r := range dispRecv(t, results, 2) {
				if r.Outcome != tt.want || !strings.Contains(r.Err, tt.wantErr) || (tt.wantErr == "") != (r.Err == "") {
					t.Errorf("result %s = %v %d %q, want %v with Err containing %q", r.Job.TaskID, r.Outcome, r.StatusCode, r.Err, tt.want, tt.wantErr)
				}
				if want := "secure " + r.Job.TaskID; tt.want == OutcomeSuccess && string(r.Body) != want {
					t.Errorf("Body = %q, want %q", r.Body, want)
				}
			}
			if n := conns.Load() - before; tt.want == OutcomeSuccess && n != 1 {
				t.Errorf("connections = %d, want 1 (kept alive)", n)
			}
		})
	}
}

// TestDispatchStaleConnection checks that a kept-alive connection the
// receiver closed while idle costs neither a failure nor a duplicate: the
// request goes once more, on a new connection.
func TestDispatchStaleConnection(t *testing.T) {
	dispNoLeaks(t)
	var requests atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		_, _ = io.WriteString(w, r.Header.Get("X-Chime-Task-Id"))
	}))
	conns := dispCountConns(srv)
	srv.Start()
	t.Cleanup(srv.Close)
	d, results := newDispTest(t, Config{Concurrency: 1}, Deps{})
	d.Start()
	for i, id := range []string{"a", "b", "c"} {
		if i > 0 {
			srv.CloseClientConnections() // the idle connection goes stale
		}
		d.Submit(dispJob(id, srv.URL))
		if r := <-results; r.Outcome != OutcomeSuccess || string(r.Body) != id {
			t.Fatalf("result %s = %v %q, body %q, want success", id, r.Outcome, r.Err, r.Body)
		}
	}
	if n, c := requests.Load(), conns.Load(); n != 3 || c != 3 {
		t.Errorf("requests, connections = %d, %d, want 3, 3", n, c)
	}
}

// dispRawServer accepts connections and hands each to handle, counting
// the requests whose header block it read with readHead.
type dispRawServer struct {
	ln       net.Listener
	requests atomic.Int64
	wg       sync.WaitGroup
}

func newDispRawServer(t *testing.T, handle func(s *dispRawServer, c net.Conn, br *bufio.Reader)) *dispRawServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &dispRawServer{ln: ln}
	s.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.wg.Go(func() {
				defer c.Close()
				handle(s, c, bufio.NewReader(c))
			})
		}
	})
	t.Cleanup(func() { ln.Close(); s.wg.Wait() })
	return s
}

func (s *dispRawServer) url() string { return "http://" + s.ln.Addr().String() + "/" }

// readHead reads one request's header block and body (by Content-Length)
// and counts it; false if the connection ended first.
func (s *dispRawServer) readHead(br *bufio.Reader) bool {
	req, err := http.ReadRequest(br)
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, req.Body)
	s.requests.Add(1)
	return true
}

// TestDispatchRawResponses checks answers that net/http servers do not
// give: no answer, HTTP/1.0, a body delimited by close, garbage, an
// oversized header block. A fresh connection that fails is not retried.
func TestDispatchRawResponses(t *testing.T) {
	tests := []struct {
		name     string
		reply    string // written after each request; "" = close without answering
		want     Outcome
		wantCode int
		wantErr  string // substring; "" = Err must be empty
		wantBody string
		wantReqs int64 // requests seen for two sequential callbacks
	}{
		{name: "no answer", reply: "", want: OutcomeFailure, wantErr: "connection closed before the response", wantReqs: 2},
		{name: "http 1.0", reply: "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok", want: OutcomeSuccess, wantCode: 200, wantBody: "ok", wantReqs: 2},
		{name: "close delimited", reply: "HTTP/1.1 200 OK\r\n\r\nuntil close", want: OutcomeSuccess, wantCode: 200, wantBody: "until close", wantReqs: 2},
		{name: "connection close", reply: "HTTP/1.1 503 Busy\r\nConnection: close\r\nRetry-After: 3\r\nContent-Length: 4\r\n\r\nbusy", want: OutcomeFailure, wantCode: 503, wantBody: "busy", wantReqs: 2},
		{name: "garbage", reply: "SMTP ready\r\n\r\n", want: OutcomeFailure, wantErr: "invalid response status code", wantReqs: 2},
		{name: "header too large", reply: "HTTP/1.1 200 OK\r\nX-Big: " + strings.Repeat("x", readBuffer) + "\r\nContent-Length: 0\r\n\r\n", want: OutcomeFailure, wantErr: "response header larger than 16 KiB", wantReqs: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dispNoLeaks(t)
			srv := newDispRawServer(t, func(s *dispRawServer, c net.Conn, br *bufio.Reader) {
				// One request per connection, then close: every callback
				// here needs a new connection, whatever the client decided.
				if s.readHead(br) && tt.reply != "" {
					_, _ = io.WriteString(c, tt.reply)
				}
			})
			d, results := newDispTest(t, Config{Concurrency: 1}, Deps{})
			d.Submit(dispJob("a", srv.url()))
			d.Submit(dispJob("b", srv.url()))
			d.Start()
			for _, r := range dispRecv(t, results, 2) {
				if r.Outcome != tt.want || r.StatusCode != tt.wantCode {
					t.Errorf("outcome, status = %v, %d, want %v, %d (err %q)", r.Outcome, r.StatusCode, tt.want, tt.wantCode, r.Err)
				}
				if (tt.wantErr == "") != (r.Err == "") || !strings.Contains(r.Err, tt.wantErr) {
					t.Errorf("Err = %q, want containing %q", r.Err, tt.wantErr)
				}
				if string(r.Body) != tt.wantBody {
					t.Errorf("Body = %q, want %q", r.Body, tt.wantBody)
				}
			}
			if n := srv.requests.Load(); n != tt.wantReqs {
				t.Errorf("requests = %d, want %d (no retry on a fresh connection)", n, tt.wantReqs)
			}
		})
	}
}

// TestDispatchIdleTimeout checks that an idle connection older than
// IdleTimeout is not reused.
func TestDispatchIdleTimeout(t *testing.T) {
	tests := []struct {
		name      string
		idle      time.Duration
		wantConns int64
	}{
		{name: "kept", idle: time.Hour, wantConns: 1},
		{name: "expired", idle: time.Nanosecond, wantConns: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dispNoLeaks(t)
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
			conns := dispCountConns(srv)
			srv.Start()
			t.Cleanup(srv.Close)
			d, results := newDispTest(t, Config{Concurrency: 1, IdleTimeout: tt.idle}, Deps{})
			for _, id := range []string{"a", "b", "c"} {
				d.Submit(dispJob(id, srv.URL))
			}
			d.Start()
			dispRecv(t, results, 3)
			if n := conns.Load(); n != tt.wantConns {
				t.Errorf("connections = %d, want %d", n, tt.wantConns)
			}
		})
	}
}

// TestDispatchCloseConnections checks that close closes the idle
// connections it kept.
func TestDispatchCloseConnections(t *testing.T) {
	dispNoLeaks(t)
	srv := dispOKServer(t)
	d, results := newDispTest(t, Config{Concurrency: 4}, Deps{})
	for i := range 8 {
		d.Submit(dispJob(strconv.Itoa(i), srv.URL))
	}
	d.Start()
	dispRecv(t, results, 8)
	if n := d.pool.openConns(); n < 1 || n > 4 {
		t.Errorf("open connections after the callbacks = %d, want 1..4", n)
	}
	d.Close(context.Background())
	if n := d.pool.openConns(); n != 0 {
		t.Errorf("open connections after close = %d, want 0", n)
	}
}

// TestDispatchPool exercises the pool directly against a listener that
// holds every connection open.
func TestDispatchPool(t *testing.T) {
	dispNoLeaks(t)
	var accepted atomic.Int64
	srv := newDispRawServer(t, func(_ *dispRawServer, c net.Conn, br *bufio.Reader) {
		accepted.Add(1)
		_, _ = io.Copy(io.Discard, br) // until the client closes
	})
	key := []byte(strings.TrimSuffix(strings.TrimPrefix(srv.url(), "http://"), "/"))
	key = append([]byte("http://"), key...)
	stop, cancel := context.WithCancel(context.Background())
	defer cancel()
	p := newConnPool(stop, clock.Real, nil, time.Hour)
	deadline := time.Now().Add(time.Minute)
	get := func(fresh bool) *poolConn {
		t.Helper()
		c, err := p.get(key, fresh, deadline)
		if err != nil {
			t.Fatalf("get(%s, fresh %v) = %v", key, fresh, err)
		}
		return c
	}

	a := get(false)
	if a.reused {
		t.Error("first conn reused = true, want false")
	}
	p.put(a)
	if b := get(false); b != a || !b.reused {
		t.Errorf("get after put = %p (reused %v), want the idle %p reused", b, b.reused, a)
	}
	b := get(false) // a is held, so this dials
	if b == a {
		t.Fatal("get while the only conn is held returned it")
	}
	p.put(a)
	p.put(b)
	if c := get(false); c != b {
		t.Errorf("get = %p, want the most recently used %p", c, b)
	}
	if c := get(true); c == a || c == b {
		t.Error("get(fresh) returned an idle conn")
	} else {
		p.discard(c)
	}
	p.put(b)
	p.dropIdle(string(key))
	if n := p.openConns(); n != 0 {
		t.Errorf("open after dropIdle = %d, want 0", n)
	}
	c := get(false)
	if c == a || c == b {
		t.Error("get after dropIdle returned a dropped conn")
	}
	held := get(false)
	p.put(c)
	p.closeAll()
	if n := p.openConns(); n != 0 {
		t.Errorf("open after closeAll = %d, want 0", n)
	}
	if _, err := held.conn.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
		t.Errorf("write on a held conn after closeAll = %v, want net.ErrClosed", err)
	}
	p.put(held) // closes it; must not panic
	if _, err := p.get(key, false, deadline); !errors.Is(err, errPoolClosed) {
		t.Errorf("get after closeAll = %v, want errPoolClosed", err)
	}
	// The server counts a connection in its own goroutine, after the
	// client's dial returned: wait for the count to settle.
	for wait := time.Now().Add(5 * time.Second); accepted.Load() < 5 && time.Now().Before(wait); {
		time.Sleep(time.Millisecond)
	}
	if n := accepted.Load(); n != 5 {
		t.Errorf("dials = %d, want 5", n)
	}
}

func TestDispatchCheckURL(t *testing.T) {
	tests := []struct {
		url       string
		wantPlain bool   // accepted without net/url
		wantErr   string // substring; "" = callable
	}{
		{url: "http://example.com/hook", wantPlain: true},
		{url: "HTTPS://Example.COM:8443/a/b?x=1&y=%2F#frag", wantPlain: true},
		{url: "http://user:pw@127.0.0.1:9000", wantPlain: true},
		{url: "http://[::1]:80/x", wantPlain: true},
		{url: "http://[::1]/x", wantPlain: true},
		{url: "http://my_host.internal/x", wantPlain: true},
		{url: "http://h/a b"},                                          // net/url accepts a space in the path
		{url: "http://exa%2Dmple.com/", wantErr: "invalid URL escape"}, // escapes in the host: net/url decides
		{url: "http://[::1", wantErr: "missing ']' in host"},           // net/url's wording
		{url: "ftp://127.0.0.1/x", wantErr: "unsupported protocol scheme \"ftp\""},
		{url: "not a url", wantErr: "unsupported protocol scheme \"\""},
		{url: "http:///path", wantErr: "no Host"},
		{url: "http://h:8x/", wantErr: "invalid port"},
		{url: "http://h/p%zz", wantErr: "invalid URL escape"},
		{url: "http://exa mple.com/", wantErr: "invalid character"},
		{url: "http://h/\x00", wantErr: "invalid control character"},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			if got := plainURL(tt.url); got != tt.wantPlain {
				t.Errorf("plainURL(%q) = %v, want %v", tt.url, got, tt.wantPlain)
			}
			got := checkURL(tt.url)
			if (tt.wantErr == "") != (got == "") || !strings.Contains(got, tt.wantErr) {
				t.Errorf("checkURL(%q) = %q, want containing %q", tt.url, got, tt.wantErr)
			}
		})
	}
}

// TestDispatchCloseCancelsHandshake checks that close cuts an attempt
// still connecting (here: a TLS handshake the server never answers), which
// no connection in the pool can stand for yet.
func TestDispatchCloseCancelsHandshake(t *testing.T) {
	dispNoLeaks(t)
	hello := make(chan struct{}, 1)
	srv := newDispRawServer(t, func(_ *dispRawServer, c net.Conn, br *bufio.Reader) {
		if _, err := br.ReadByte(); err == nil { // the ClientHello began
			hello <- struct{}{}
		}
		_, _ = io.Copy(io.Discard, br) // never answers; until the client closes
	})
	d, results := newDispTest(t, Config{Concurrency: 1}, Deps{})
	d.Submit(dispJob("j1", "https://"+srv.ln.Addr().String()+"/"))
	d.Start()
	<-hello
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if left := d.Close(ctx); len(left) != 0 {
		t.Errorf("close returned %v, want none", dispJobIDs(left))
	}
	select {
	case r := <-results:
		if r.Outcome != OutcomeFailure || r.Err != "shutdown" || r.StatusCode != 0 {
			t.Errorf("result = %v %d %q, want failure 0 \"shutdown\"", r.Outcome, r.StatusCode, r.Err)
		}
	default:
		t.Fatal("close returned before done was called for the running job")
	}
}
