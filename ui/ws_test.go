package ui

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// pushed is a decoded push.
type pushed struct {
	Type  string          `json:"type"`
	Seq   uint64          `json:"seq"`
	Data  json.RawMessage `json:"data"`
	Error string          `json:"error"`
}

// newTestServer serves a Handler for api on 127.0.0.1; both are closed at
// cleanup, the handler first so the websockets end before the server waits
// for them. Tests that are not about dropping slow readers give a large
// ClientQueue, so that a test goroutine slowed by the race detector on a
// busy machine is never mistaken for a slow browser.
func newTestServer(t *testing.T, api API, opts Options) (*Handler, *httptest.Server) {
	t.Helper()
	h := NewHandler(api, opts)
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		h.Close()
		srv.Close()
	})
	return h, srv
}

func wsURL(srv *httptest.Server, query string) string {
	u := "ws" + strings.TrimPrefix(srv.URL, "http") + "/v1/ws"
	if query != "" {
		u += "?" + query
	}
	return u
}

// dial opens a websocket; the connection is closed at cleanup.
func dial(t *testing.T, url string, hdr http.Header, protocols ...string) (*websocket.Conn, *http.Response, error) {
	t.Helper()
	d := websocket.Dialer{Subprotocols: protocols, HandshakeTimeout: 10 * time.Second}
	c, resp, err := d.Dial(url, hdr)
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
	if c != nil {
		t.Cleanup(func() { c.Close() })
	}
	return c, resp, err
}

func mustDial(t *testing.T, url string) *websocket.Conn {
	t.Helper()
	c, resp, err := dial(t, url, nil)
	if err != nil {
		t.Fatalf("dial %s: %v (response %v)", url, err, statusOf(resp))
	}
	return c
}

func statusOf(resp *http.Response) int {
	if resp == nil {
		return 0
	}
	return resp.StatusCode
}

// read reads one push, failing the test after 10 s.
func read(t *testing.T, c *websocket.Conn) pushed {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, b, err := c.ReadMessage()
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	var p pushed
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatalf("decode push %.200q: %v", b, err)
	}
	return p
}

// closeCode reads until the connection ends and returns its close code
// (websocket.CloseAbnormalClosure when it ended without a close message).
func closeCode(t *testing.T, c *websocket.Conn) int {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		_, _, err := c.ReadMessage()
		if err == nil {
			continue
		}
		var ce *websocket.CloseError
		if errors.As(err, &ce) {
			return ce.Code
		}
		t.Fatalf("connection ended with %v, want a close message", err)
	}
}

func TestWebsocketPushesSnapshots(t *testing.T) {
	api := &fakeAPI{members: 5}
	// A generous queue: this test is about delivery, not about dropping a
	// reader that the race detector slows down.
	_, srv := newTestServer(t, api, Options{Interval: 20 * time.Millisecond, ClientQueue: 100})
	c := mustDial(t, wsURL(srv, ""))

	first, second := read(t, c), read(t, c)
	for i, p := range []pushed{first, second} {
		if p.Type != "snapshot" {
			t.Fatalf("push %d: type = %q (error %q), want snapshot", i, p.Type, p.Error)
		}
		var snap fakeSnapshot
		if err := json.Unmarshal(p.Data, &snap); err != nil {
			t.Fatalf("push %d: decode data: %v", i, err)
		}
		if len(snap.Members) != 5 {
			t.Errorf("push %d: %d members, want 5", i, len(snap.Members))
		}
		owners, states := snap.SlotOwners, snap.SlotStates
		if len(owners) != numSlots || len(states) != numSlots {
			t.Fatalf("push %d: slot table of %d owners, %d states, want %d of each", i, len(owners), len(states), numSlots)
		}
		var owned [256]int
		for _, o := range owners {
			owned[o]++
		}
		for o, n := range owned {
			if (o < 5) != (n > 0) {
				t.Errorf("push %d: member index %d owns %d slots, want every one of 0-4 to own some and no other", i, o, n)
			}
		}
	}
	if second.Seq <= first.Seq {
		t.Errorf("seq went from %d to %d, want it to grow", first.Seq, second.Seq)
	}
}

