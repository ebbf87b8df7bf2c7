package node

// Chains (API.md "Chains", DESIGN.md "Chains"): when a fire of a task with
// on_success or on_failure finishes with that outcome, the writer records
// the children to create in the parent's record, in the same write as the
// outcome (storage.Task.Children), so they replicate with it. The chain
// outbox below creates them: each through its slot's owner (a local write,
// or POST /internal/v1/chain to the owner), create-if-absent by its fixed
// id, and once the owner acknowledged it the writer drops it from the
// parent's list, in a replicated write. A pending child is the parent's
// wake (storage.Task.Wake), so a restart or the slot's next owner finds
// it in the due index and resumes it: no scan, no timer. A repeat (an ack
// lost to a crash, a handover, a repeated fire) finds the child created,
// with the same parent fire, and counts it as created: never twice.

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/chime-scheduler/chime/node/firing"
	"github.com/chime-scheduler/chime/node/httpapi"
	"github.com/chime-scheduler/chime/slots"
	"github.com/chime-scheduler/chime/storage"
)

// chainRetryDelay is how long a parent waits after a try that could not
// reach a child's owner (no owner, moving, unreachable) before the next.
const chainRetryDelay = time.Second

// maxChainBody bounds POST /internal/v1/chain: one child's record (its
// chains of at most 256 KiB, a payload of at most 64 KiB, its headers).
const maxChainBody = 4 << 20

// chainOutbox creates the pending children of the parents the writer hands
// it. A parent is busy from the writer's claim until the writer applies
// the outbox's answer (chainDoneOp), so it is never worked on twice at
// once, and its wake leaves its children out meanwhile.
type chainOutbox struct {
	n *Node

	mu    sync.Mutex
	busy  map[string]bool
	queue []*storage.Task
	kick  chan struct{} // cap 1

	// beforeCreate, when set (tests), runs before the children of a
	// parent are created; false abandons the parent as a crash would (it
	// stays claimed: nothing on this node tries it again). A fault test
	// crashes the node there.
	beforeCreate func(parent *storage.Task) bool
}

func newChainOutbox(n *Node) *chainOutbox {
	return &chainOutbox{n: n, busy: map[string]bool{}, kick: make(chan struct{}, 1)}
}

// claim marks parent id busy; false if it was already. Writer goroutine.
func (o *chainOutbox) claim(id string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.busy[id] {
		return false
	}
	o.busy[id] = true
	return true
}

// isBusy reports whether parent id is claimed.
func (o *chainOutbox) isBusy(id string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.busy[id]
}

// release ends the claim of parent id.
func (o *chainOutbox) release(id string) {
	o.mu.Lock()
	delete(o.busy, id)
	o.mu.Unlock()
}

// enqueue hands claimed parents (copies of their records, as committed)
// to the outbox. It never blocks.
func (o *chainOutbox) enqueue(ps []*storage.Task) {
	o.mu.Lock()
	o.queue = append(o.queue, ps...)
	o.mu.Unlock()
	select {
	case o.kick <- struct{}{}:
	default:
	}
}

// run creates the children of queued parents until stop closes.
func (o *chainOutbox) run(stop <-chan struct{}) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-stop
		cancel()
	}()
	for {
		select {
		case <-stop:
			return
		case <-o.kick:
		}
		for {
			o.mu.Lock()
			if len(o.queue) == 0 {
				o.mu.Unlock()
				break
			}
			p := o.queue[0]
			o.queue[0] = nil
			o.queue = o.queue[1:]
			o.mu.Unlock()
			op := o.createChildren(ctx, p)
			if op == nil {
				continue
			}
			if !o.n.writer.send(op) {
				return // stopping
			}
		}
	}
}

// chainDoneOp is the outbox's answer for one parent: which of its pending
// children are settled (created, or found created, or refused for good),
// and whether some are left to try again later.
type chainDoneOp struct {
	writeOp
	parent  string
	settled []storage.PendingChild
	retry   bool
}

