package node

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/chime-scheduler/chime/ring"
	"github.com/chime-scheduler/chime/slots"
	"github.com/chime-scheduler/chime/storage"
	"github.com/vmihailenco/msgpack/v5"
)

// Replication: every write group the writer commits for slots this node
// owns is also applied by each of the slot's replicas (Board.Replicas: the
// follower the ownership machine feeds, and any node that may still hold
// its lease grant) before the group's API writes are acknowledged. The unit
// is storage.SlotOps: the exact key mutations of one slot in one group,
// tagged (slot, epoch, seq) and with the position the replica must be at
// to apply it (Prev). A replica that is not there answers "gap"; ctl then
// streams it a snapshot of the whole slot (Reset). A message below the
// replica's epoch is refused: it comes from a deposed owner, which learns
// of the newer epoch from the answer.
//
// Snapshots are the machine's SendSnapshot effects: a Reset message that
// carries the machine's Sent and Grant, after which the receiver's machine
// gets SnapshotComplete.
//
// Fire intents and results are replicated the same way but nobody waits
// for them: a fire does not cost a network round trip of its own. After a
// failover the new owner repeats the fires whose results it had not
// received yet, with the same fire id (at least once).

// maxReplBatch bounds the messages of one replication request.
const maxReplBatch = 4096

// maxSnapBytes bounds the snapshot data of one replication request (one
// snapshot always goes, however big).
const maxSnapBytes = 4 << 20

// replMsg is one slot's group, or a snapshot of the slot (Reset).
type replMsg struct {
	Slot      uint16 `msgpack:"s"`
	Epoch     uint64 `msgpack:"e"`
	Seq       uint64 `msgpack:"q"`
	PrevEpoch uint64 `msgpack:"pe"`
	PrevSeq   uint64 `msgpack:"pq"`
	Reset     bool   `msgpack:"r,omitempty"`
	// A snapshot the ownership machine sent (SendSnapshot): its Sent time
	// and Grant, for the receiver's SnapshotComplete.
	Snap  bool  `msgpack:"x,omitempty"`
	Sent  int64 `msgpack:"t,omitempty"`
	Grant bool  `msgpack:"g,omitempty"`
	// Owner: the sender owns the epoch (SendSnapshot.Owner).
	Owner bool `msgpack:"o,omitempty"`
	// SnapEpoch is the machine's epoch the snapshot speaks for (Epoch
	// and Seq are the data's position, which may be at an older epoch:
	// a node that handed a slot over keeps its data as it was).
	SnapEpoch uint64 `msgpack:"xe,omitempty"`
	Count     int    `msgpack:"n"`
	Data      []byte `msgpack:"d"`
}

func (m *replMsg) ops() storage.SlotOps {
	return storage.SlotOps{Slot: m.Slot, Count: m.Count, Data: m.Data}
}

// Results of one replMsg at the follower.
const (
	replOK    uint8 = 0
	replStale uint8 = 1 // the message's epoch is below the follower's: a deposed owner
	replGap   uint8 = 2 // the follower is not at Prev: send a Reset
	replBusy  uint8 = 3 // the follower could not apply it now (stopping, overloaded): retry
)

type replRequest struct {
	From string    `msgpack:"f"`
	Msgs []replMsg `msgpack:"m"`
}

type replAnswer struct {
	Results []uint8 `msgpack:"r"`
	// Epochs is the replica's epoch of each message's slot (for stale).
	Epochs []uint64 `msgpack:"e"`
}

// replWait is what one write group waits for: every message of it applied
// by its follower, or given up.
type replWait struct {
	mu      sync.Mutex
	left    int
	failed  map[uint16]string // slot -> why it was not replicated
	done    chan struct{}
	expires time.Time
}

func newReplWait(n int, deadline time.Time) *replWait {
	w := &replWait{left: n, done: make(chan struct{}), expires: deadline}
	if n == 0 {
		close(w.done)
	}
	return w
}

// settle marks one message done; why is empty on success.
func (w *replWait) settle(slot uint16, why string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.left == 0 {
		return
	}
	if why != "" {
		if w.failed == nil {
			w.failed = map[uint16]string{}
		}
		w.failed[slot] = why
	}
	w.left--
	if w.left == 0 {
		close(w.done)
	}
}

