package node

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/chime-scheduler/chime/ring"
	"github.com/chime-scheduler/chime/slots"
	"github.com/chime-scheduler/chime/storage"
)

// Anti-entropy: the owner of a slot periodically sends each of the slot's
// replicas its checksum of the slot (storage.Store.SlotChecksum: an
// order-independent digest of the slot's data keys, kept by every commit)
// together with the position it was taken at, (epoch, seq). Both sides
// read checksum and position on their writer goroutine right after a
// group's commit, where no write to the slot can fall between the two
// (opSums, opCheckSums). A replica compares only when it is at exactly that
// position: then the two copies must be equal, whatever was in flight
// before or after. A replica elsewhere (behind, ahead, resyncing) answers
// "not comparable" and the slot is tried again in a later pass.
//
// A mismatch resyncs the replica's copy through the path a replication gap
// takes: the owner posts GapSeen for (slot, replica) to its ctl, whose
// machine sends the replica a snapshot (slots.SnapshotRequest ->
// SendSnapshot). If the same replica mismatches again, the owner first
// recomputes its own checksum (storage.RepairSlotChecksum): a replica's
// checksum right after a snapshot is exact, so a second mismatch may be
// the owner's own checksum gone wrong; only if the repair changes nothing
// is the replica resynced again.
//
// A pass over all slots takes AntiEntropyInterval, in aeRounds ticks of a
// slice each. A slot whose position has not moved since it was verified
// against a replica is skipped for aeRecheck intervals, so an idle node
// sends almost nothing; after that it is verified again (a copy can change
// without its position moving: a write that raced a move, a bug).

// aeRounds is how many ticks one pass over all slots is spread over: a
// tick checks slots.Count/aeRounds slots (1024), so one request per replica
// carries at most that many items (~40 KB), every AntiEntropyInterval/16.
const aeRounds = 16

// aeRecheck is how many passes a slot verified at an unchanged position is
// skipped: 10 × 30 s re-verifies every idle slot every 5 minutes, for the
// divergences that do not move a position.
const aeRecheck = 10

// Results of comparing one slot, as the replica answers them.
const (
	aeMatch         uint8 = 1 + iota // same position, same checksum
	aeMismatch                       // same position, different checksum: resync
	aeNotComparable                  // not at that position (or not a replica now, or another checksum version)
)

// aeItem is a slot's checksum at a position of its owner.
type aeItem struct {
	Slot  uint16
	Epoch uint64
	Seq   uint64
	// HasAlt: the owner took its epoch Epoch and has written nothing to
	// the slot since, so a replica still at (AltEpoch, Seq), the position
	// before, holds the same data (see writerRepl.bumpPrev).
	HasAlt   bool
	AltEpoch uint64
	Sum      uint64
	Count    uint64
}

// aeRequest is POST /internal/v1/antientropy (antientropy_wire.go).
type aeRequest struct {
	From string
	// Version is the sender's storage.ChecksumVersion: checksums of
	// different schemes do not compare.
	Version byte
	Items   []aeItem
}

// aeAnswer has one result per item, and the replica's epoch of each slot
// (the resync request carries it, as a gap's does).
type aeAnswer struct {
	Results []uint8
	Epochs  []uint64
}

// compareSums compares the owner's item with this node's copy of the slot:
// its data position pos and checksum sum, read together.
func compareSums(pos storage.SlotMeta, sum storage.Checksum, it aeItem) uint8 {
	if pos.Seq != it.Seq || (pos.Epoch != it.Epoch && !(it.HasAlt && pos.Epoch == it.AltEpoch)) {
		return aeNotComparable
	}
	if sum != (storage.Checksum{Sum: it.Sum, Count: it.Count}) {
		return aeMismatch
	}
	return aeMatch
}

// aeOp is the anti-entropy part of a writeOp.
type aeOp struct {
	items   []aeItem // opSums: the result; opCheckSums: the owner's items
	version byte     // opCheckSums: the owner's checksum version
	results []uint8  // opCheckSums: one per item
	epochs  []uint64 // opCheckSums: this node's epoch of each item's slot
}

