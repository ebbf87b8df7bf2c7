package node

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/chime-scheduler/chime/ring"
	"github.com/chime-scheduler/chime/storage"
	"github.com/vmihailenco/msgpack/v5"
)

// Replication: every write group the writer commits for slots this node
// owns is also applied by each slot's follower (the second member of the
// slot in the table) before the group's API writes are acknowledged. The
// unit is storage.SlotOps: the exact key mutations of one slot in one
// group, tagged (slot, epoch, seq) and with the (epoch, seq) the follower
// must be at to apply it (Prev). A follower that is not there (it is new,
// or missed messages) answers "gap" and gets a snapshot of the whole slot
// (Reset) instead. A message with an epoch below the follower's is refused:
// it comes from a deposed owner.
//
// Epochs: when a node starts owning a slot (it gained it in a view) the
// writer bumps the slot's epoch past the highest it knows, and it fires the
// slot only at that epoch. Before that it pulls the slot from its follower
// if the follower holds a newer copy (a higher epoch or seq): a node that
// comes back with old data, or that joins, resyncs first, so old data never
// overwrites newer data.
//
// Fire intents and results are replicated the same way but nobody waits
// for them: a fire does not cost a network round trip of its own. After a
// failover the new owner repeats the fires whose results it had not
// received yet, with the same fire id (at least once).

// maxReplBatch bounds the messages of one replication request.
const maxReplBatch = 4096

// replMsg is one slot's group, or a snapshot of the slot (Reset).
type replMsg struct {
	Slot      uint16 `msgpack:"s"`
	Epoch     uint64 `msgpack:"e"`
	Seq       uint64 `msgpack:"q"`
	PrevEpoch uint64 `msgpack:"pe"`
	PrevSeq   uint64 `msgpack:"pq"`
	Reset     bool   `msgpack:"r,omitempty"`
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
}

// pullRequest asks a node for the slots where it holds a newer copy than
// the caller: for each slot the caller's (epoch, seq).
type pullRequest struct {
	Slots []slotPos `msgpack:"s"`
}

type slotPos struct {
	Slot  uint16 `msgpack:"s"`
	Epoch uint64 `msgpack:"e"`
	Seq   uint64 `msgpack:"q"`
}

// pullAnswer holds a snapshot (a Reset message) for every asked slot where
// the callee's copy is newer; slots not in it are current at the caller.
type pullAnswer struct {
	Snapshots []replMsg `msgpack:"m"`
	// Epochs is the callee's epoch of every asked slot, in request order:
	// the caller takes an epoch above it.
	Epochs []uint64 `msgpack:"e"`
}

// newer reports whether position (e, q) is ahead of (e2, q2).
func newer(e, q, e2, q2 uint64) bool { return e > e2 || (e == e2 && q > q2) }

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

// queued is one message waiting for its follower's answer.
type queued struct {
	msg  replMsg
	wait *replWait // nil: nobody waits (fire groups)
}

// shipper sends replication messages to followers: one round at a time,
// every queued message in it, grouped by the slot's current follower and
// sent to all followers in parallel. Messages of a slot stay in order.
type shipper struct {
	n       *Node
	timeout time.Duration // how long an API write waits for its follower
	mu      sync.Mutex
	queue   []queued
	busy    int // messages of the round in progress
	closed  bool
	kick    chan struct{}
	// backoff: a follower whose last call failed is not called before this
	// time (run goroutine only); failDelay is the current delay.
	backoff   map[string]time.Time
	failDelay map[string]time.Duration
	stop      chan struct{}
	done      chan struct{}
}

func newShipper(n *Node, timeout time.Duration) *shipper {
	return &shipper{n: n, timeout: timeout, kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
		backoff: map[string]time.Time{}, failDelay: map[string]time.Duration{}}
}

// enqueue adds a group's messages. It never blocks.
func (s *shipper) enqueue(msgs []replMsg, wait *replWait) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		for _, m := range msgs {
			if wait != nil {
				wait.settle(m.Slot, "node is stopping")
			}
		}
		return
	}
	for _, m := range msgs {
		s.queue = append(s.queue, queued{msg: m, wait: wait})
	}
	s.mu.Unlock()
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// pending returns how many messages wait for a follower's acknowledgement.
func (s *shipper) pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.queue) + s.busy
}

