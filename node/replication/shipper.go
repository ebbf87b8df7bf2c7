package replication

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/chime-scheduler/chime/node/clock"
	"github.com/chime-scheduler/chime/slots"
)

// queued is one message waiting for its replicas' answers.
type queued struct {
	msg  Msg
	wait *Wait // nil: nobody waits (fire groups, snapshots)
	// to: a snapshot for this one node (msg is read when it is sent);
	// empty: a group for the slot's replicas.
	to    string
	sent  time.Time
	grant bool
	owner bool   // the sender owns epoch (SendSnapshot.Owner)
	final bool   // the final copy of epoch-1 (SendSnapshot.Final)
	epoch uint64 // a snapshot's machine epoch
	inc   uint64 // and the sender's incarnation and vote term
	term  uint64
	acked map[string]bool // replicas that applied it
	asked time.Time       // a snapshot: when it was last asked for (SendSnapshot)
}

// delivery is when a copy of a slot at an epoch was last applied by a
// node (Shipper.delivered).
type delivery struct {
	epoch uint64
	at    time.Time
}

// ShipperDeps is what the shipper needs of the node.
type ShipperDeps struct {
	Transport Transport
	Ownership Ownership
	Copies    Copies
	Clock     clock.Clock // nil: clock.Real
	Log       *slog.Logger
	// TableOwner returns the member the slot table gives slot to ("":
	// none); nil: unknown. A catch-up snapshot for that member (an
	// importer, whose takeover waits for it) goes before the others.
	TableOwner func(slot uint16) string
}

// Shipper sends replication messages to replicas: one round at a time,
// every queued message in it, grouped by replica and sent to all replicas
// in parallel. Messages of a slot stay in order.
type Shipper struct {
	d     ShipperDeps
	self  string // this node's name: Request.From
	mu    sync.Mutex
	queue []*queued
	// unread indexes the queue's snapshots not read yet: a machine that
	// asks again for one (its retry after Lease) refreshes it instead of
	// queueing a second copy of the slot behind a backlog.
	unread map[slotNode]*queued
	busy   int // messages of the round in progress
	closed bool
	// flushing counts the Flush calls waiting; idle is closed, and
	// replaced, when a round ends with nothing queued while one waits
	// (and by Close).
	flushing int
	idle     chan struct{}
	kick     chan struct{}
	// backoff: a replica whose last call failed is not called before this
	// time (run goroutine only); failDelay is the current delay.
	backoff   map[string]time.Time
	failDelay map[string]time.Duration
	// snapBusy: a replica that answered a snapshot Busy, or any request
	// Pressed (its store was close to a write stall), gets no owner's
	// snapshot before this time (run goroutine only); its live writes and
	// final copies go on.
	snapBusy map[string]time.Time
	// delivered: the last copy of a slot each node applied (run goroutine
	// only). A snapshot asked for before that copy's answer came is not
	// sent: the copy holds all it would (see round).
	delivered map[slotNode]delivery
	pruned    time.Time
	deferred  bool // the last round left snapshots over its byte budget (run goroutine only)
	stop      chan struct{}
	done      chan struct{}
}

// NewShipper returns the shipper of node self; Run runs it. Its times
// (Wait deadlines, backoffs) are deps.Clock's, as the writer's are.
func NewShipper(self string, deps ShipperDeps) *Shipper {
	deps.Clock = clock.Or(deps.Clock)
	return &Shipper{d: deps, self: self, kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
		idle:    make(chan struct{}),
		backoff: map[string]time.Time{}, failDelay: map[string]time.Duration{}, snapBusy: map[string]time.Time{}, unread: map[slotNode]*queued{},
		delivered: map[slotNode]delivery{}}
}

// Enqueue adds a group's messages, which wait settles (nil: nobody
// waits). It never blocks.
func (s *Shipper) Enqueue(msgs []Msg, wait *Wait) {
	qs := make([]*queued, len(msgs))
	for i, m := range msgs {
		qs[i] = &queued{msg: m, wait: wait}
	}
	s.add(qs)
}