func TestWebsocketAuth(t *testing.T) {
	const token = "s3cret"
	tests := []struct {
		name      string
		token     string // the handler's
		read      string // the handler's read token
		query     string
		header    string
		protocols []string
		wantOK    bool
		wantProto string
	}{
		{name: "no token configured", wantOK: true},
		{name: "no token configured, page protocol", protocols: []string{"chime.v1"}, wantOK: true, wantProto: "chime.v1"},
		{name: "missing", token: token},
		{name: "wrong query", token: token, query: "access_token=nope"},
		{name: "query", token: token, query: "access_token=" + token, wantOK: true},
		// The token is never echoed: a lone bearer protocol gets no answer.
		{name: "bearer protocol alone", token: token, protocols: []string{"bearer." + token}, wantOK: true, wantProto: ""},
		{name: "page protocols", token: token, protocols: []string{"chime.v1", "bearer." + token}, wantOK: true, wantProto: "chime.v1"},
		{name: "wrong bearer protocol", token: token, protocols: []string{"chime.v1", "bearer.nope"}},
		{name: "authorization header", token: token, header: "Bearer " + token, wantOK: true},
		{name: "wrong authorization header", token: token, header: "Bearer nope"},
		{name: "token prefix only", token: token, query: "access_token=s3cre"},
		{name: "read token, header", token: token, read: "r3ad", header: "Bearer r3ad", wantOK: true},
		{name: "read token, page protocols", token: token, read: "r3ad", protocols: []string{"chime.v1", "bearer.r3ad"}, wantOK: true, wantProto: "chime.v1"},
		{name: "read token, bearer protocol alone", token: token, read: "r3ad", protocols: []string{"bearer.r3ad"}, wantOK: true},
		{name: "read token configured, wrong one", token: token, read: "r3ad", query: "access_token=r3a"},
		{name: "read token configured, api token", token: token, read: "r3ad", query: "access_token=" + token, wantOK: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, srv := newTestServer(t, &fakeAPI{}, Options{Token: tt.token, ReadToken: tt.read, Interval: 20 * time.Millisecond, ClientQueue: 100})
			var hdr http.Header
			if tt.header != "" {
				hdr = http.Header{"Authorization": {tt.header}}
			}
			c, resp, err := dial(t, wsURL(srv, tt.query), hdr, tt.protocols...)
			if !tt.wantOK {
				if err == nil {
					t.Fatal("dial succeeded, want 401")
				}
				if got := statusOf(resp); got != http.StatusUnauthorized {
					t.Fatalf("dial status = %d, want 401", got)
				}
				return
			}
			if err != nil {
				t.Fatalf("dial: %v (status %d)", err, statusOf(resp))
			}
			if got := c.Subprotocol(); got != tt.wantProto {
				t.Errorf("subprotocol = %q, want %q", got, tt.wantProto)
			}
			for k, vs := range resp.Header {
				for _, v := range vs {
					if tt.token != "" && strings.Contains(v, tt.token) || tt.read != "" && strings.Contains(v, tt.read) {
						t.Errorf("answer header %s: %q echoes a token", k, v)
					}
				}
			}
			if p := read(t, c); p.Type != "snapshot" {
				t.Errorf("first push type = %q, want snapshot", p.Type)
			}
		})
	}
}

// TestOneSnapshotPerPush: browsers share snapshots; the API is not called
// once per browser.
func TestOneSnapshotPerPush(t *testing.T) {
	api := &fakeAPI{}
	h, srv := newTestServer(t, api, Options{Interval: 20 * time.Millisecond, ClientQueue: 100})
	conns := make([]*websocket.Conn, 3)
	for i := range conns {
		conns[i] = mustDial(t, wsURL(srv, ""))
	}
	for range 3 {
		for _, c := range conns {
			if p := read(t, c); p.Type != "snapshot" {
				t.Fatalf("push type = %q, want snapshot", p.Type)
			}
		}
	}
	h.Close()
	pushes := h.Stats().Pushes
	if got := api.calls(); uint64(got) != pushes {
		t.Errorf("API called %d times for %d pushes to 3 browsers, want one call per push", got, pushes)
	}
	if pushes < 3 {
		t.Errorf("pushes = %d, want at least 3", pushes)
	}
}

// TestHubDropsSlowClient drives the hub directly: a client that never
// takes from its queue is dropped when a push finds the queue full, while
// a client that keeps up is not.
func TestHubDropsSlowClient(t *testing.T) {
	opts := Options{Interval: 10 * time.Millisecond, ClientQueue: 2}.withDefaults()
	hb := newHub(&fakeAPI{}, opts, discardLogger())
	go hb.run()
	defer func() {
		close(hb.stop)
		<-hb.done
	}()
	slow := &client{send: make(chan *websocket.PreparedMessage, opts.ClientQueue)}
	fast := &client{send: make(chan *websocket.PreparedMessage, 1000)} // never full in this test
	hb.register <- slow
	hb.register <- fast

	// Both got the first push on registering; the slow queue is full after
	// push 2 and push 3 drops it. Once fast has push 4, the fan-out of push
	// 3 is over.
	for range 4 {
		if _, ok := <-fast.send; !ok {
			t.Fatal("the fast client was dropped")
		}
	}
	for i := range opts.ClientQueue {
		if _, ok := <-slow.send; !ok {
			t.Fatalf("slow queue closed after %d pushes, want %d queued first", i, opts.ClientQueue)
		}
	}
	if _, ok := <-slow.send; ok {
		t.Fatal("slow client got a push beyond its queue; want it dropped")
	}
	if slow.closeCode != websocket.CloseTryAgainLater {
		t.Errorf("slow client close code = %d, want %d (try again later)", slow.closeCode, websocket.CloseTryAgainLater)
	}
	if got := hb.dropped.Load(); got != 1 {
		t.Errorf("dropped = %d, want 1", got)
	}
}