// behindSlots returns the slots with queued messages their follower has
// not acknowledged, ascending.
func (s *shipper) behindSlots() []uint16 {
	s.mu.Lock()
	seen := map[uint16]bool{}
	for _, q := range s.queue {
		seen[q.msg.Slot] = true
	}
	s.mu.Unlock()
	out := make([]uint16, 0, len(seen))
	for x := range seen {
		out = append(out, x)
	}
	slices.Sort(out)
	return out
}

// behind returns how many slots are under-replicated (behindSlots).
func (s *shipper) behind() int { return len(s.behindSlots()) }

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
		if s.round() {
			retry.Reset(100 * time.Millisecond)
		}
	}
}

// round sends everything queued once. It reports whether messages are
// left for a retry.
func (s *shipper) round() bool {
	s.mu.Lock()
	batch := s.queue
	s.queue = nil
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
	v := s.n.view.Load()
	now := time.Now()
	byFollower := map[string][]int{}
	followers := map[string]ring.Member{}
	var keep []queued
	var held []int // not sent this round, in queue order
	for i, q := range batch {
		slot := q.msg.Slot
		if !q.msg.Reset && q.msg.Epoch != s.n.writer.repl.ownEpoch(slot) {
			// Written at an epoch this node no longer holds (it lost the
			// slot, or took it again at a higher epoch since): the copy
			// its follower gets now comes from the new epoch's messages.
			if q.wait != nil {
				q.wait.settle(slot, "the slot changed hands while the write was replicated")
			}
			continue
		}
		if !v.owns(slot) {
			// Not ours any more: the new owner replicates from its copy.
			if q.wait != nil {
				q.wait.settle(slot, "the slot moved to another node")
			}
			continue
		}
		f, ok := v.table.Follower(slot)
		if !ok {
			// A one-member cluster: nobody to replicate to.
			if q.wait != nil {
				q.wait.settle(slot, "")
			}
			continue
		}
		if q.wait != nil && now.After(q.wait.expires) {
			q.wait.settle(slot, "follower "+f.Name+" did not acknowledge in time")
			batch[i].wait = nil // keep shipping it; nobody waits any more
		}
		if until, ok := s.backoff[f.Name]; (ok && now.Before(until)) || len(byFollower[f.Name]) >= maxReplBatch {
			// An unreachable follower is not sent the whole queue again
			// every round; a long queue goes out in bounded requests.
			held = append(held, i)
			continue
		}
		byFollower[f.Name] = append(byFollower[f.Name], i)
		followers[f.Name] = f
	}
	type outcome struct {
		name    string
		idx     []int
		results []uint8
		err     error
	}
	outs := make(chan outcome, len(byFollower))
	var wg sync.WaitGroup
	for name, idx := range byFollower {
		req := replRequest{From: s.n.cfg.Name, Msgs: make([]replMsg, len(idx))}
		for k, i := range idx {
			req.Msgs[k] = batch[i].msg
		}
		wg.Go(func() {
			res, err := s.n.callReplicate(followers[name], &req)
			outs <- outcome{name, idx, res, err}
		})
	}
	wg.Wait()
	close(outs)
	resets := map[uint16]bool{}
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
				if q.wait != nil {
					q.wait.settle(q.msg.Slot, "")
				}
			case replStale:
				if q.msg.Epoch == s.n.writer.repl.ownEpoch(q.msg.Slot) {
					s.n.log.Warn("follower refused a replicated write: its epoch is newer", "slot", q.msg.Slot, "epoch", q.msg.Epoch)
					s.n.writer.depose(q.msg.Slot)
				}
				if q.wait != nil {
					q.wait.settle(q.msg.Slot, "another node holds a newer epoch of the slot")
				}
			case replGap:
				resets[q.msg.Slot] = true
				keep = append(keep, q)
			default:
				if o.err != nil {
					s.n.log.Debug("replicate", "err", o.err)
				}
				keep = append(keep, q)
			}
		}
	}
	// A slot that needs a snapshot: the snapshot covers every queued
	// message of it up to the snapshot's seq.
	for slot := range resets {
		snap, err := s.n.writer.snapshot(slot)
		if err != nil {
			s.n.log.Warn("snapshot for a follower", "slot", slot, "err", err)
			continue
		}
		keep = append([]queued{{msg: snap}}, keep...)
		// Messages of the slot at or below the snapshot are in it; their
		// waiters are released when the snapshot is acknowledged... kept
		// simple: they stay queued and the follower skips them as old.
	}
	// Messages are put back in queue order per slot: what was sent and
	// must be retried, then what was held back (later in the queue).
	for _, i := range held {
		keep = append(keep, batch[i])
	}
	if len(keep) > 0 {
		s.mu.Lock()
		s.queue = append(keep, s.queue...)
		s.mu.Unlock()
	}
	return len(keep) > 0
}