// SendSnapshot queues a snapshot of slot for node to (the machine's
// SendSnapshot effect). It never blocks.
func (s *Shipper) SendSnapshot(ef slots.SendSnapshot) {
	slot, to := uint16(ef.Slot), ef.To
	k := slotNode{slot, to}
	now := s.d.Clock.Now()
	s.mu.Lock()
	if q, ok := s.unread[k]; ok && !s.closed {
		q.setSnap(ef) // the older request is as good as lost
		q.asked = now
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	q := &queued{msg: Msg{Slot: slot}, to: to, asked: now}
	q.setSnap(ef)
	s.add([]*queued{q})
}

// setSnap takes what the machine's SendSnapshot says of the copy.
func (q *queued) setSnap(ef slots.SendSnapshot) {
	q.sent, q.grant, q.owner, q.final = ef.Sent, ef.Grant, ef.Owner, ef.Final
	q.epoch, q.inc, q.term = uint64(ef.Epoch), ef.Inc, ef.Term
}

// FollowerReady wakes the shipper: a slot's replicas can take it over
// now, so writes that waited for that (Ownership.Replicas not safe) may be
// done. It never blocks.
func (s *Shipper) FollowerReady() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// unreadSnapshot reports whether q is a snapshot not read yet.
func unreadSnapshot(q *queued) bool { return q.to != "" && q.msg.Data == nil && !q.msg.Reset }

func (s *Shipper) add(qs []*queued) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		for _, q := range qs {
			if q.wait != nil {
				q.wait.settle(q.msg.Slot, "node is stopping")
			}
		}
		return
	}
	for _, q := range qs {
		if unreadSnapshot(q) {
			s.unread[slotNode{q.msg.Slot, q.to}] = q
		}
	}
	s.queue = append(s.queue, qs...)
	s.mu.Unlock()
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// Pending returns how many messages wait for a replica's acknowledgement.
func (s *Shipper) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.queue) + s.busy
}

// Flush waits until every queued message was acknowledged (or max passed,
// or ctx ended). Meanwhile the shipper retries what is left every
// flushRetry instead of every retryEvery.
func (s *Shipper) Flush(ctx context.Context, max time.Duration) {
	if ctx.Err() != nil || max <= 0 {
		return
	}
	s.mu.Lock()
	if len(s.queue) == 0 && s.busy == 0 {
		s.mu.Unlock()
		return
	}
	s.flushing++
	idle := s.idle
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.flushing--
		s.mu.Unlock()
	}()
	select {
	case s.kick <- struct{}{}:
	default:
	}
	t := s.d.Clock.NewTimer(max)
	defer t.Stop()
	select {
	case <-idle:
	case <-t.C:
	case <-ctx.Done():
	}
}

// snapBusyWait is how long a replica that answered a snapshot Busy gets
// no snapshot: about a memtable flush on a loaded box.
const snapBusyWait = 50 * time.Millisecond

// How soon Run retries the messages a round left: flushRetry while a
// Flush waits (a drain), else retryEvery.
const (
	retryEvery = 100 * time.Millisecond
	flushRetry = 5 * time.Millisecond
)

// Close stops Run and settles every message still queued as failed.
func (s *Shipper) Close() {
	close(s.stop)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	close(s.idle) // wakes a Flush: nothing is left to wait for
	s.idle = make(chan struct{})
	for _, q := range s.queue {
		if q.wait != nil {
			q.wait.settle(q.msg.Slot, "node is stopping")
		}
	}
	s.queue = nil
}

// Run is the shipper's goroutine, until Close.
func (s *Shipper) Run() {
	defer close(s.done)
	retry := s.d.Clock.NewTimer(time.Hour)
	retry.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-s.kick:
		case <-retry.C:
		}
		s.deferred = false
		if s.round() {
			s.mu.Lock()
			d := retryEvery
			if s.flushing > 0 {
				d = flushRetry
			}
			s.mu.Unlock()
			retry.Reset(d)
		}
		if s.deferred {
			select { // more snapshots are ready to go: no need to wait
			case s.kick <- struct{}{}:
			default:
			}
		}
	}
}