// TestWebsocketDropsSlowClient: a browser that stops reading fills its
// socket buffers, then its queue; it is dropped and, once it reads again,
// finds the close message 1013 after the queued snapshots.
func TestWebsocketDropsSlowClient(t *testing.T) {
	api := &fakeAPI{blob: strings.Repeat("x", 1<<20)}
	h, srv := newTestServer(t, api, Options{Interval: 20 * time.Millisecond, ClientQueue: 1})
	c := mustDial(t, wsURL(srv, ""))
	waitFor(t, "the slow client to be dropped", func() bool { return h.Stats().Dropped == 1 })
	if got := closeCode(t, c); got != websocket.CloseTryAgainLater {
		t.Errorf("close code = %d, want %d (try again later)", got, websocket.CloseTryAgainLater)
	}
	waitFor(t, "the dropped client to be released", func() bool { return h.Stats().Clients == 0 })
}

func TestWebsocketSnapshotError(t *testing.T) {
	api := &fakeAPI{}
	api.fail(errFakeDown)
	_, srv := newTestServer(t, api, Options{Interval: 20 * time.Millisecond, ClientQueue: 100})
	c := mustDial(t, wsURL(srv, ""))
	p := read(t, c)
	if p.Type != "error" || !strings.Contains(p.Error, errFakeDown.Error()) {
		t.Fatalf("push = {type %q, error %q}, want an error push naming %q", p.Type, p.Error, errFakeDown)
	}
	api.fail(nil)
	for p.Type == "error" {
		p = read(t, c)
	}
	if p.Type != "snapshot" {
		t.Errorf("push after recovery = %q, want snapshot", p.Type)
	}
}

func TestCloseDisconnectsEveryone(t *testing.T) {
	h, srv := newTestServer(t, &fakeAPI{}, Options{Interval: 20 * time.Millisecond, ClientQueue: 100})
	a, b := mustDial(t, wsURL(srv, "")), mustDial(t, wsURL(srv, ""))
	read(t, a)
	read(t, b)
	if err := h.Close(); err != nil {
		t.Fatalf("Close() = %v", err)
	}
	for i, c := range []*websocket.Conn{a, b} {
		if got := closeCode(t, c); got != websocket.CloseGoingAway {
			t.Errorf("conn %d close code = %d, want %d (going away)", i, got, websocket.CloseGoingAway)
		}
	}
	if got := h.Stats().Clients; got != 0 {
		t.Errorf("Stats().Clients after Close = %d, want 0", got)
	}
	_, resp, err := dial(t, wsURL(srv, ""), nil)
	if err == nil || statusOf(resp) != http.StatusServiceUnavailable {
		t.Errorf("dial after Close: err %v, status %d; want 503", err, statusOf(resp))
	}
	if err := h.Close(); err != nil {
		t.Errorf("second Close() = %v", err)
	}
}

func TestCloseBeforeAnyConnection(t *testing.T) {
	h := NewHandler(&fakeAPI{}, Options{})
	if err := h.Close(); err != nil {
		t.Fatalf("Close() = %v", err)
	}
}

func TestMaxClients(t *testing.T) {
	h, srv := newTestServer(t, &fakeAPI{}, Options{Interval: 20 * time.Millisecond, MaxClients: 1, ClientQueue: 100})
	first := mustDial(t, wsURL(srv, ""))
	read(t, first)
	_, resp, err := dial(t, wsURL(srv, ""), nil)
	if err == nil || statusOf(resp) != http.StatusServiceUnavailable {
		t.Fatalf("second dial: err %v, status %d; want 503", err, statusOf(resp))
	}
	first.Close()
	waitFor(t, "the first client to be released", func() bool { return h.Stats().Clients == 0 })
	third := mustDial(t, wsURL(srv, ""))
	if p := read(t, third); p.Type != "snapshot" {
		t.Errorf("push type = %q, want snapshot", p.Type)
	}
}

// TestPingAndSilentPeer: the server pings; a peer that never answers with
// a pong is disconnected once PongWait passes.
func TestPingAndSilentPeer(t *testing.T) {
	h, srv := newTestServer(t, &fakeAPI{}, Options{Interval: time.Hour, PongWait: 100 * time.Millisecond})
	c := mustDial(t, wsURL(srv, ""))
	pinged := make(chan struct{}, 1)
	c.SetPingHandler(func(string) error { // no pong
		select {
		case pinged <- struct{}{}:
		default:
		}
		return nil
	})
	code := closeCode(t, c)
	select {
	case <-pinged:
	default:
		t.Error("no ping arrived before the server gave up")
	}
	if code != websocket.CloseNormalClosure {
		t.Errorf("close code = %d, want %d", code, websocket.CloseNormalClosure)
	}
	waitFor(t, "the silent client to be released", func() bool { return h.Stats().Clients == 0 })
}

func TestReadLimit(t *testing.T) {
	_, srv := newTestServer(t, &fakeAPI{}, Options{Interval: time.Hour, ReadLimit: 64})
	c := mustDial(t, wsURL(srv, ""))
	if err := c.WriteMessage(websocket.TextMessage, []byte(strings.Repeat("x", 1024))); err != nil {
		t.Fatalf("write: %v", err)
	}
	if got := closeCode(t, c); got != websocket.CloseMessageTooBig {
		t.Errorf("close code = %d, want %d (message too big)", got, websocket.CloseMessageTooBig)
	}
}