// result returns the slots that were not replicated, after done.
func (w *replWait) result() map[uint16]string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.failed
}

// queued is one message waiting for its replicas' answers.
type queued struct {
	msg  replMsg
	wait *replWait // nil: nobody waits (fire groups, snapshots)
	// to: a snapshot for this one node (msg is read when it is sent);
	// empty: a group for the slot's replicas.
	to    string
	sent  time.Time
	grant bool
	owner bool            // the sender owns epoch (SendSnapshot.Owner)
	epoch uint64          // a snapshot's machine epoch
	acked map[string]bool // replicas that applied it
}

// shipper sends replication messages to replicas: one round at a time,
// every queued message in it, grouped by replica and sent to all replicas
// in parallel. Messages of a slot stay in order.
type shipper struct {
	n       *Node
	timeout time.Duration // how long an API write waits for its replicas
	mu      sync.Mutex
	queue   []*queued
	// unread indexes the queue's snapshots not read yet: a machine that
	// asks again for one (its retry after Lease) refreshes it instead of
	// queueing a second copy of the slot behind a backlog.
	unread map[slotNode]*queued
	busy   int // messages of the round in progress
	closed bool
	kick   chan struct{}
	// backoff: a replica whose last call failed is not called before this
	// time (run goroutine only); failDelay is the current delay.
	backoff   map[string]time.Time
	failDelay map[string]time.Duration
	deferred  bool // the last round left snapshots over its byte budget (run goroutine only)
	stop      chan struct{}
	done      chan struct{}
}

func newShipper(n *Node, timeout time.Duration) *shipper {
	return &shipper{n: n, timeout: timeout, kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
		backoff: map[string]time.Time{}, failDelay: map[string]time.Duration{}, unread: map[slotNode]*queued{}}
}

// enqueue adds a group's messages. It never blocks.
func (s *shipper) enqueue(msgs []replMsg, wait *replWait) {
	qs := make([]*queued, len(msgs))
	for i, m := range msgs {
		qs[i] = &queued{msg: m, wait: wait}
	}
	s.add(qs)
}

// sendSnapshot queues a snapshot of slot for node to (SendSnapshot). It
// never blocks.
func (s *shipper) sendSnapshot(slot uint16, epoch uint64, to string, sent time.Time, grant, owner bool) {
	k := slotNode{slot, to}
	s.mu.Lock()
	if q, ok := s.unread[k]; ok && !s.closed {
		q.sent, q.grant, q.owner, q.epoch = sent, grant, owner, epoch // the older request is as good as lost
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	q := &queued{msg: replMsg{Slot: slot}, to: to, sent: sent, grant: grant, owner: owner, epoch: epoch}
	s.add([]*queued{q})
}

// unreadSnapshot reports whether q is a snapshot not read yet.
func unreadSnapshot(q *queued) bool { return q.to != "" && q.msg.Data == nil && !q.msg.Reset }

func (s *shipper) add(qs []*queued) {
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

// pending returns how many messages wait for a replica's acknowledgement.
func (s *shipper) pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.queue) + s.busy
}

