package node

// The writer's flow ops (API.md "Flow keys"): PUT, DELETE and GET of a
// flow definition, applied on the key's slot owner to the store and to
// the flow limiter (package node/flow), which holds the fires of a key
// over its limits.

import (
	"github.com/chime-scheduler/chime/node/flow"
	"github.com/chime-scheduler/chime/storage"
)

// flowOp is opFlowPut, opFlowDel and opFlowGet.
type flowOp struct {
	writeOp
	flow    *storage.Flow // opFlowPut: the new definition (Key, Slot, limits)
	key     string        // opFlowDel, opFlowGet
	slot    uint16
	out     *storage.Flow // the definition after the op (opFlowGet: nil = none)
	created bool
	live    flow.Live // opFlowGet: the limiter's state
	refused *Error
}

// storedFlow is the current definition of key: the group's own write if
// any, else the stored one; nil means none.
func (w *writer) storedFlow(slot uint16, key string) (*storage.Flow, error) {
	if f, ok := w.pendingFlows[key]; ok {
		return f, nil
	}
	f, err := w.store.GetFlow(slot, key)
	if err == storage.ErrNotFound {
		return nil, nil
	}
	return f, err
}

func (w *writer) applyFlow(b *storage.Batch, g *syncGroup, op *flowOp) int {
	key, slot := op.key, op.slot
	if op.flow != nil {
		key, slot = op.flow.Key, op.flow.Slot
	}
	if op.kind == opFlowGet {
		f, err := w.storedFlow(slot, key)
		if err != nil {
			op.refused = asError(err)
			return 0
		}
		op.out = f
		if f != nil {
			op.live, _ = w.flows.Live(key, slot, op.now)
		}
		return 0
	}
	if !w.active(slot) {
		op.refused = errNotOwner
		return 0
	}
	old, err := w.storedFlow(slot, key)
	if err != nil {
		op.refused = asError(err)
		return 0
	}
	if w.pendingFlows == nil {
		w.pendingFlows = make(map[string]*storage.Flow)
	}
	if op.kind == opFlowDel {
		if old == nil {
			op.refused = errNotFound
			return 0
		}
		b.DeleteFlow(slot, key)
		w.pendingFlows[key] = nil
		for _, id := range w.flows.Drop(key) {
			g.wakes = append(g.wakes, wakeChange{ID: id, At: op.now + 1})
		}
		return 1
	}
	f := op.flow
	f.CreatedAt, f.UpdatedAt, f.Version = op.now, op.now, 1
	if old != nil {
		f.CreatedAt, f.Version = old.CreatedAt, old.Version+1
	}
	b.PutFlow(slot, f)
	w.pendingFlows[key] = f
	op.out, op.created = f, old == nil
	g.wakes = w.flows.Put(g.wakes, f, old == nil, op.now)
	return 1
}
