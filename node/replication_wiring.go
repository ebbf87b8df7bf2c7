package node

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/chime-scheduler/chime/node/clock"
	"github.com/chime-scheduler/chime/node/forward"
	"github.com/chime-scheduler/chime/node/internalauth"
	"github.com/chime-scheduler/chime/node/metrics"
	"github.com/chime-scheduler/chime/node/replication"
	"github.com/chime-scheduler/chime/ring"
)

// The wiring of the replication shipper and the anti-entropy checker
// (package node/replication): the node's parts behind the small
// interfaces they take, and their endpoints.

// replTimeout bounds how long an API write waits for its followers.
const replTimeout = 10 * time.Second

// peers is the replication's Transport: signed calls through the
// forwarder to the members of the current view.
type peers struct {
	fwd  *forward.Client
	view func() *view
}

func (p peers) Call(ctx context.Context, to, path, contentType string, body []byte) ([]byte, error) {
	mem, ok := p.view().member(to)
	if !ok {
		return nil, replication.ErrUnknownMember
	}
	return p.fwd.Post(ctx, ring.Member{Name: to, HTTPAddr: mem.Meta.HTTPAddr}, path, contentType, body)
}

// replData is the writer as the replication sees it: its Copies and Sums.
type replData struct{ w *writer }

func (d replData) Snapshots(ss []uint16, maxBytes int) []replication.SnapResult {
	return d.w.snapshots(ss, maxBytes)
}

func (d replData) Apply(done <-chan struct{}, from string, msgs []replication.Msg) (replication.Applied, error) {
	op := &replicaOp{writeOp: writeOp{kind: opReplica}, msgs: msgs, from: from}
	if err := d.w.submitInternal(done, op); err != nil {
		return replication.Applied{}, err
	}
	return op.applied, nil
}

// AdmitSnapshots is replication.Copies' (snapAdmission).
func (d replData) AdmitSnapshots(done <-chan struct{}) bool { return d.w.snaps.admit(done) }

// Pressed is replication.Copies'.
func (d replData) Pressed() bool { return d.w.snaps.pressedLately() }

// pressedLately is pressed, asked at most every snapAdmitPoll: every
// replication request's answer carries it, and the store's answer takes
// pebble's metrics lock.
func (a *snapAdmission) pressedLately() bool {
	now := a.clock.Now().UnixNano()
	if now-a.latelyAt.Load() < int64(snapAdmitPoll) {
		return a.lately.Load()
	}
	p := a.pressed()
	a.lately.Store(p)
	a.latelyAt.Store(now)
	return p
}

// Snapshot admission: how long a replication request's snapshots wait
// for room in the store, and how often they look.
const (
	snapAdmitWait = 500 * time.Millisecond
	snapAdmitPoll = 10 * time.Millisecond
)

// snapAdmission is a replica's wait for room for the snapshots of a
// replication request: in arrival order (turn, cap 1), until pressed
// (storage.Store.Pressed) is false, for at most snapAdmitWait in all. The
// turn is given up once admitted: the applies themselves run side by side.
type snapAdmission struct {
	turn    chan struct{}
	pressed func() bool
	clock   clock.Clock
	// lately: pressed's last answer, and when (unix ns), for the answers
	// to every replication request (pressedLately).
	lately   atomic.Bool
	latelyAt atomic.Int64
}

func newSnapAdmission(pressed func() bool, c clock.Clock) *snapAdmission {
	return &snapAdmission{turn: make(chan struct{}, 1), pressed: pressed, clock: c}
}

// admit reports whether the snapshots may apply now; false when no room
// came within snapAdmitWait or done ended first.
func (a *snapAdmission) admit(done <-chan struct{}) bool {
	deadline := a.clock.Now().Add(snapAdmitWait)
	t := a.clock.NewTimer(snapAdmitWait)
	defer t.Stop()
	select {
	case a.turn <- struct{}{}:
	case <-t.C:
		return false
	case <-done:
		return false
	}
	defer func() { <-a.turn }()
	for a.pressed() {
		wait := min(snapAdmitPoll, deadline.Sub(a.clock.Now()))
		if wait <= 0 {
			return false
		}
		t.Reset(wait)
		select {
		case <-t.C:
		case <-done:
			return false
		}
	}
	return true
}

func (d replData) Position(slot uint16) (epoch, seq uint64) {
	m := d.w.repl.position(slot)
	return m.Epoch, m.Seq
}

func (d replData) Sums(done <-chan struct{}, ss []uint16) ([]replication.Item, error) {
	op := &sumsOp{writeOp: writeOp{kind: opSums}, slots: ss}
	if err := d.w.submitInternal(done, op); err != nil {
		return nil, err
	}
	return op.items, nil
}

func (d replData) Check(done <-chan struct{}, version byte, items []replication.Item) ([]uint8, []uint64, error) {
	op := &checkSumsOp{writeOp: writeOp{kind: opCheckSums}, items: items, version: version}
	if err := d.w.submitInternal(done, op); err != nil {
		return nil, nil, err
	}
	return op.results, op.epochs, nil
}

func (d replData) Repair(slot uint16) (was, now replication.Checksum, err error) {
	w, i, err := d.w.store.RepairSlotChecksum(slot)
	return replication.Checksum(w), replication.Checksum(i), err
}

// aeMetrics counts the checker's outcomes in the node's metrics.
type aeMetrics struct{ m *metrics.Metrics }

func (a aeMetrics) Checked(res uint8) {
	switch res {
	case replication.Match:
		a.m.AeMatch.Inc()
	case replication.Mismatch:
		a.m.AeMismatch.Inc()
	default:
		a.m.AeNotComparable.Inc()
	}
}

func (a aeMetrics) Resynced() { a.m.AeResyncs.Inc() }

// handleReplicate is the replica's side of replication.PathReplicate.
func (n *Node) handleReplicate(w http.ResponseWriter, r *http.Request) {
	from, body, e := n.guard.Read(r, "replicate", internalauth.MaxReplBody)
	serveRepl(w, e, n.ctl == nil, "application/msgpack", func() ([]byte, error) {
		return replication.Receive(r.Context(), replData{n.writer}, n.ctl, from, body)
	})
}

// handleAntiEntropy is the replica's side of replication.PathAntiEntropy.
func (n *Node) handleAntiEntropy(w http.ResponseWriter, r *http.Request) {
	_, body, e := n.guard.Read(r, "antientropy", internalauth.MaxAEBody)
	serveRepl(w, e, n.ctl == nil, "application/octet-stream", func() ([]byte, error) {
		return replication.AnswerSums(r.Context(), replData{n.writer}, body)
	})
}

// serveRepl answers a replication endpoint: e, the call's authentication
// (Guard.Read), and standalone refuse it before anything of the body is
// decoded; then answer decodes, checks and applies it. A request refused
// for what it says is a 400 naming the field.
func serveRepl(w http.ResponseWriter, e *Error, standalone bool, contentType string, answer func() ([]byte, error)) {
	if e == nil && standalone {
		e = &Error{Code: CodeNotFound, Message: "not a cluster member"}
	}
	if e != nil {
		writeError(w, e)
		return
	}
	out, err := answer()
	var bad *replication.BadRequest
	switch {
	case errors.As(err, &bad):
		writeError(w, invalid(bad.Field, "%v", bad.Err))
	case err != nil:
		writeError(w, asError(err))
	default:
		w.Header().Set("Content-Type", contentType)
		_, _ = w.Write(out)
	}
}
