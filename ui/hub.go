package ui

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
)

// message is one push to the browsers. Type is "snapshot" (Data holds the
// API's snapshot) or "error" (Error says why there is none this time). Seq
// counts pushes since the hub started.
type message struct {
	Type  string `json:"type"`
	Seq   uint64 `json:"seq"`
	Data  any    `json:"data,omitempty"`
	Error string `json:"error,omitempty"`
}

// hub owns the set of connected browsers. Its run goroutine is the only one
// that touches clients: it registers and unregisters them, takes one
// snapshot per interval (not one per browser) and hands the same encoded
// message to every browser's queue without blocking. A browser whose queue
// is full is dropped: slow readers must not slow the node or the others.
//
// The ticker runs only while at least one browser is connected, so an
// unwatched dashboard costs one parked goroutine and no snapshots.
type hub struct {
	api  API
	opts Options
	log  *slog.Logger

	ctx    context.Context // ends when the hub stops; bounds API calls
	cancel context.CancelFunc

	register   chan *client  // unbuffered: the handler waits for the hub
	unregister chan *client  // unbuffered
	stop       chan struct{} // closed by Handler.Close
	done       chan struct{} // closed when run returns

	pushes    atomic.Uint64
	dropped   atomic.Uint64
	lastBytes atomic.Int64
}

func newHub(api API, opts Options, log *slog.Logger) *hub {
	ctx, cancel := context.WithCancel(context.Background())
	return &hub{
		api: api, opts: opts, log: log,
		ctx: ctx, cancel: cancel,
		register:   make(chan *client),
		unregister: make(chan *client),
		stop:       make(chan struct{}),
		done:       make(chan struct{}),
	}
}

// run is the hub's goroutine. It returns after stop is closed, having
// closed every remaining client's queue.
func (h *hub) run() {
	defer close(h.done)
	defer h.cancel()
	clients := make(map[*client]struct{})
	var (
		ticker *time.Ticker
		tick   <-chan time.Time // nil (disabled) while nobody is connected
		last   *websocket.PreparedMessage
		seq    uint64
		failed bool // the previous snapshot failed; log only transitions
	)
	push := func() {
		seq++
		last = h.encode(seq, &failed)
		for c := range clients {
			select {
			case c.send <- last:
			default:
				delete(clients, c)
				c.drop(websocket.CloseTryAgainLater, "too slow: snapshots were not read in time")
				h.dropped.Add(1)
				h.log.Warn("dashboard client dropped: too slow", "remote", c.remote)
			}
		}
	}
	idle := func() {
		if len(clients) == 0 && ticker != nil {
			ticker.Stop()
			ticker, tick, last = nil, nil, nil
		}
	}
	for {
		select {
		case c := <-h.register:
			clients[c] = struct{}{}
			if ticker == nil {
				ticker = time.NewTicker(h.opts.Interval)
				tick = ticker.C
				push() // the first browser sees data at once, not after an interval
			} else {
				c.send <- last // room: a new queue is empty
			}
		case c := <-h.unregister:
			if _, ok := clients[c]; ok {
				delete(clients, c)
				c.drop(websocket.CloseNormalClosure, "")
			}
			idle()
		case <-tick:
			push()
			idle()
		case <-h.stop:
			if ticker != nil {
				ticker.Stop()
			}
			for c := range clients {
				c.drop(websocket.CloseGoingAway, "dashboard is shutting down")
			}
			return
		}
	}
}

// encode takes one snapshot and encodes it as the message every browser
// gets. failed carries the previous outcome so that a failing API logs once
// per failure streak, not once per interval.
func (h *hub) encode(seq uint64, failed *bool) *websocket.PreparedMessage {
	ctx, cancel := context.WithTimeout(h.ctx, h.opts.SnapshotTimeout)
	v, err := h.api.Snapshot(ctx)
	cancel()
	m := message{Type: "snapshot", Seq: seq, Data: v}
	if err != nil {
		m = message{Type: "error", Seq: seq, Error: "snapshot: " + err.Error()}
	}
	b, encErr := json.Marshal(m)
	if encErr != nil {
		err = encErr
		b, _ = json.Marshal(message{Type: "error", Seq: seq, Error: "encode snapshot: " + encErr.Error()})
	}
	switch {
	case err != nil && !*failed:
		h.log.Warn("dashboard snapshot failed", "err", err)
	case err == nil && *failed:
		h.log.Info("dashboard snapshot recovered")
	}
	*failed = err != nil
	h.pushes.Add(1)
	h.lastBytes.Store(int64(len(b)))
	pm, err := websocket.NewPreparedMessage(websocket.TextMessage, b)
	if err != nil {
		// NewPreparedMessage fails only for an invalid message type.
		panic("ui: prepare a text message: " + err.Error())
	}
	return pm
}