// createChildren tries to create every pending child of p, in order.
func (o *chainOutbox) createChildren(ctx context.Context, p *storage.Task) *chainDoneOp {
	op := &chainDoneOp{writeOp: writeOp{kind: opChainDone}, parent: p.ID}
	if o.beforeCreate != nil && !o.beforeCreate(p) {
		return nil
	}
	for _, c := range p.Children {
		if ctx.Err() != nil {
			op.retry = true
			break
		}
		err := o.create(ctx, p, &c)
		var e *Error
		switch {
		case err == nil:
			op.settled = append(op.settled, c)
		case errors.As(err, &e) && (e.Code == CodeInvalidArgument || e.Code == CodeConflict):
			// Refused for good: a body no longer valid at the parent's
			// finish (a due_at or end_at passed), a callback address now
			// denied, or an id taken by another task. Dropped, and said.
			o.n.metrics.chainRefused.Inc()
			o.n.log.Warn("chain: child not created", "parent", p.ID, "child", c.ID, "fire", firing.FireID(p.ID, c.Seq), "err", err)
			op.settled = append(op.settled, c)
		default:
			o.n.log.Debug("chain: child not created yet", "parent", p.ID, "child", c.ID, "err", err)
			op.retry = true
		}
	}
	return op
}

// create creates child c of p through the owner of its slot; nil once the
// owner acknowledged it (created now, or before with the same parent fire).
func (o *chainOutbox) create(ctx context.Context, p *storage.Task, c *storage.PendingChild) error {
	n := o.n
	t, e := httpapi.ChildTask(c.Body, c.ID, c.Result, time.Unix(0, c.At), n.cfg.Limits)
	if e != nil {
		return e
	}
	if err := (api{n}).CheckCallback(t.Spec.CallbackURL); err != nil {
		return invalid("callback_url", "%s", err.Error())
	}
	t.ParentID, t.ParentFire = p.ID, firing.FireID(p.ID, c.Seq)
	v := n.view.Load()
	if v.Owns(t.Slot) {
		_, err := n.createChild(ctx, t)
		return err
	}
	owner, ok := v.Owner(t.Slot)
	if !ok {
		return errNotOwner
	}
	enc, _ := storage.EncodeTask(t)
	ans, err := n.fwd.do(ctx, owner, http.MethodPost, "/internal/v1/chain", enc, http.Header{}, 0)
	if err != nil {
		return err
	}
	switch ans.status {
	case http.StatusOK, http.StatusCreated:
		return nil
	case http.StatusConflict:
		return &Error{Code: CodeConflict, Message: "the child's id is taken by another task"}
	case http.StatusBadRequest:
		return invalid("", "the child's owner refused it: %s", ans.body)
	}
	return &Error{Code: CodeUnavailable, Message: "the child's owner answered " + strconv.Itoa(ans.status)}
}

// createChild writes child t on this node, which owns its slot (opChild):
// create-if-absent, where a task of that id from the same parent fire
// counts as created. It reports whether t was created now.
func (n *Node) createChild(ctx context.Context, t *storage.Task) (bool, error) {
	a := api{n}
	a.awaitHeld(ctx, t.Slot)
	op := &tasksOp{writeOp: writeOp{kind: opChild, now: n.now().UnixNano()}, tasks: []*storage.Task{t}}
	if err := n.writer.submitInternal(ctx.Done(), op); err != nil {
		return false, err
	}
	if e := op.errs[0]; e != nil {
		return false, e
	}
	return op.created[0], nil
}