// round sends everything queued once. It reports whether messages are
// left for a retry.
func (s *Shipper) round() bool {
	s.mu.Lock()
	batch := s.queue
	s.queue = nil
	clear(s.unread) // the round owns them now
	s.busy = len(batch)
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.busy = 0
		if s.flushing > 0 && len(s.queue) == 0 {
			close(s.idle)
			s.idle = make(chan struct{})
		}
		s.mu.Unlock()
	}()
	if len(batch) == 0 {
		return false
	}
	c := s.d.Ownership
	now := s.d.Clock.Now()
	finished := make([]bool, len(batch))
	byNode := map[string][]int{}
	finish := func(i int, why string) {
		finished[i] = true
		q := batch[i]
		// The machine hears of the replica's copy before the write's
		// waiter does (TestShipperSettles reads it once the wait is done).
		if why == "" && q.to == "" {
			c.Post(slots.Applied{Slot: slots.Slot(q.msg.Slot), Seq: q.msg.Seq})
		}
		if q.wait != nil {
			q.wait.settle(q.msg.Slot, why)
		}
	}
	// A replica with a snapshot of the slot queued gets the slot's live
	// writes only once that snapshot is applied: the snapshot, read at
	// the slot's position when it goes, holds them, and a write sent
	// before it answers Gap (no copy to apply it to), which asks for
	// another snapshot of the slot. A joiner importing thousands of
	// slots from owners that kept writing got nearly every slot twice.
	//
	// A snapshot not read yet whose node applied a copy of the slot at
	// the same epoch since it was asked for is done: that copy was read
	// after the node asked (a round's copies are read at its start, and
	// answered in it) or was on its way then, and nothing written since
	// gapped into it (the writes waited for it, above). The machines ask
	// again every Lease until their copy arrives, and a copy takes longer
	// than that behind a joiner's thousands: each request read a copy
	// anew, and a joiner got most slots two to four times over.
	s.pruneDelivered(now)
	var snapTo map[slotNode]bool
	for i, q := range batch {
		if unreadSnapshot(q) {
			if d, ok := s.delivered[slotNode{q.msg.Slot, q.to}]; ok && d.epoch == q.epoch && d.at.After(q.asked) {
				finished[i] = true
				continue
			}
		}
		if q.to != "" {
			if snapTo == nil {
				snapTo = map[slotNode]bool{}
			}
			snapTo[slotNode{q.msg.Slot, q.to}] = true
		}
	}
	for _, i := range shipOrder(batch, c.Holds, s.d.TableOwner) {
		if finished[i] {
			continue
		}
		q := batch[i]
		slot := q.msg.Slot
		ep := c.Holds(slot)
		var targets []string
		if q.to != "" {
			// A snapshot the machine asked for: owners, sealers and
			// holders of a copy (after a handover or a crash) send them.
			targets = []string{q.to}
		} else {
			if q.msg.Epoch != ep {
				// Written at an epoch this node no longer holds (it lost the
				// slot, or took it again at a higher epoch since).
				finish(i, "the slot changed hands while the write was replicated")
				continue
			}
			reps, safe := c.Replicas(slot)
			for _, r := range reps {
				if !q.acked[r] {
					targets = append(targets, r)
				}
			}
			if len(targets) == 0 {
				if safe {
					finish(i, "") // every replica has it (none: single copy, degraded)
					continue
				}
				// Every replica has it, but none could take the slot over
				// yet (the follower has not acked its snapshot, or nobody
				// acked the grant): the write waits (FollowerReady).
				if q.wait != nil && now.After(q.wait.expires) {
					q.wait.settle(slot, "no replica could take the slot over in time (its follower's copy or grant not acknowledged)")
					q.wait = nil
				}
				continue
			}
		}
		if q.wait != nil && now.After(q.wait.expires) {
			q.wait.settle(slot, "replica "+targets[0]+" did not acknowledge in time")
			q.wait = nil // keep shipping it; nobody waits any more
		}
		for _, t := range targets {
			if until, ok := s.backoff[t]; (ok && now.Before(until)) || len(byNode[t]) >= maxBatch {
				continue // retried later: it stays queued
			}
			if q.to == "" && snapTo[slotNode{slot, t}] {
				continue // after the slot's snapshot to t: it stays queued
			}
			if until, ok := s.snapBusy[t]; ok && unreadSnapshot(q) && q.owner && now.Before(until) {
				continue // the replica's store is pressed: it stays queued (a final copy goes: applyAdmitted)
			}
			byNode[t] = append(byNode[t], i)
		}
	}
	// Snapshots are read now, at the slot's current position, up to
	// maxSnapBytes per request: the rest wait for the next round, so that
	// the live writes behind them are not held up by one huge request.
	// One request to the writer pins them all (a bootstrap or a failover
	// streams thousands, one per slot); their data is read here, off the
	// writer goroutine.
	for t, idx := range byNode {
		var want []uint16
		for _, i := range idx {
			if unreadSnapshot(batch[i]) {
				want = append(want, batch[i].msg.Slot)
			}
		}
		var snaps []SnapResult
		if len(want) > 0 {
			snaps = s.d.Copies.Snapshots(want, maxSnapBytes)
		}
		keep, k := idx[:0], 0
		for _, i := range idx {
			q := batch[i]
			if unreadSnapshot(q) {
				if k >= len(snaps) {
					s.deferred = true
					continue // over maxSnapBytes: stays queued
				}
				r := snaps[k]
				k++
				if r.Err != nil {
					s.d.Log.Warn("snapshot for a replica", "slot", q.msg.Slot, "to", t, "err", r.Err)
					continue
				}
				snap := r.Msg
				snap.Snap, snap.Sent, snap.Grant, snap.Owner, snap.SnapEpoch = true, q.sent.UnixNano(), q.grant, q.owner, q.epoch
				snap.SnapInc, snap.SnapTerm, snap.Final = q.inc, q.term, q.final
				q.msg = snap
			}
			keep = append(keep, i)
		}
		byNode[t] = keep
	}
	type outcome struct {
		name    string
		idx     []int
		results []uint8
		epochs  []uint64
		pressed bool
		err     error
	}
	outs := make(chan outcome, len(byNode))
	var wg sync.WaitGroup
	for name, idx := range byNode {
		if len(idx) == 0 {
			continue
		}
		req := Request{From: s.self, Msgs: make([]Msg, len(idx))}
		for k, i := range idx {
			req.Msgs[k] = batch[i].msg
		}
		wg.Go(func() {
			res, eps, pressed, err := s.call(name, &req)
			outs <- outcome{name, idx, res, eps, pressed, err}
		})
	}
	wg.Wait()
	close(outs)
	for o := range outs {
		if errors.Is(o.err, ErrUnknownMember) {
			continue // not sent: its messages stay queued
		}
		if o.err != nil {
			d := s.failDelay[o.name]*2 + 100*time.Millisecond
			d = min(d, time.Second)
			s.failDelay[o.name] = d
			s.backoff[o.name] = s.d.Clock.Now().Add(d)
		} else {
			delete(s.failDelay, o.name)
			delete(s.backoff, o.name)
			if o.pressed {
				// Its store is close to a stall: an owner's snapshot sent
				// now would wait there and likely come back Busy, read
				// and sent for nothing (a joiner pressed for seconds had
				// the same 200 slots read and sent five times). Its
				// answers to the live writes say when room came.
				s.snapBusy[o.name] = s.d.Clock.Now().Add(snapBusyWait)
			}
		}
		for k, i := range o.idx {
			q := batch[i]
			status := Busy
			if o.err == nil && k < len(o.results) {
				status = o.results[k]
			}
			switch status {
			case OK:
				if q.acked == nil {
					q.acked = map[string]bool{}
				}
				q.acked[o.name] = true
				if q.to != "" {
					finished[i] = true
					s.delivered[slotNode{q.msg.Slot, q.to}] = delivery{q.epoch, s.d.Clock.Now()}
				}
			case Stale:
				c.Post(slots.EpochSeen{Slot: slots.Slot(q.msg.Slot), Epoch: slots.Epoch(o.epochs[k]), From: o.name})
				finish(i, "another node holds a newer epoch of the slot")
			case Gap:
				if q.to != "" {
					finished[i] = true
					continue
				}
				c.GapSeen(q.msg.Slot, o.epochs[k], o.name)
			default:
				if o.err != nil {
					s.d.Log.Debug("replicate", "to", o.name, "err", o.err)
				} else if q.to != "" && q.msg.Reset {
					// Busy: read it again once the replica's store has
					// room (applyAdmitted), at the slot's position then.
					q.msg = Msg{Slot: q.msg.Slot}
					s.snapBusy[o.name] = s.d.Clock.Now().Add(snapBusyWait)
				}
			}
		}
	}
	// Groups whose every replica acked are done.
	var keep []*queued
	for i, q := range batch {
		if finished[i] {
			continue
		}
		if q.to == "" {
			reps, all := c.Replicas(q.msg.Slot)
			for _, r := range reps {
				all = all && q.acked[r]
			}
			if all {
				finish(i, "")
				continue
			}
		}
		keep = append(keep, q)
	}
	if len(keep) > 0 {
		s.mu.Lock()
		kept := keep[:0]
		for _, q := range keep {
			if unreadSnapshot(q) {
				k := slotNode{q.msg.Slot, q.to}
				if _, newer := s.unread[k]; newer {
					continue // asked again during the round: that one goes
				}
				s.unread[k] = q
			}
			kept = append(kept, q)
		}
		s.queue = append(kept, s.queue...)
		s.mu.Unlock()
	}
	return len(keep) > 0
}

