package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/chime-scheduler/chime/node"
)

func TestEdgeExposureCheck(t *testing.T) {
	tests := []struct {
		addr            string
		token, insecure bool
		wantErr         bool
	}{
		{"127.0.0.1:7070", false, false, false},
		{"127.0.0.2:7070", false, false, false},
		{"localhost:7070", false, false, false},
		{"[::1]:7070", false, false, false},
		{"0.0.0.0:7070", false, false, true},
		{":7070", false, false, true},
		{"[::]:7070", false, false, true},
		{"192.168.1.10:7070", false, false, true},
		{"chime.lan:7070", false, false, true},
		{"0.0.0.0:7070", true, false, false},
		{"0.0.0.0:7070", false, true, false},
		{"192.168.1.10:7070", true, true, false},
	}
	for _, tt := range tests {
		err := checkExposure("--http-addr", tt.addr, tt.token, tt.insecure)
		if (err != nil) != tt.wantErr {
			t.Errorf("checkExposure(%q, token %v, insecure %v) = %v, want error %v", tt.addr, tt.token, tt.insecure, err, tt.wantErr)
		}
		if err != nil && (strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "--insecure-api")) {
			t.Errorf("error %q: want one line naming --insecure-api", err)
		}
	}
}

// TestEdgeServeRefuses: chime serve refuses before it listens (so these
// never bind): a non-loopback address without a token, a read token alone.
func TestEdgeServeRefuses(t *testing.T) {
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "read")
	if err := os.WriteFile(tokenFile, []byte("r3ad\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	noEnv := func(string) string { return "" }
	tests := []struct {
		name string
		args []string
		env  func(string) string
		want string
	}{
		{"all interfaces, no token", []string{"--http-addr", "0.0.0.0:0"}, noEnv, "--http-addr 0.0.0.0:0 is not on loopback"},
		{"LAN address, no token", []string{"--http-addr", "192.0.2.1:0"}, noEnv, "is not on loopback"},
		{"debug on all interfaces, no token", []string{"--http-addr", "127.0.0.1:0", "--debug-addr", ":0"}, noEnv, "--debug-addr :0 is not on loopback"},
		{"read token alone", []string{"--http-addr", "127.0.0.1:0", "--read-token", "r3ad"}, noEnv, "--read-token needs --api-token"},
		{"read token file alone", []string{"--http-addr", "127.0.0.1:0", "--read-token-file", tokenFile}, noEnv, "--read-token needs --api-token"},
		{"read token from env alone", []string{"--http-addr", "127.0.0.1:0"}, func(k string) string {
			if k == "CHIME_READ_TOKEN" {
				return "r3ad"
			}
			return ""
		}, "--read-token needs --api-token"},
		{"read token flag and file", []string{"--http-addr", "127.0.0.1:0", "--api-token", "a", "--read-token", "x", "--read-token-file", tokenFile}, noEnv, "both given"},
		{"max-conns 0", []string{"--http-addr", "127.0.0.1:0", "--max-conns", "0"}, noEnv, "--max-conns 0"},
		{"breaker maybe", []string{"--http-addr", "127.0.0.1:0", "--breaker", "maybe"}, noEnv, `--breaker "maybe": want on or off`},
		{"breaker ratio 1.5", []string{"--http-addr", "127.0.0.1:0", "--breaker-failure-ratio", "1.5"}, noEnv, "FailureRatio must be in (0, 1]"},
		{"breaker probe over max", []string{"--http-addr", "127.0.0.1:0", "--breaker-probe", "2m", "--breaker-probe-max", "1m"}, noEnv, "ProbeMax (1m0s) must be >= Probe (2m0s)"},
		{"breaker min attempts 0", []string{"--http-addr", "127.0.0.1:0", "--breaker-min-attempts", "0"}, noEnv, "must be positive"},
		{"memory limit too small", []string{"--http-addr", "127.0.0.1:0", "--memory-limit", "64MiB"}, noEnv, "--memory-limit 64MiB: want at least 128MiB"},
		{"memory limit not a size", []string{"--http-addr", "127.0.0.1:0", "--memory-limit", "256MB"}, noEnv, "want a size such as 256MiB"},
		{"memory limit from env", []string{"--http-addr", "127.0.0.1:0"}, func(k string) string {
			if k == "CHIME_MEMORY_LIMIT" {
				return "1MiB"
			}
			return ""
		}, "--memory-limit 1MiB: want at least 128MiB"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stderr strings.Builder
			args := append([]string{"--data-dir", filepath.Join(dir, "data")}, tt.args...)
			err := runServe(t.Context(), args, io.Discard, &stderr, tt.env)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("runServe: %v, want an error containing %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error is not one line: %q", err)
			}
			if _, serr := os.Stat(filepath.Join(dir, "data")); serr == nil {
				t.Errorf("the refused node created its data dir")
			}
		})
	}
}