// readsAfterCommit reports whether ops of kind k read the store once the
// group's writes are committed (answerSums).
func (k opKind) readsAfterCommit() bool { return k == opSums || k == opCheckSums }

// answerSums answers the group's opSums and opCheckSums, on the writer
// goroutine after the group's commit: every slot's position (its meta, set
// in the same batch) and its checksum (kept by the same commit) describe
// the same data. A failed commit leaves them to finish, which reports it.
func (w *writer) answerSums(g *syncGroup) {
	if !g.sums || g.err != nil {
		return
	}
	for _, op := range g.ops {
		if !op.kind.readsAfterCommit() {
			continue
		}
		if op.kind == opSums {
			op.err = w.readSums(op)
		} else {
			op.err = w.checkSums(op)
		}
		close(op.reply)
		op.answered = true
	}
}

// readSums fills op.ae.items with the position and checksum of op.slots.
func (w *writer) readSums(op *writeOp) error {
	op.ae.items = make([]aeItem, 0, len(op.slots))
	for _, s := range op.slots {
		m := w.repl.position(s)
		sum, err := w.store.SlotChecksum(s)
		if err != nil {
			return err
		}
		it := aeItem{Slot: s, Epoch: m.Epoch, Seq: m.Seq, Sum: sum.Sum, Count: sum.Count}
		if bp, ok := w.repl.bumpPrev[s]; ok && bp.Seq == m.Seq {
			it.HasAlt, it.AltEpoch = true, bp.Epoch
		}
		op.ae.items = append(op.ae.items, it)
	}
	return nil
}

// checkSums compares the owner's items with this node's copies. A slot this
// node holds as owner is not compared: the machine settles who owns it.
func (w *writer) checkSums(op *writeOp) error {
	op.ae.results = make([]uint8, len(op.ae.items))
	op.ae.epochs = make([]uint64, len(op.ae.items))
	for i, it := range op.ae.items {
		role, known, _ := w.ctl.State(it.Slot)
		op.ae.epochs[i] = known
		op.ae.results[i] = aeNotComparable
		if op.ae.version != storage.ChecksumVersion || role == slots.RoleOwner || role == slots.RoleSealing {
			continue
		}
		sum, err := w.store.SlotChecksum(it.Slot)
		if err != nil {
			return err
		}
		op.ae.results[i] = compareSums(w.repl.position(it.Slot), sum, it)
	}
	return nil
}

// aeVerified is the position at which a slot last matched a replica.
type aeVerified struct {
	epoch, seq uint64
	at         time.Time
}

// aeAction is what the owner does after a replica's answer.
type aeAction uint8

const (
	aeNone             aeAction = iota
	aeResync                    // ask for the replica's resync
	aeRepairThenResync          // check the owner's own checksum; resync if it was right
)

// aeState is the owner's memory of its checks, per (slot, replica): pure
// (time comes in as a value), owned by the antiEntropy goroutine.
type aeState struct {
	recheck time.Duration // a verified, unmoved pair is checked again after this
	hold    time.Duration // a resynced pair is not checked again within this
	// verified: where each pair last matched; held: pairs resynced, until
	// when; misses: mismatches in a row.
	verified map[slotNode]aeVerified
	held     map[slotNode]time.Time
	misses   map[slotNode]int
}

func newAEState(recheck, hold time.Duration) *aeState {
	return &aeState{recheck: recheck, hold: hold, verified: map[slotNode]aeVerified{},
		held: map[slotNode]time.Time{}, misses: map[slotNode]int{}}
}

// due reports whether pair k, its slot now at (epoch, seq) on the owner,
// is to be checked at now: not while a resync of it may be in flight, and
// not when it matched at this very position less than recheck ago.
func (st *aeState) due(k slotNode, epoch, seq uint64, now time.Time) bool {
	if until, ok := st.held[k]; ok {
		if now.Before(until) {
			return false
		}
		delete(st.held, k)
	}
	v, ok := st.verified[k]
	return !ok || v.epoch != epoch || v.seq != seq || now.Sub(v.at) >= st.recheck
}

