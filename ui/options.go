package ui

import (
	"log/slog"
	"time"
)

// Options configures a Handler. A zero (or negative) field takes its
// default from DefaultOptions, so Options{Token: t} is a complete
// configuration; there is no invalid Options value.
type Options struct {
	// Token, when not empty, is required on the websocket: as the query
	// parameter access_token, as a Sec-WebSocket-Protocol value
	// "bearer.<token>" (browsers cannot set headers on a websocket), or as
	// "Authorization: Bearer <token>". The static page is served without it;
	// it asks the user for the token once. Compared in constant time.
	Token string

	// ReadToken, when not empty, also opens the websocket, in the same
	// places as Token (the node's read-only token).
	ReadToken string

	// Interval is the time between two pushed snapshots, at least 10 ms.
	// Default 1 s: the node's rates are per second, and one snapshot per
	// second for all browsers together costs a node well under 1 % of a
	// core (see the README's Dashboard section).
	Interval time.Duration

	// SnapshotTimeout bounds one API.Snapshot call. Default 5 s: a snapshot
	// may include a scan of the due index for the wheel heatmap; anything
	// slower means the node is in trouble and the browsers get an error
	// message instead of a frozen page.
	SnapshotTimeout time.Duration

	// ClientQueue is how many snapshots may wait for one browser's writer,
	// besides the one being written. When a push finds the queue full the
	// browser is dropped: its connection is closed with status 1013 (try
	// again later) and the page reconnects. Default 2: a browser may fall
	// about two intervals behind (a GC pause, a busy tab) before it counts
	// as slow, and a stuck one holds at most three snapshots in memory.
	ClientQueue int

	// MaxClients caps the connected browsers; beyond it the websocket answers
	// 503. Default 64: each browser costs one writer goroutine, one reader
	// goroutine and a copy of each push in the kernel's socket buffer.
	MaxClients int

	// WriteWait is the deadline of one websocket write (a snapshot, a ping or
	// the close message). Default 10 s: ample for a large snapshot over a
	// slow link, and a peer that stopped reading frees its goroutines within
	// it (Close waits at most that long for such a peer).
	WriteWait time.Duration

	// PongWait is how long the connection may stay silent (no pong, no
	// message) before it is closed. Pings go out every 9/10 of it. Default
	// 60 s.
	PongWait time.Duration

	// ReadLimit is the largest message accepted from a browser, in bytes.
	// The page sends nothing but control frames, so a small limit stops a
	// peer from making the node buffer large messages. Default 4096.
	ReadLimit int64

	// Logger receives connection and snapshot errors; nil discards them.
	Logger *slog.Logger
}

// DefaultOptions returns the defaults every zero field of Options takes.
func DefaultOptions() Options {
	return Options{
		Interval:        time.Second,
		SnapshotTimeout: 5 * time.Second,
		ClientQueue:     2,
		MaxClients:      64,
		WriteWait:       10 * time.Second,
		PongWait:        60 * time.Second,
		ReadLimit:       4096,
	}
}

// minInterval is the shortest push interval; shorter ones are raised to it
// so a misconfiguration cannot turn the hub into a busy loop.
const minInterval = 10 * time.Millisecond

// withDefaults returns o with every zero or negative field set to its
// default, and Interval raised to at least 10 ms.
func (o Options) withDefaults() Options {
	d := DefaultOptions()
	if o.Interval <= 0 {
		o.Interval = d.Interval
	}
	o.Interval = max(o.Interval, minInterval)
	if o.SnapshotTimeout <= 0 {
		o.SnapshotTimeout = d.SnapshotTimeout
	}
	if o.ClientQueue <= 0 {
		o.ClientQueue = d.ClientQueue
	}
	if o.MaxClients <= 0 {
		o.MaxClients = d.MaxClients
	}
	if o.WriteWait <= 0 {
		o.WriteWait = d.WriteWait
	}
	if o.PongWait <= 0 {
		o.PongWait = d.PongWait
	}
	if o.ReadLimit <= 0 {
		o.ReadLimit = d.ReadLimit
	}
	return o
}

// pingPeriod is how often the writer pings: 9/10 of PongWait, so a ping's
// pong can arrive before the read deadline runs out.
func (o Options) pingPeriod() time.Duration { return o.PongWait * 9 / 10 }