func TestEdgeListFlag(t *testing.T) {
	var l listFlag
	for _, v := range []string{"a.example", "b.example, c.example", ",", " d.example "} {
		if err := l.Set(v); err != nil {
			t.Fatal(err)
		}
	}
	if got := l.String(); got != "a.example,b.example,c.example,d.example" {
		t.Errorf("listFlag = %q", got)
	}
}

// rawGet sends a GET on a new connection to addr and returns the status
// line, or the error.
func rawGet(addr string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, "GET /x HTTP/1.1\r\nHost: localhost\r\n\r\n"); err != nil {
		return "", err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return strings.TrimSpace(line), err
}

func TestEdgeLimitListener(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	entered := make(chan struct{}, 4)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		<-release
		w.WriteHeader(http.StatusNoContent)
	})}
	go func() { _ = srv.Serve(newLimitListener(ln, 2)) }()
	t.Cleanup(func() { _ = srv.Close() })
	addr := ln.Addr().String()

	// Two connections are admitted and held by the handler.
	type res struct {
		line string
		err  error
	}
	held := make(chan res, 2)
	for range 2 {
		go func() {
			line, err := rawGet(addr)
			held <- res{line, err}
		}()
	}
	for range 2 {
		select {
		case <-entered:
		case <-time.After(5 * time.Second):
			t.Fatal("the first two connections did not reach the handler")
		}
	}
	// The third is answered 503 at once, in the error shape.
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	_, _ = io.WriteString(c, "GET /x HTTP/1.1\r\nHost: localhost\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("third connection: %v, want a 503", err)
	}
	body, _ := io.ReadAll(resp.Body)
	c.Close()
	var eb struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" ||
		json.Unmarshal(body, &eb) != nil || eb.Error.Code != "unavailable" || !strings.Contains(eb.Error.Message, "--max-conns") {
		t.Fatalf("third connection: %d %v %s, want 503 unavailable with Retry-After", resp.StatusCode, resp.Header, body)
	}
	select {
	case <-entered:
		t.Fatal("the refused connection reached the handler")
	default:
	}
	// Once the held ones finish and close, new connections are admitted.
	close(release)
	for range 2 {
		r := <-held
		if r.err != nil || r.line != "HTTP/1.1 204 No Content" {
			t.Fatalf("held connection: %q %v", r.line, r.err)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		line, err := rawGet(addr)
		if err == nil && line == "HTTP/1.1 204 No Content" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the slots freed: %q %v", line, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestEdgeDeadlines(t *testing.T) {
	const read, write = 200 * time.Millisecond, 800 * time.Millisecond
	bodyErr := make(chan error, 1)
	mux := http.NewServeMux()
	mux.HandleFunc("/body", func(w http.ResponseWriter, r *http.Request) {
		_, err := io.ReadAll(r.Body)
		bodyErr <- err
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		// Longer than the read deadline: the body was read, so the
		// request's context must live on.
		_, _ = io.ReadAll(r.Body)
		select {
		case <-time.After(2 * read):
			w.WriteHeader(http.StatusNoContent)
		case <-r.Context().Done():
			w.WriteHeader(http.StatusTeapot)
		}
	})
	mux.HandleFunc("/late", func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(write + 100*time.Millisecond)
		_, _ = w.Write(make([]byte, 1<<20))
	})
	srv := httptest.NewServer(withDeadlines(mux, read, write))
	t.Cleanup(srv.Close)
	addr := strings.TrimPrefix(srv.URL, "http://")

	// A body that stalls is cut off at the read deadline.
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, _ = io.WriteString(c, "POST /body HTTP/1.1\r\nHost: localhost\r\nContent-Length: 100\r\n\r\n{\"a\":")
	select {
	case err := <-bodyErr:
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			t.Errorf("stalled body: %v, want a timeout", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a stalled body was not cut off")
	}
	// A handler that outlives the read deadline after reading its body
	// keeps its context, on a keep-alive connection used twice.
	for i := range 2 {
		resp, err := srv.Client().Post(srv.URL+"/slow", "application/json", strings.NewReader(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNoContent {
			t.Errorf("slow handler, request %d: %d, want 204 (its context was cancelled)", i, resp.StatusCode)
		}
	}
	// An answer that starts after the write deadline does not arrive.
	resp, err := srv.Client().Get(srv.URL + "/late")
	if err == nil {
		_, err = io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	if err == nil {
		t.Error("an answer written after the write deadline arrived in full")
	}
}

// TestEdgeWebsocketOutlivesDeadlines: the dashboard's stream keeps
// pushing long after the per-request deadlines.
func TestEdgeWebsocketOutlivesDeadlines(t *testing.T) {
	if testing.Short() {
		t.Skip("streams for 2.5 s")
	}
	d := startDashNode(t, "chime-ws-deadlines", "")
	srv := httptest.NewServer(withDeadlines(d.h, 100*time.Millisecond, 100*time.Millisecond))
	t.Cleanup(srv.Close)
	c, resp, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(srv.URL, "http")+"/v1/ws", nil)
	if err != nil {
		t.Fatalf("dial: %v (%v)", err, resp)
	}
	defer c.Close()
	start := time.Now()
	got := 0
	for time.Since(start) < 2500*time.Millisecond {
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, _, err := c.ReadMessage(); err != nil {
			t.Fatalf("after %v and %d pushes: %v", time.Since(start), got, err)
		}
		got++
	}
	if got < 3 {
		t.Errorf("%d pushes in 2.5 s, want at least 3 (one a second)", got)
	}
}

// TestEdgeDashboardHost: without a token, the dashboard and its websocket
// answer only loopback and --public-host names, like the API.
func TestEdgeDashboardHost(t *testing.T) {
	d := startDashNodeWith(t, "chime-host", func(c *node.Config) { c.PublicHosts = []string{"chime.lan"} })
	tests := []struct {
		host, path string
		want       int
	}{
		{"localhost", "/ui/", 200},
		{"127.0.0.1:7070", "/ui/app.js", 200},
		{"chime.lan:7070", "/ui/", 200},
		{"evil.example", "/ui/", 421},
		{"evil.example", "/ui/app.js", 421},
		{"evil.example", "/v1/ws", 421},
		{"evil.example:7070", "/v1/snapshot", 421},
		{"evil.example", "/v1/tasks", 421},
	}
	for _, tt := range tests {
		req, _ := http.NewRequestWithContext(t.Context(), "GET", d.srv.URL+tt.path, nil)
		req.Host = tt.host
		resp, err := d.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tt.want {
			t.Errorf("Host %s GET %s: %d, want %d", tt.host, tt.path, resp.StatusCode, tt.want)
			continue
		}
		if tt.want == 421 && !strings.Contains(string(body), `"code":"misdirected_request"`) || tt.want == 421 && !strings.Contains(string(body), `"field":"Host"`) {
			t.Errorf("Host %s GET %s: %s, want the error shape naming Host", tt.host, tt.path, body)
		}
	}
	// The websocket through an allowed name still works.
	hdr := http.Header{"Host": {"localhost"}}
	c, resp, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(d.srv.URL, "http")+"/v1/ws", hdr)
	if err != nil {
		t.Fatalf("ws via localhost: %v (%v)", err, resp)
	}
	c.Close()
}

// TestEdgeDashboardReadToken: the read token opens the dashboard's
// websocket, is refused writes, and is never echoed.
func TestEdgeDashboardReadToken(t *testing.T) {
	d := startDashNodeWith(t, "chime-read", func(c *node.Config) { c.APIToken = "full-s3cret"; c.ReadToken = "read-s3cret" })
	ws := "ws" + strings.TrimPrefix(d.srv.URL, "http") + "/v1/ws"
	dl := websocket.Dialer{Subprotocols: []string{"bearer.read-s3cret"}, HandshakeTimeout: 5 * time.Second}
	c, resp, err := dl.Dial(ws, nil)
	if err != nil {
		t.Fatalf("ws with the read token: %v", err)
	}
	c.Close()
	for k, vs := range resp.Header {
		for _, v := range vs {
			if strings.Contains(v, "s3cret") {
				t.Errorf("answer header %s echoes the token: %q", k, v)
			}
		}
	}
	if _, resp, err := websocket.DefaultDialer.Dial(ws, http.Header{"Authorization": {"Bearer nope"}}); err == nil || resp == nil || resp.StatusCode != 401 {
		t.Errorf("ws with a wrong token: %v, want 401", err)
	} else if body, _ := io.ReadAll(resp.Body); !strings.Contains(string(body), `"field":"Authorization"`) {
		t.Errorf("ws 401 body %s: want the error shape naming Authorization", body)
	}
	req, _ := http.NewRequestWithContext(context.Background(), "POST", d.srv.URL+"/v1/tasks", strings.NewReader(`{}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer read-s3cret")
	resp, err = d.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("create with the read token: %d, want 403", resp.StatusCode)
	}
}

func TestEdgeDebugToken(t *testing.T) {
	h := requireToken("s3cret", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(204) }))
	for auth, want := range map[string]int{"": 401, "Bearer nope": 401, "Bearer s3cre": 401, "s3cret": 401, "Bearer s3cret": 204} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("GET", "/debug/pprof/", nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		h.ServeHTTP(rec, req)
		if rec.Code != want {
			t.Errorf("Authorization %q: %d, want %d", auth, rec.Code, want)
		}
		if want == 401 && !strings.Contains(rec.Body.String(), `"field":"Authorization"`) {
			t.Errorf("401 body %s: want the error shape", rec.Body)
		}
	}
}