// record notes the replica's answer res for item it of pair k and returns
// what to do.
func (st *aeState) record(k slotNode, it aeItem, res uint8, now time.Time) aeAction {
	switch res {
	case aeMatch:
		st.verified[k] = aeVerified{epoch: it.Epoch, seq: it.Seq, at: now}
		delete(st.misses, k)
	case aeMismatch:
		delete(st.verified, k)
		st.held[k] = now.Add(st.hold)
		st.misses[k]++
		if st.misses[k] >= 2 {
			return aeRepairThenResync
		}
		return aeResync
	}
	return aeNone
}

// antiEntropy runs the owner's side of the checks (see the top of this
// file) on one goroutine.
type antiEntropy struct {
	n        *Node
	interval time.Duration
	st       *aeState
	next     int // the first slot of the next tick
	stop     chan struct{}
	done     chan struct{}
}

func newAntiEntropy(n *Node, interval time.Duration) *antiEntropy {
	// Hold a resynced pair for twice the lease: ctl asks for one snapshot
	// per (slot, replica) within a lease, so a check sooner could count a
	// resync that is not made.
	return &antiEntropy{n: n, interval: interval, st: newAEState(aeRecheck*interval, 2*n.lease),
		stop: make(chan struct{}), done: make(chan struct{})}
}

func (a *antiEntropy) run() {
	defer close(a.done)
	t := time.NewTicker(max(a.interval/aeRounds, time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-a.stop:
			return
		case <-t.C:
		}
		a.tick(time.Now())
	}
}

func (a *antiEntropy) close() {
	close(a.stop)
	<-a.done
}

// tick checks the next slice of slots: those this node owns with a
// replica that is not under-replicated (its follower is catching up: a
// new follower, a resync in flight), and of them the ones due
// (aeState.due).
func (a *antiEntropy) tick(now time.Time) {
	n, c := a.n, a.n.ctl
	per := slots.Count / aeRounds
	from := a.next
	a.next = (from + per) % slots.Count
	var cand []uint16
	due := map[uint16][]string{}
	under, _ := c.Flagged() // ascending
	for s := uint16(from); int(s) < from+per; s++ {
		if role, _, _ := c.State(s); role != slots.RoleOwner {
			continue
		}
		if _, ok := slices.BinarySearch(under, s); ok {
			continue // its follower is being fed a snapshot: nothing to compare yet
		}
		m := n.writer.repl.position(s)
		for _, r := range c.Replicas(s) {
			if a.st.due(slotNode{s, r}, m.Epoch, m.Seq, now) {
				due[s] = append(due[s], r)
			}
		}
		if len(due[s]) > 0 {
			cand = append(cand, s)
		}
	}
	if len(cand) == 0 {
		return
	}
	op := &writeOp{kind: opSums, slots: cand}
	if err := n.writer.submitInternal(a.stop, op); err != nil {
		return
	}
	byNode := map[string][]aeItem{}
	for _, it := range op.ae.items {
		for _, r := range due[it.Slot] {
			byNode[r] = append(byNode[r], it)
		}
	}
	type outcome struct {
		to    string
		items []aeItem
		ans   aeAnswer
		err   error
	}
	v := n.view.Load()
	outs := make(chan outcome, len(byNode))
	var wg sync.WaitGroup
	for to, items := range byNode {
		mem, ok := v.member(to)
		if !ok {
			continue
		}
		target := ring.Member{Name: to, HTTPAddr: mem.Meta.HTTPAddr}
		wg.Go(func() {
			ans, err := n.callAntiEntropy(target, &aeRequest{From: n.cfg.Name, Version: storage.ChecksumVersion, Items: items},
				min(a.interval, 5*time.Second))
			outs <- outcome{to, items, ans, err}
		})
	}
	wg.Wait()
	close(outs)
	for o := range outs {
		if o.err != nil {
			n.log.Debug("anti-entropy check", "to", o.to, "err", o.err)
			continue
		}
		for k, it := range o.items {
			a.answered(slotNode{it.Slot, o.to}, it, o.ans.Results[k], o.ans.Epochs[k], now)
		}
	}
}