// pruneDelivered forgets, once a minute, the copies applied more than a
// minute ago: a snapshot asked for since then is sent.
func (s *Shipper) pruneDelivered(now time.Time) {
	if now.Sub(s.pruned) < time.Minute {
		return
	}
	s.pruned = now
	for k, d := range s.delivered {
		if now.Sub(d.at) > time.Minute {
			delete(s.delivered, k)
		}
	}
}

// applyAdmitted applies msgs; those with snapshots wait for room in the
// store first (Copies.AdmitSnapshots), and when it had none in time the
// snapshots are answered Busy unapplied (the sender reads them again
// later: round) while the live writes apply. A joiner importing hundreds
// of thousands of tasks from three owners at once filled its memtables
// faster than pebble flushed them, and each write stall held up its
// ownership states and so its acks: the owners' leases of every slot it
// followed ran out, and their tasks waited seconds.
//
// Only an owner's copy waits (deferrable): a follower's is the final copy
// a handover or takeover waits for (the machine sends one only to the node
// taking the slot), one slot each; deferred with the bulk of a joiner's
// import, a joiner's handovers waited seconds for theirs, and it was not
// ready for as long.
func applyAdmitted(ctx context.Context, c Copies, from string, msgs []Msg) (Applied, error) {
	snaps := 0
	for _, m := range msgs {
		if deferrable(m) {
			snaps++
		}
	}
	if snaps == 0 || c.AdmitSnapshots(ctx.Done()) {
		return c.Apply(ctx.Done(), from, msgs)
	}
	n := len(msgs)
	a := Applied{Results: make([]uint8, n), Epochs: make([]uint64, n), Gens: make([]uint64, n), Held: make([]uint64, n)}
	admitted := make([]Msg, 0, n-snaps)
	at := make([]int, 0, n-snaps)
	for i, m := range msgs {
		if deferrable(m) {
			a.Results[i] = Busy
			continue
		}
		admitted = append(admitted, m)
		at = append(at, i)
	}
	if len(admitted) == 0 {
		return a, nil
	}
	b, err := c.Apply(ctx.Done(), from, admitted)
	if err != nil {
		return Applied{}, err
	}
	for k, i := range at {
		a.Results[i], a.Epochs[i], a.Gens[i], a.Held[i] = b.Results[k], b.Epochs[k], b.Gens[k], b.Held[k]
	}
	return a, nil
}