// callReplicate sends one replication request to member m.
func (n *Node) callReplicate(m ring.Member, req *replRequest) ([]uint8, error) {
	body, err := msgpack.Marshal(req)
	if err != nil {
		return nil, err
	}
	c, err := n.fwd.do(context.Background(), m, http.MethodPost, "/internal/v1/replicate", body,
		http.Header{"Content-Type": {"application/msgpack"}}, 0)
	if err != nil {
		return nil, err
	}
	if c.status != http.StatusOK {
		return nil, fmt.Errorf("replicate to %s: %d %s", m.Name, c.status, c.body)
	}
	var ans replAnswer
	if err := msgpack.Unmarshal(c.body, &ans); err != nil {
		return nil, err
	}
	if len(ans.Results) != len(req.Msgs) {
		return nil, errors.New("replicate: answer has the wrong number of results")
	}
	return ans.Results, nil
}

// handleReplicate is the follower's side: apply the messages through the
// writer, durably, and answer one result per message.
func (n *Node) handleReplicate(w http.ResponseWriter, r *http.Request) {
	body, e := n.readInternal(w, r)
	if e != nil {
		writeError(w, e)
		return
	}
	var req replRequest
	if err := msgpack.Unmarshal(body, &req); err != nil {
		writeError(w, invalid("body", "replicate: %v", err))
		return
	}
	op := &writeOp{kind: opReplica, repl: req.Msgs}
	if err := n.writer.submitInternal(r.Context().Done(), op); err != nil {
		writeError(w, asError(err))
		return
	}
	out, _ := msgpack.Marshal(replAnswer{Results: op.replRes})
	w.Header().Set("Content-Type", "application/msgpack")
	_, _ = w.Write(out)
}

// handlePull answers a node that is about to own slots: snapshots of the
// slots where this node's copy is newer than the caller's.
func (n *Node) handlePull(w http.ResponseWriter, r *http.Request) {
	body, e := n.readInternal(w, r)
	if e != nil {
		writeError(w, e)
		return
	}
	var req pullRequest
	if err := msgpack.Unmarshal(body, &req); err != nil {
		writeError(w, invalid("body", "pull: %v", err))
		return
	}
	snaps, epochs, err := n.writer.snapshotsIfNewer(req.Slots)
	if err != nil {
		writeError(w, asError(err))
		return
	}
	ans := pullAnswer{Snapshots: snaps, Epochs: epochs}
	out, _ := msgpack.Marshal(ans)
	w.Header().Set("Content-Type", "application/msgpack")
	_, _ = w.Write(out)
}

// readInternal reads and authenticates the body of an internal call.
func (n *Node) readInternal(w http.ResponseWriter, r *http.Request) ([]byte, *Error) {
	if n.fwd == nil {
		return nil, &Error{Code: CodeNotFound, Message: "not a cluster member"}
	}
	body, e := n.readBodyLimit(w, r, 512<<20)
	if e != nil {
		return nil, e
	}
	if !verifyCall(n.fwd.secret, r, body, n.now()) {
		return nil, &Error{Code: CodeUnauthenticated, Message: "internal endpoint: missing or bad " + hdrAuth}
	}
	return body, nil
}