// handleChain is POST /internal/v1/chain: another member's chain outbox
// creates a child in a slot this node owns. The body is the child's record
// (storage.EncodeTask), checked here like anything from the network.
func (n *Node) handleChain(w http.ResponseWriter, r *http.Request) {
	_, body, e := n.guard.Read(r, "chain", maxChainBody)
	if e != nil {
		writeError(w, e)
		return
	}
	var in storage.Task
	if err := storage.DecodeTask(body, &in); err != nil {
		writeError(w, invalid("body", "%v", err))
		return
	}
	if e := checkChild(&in); e != nil {
		writeError(w, e)
		return
	}
	// Only what a new task has: the rest of a record is the owner's.
	t := &storage.Task{ID: in.ID, Slot: in.Slot, Spec: in.Spec, Status: in.Status, NextDue: in.NextDue,
		CreatedAt: in.CreatedAt, UpdatedAt: in.CreatedAt, ParentID: in.ParentID, ParentFire: in.ParentFire}
	created, err := n.createChild(r.Context(), t)
	if err != nil {
		writeError(w, asError(err))
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	writeJSON(w, status, map[string]any{"id": t.ID, "created": created})
}

// checkChild checks the parts of a child's record that the owner relies on.
func checkChild(t *storage.Task) *Error {
	switch {
	case t.ID == "" || len(t.ID) > 128:
		return invalid("id", "must be 1 to 128 characters")
	case uint16(slots.Of(t.ID)) != t.Slot:
		return invalid("slot", "is not the slot of the id")
	case t.ParentID == "" || t.ParentFire == "":
		return invalid("parent_id", "a chain's child names its parent and its fire")
	case t.Status != storage.StatusScheduled && t.Status != storage.StatusPaused:
		return invalid("status", "must be scheduled or paused")
	case t.Spec.Kind < storage.KindOnce || t.Spec.Kind > storage.KindCron:
		return invalid("kind", "unknown schedule kind")
	case t.NextDue <= 0 || t.Spec.CallbackURL == "":
		return invalid("next_due", "a new task has a callback and a first due time")
	}
	return nil
}

// addChildren records, on the parent t whose fire seq just finished with
// outcome (failed or not) at now, the children of its matching chain, and
// returns their ids for the fire's execution (now is the fire's finish,
// which a child's delay_ms counts from). result is the fire's kept
// response body (payload_from_parent).
func addChildren(t *storage.Task, seq uint64, failed bool, now int64, result []byte) []string {
	bodies := t.Spec.OnSuccess
	if failed {
		bodies = t.Spec.OnFailure
	}
	if len(bodies) == 0 {
		return nil
	}
	ids := make([]string, len(bodies))
	children := slices.Clip(t.Children) // appends never write into a copy the outbox reads
	for i, b := range bodies {
		ids[i] = httpapi.ChildID(b, t.ID, seq, i)
		children = append(children, storage.PendingChild{ID: ids[i], Seq: seq, Index: i, Failure: failed, At: now, Body: b, Result: result})
	}
	t.Children = children
	return ids
}

// applyChainDone applies the outbox's answer for one parent: its settled
// children leave its pending list (a replicated write); if some are left
// to try again, the parent wakes for them after chainRetryDelay.
func (w *writer) applyChainDone(b *storage.Batch, g *syncGroup, op *chainDoneOp) int {
	defer w.chain.release(op.parent)
	t, err := w.get(op.parent)
	if err != nil || t == nil {
		return 0
	}
	if _, ok := w.holds(t.Slot); !ok {
		return 0 // its new owner resumes the children it still lists
	}
	if op.retry {
		w.chainAfter[t.ID] = op.now + int64(chainRetryDelay)
	}
	prev := t.Wake()
	left := make([]storage.PendingChild, 0, len(t.Children))
	for _, c := range t.Children {
		if !slices.ContainsFunc(op.settled, func(s storage.PendingChild) bool {
			return s.Seq == c.Seq && s.Index == c.Index && s.Failure == c.Failure
		}) {
			left = append(left, c)
		}
	}
	if len(left) == 0 {
		delete(w.chainAfter, t.ID)
		left = nil
	}
	if len(left) == len(t.Children) {
		w.chain.release(op.parent) // before wakeOf: the children count again
		g.wakes = append(g.wakes, wakeChange{ID: t.ID, At: w.wakeOf(t)})
		return 0
	}
	t.Children = left
	w.chain.release(op.parent)
	w.put(b, g, t, prev, op.now)
	return 1
}

// claimChildren hands t's pending children to the outbox, after the
// group's commit, unless they are at the outbox already or wait for a
// retry. Writer goroutine.
func (w *writer) claimChildren(g *syncGroup, t *storage.Task, now int64) {
	if len(t.Children) == 0 || w.chain == nil || w.chainAfter[t.ID] > now || !w.chain.claim(t.ID) {
		return
	}
	g.chains = append(g.chains, cloneTask(t))
}