// deferrable reports whether m is a snapshot that may wait for room in
// a pressed store (applyAdmitted): an owner's copy.
func deferrable(m Msg) bool { return m.Reset && m.Owner }

// slotNode names a slot's copy at a node.
type slotNode struct {
	slot uint16
	node string
}

// shipOrder returns the order in which round considers batch: live
// writes first (clients wait for their acks), then snapshots of slots this
// node no longer owns (the final copy a handover or takeover waits for),
// then catch-up snapshots for the member the table gives the slot to (an
// importer: it takes the slot over once caught up, and a joiner is ready
// when it has all of its slots), then the rest (a follower catching up).
// Within each class the queue's order stands. holds gives the epoch at
// which this node holds a slot (0: it does not); owner the slot's table
// owner (nil: the last two classes are one).
func shipOrder(batch []*queued, holds func(slot uint16) uint64, owner func(slot uint16) string) []int {
	order := make([]int, 0, len(batch))
	for pass := range 4 {
		for i, q := range batch {
			class := 0
			switch {
			case q.to == "":
			case holds(q.msg.Slot) == 0:
				class = 1
			case owner != nil && owner(q.msg.Slot) == q.to:
				class = 2
			default:
				class = 3
			}
			if class == pass {
				order = append(order, i)
			}
		}
	}
	return order
}