// flush waits until every queued message was acknowledged (or max passed).
func (s *shipper) flush(ctx context.Context, max time.Duration) {
	deadline := time.Now().Add(max)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		s.mu.Lock()
		idle := len(s.queue) == 0 && s.busy == 0
		s.mu.Unlock()
		if idle {
			return
		}
		select {
		case s.kick <- struct{}{}:
		default:
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (s *shipper) close() {
	close(s.stop)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for _, q := range s.queue {
		if q.wait != nil {
			q.wait.settle(q.msg.Slot, "node is stopping")
		}
	}
	s.queue = nil
}

func (s *shipper) run() {
	defer close(s.done)
	retry := time.NewTimer(time.Hour)
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
			retry.Reset(100 * time.Millisecond)
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
func (s *shipper) round() bool {
	s.mu.Lock()
	batch := s.queue
	s.queue = nil
	clear(s.unread) // the round owns them now
	s.busy = len(batch)
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.busy = 0
		s.mu.Unlock()
	}()
	if len(batch) == 0 {
		return false
	}
	c := s.n.ctl
	v := s.n.view.Load()
	now := time.Now()
	finished := make([]bool, len(batch))
	byNode := map[string][]int{}
	finish := func(i int, why string) {
		finished[i] = true
		q := batch[i]
		if q.wait != nil {
			q.wait.settle(q.msg.Slot, why)
		}
		if why == "" && q.to == "" {
			c.Post(slots.Applied{Slot: slots.Slot(q.msg.Slot), Seq: q.msg.Seq})
		}
	}
	for _, i := range shipOrder(batch, c.Holds) {
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
			left := 0
			for _, r := range c.Replicas(slot) {
				if !q.acked[r] {
					targets = append(targets, r)
					left++
				}
			}
			if left == 0 {
				finish(i, "") // every replica has it (none: single copy, degraded)
				continue
			}
		}
		if q.wait != nil && now.After(q.wait.expires) {
			q.wait.settle(slot, "replica "+targets[0]+" did not acknowledge in time")
			q.wait = nil // keep shipping it; nobody waits any more
		}
		for _, t := range targets {
			if until, ok := s.backoff[t]; (ok && now.Before(until)) || len(byNode[t]) >= maxReplBatch {
				continue // retried later: it stays queued
			}
			byNode[t] = append(byNode[t], i)
		}
	}
	// Snapshots are read now, at the slot's current position, up to
	// maxSnapBytes per request: the rest wait for the next round, so that
	// the live writes behind them are not held up by one huge request.
	for t, idx := range byNode {
		keep := idx[:0]
		snapBytes := 0
		for _, i := range idx {
			q := batch[i]
			if unreadSnapshot(q) {
				if snapBytes >= maxSnapBytes {
					s.deferred = true
					continue // stays queued
				}
				snap, err := s.n.writer.snapshot(q.msg.Slot)
				if err != nil {
					s.n.log.Warn("snapshot for a replica", "slot", q.msg.Slot, "to", t, "err", err)
					continue
				}
				snap.Snap, snap.Sent, snap.Grant, snap.Owner, snap.SnapEpoch = true, q.sent.UnixNano(), q.grant, q.owner, q.epoch
				q.msg = snap
				snapBytes += len(snap.Data)
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
		err     error
	}
	outs := make(chan outcome, len(byNode))
	var wg sync.WaitGroup
	for name, idx := range byNode {
		if len(idx) == 0 {
			continue
		}
		mem, ok := v.member(name)
		if !ok {
			continue
		}
		target := ring.Member{Name: name, HTTPAddr: mem.Meta.HTTPAddr}
		req := replRequest{From: s.n.cfg.Name, Msgs: make([]replMsg, len(idx))}
		for k, i := range idx {
			req.Msgs[k] = batch[i].msg
		}
		wg.Go(func() {
			res, eps, err := s.n.callReplicate(target, &req)
			outs <- outcome{name, idx, res, eps, err}
		})
	}
	wg.Wait()
	close(outs)
	for o := range outs {
		if o.err != nil {
			d := s.failDelay[o.name]*2 + 100*time.Millisecond
			d = min(d, time.Second)
			s.failDelay[o.name] = d
			s.backoff[o.name] = time.Now().Add(d)
		} else {
			delete(s.failDelay, o.name)
			delete(s.backoff, o.name)
		}
		for k, i := range o.idx {
			q := batch[i]
			status := replBusy
			if o.err == nil && k < len(o.results) {
				status = o.results[k]
			}
			switch status {
			case replOK:
				if q.acked == nil {
					q.acked = map[string]bool{}
				}
				q.acked[o.name] = true
				if q.to != "" {
					finished[i] = true
				}
			case replStale:
				c.Post(slots.EpochSeen{Slot: slots.Slot(q.msg.Slot), Epoch: slots.Epoch(o.epochs[k]), From: o.name})
				finish(i, "another node holds a newer epoch of the slot")
			case replGap:
				if q.to != "" {
					finished[i] = true
					continue
				}
				c.GapSeen(q.msg.Slot, o.epochs[k], o.name)
			default:
				if o.err != nil {
					s.n.log.Debug("replicate", "to", o.name, "err", o.err)
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
			all := true
			for _, r := range c.Replicas(q.msg.Slot) {
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

// slotNode names a slot's copy at a node.
type slotNode struct {
	slot uint16
	node string
}

// shipOrder returns the order in which round considers batch: live
// writes first (clients wait for their acks), then snapshots of slots this
// node no longer owns (the final copy a handover or takeover waits for),
// then the rest (a follower or importer catching up). Within each class
// the queue's order stands.
// holds gives the epoch at which this node holds a slot (0: it does not).
func shipOrder(batch []*queued, holds func(slot uint16) uint64) []int {
	order := make([]int, 0, len(batch))
	for pass := range 3 {
		for i, q := range batch {
			class := 0
			if q.to != "" {
				class = 2
				if holds(q.msg.Slot) == 0 {
					class = 1
				}
			}
			if class == pass {
				order = append(order, i)
			}
		}
	}
	return order
}

// callReplicate sends one replication request to member m.
func (n *Node) callReplicate(m ring.Member, req *replRequest) ([]uint8, []uint64, error) {
	body, err := msgpack.Marshal(req)
	if err != nil {
		return nil, nil, err
	}
	c, err := n.fwd.do(context.Background(), m, http.MethodPost, "/internal/v1/replicate", body,
		http.Header{"Content-Type": {"application/msgpack"}}, 0)
	if err != nil {
		return nil, nil, err
	}
	if c.status != http.StatusOK {
		return nil, nil, fmt.Errorf("replicate to %s: %d %s", m.Name, c.status, c.body)
	}
	var ans replAnswer
	if err := checkMsgpack(c.body); err != nil {
		return nil, nil, fmt.Errorf("replicate to %s: the answer: %w", m.Name, err)
	}
	if err := msgpack.Unmarshal(c.body, &ans); err != nil {
		return nil, nil, err
	}
	if len(ans.Results) != len(req.Msgs) || len(ans.Epochs) != len(req.Msgs) {
		return nil, nil, errors.New("replicate: answer has the wrong number of results")
	}
	return ans.Results, ans.Epochs, nil
}

// handleReplicate is the follower's side: apply the messages through the
// writer, durably, and answer one result per message.
func (n *Node) handleReplicate(w http.ResponseWriter, r *http.Request) {
	from, body, e := n.readSigned(r, "replicate", maxReplBody)
	if e != nil {
		writeError(w, e)
		return
	}
	var req replRequest
	if err := checkMsgpack(body); err != nil {
		writeError(w, invalid("body", "replicate: %v", err))
		return
	}
	if err := msgpack.Unmarshal(body, &req); err != nil {
		writeError(w, invalid("body", "replicate: %v", err))
		return
	}
	if from != "" && req.From != from {
		writeError(w, invalid("from", "replicate: the body names sender %q, the signature %q", req.From, from))
		return
	}
	if n.ctl == nil {
		writeError(w, &Error{Code: CodeNotFound, Message: "not a cluster member"})
		return
	}
	op := &writeOp{kind: opReplica, repl: req.Msgs, from: req.From}
	if err := n.writer.submitInternal(r.Context().Done(), op); err != nil {
		writeError(w, asError(err))
		return
	}
	// Durable now: the machine may acknowledge the snapshots it got.
	for i, m := range req.Msgs {
		if m.Snap && op.replRes[i] == replOK {
			n.ctl.SnapshotApplied(slots.SnapshotComplete{Slot: slots.Slot(m.Slot), Epoch: slots.Epoch(max(m.Epoch, m.SnapEpoch)),
				Seq: op.held[i], From: req.From, Sent: time.Unix(0, m.Sent), Grant: m.Grant, Owner: m.Owner}, op.gens[i])
		}
	}
	out, _ := msgpack.Marshal(replAnswer{Results: op.replRes, Epochs: op.epochs})
	w.Header().Set("Content-Type", "application/msgpack")
	_, _ = w.Write(out)
}
