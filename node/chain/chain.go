// Package chain is the chain outbox (API.md "Chains", DESIGN.md
// "Chains"): when a fire of a task with on_success or on_failure finishes
// with that outcome, the writer records the children to create in the
// parent's record (AddChildren), in the same write as the outcome
// (storage.Task.Children), so they replicate with it. The Outbox creates
// them: each through its slot's owner (a local write, or POST
// /internal/v1/chain to the owner, which checks the record with Check),
// create-if-absent by its fixed id, and once the owner acknowledged it
// the writer drops it from the parent's list, in a replicated write. A
// pending child is the parent's wake (storage.Task.Wake), so a restart or
// the slot's next owner finds it in the due index and resumes it: no
// scan, no timer. A repeat (an ack lost to a crash, a handover, a repeated
// fire) finds the child created, with the same parent fire, and counts it
// as created: never twice.
package chain

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/chime-scheduler/chime/node/firing"
	"github.com/chime-scheduler/chime/node/httpapi"
	"github.com/chime-scheduler/chime/slots"
	"github.com/chime-scheduler/chime/storage"
)

// RetryDelay is how long a parent waits after a try that could not reach
// a child's owner (no owner, moving, unreachable) before the next.
const RetryDelay = time.Second

// MaxBody bounds POST /internal/v1/chain: one child's record (its chains
// of at most 256 KiB, a payload of at most 64 KiB, its headers).
const MaxBody = 4 << 20

// Config is what an Outbox is made with.
type Config struct {
	// Create creates child t (its record, linked to its parent) through
	// the owner of its slot; nil once the owner acknowledged it (created
	// now, or before with the same parent fire). An *httpapi.Error with
	// CodeInvalidArgument or CodeConflict refuses it for good.
	Create func(ctx context.Context, t *storage.Task) error
	// CheckCallback is the callback address policy (dispatch.Policy).
	CheckCallback func(url string) error
	Limits        httpapi.Limits
	// Done hands the answer for one parent to the writer; false: the
	// node is stopping.
	Done func(Done) bool
	// Refused counts a child refused for good (a metric).
	Refused func()
	Log     *slog.Logger
}

// Done is the outbox's answer for one parent: which of its pending
// children are settled (created, or found created, or refused for good),
// and whether some are left to try again later.
type Done struct {
	Parent  string
	Settled []storage.PendingChild
	Retry   bool
}

// Outbox creates the pending children of the parents the writer hands
// it. A parent is busy from the writer's Claim until the writer applies
// the outbox's answer (Done), so it is never worked on twice at once, and
// its wake leaves its children out meanwhile.
type Outbox struct {
	cfg Config

	mu    sync.Mutex
	busy  map[string]bool
	queue []*storage.Task
	kick  chan struct{} // cap 1

	// BeforeCreate, when set (tests), runs before the children of a
	// parent are created; false abandons the parent as a crash would (it
	// stays claimed: nothing on this node tries it again). A fault test
	// crashes the node there.
	BeforeCreate func(parent *storage.Task) bool
}

// New returns an outbox; Run works it.
func New(cfg Config) *Outbox {
	return &Outbox{cfg: cfg, busy: map[string]bool{}, kick: make(chan struct{}, 1)}
}

// Claim marks parent id busy; false if it was already. Writer goroutine.
func (o *Outbox) Claim(id string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.busy[id] {
		return false
	}
	o.busy[id] = true
	return true
}

// Busy reports whether parent id is claimed.
func (o *Outbox) Busy(id string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.busy[id]
}

// Release ends the claim of parent id.
func (o *Outbox) Release(id string) {
	o.mu.Lock()
	delete(o.busy, id)
	o.mu.Unlock()
}

// Enqueue hands claimed parents (copies of their records, as committed)
// to the outbox. It never blocks.
func (o *Outbox) Enqueue(ps []*storage.Task) {
	o.mu.Lock()
	o.queue = append(o.queue, ps...)
	o.mu.Unlock()
	select {
	case o.kick <- struct{}{}:
	default:
	}
}

// Run creates the children of queued parents until stop closes.
func (o *Outbox) Run(stop <-chan struct{}) {
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
			d, ok := o.createChildren(ctx, p)
			if !ok {
				continue
			}
			if !o.cfg.Done(d) {
				return // stopping
			}
		}
	}
}

// createChildren tries to create every pending child of p, in order.
// false: abandoned (BeforeCreate).
func (o *Outbox) createChildren(ctx context.Context, p *storage.Task) (Done, bool) {
	d := Done{Parent: p.ID}
	if o.BeforeCreate != nil && !o.BeforeCreate(p) {
		return d, false
	}
	for _, c := range p.Children {
		if ctx.Err() != nil {
			d.Retry = true
			break
		}
		err := o.create(ctx, p, &c)
		var e *httpapi.Error
		switch {
		case err == nil:
			d.Settled = append(d.Settled, c)
		case errors.As(err, &e) && (e.Code == httpapi.CodeInvalidArgument || e.Code == httpapi.CodeConflict):
			// Refused for good: a body no longer valid at the parent's
			// finish (a due_at or end_at passed), a callback address now
			// denied, or an id taken by another task. Dropped, and said.
			o.cfg.Refused()
			o.cfg.Log.Warn("chain: child not created", "parent", p.ID, "child", c.ID, "fire", firing.FireID(p.ID, c.Seq), "err", err)
			d.Settled = append(d.Settled, c)
		default:
			o.cfg.Log.Debug("chain: child not created yet", "parent", p.ID, "child", c.ID, "err", err)
			d.Retry = true
		}
	}
	return d, true
}

// create creates child c of p through the owner of its slot; nil once the
// owner acknowledged it (created now, or before with the same parent fire).
func (o *Outbox) create(ctx context.Context, p *storage.Task, c *storage.PendingChild) error {
	t, e := httpapi.ChildTask(c.Body, c.ID, c.Result, time.Unix(0, c.At), o.cfg.Limits)
	if e != nil {
		return e
	}
	if err := o.cfg.CheckCallback(t.Spec.CallbackURL); err != nil {
		return httpapi.Invalid("callback_url", "%s", err.Error())
	}
	t.ParentID, t.ParentFire = p.ID, firing.FireID(p.ID, c.Seq)
	return o.cfg.Create(ctx, t)
}

// Check checks the parts of a child's record that the owner relies on.
func Check(t *storage.Task) *httpapi.Error {
	switch {
	case t.ID == "" || len(t.ID) > 128:
		return httpapi.Invalid("id", "must be 1 to 128 characters")
	case uint16(slots.Of(t.ID)) != t.Slot:
		return httpapi.Invalid("slot", "is not the slot of the id")
	case t.ParentID == "" || t.ParentFire == "":
		return httpapi.Invalid("parent_id", "a chain's child names its parent and its fire")
	case t.Status != storage.StatusScheduled && t.Status != storage.StatusPaused:
		return httpapi.Invalid("status", "must be scheduled or paused")
	case t.Spec.Kind < storage.KindOnce || t.Spec.Kind > storage.KindCron:
		return httpapi.Invalid("kind", "unknown schedule kind")
	case t.NextDue <= 0 || t.Spec.CallbackURL == "":
		return httpapi.Invalid("next_due", "a new task has a callback and a first due time")
	}
	return nil
}

// AddChildren records, on the parent t whose fire seq just finished with
// outcome (failed or not) at now, the children of its matching chain, and
// returns their ids for the fire's execution (now is the fire's finish,
// which a child's delay_ms counts from). result is the fire's kept
// response body (payload_from_parent).
func AddChildren(t *storage.Task, seq uint64, failed bool, now int64, result []byte) []string {
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