// call sends one replication request to node to; pressed is the
// answer's Pressed.
func (s *Shipper) call(to string, req *Request) (_ []uint8, _ []uint64, pressed bool, _ error) {
	body := encodeRequest(req)
	out, err := s.d.Transport.Call(context.Background(), to, PathReplicate, "application/msgpack", body)
	if err != nil {
		return nil, nil, false, fmt.Errorf("replicate to %s: %w", to, err)
	}
	if err := checkMsgpack(out); err != nil {
		return nil, nil, false, fmt.Errorf("replicate to %s: the answer: %w", to, err)
	}
	ans, err := decodeAnswer(out)
	if err != nil {
		return nil, nil, false, fmt.Errorf("replicate to %s: the answer: %w", to, err)
	}
	if len(ans.Results) != len(req.Msgs) || len(ans.Epochs) != len(req.Msgs) {
		return nil, nil, false, errors.New("replicate: answer has the wrong number of results")
	}
	return ans.Results, ans.Epochs, ans.Pressed, nil
}

// Receive is the replica's side of POST PathReplicate, for a body signed
// by from ("": the signature names no sender): apply the messages through
// the writer (c), durably, and answer one result per message. The caller
// has authenticated the call and bounded the body.
func Receive(ctx context.Context, c Copies, o Ownership, from string, body []byte) ([]byte, error) {
	if err := checkMsgpack(body); err != nil {
		return nil, &BadRequest{"body", fmt.Errorf("replicate: %w", err)}
	}
	req, err := decodeRequest(body)
	if err != nil {
		return nil, &BadRequest{"body", err}
	}
	if from != "" && req.From != from {
		return nil, &BadRequest{"from", fmt.Errorf("replicate: the body names sender %q, the signature %q", req.From, from)}
	}
	a, err := applyAdmitted(ctx, c, req.From, req.Msgs)
	if err != nil {
		return nil, err
	}
	// Durable now: the machine may acknowledge the snapshots it got.
	for i, m := range req.Msgs {
		if m.Snap && a.Results[i] == OK {
			o.SnapshotApplied(slots.SnapshotComplete{Slot: slots.Slot(m.Slot), Epoch: slots.Epoch(max(m.Epoch, m.SnapEpoch)),
				Seq: a.Held[i], From: req.From, Sent: time.Unix(0, m.Sent), Grant: m.Grant, Owner: m.Owner, Inc: m.SnapInc, Term: m.SnapTerm, Final: m.Final}, a.Gens[i])
		}
	}
	return encodeAnswer(&Answer{Results: a.Results, Epochs: a.Epochs, Pressed: c.Pressed()}), nil
}