// answered acts on replica k.node's answer res for item it.
func (a *antiEntropy) answered(k slotNode, it aeItem, res uint8, epoch uint64, now time.Time) {
	n := a.n
	switch res {
	case aeMatch:
		n.metrics.aeMatch.Inc()
	case aeMismatch:
		n.metrics.aeMismatch.Inc()
	default:
		n.metrics.aeNotComparable.Inc()
	}
	switch a.st.record(k, it, res, now) {
	case aeNone:
		return
	case aeRepairThenResync:
		was, is, err := n.store.RepairSlotChecksum(k.slot)
		if err != nil {
			n.log.Warn("anti-entropy: recompute own checksum", "slot", k.slot, "err", err)
			return
		}
		if was != is {
			n.log.Warn("anti-entropy: this owner's checksum of a slot was wrong; repaired, not resyncing its replica",
				"slot", k.slot, "replica", k.node, "was", was.String(), "now", is.String())
			return
		}
	}
	n.log.Warn("anti-entropy: a replica's copy of a slot differs; resyncing it", "slot", k.slot, "replica", k.node,
		"epoch", it.Epoch, "seq", it.Seq, "owner_checksum", storage.Checksum{Sum: it.Sum, Count: it.Count}.String())
	n.metrics.aeResyncs.Inc()
	// The path a replication gap takes: the machine streams the replica a
	// snapshot of the slot.
	n.ctl.GapSeen(k.slot, epoch, k.node)
}

// callAntiEntropy sends one check request to member m.
func (n *Node) callAntiEntropy(m ring.Member, req *aeRequest, timeout time.Duration) (aeAnswer, error) {
	body := encodeAERequest(req)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	c, err := n.fwd.do(ctx, m, http.MethodPost, "/internal/v1/antientropy", body,
		http.Header{"Content-Type": {"application/octet-stream"}}, 0)
	if err != nil {
		return aeAnswer{}, err
	}
	if c.status != http.StatusOK {
		return aeAnswer{}, fmt.Errorf("anti-entropy check at %s: %d %s", m.Name, c.status, c.body)
	}
	ans, err := decodeAEAnswer(c.body)
	if err != nil {
		return aeAnswer{}, err
	}
	if len(ans.Results) != len(req.Items) || len(ans.Epochs) != len(req.Items) {
		return aeAnswer{}, fmt.Errorf("anti-entropy check at %s: %d results for %d items", m.Name, len(ans.Results), len(req.Items))
	}
	return ans, nil
}

// handleAntiEntropy is the replica's side: compare the owner's checksums
// with this node's, on the writer goroutine, and answer one result per
// item.
func (n *Node) handleAntiEntropy(w http.ResponseWriter, r *http.Request) {
	_, body, e := n.readSigned(r, "antientropy", maxAEBody)
	if e != nil {
		writeError(w, e)
		return
	}
	req, err := decodeAERequest(body)
	if err != nil {
		writeError(w, invalid("body", "%v", err))
		return
	}
	if n.ctl == nil {
		writeError(w, &Error{Code: CodeNotFound, Message: "not a cluster member"})
		return
	}
	for _, it := range req.Items {
		if int(it.Slot) >= slots.Count {
			writeError(w, invalid("slot", "antientropy: slot %d is not below %d", it.Slot, slots.Count))
			return
		}
	}
	op := &writeOp{kind: opCheckSums, ae: aeOp{items: req.Items, version: req.Version}}
	if err := n.writer.submitInternal(r.Context().Done(), op); err != nil {
		writeError(w, asError(err))
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	_, _ = w.Write(encodeAEAnswer(&aeAnswer{Results: op.ae.results, Epochs: op.ae.epochs}))
}
