package ui

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"

	"github.com/gorilla/websocket"
)

// Handler serves the dashboard: the static page under /ui/ and the
// snapshot stream on /v1/ws. Build it with NewHandler; stop it with Close.
type Handler struct {
	api      API
	opts     Options
	log      *slog.Logger
	auth     tokenCheck
	static   staticFiles
	upgrader websocket.Upgrader

	wg sync.WaitGroup // one per websocket connection being served
	mu struct {
		sync.Mutex
		closed  bool // guards: no connection is accepted once set
		clients int  // connections being served, for MaxClients
		hub     *hub // started by the first connection
	}
}

var _ http.Handler = (*Handler)(nil)

// NewHandler returns the dashboard handler for api. It serves
//
//	GET /ui/        the page (index.html), without a token
//	GET /ui/<file>  the page's scripts, styles and icon, without a token
//	GET /v1/ws      the websocket: one snapshot every opts.Interval
//
// and answers 404 to anything else, so mount it on exactly those paths.
// Nothing runs until the first websocket connects: then the hub goroutine
// starts and lives until Close. NewHandler panics if api is nil.
func NewHandler(api API, opts Options) *Handler {
	if api == nil {
		panic("ui: NewHandler with a nil API")
	}
	opts = opts.withDefaults()
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	h := &Handler{
		api:    api,
		opts:   opts,
		log:    log,
		auth:   newTokenCheck(opts.Token, opts.ReadToken),
		static: loadStatic(),
		upgrader: websocket.Upgrader{
			ReadBufferSize:  1024,
			WriteBufferSize: 4096,
			// Browsers offer permessage-deflate; a prepared message is
			// compressed once per push for all browsers. A snapshot
			// shrinks about 5× (five members) to 75× (one node; its slot
			// table is one repeated byte): see BenchmarkEncode.
			EnableCompression: true,
			// CheckOrigin stays the default: same origin only, so another
			// site's page cannot read the stream with the user's network
			// position when no token is set.
		},
	}
	return h
}

// ServeHTTP routes /ui/… to the static files and /v1/ws to the websocket.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch p := r.URL.Path; {
	case p == "/v1/ws":
		h.serveWS(w, r)
	case p == "/ui":
		http.Redirect(w, r, "/ui/", http.StatusMovedPermanently)
	case strings.HasPrefix(p, "/ui/"):
		h.static.serve(w, r, strings.TrimPrefix(p, "/ui/"))
	default:
		writeError(w, http.StatusNotFound, "not_found", "no such dashboard path: "+p)
	}
}

// serveWS upgrades to a websocket and streams snapshots until the browser
// leaves, is dropped as slow, or the handler closes.
func (h *Handler) serveWS(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		writeError(w, http.StatusMethodNotAllowed, "invalid_argument", "the websocket needs GET")
		return
	}
	if !h.auth.authorized(r) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="chime"`)
		writeError(w, http.StatusUnauthorized, "unauthenticated", "missing or wrong token (access_token, bearer.<token> subprotocol or Authorization header)", "Authorization")
		return
	}
	hb, release, err := h.acquire()
	if err != nil {
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, "unavailable", err.Error())
		return
	}
	defer release()
	var hdr http.Header
	if p := subprotocol(r); p != "" {
		hdr = http.Header{"Sec-Websocket-Protocol": {p}}
	}
	conn, err := h.upgrader.Upgrade(w, r, hdr)
	if err != nil {
		return // Upgrade has answered the request with the error
	}
	c := &client{conn: conn, remote: r.RemoteAddr, send: make(chan *websocket.PreparedMessage, h.opts.ClientQueue)}
	select {
	case hb.register <- c:
	case <-hb.done:
		_ = conn.WriteControl(websocket.CloseMessage,
			websocket.FormatCloseMessage(websocket.CloseGoingAway, "dashboard is shutting down"), deadline(h.opts.WriteWait))
		conn.Close()
		return
	}
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		c.writeLoop(h.opts)
	}()
	c.readLoop(h.opts)
	select {
	case hb.unregister <- c:
	case <-hb.done:
	}
	// The hub has closed c.send (on unregister or on stop): the writer sends
	// the close message, within WriteWait, and closes conn.
	<-writerDone
}

// Errors of acquire, answered as 503.
var (
	errClosed = errors.New("ui: the dashboard is shutting down")
	errBusy   = errors.New("ui: too many dashboard connections")
)

// acquire admits one websocket connection: it checks Close and MaxClients,
// starts the hub on first use, and returns it with the release function
// the connection must call when it is done.
func (h *Handler) acquire() (*hub, func(), error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.mu.closed {
		return nil, nil, errClosed
	}
	if h.mu.clients >= h.opts.MaxClients {
		return nil, nil, errBusy
	}
	if h.mu.hub == nil {
		h.mu.hub = newHub(h.api, h.opts, h.log)
		go h.mu.hub.run()
	}
	h.mu.clients++
	h.wg.Add(1)
	return h.mu.hub, func() {
		h.mu.Lock()
		h.mu.clients--
		h.mu.Unlock()
		h.wg.Done()
	}, nil
}

// Close disconnects every browser (close status 1001, going away), stops
// the hub and waits until every goroutine the handler started has
// returned, which takes at most Options.WriteWait for a browser that has
// stopped reading. New websocket requests then get 503; the static files
// are still served. Idempotent; it always returns nil.
func (h *Handler) Close() error {
	h.mu.Lock()
	if h.mu.closed {
		h.mu.Unlock()
		return nil
	}
	h.mu.closed = true
	hb := h.mu.hub
	h.mu.Unlock()
	if hb != nil {
		close(hb.stop)
		<-hb.done
	}
	h.wg.Wait()
	return nil
}

// Stats describes the websocket side of the dashboard.
type Stats struct {
	Clients   int    // connections being served
	Pushes    uint64 // snapshots taken and fanned out since the hub started
	Dropped   uint64 // browsers dropped because their queue was full
	LastBytes int    // size of the last pushed message, before compression
}

// Stats returns current counters. Safe for concurrent use.
func (h *Handler) Stats() Stats {
	h.mu.Lock()
	s := Stats{Clients: h.mu.clients}
	hb := h.mu.hub
	h.mu.Unlock()
	if hb != nil {
		s.Pushes, s.Dropped, s.LastBytes = hb.pushes.Load(), hb.dropped.Load(), int(hb.lastBytes.Load())
	}
	return s
}

// writeError answers with the API's error body (API.md "Errors"), naming
// field (a request field or header) when given.
func writeError(w http.ResponseWriter, status int, code, msg string, field ...string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	e := map[string]string{"code": code, "message": msg}
	if len(field) > 0 {
		e["field"] = field[0]
	}
	_ = json.NewEncoder(w).Encode(map[string]map[string]string{"error": e})
}
