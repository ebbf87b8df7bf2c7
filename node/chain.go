package node

// The wiring of the chain outbox (package node/chain): how a child
// reaches the owner of its slot, POST /internal/v1/chain, and the
// writer's side (claiming parents, applying the outbox's answers).

import (
	"context"
	"net/http"
	"slices"
	"strconv"

	"github.com/chime-scheduler/chime/node/chain"
	"github.com/chime-scheduler/chime/storage"
)

// newChainOutbox returns n's chain outbox.
func newChainOutbox(n *Node) *chain.Outbox {
	return chain.New(chain.Config{
		Create:        func(ctx context.Context, t *storage.Task) error { return createChildAtOwner(ctx, n, t) },
		CheckCallback: api{n}.CheckCallback,
		Limits:        n.cfg.Limits,
		Done: func(d chain.Done) bool {
			return n.writer.send(&chainDoneOp{writeOp: writeOp{kind: opChainDone}, Done: d})
		},
		Refused: func() { n.metrics.ChainRefused.Inc() }, // made after the outbox
		Log:     n.log,
	})
}

// chainDoneOp is the outbox's answer for one parent (opChainDone).
type chainDoneOp struct {
	writeOp
	chain.Done
}

// createChildAtOwner creates child t through the owner of its slot: here
// when this node owns it, else POST /internal/v1/chain to the owner.
func createChildAtOwner(ctx context.Context, n *Node, t *storage.Task) error {
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
	ans, err := n.fwd.Do(ctx, owner, http.MethodPost, "/internal/v1/chain", enc, http.Header{}, 0)
	if err != nil {
		return err
	}
	switch ans.Status {
	case http.StatusOK, http.StatusCreated:
		return nil
	case http.StatusConflict:
		return &Error{Code: CodeConflict, Message: "the child's id is taken by another task"}
	case http.StatusBadRequest:
		return invalid("", "the child's owner refused it: %s", ans.Body)
	}
	return &Error{Code: CodeUnavailable, Message: "the child's owner answered " + strconv.Itoa(ans.Status)}
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
	_, body, e := n.guard.Read(r, "chain", chain.MaxBody)
	if e != nil {
		writeError(w, e)
		return
	}
	var in storage.Task
	if err := storage.DecodeTask(body, &in); err != nil {
		writeError(w, invalid("body", "%v", err))
		return
	}
	if e := chain.Check(&in); e != nil {
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

// applyChainDone applies the outbox's answer for one parent: its settled
// children leave its pending list (a replicated write); if some are left
// to try again, the parent wakes for them after chain.RetryDelay.
func (w *writer) applyChainDone(b *storage.Batch, g *syncGroup, op *chainDoneOp) int {
	defer w.chain.Release(op.Parent)
	t, err := w.get(op.Parent)
	if err != nil || t == nil {
		return 0
	}
	if _, ok := w.holds(t.Slot); !ok {
		return 0 // its new owner resumes the children it still lists
	}
	if op.Retry {
		w.chainAfter[t.ID] = op.now + int64(chain.RetryDelay)
	}
	prev := t.Wake()
	left := make([]storage.PendingChild, 0, len(t.Children))
	for _, c := range t.Children {
		if !slices.ContainsFunc(op.Settled, func(s storage.PendingChild) bool {
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
		w.chain.Release(op.Parent) // before wakeOf: the children count again
		g.wakes = append(g.wakes, wakeChange{ID: t.ID, At: w.wakeOf(t)})
		return 0
	}
	t.Children = left
	w.chain.Release(op.Parent)
	w.put(b, g, t, prev, op.now)
	return 1
}

// claimChildren hands t's pending children to the outbox, after the
// group's commit, unless they are at the outbox already or wait for a
// retry. Writer goroutine.
func (w *writer) claimChildren(g *syncGroup, t *storage.Task, now int64) {
	if len(t.Children) == 0 || w.chain == nil || w.chainAfter[t.ID] > now || !w.chain.Claim(t.ID) {
		return
	}
	g.chains = append(g.chains, cloneTask(t))
}
