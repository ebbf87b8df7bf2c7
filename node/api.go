package node

// This file is the node as its HTTP API (package httpapi) sees it: the
// server's wiring, and api, which implements httpapi.Backend with plain
// methods over the writer, the store and the view. Tests call them
// directly instead of going through HTTP.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/chime-scheduler/chime/node/backup"
	"github.com/chime-scheduler/chime/node/forward"
	"github.com/chime-scheduler/chime/node/health"
	"github.com/chime-scheduler/chime/node/httpapi"
	"github.com/chime-scheduler/chime/ring"
	"github.com/chime-scheduler/chime/ring/gossip"
	"github.com/chime-scheduler/chime/slots"
	"github.com/chime-scheduler/chime/storage"
)

// newAPI builds the node's HTTP API.
func newAPI(n *Node) *httpapi.Server {
	cfg := &n.cfg
	var keys [][]byte // the callback signing keys, current first
	for _, k := range [][]byte{cfg.Dispatch.SigningKey, cfg.Dispatch.SigningKeyNext} {
		if len(k) > 0 {
			keys = append(keys, k)
		}
	}
	return httpapi.New(httpapi.Config{
		Name: cfg.Name, HTTPAddr: cfg.HTTPAddr, PublicHosts: cfg.PublicHosts,
		APIToken: cfg.APIToken, ReadToken: cfg.ReadToken,
		Limits: cfg.Limits, HistoryLimit: cfg.HistoryLimit, Clustered: cfg.Cluster != nil,
		SigningKeys: keys,
		Clock:       cfg.Clock,
		Forwarded: func(ok bool) {
			if ok {
				n.metrics.Forwarded.WithLabelValues("ok").Inc()
			} else {
				n.metrics.Forwarded.WithLabelValues("error").Inc()
			}
		},
		Handlers: httpapi.Handlers{
			Keys:     n.keys.HandleKeys,
			Stats:    httpapi.JSON(func(context.Context) (*health.Stats, error) { return api{n}.Stats() }),
			Snapshot: httpapi.JSON(n.dash.Snapshot),
			Backup: backup.New(backup.Config{Node: cfg.Name, DataDir: cfg.DataDir, InMemory: cfg.InMemory || cfg.Mem != nil,
				Checkpoint: func(dir string) error { return n.store.Checkpoint(dir) }, Now: n.now, Log: n.log}).ServeHTTP,
			Metrics: func(w http.ResponseWriter, r *http.Request) {
				if n.metrics == nil {
					writeError(w, errStopping)
					return
				}
				n.metrics.Handler.ServeHTTP(w, r)
			},
			Replicate:    n.handleReplicate,
			Ctl:          n.handleCtl,
			AntiEntropy:  n.handleAntiEntropy,
			SlotDebug:    n.handleSlotDebug,
			Member:       dashSource{n}.serveMember,
			Run:          n.handleRun,
			InternalKeys: n.keys.HandleInternal,
			Chain:        n.handleChain,
		},
	}, api{n})
}

// api is the node as its HTTP API sees it (httpapi.Backend).
type api struct{ n *Node }

var _ httpapi.Backend = api{}

func (a api) Now() time.Time { return a.n.now() }

func (a api) View() httpapi.View { return apiView{a.n.view.Load()} }

func (a api) Stopped() *Error {
	if a.n.running.Load() {
		return nil
	}
	return a.n.stoppedError()
}

// Overloaded refuses new work while the dispatcher's backlog is full, so
// more fires could only wait in memory.
func (a api) Overloaded() *Error {
	if a.n.disp.Queued() >= a.n.cfg.Dispatch.MaxQueued {
		return &Error{Code: CodeOverloaded, Message: "callback backlog is full; retry later"}
	}
	return nil
}

func (a api) CheckCallback(url string) error {
	err := a.n.policy.CheckURL(url)
	if err != nil && a.n.metrics != nil {
		a.n.metrics.CallbacksDenied.WithLabelValues("create").Inc()
	}
	return err
}

// moveWait is how long a request for a slot that this node's table gives
// it, but that it does not hold yet (the slot is moving here: the old
// owner seals and hands it over), is held for the handover before it is
// answered 503 with Retry-After.
const moveWait = 2 * time.Second

// awaitHeld waits until this node holds every slot of ss as its owner (at
// most moveWait, or until ctx ends) and reports whether it does. A
// standalone node holds every slot.
func (a api) awaitHeld(ctx context.Context, ss ...uint16) bool {
	n := a.n
	if n.ctl == nil {
		return true
	}
	ctx, cancel := context.WithTimeout(ctx, moveWait)
	defer cancel()
	return n.ctl.AwaitHeld(ctx, ss...)
}

// submit hands r to the writer and waits for it.
func (a api) submit(ctx context.Context, r request) error {
	if err := a.n.writer.submit(ctx.Done(), r); err != nil {
		return asError(err)
	}
	return nil
}

func (a api) Write(ctx context.Context, t *storage.Task, put bool, now time.Time) (*storage.Task, bool, error) {
	a.awaitHeld(ctx, t.Slot)
	if e := a.Overloaded(); e != nil {
		return nil, false, e
	}
	kind := opCreate
	if put {
		kind = opPut
	}
	op := &tasksOp{writeOp: writeOp{kind: kind, now: now.UnixNano()}, tasks: []*storage.Task{t}}
	if err := a.submit(ctx, op); err != nil {
		return nil, false, err
	}
	if e := op.errs[0]; e != nil {
		return nil, false, e
	}
	return op.out[0], op.created[0], nil
}

func (a api) CreateBatch(ctx context.Context, tasks []*storage.Task, now time.Time) ([]*Error, error) {
	var local []uint16
	for _, t := range tasks {
		if t != nil {
			local = append(local, t.Slot)
		}
	}
	a.awaitHeld(ctx, local...)
	op := &tasksOp{writeOp: writeOp{kind: opCreate, now: now.UnixNano()}, tasks: tasks, errs: make([]*Error, len(tasks))}
	if err := a.submit(ctx, op); err != nil {
		return nil, err
	}
	return op.errs, nil
}

func (a api) Get(ctx context.Context, id string) (*storage.Task, error) {
	if !a.awaitHeld(ctx, slots.Of(id)) {
		// The copy here may lack the task (still catching up) or be one
		// the slot's holder has moved past: say so rather than 404.
		return nil, errNotOwner
	}
	return a.stored(id)
}

// stored reads task id from the store.
func (a api) stored(id string) (*storage.Task, error) {
	t, err := a.n.store.Get(slots.Of(id), id)
	if errors.Is(err, storage.ErrNotFound) {
		return nil, errNotFound
	}
	return t, err
}

func (a api) Delete(ctx context.Context, id string) error {
	_, err := a.one(ctx, opDelete, id)
	return err
}

func (a api) Pause(ctx context.Context, id string) (*storage.Task, error) {
	return a.one(ctx, opPause, id)
}

func (a api) Resume(ctx context.Context, id string) (*storage.Task, error) {
	return a.one(ctx, opResume, id)
}

func (a api) Trigger(ctx context.Context, id string, dueAt int64) (*storage.Task, error) {
	return a.one(ctx, opTrigger, id, func(op *oneOp) { op.dueAt = dueAt })
}

func (a api) Backfill(ctx context.Context, id string, from, to int64) (*storage.Task, httpapi.BackfillResult, error) {
	var op *oneOp
	t, err := a.one(ctx, opBackfill, id, func(o *oneOp) { o.from, o.to, op = from, to, o })
	if err != nil {
		return nil, httpapi.BackfillResult{}, err
	}
	return t, httpapi.BackfillResult{Queued: op.queued, First: op.first, Last: op.last}, nil
}

// Retry fires the failed task id again now (409 for any other status).
func (a api) Retry(ctx context.Context, id string) (*storage.Task, error) {
	return a.one(ctx, opRetry, id)
}

// RecentExecutions is this node's part of GET /v1/executions: the newest
// executions in the slots it owns (storage.Store.RecentExecutions).
func (a api) RecentExecutions(q storage.ExecQuery) ([]storage.LoggedExecution, bool, error) {
	owned := a.n.view.Load().Owns
	if q.FlowKey != "" {
		fs := slots.Of(q.FlowKey) // every task of the key is in its slot
		all := owned
		owned = func(s uint16) bool { return s == fs && all(s) }
	}
	return a.n.store.RecentExecutions(owned, q)
}

// one applies a single-task op to task id and returns the task after it
// (nil for a delete). set, if any, fills the op's own fields.
func (a api) one(ctx context.Context, kind opKind, id string, set ...func(*oneOp)) (*storage.Task, error) {
	a.awaitHeld(ctx, slots.Of(id))
	op := &oneOp{writeOp: writeOp{kind: kind}, id: id}
	for _, f := range set {
		f(op)
	}
	if kind != opDelete {
		op.now = a.n.now().UnixNano()
	}
	if err := a.submit(ctx, op); err != nil {
		return nil, err
	}
	if op.refused != nil {
		return nil, op.refused
	}
	if kind == opDelete {
		return nil, nil
	}
	return op.out, nil
}

func (a api) Executions(_ context.Context, id string, limit int) ([]storage.Execution, error) {
	if _, err := a.stored(id); err != nil {
		return nil, err
	}
	return a.n.store.Executions(slots.Of(id), id, limit)
}

// CountDue is this node's part of GET /v1/stats/due: the slots it owns in
// the current view only (a follower's replica is its owner's to count).
func (a api) CountDue(q storage.DueCountQuery) (storage.DueCounts, error) {
	return a.n.store.CountDue(a.n.view.Load().Owns, q)
}

// DueVersion is the store's writes plus the view's sequence: both only
// grow, so the sum changes whenever either does.
func (a api) DueVersion() uint64 { return a.n.store.Writes() + a.n.view.Load().Seq }

func (a api) ScanTasks(from storage.Position, f func(*storage.Task) bool) error {
	return a.n.store.ScanTasks(from, f)
}

// Stats is GET /v1/stats.
func (a api) Stats() (*health.Stats, error) {
	n := a.n
	st, err := n.health.Stats(n.cfg.Name, n.now().Sub(n.started), n.Ready(), n.metrics.Reg)
	if err != nil {
		return nil, err
	}
	st.Callbacks = health.Callbacks{Breaker: "off", Circuits: []health.Circuit{}}
	if n.breakers != nil {
		st.Callbacks.Breaker = "on"
		for _, c := range n.breakers.Circuits() {
			st.Callbacks.Circuits = append(st.Callbacks.Circuits, health.Circuit{
				Host: c.Host, State: c.State, Held: c.Held, OpenedAt: c.OpenedAt, NextProbeAt: c.NextProbe})
		}
	}
	return st, nil
}

func (a api) Readiness() (bool, string, []string) {
	reasons := a.n.health.Reasons()
	return a.n.Ready(), a.n.notReadyReason(), reasons
}

// Hops returns how often r was forwarded already. The header counts only on
// a signed call from a member: a client cannot make a node refuse by
// sending it. body is the request's body, already read.
func (a api) Hops(r *http.Request, body []byte) int {
	n := a.n
	h := r.Header.Get(forward.HeaderHop)
	if h == "" || n.guard == nil {
		return 0
	}
	v, err := strconv.Atoi(h)
	if err != nil || v < 0 {
		return 0
	}
	if !n.guard.Signed(r, body) {
		return 0
	}
	return v
}

func (a api) Forward(ctx context.Context, to ring.Member, method, uri string, body []byte, hdr http.Header, hop int) (httpapi.Answer, error) {
	return a.n.fwd.Do(ctx, to, method, uri, body, hdr, hop)
}

func (a api) Authenticate(r *http.Request, endpoint string) *Error {
	_, _, e := a.n.guard.Read(r, endpoint, 0)
	return e
}

// Cluster describes the cluster as this node sees it: every known member
// (dead and left ones too, owning nothing) and the slot table, with each
// member's slot ranges if ranges.
func (a api) Cluster(ranges bool) httpapi.Cluster {
	n := a.n
	v := n.view.Load()
	var settle time.Duration
	if n.cluster != nil {
		settle = n.cfg.Cluster.SettleTime
	}
	out := httpapi.Cluster{Self: n.cfg.Name, TableVersion: v.version,
		ViewChecksum: fmt.Sprintf("%016x", v.version), Settled: v.Settled(n.now(), settle),
		Insecure: n.cfg.Cluster != nil && n.cfg.Cluster.Insecure}
	counts := v.Table.Counts()
	for _, m := range v.Members {
		c := counts[m.Name]
		mj := httpapi.Member{Name: m.Name, GossipAddr: m.Addr, HTTPAddr: m.Meta.HTTPAddr,
			State: m.Meta.State.String(), Status: m.Status.String(), Forgotten: m.Forgotten,
			SlotsOwned: c.Owned, SlotsFollowing: c.Following}
		switch {
		case n.cluster == nil:
			mj.Status = "alive"
		case m.Status == gossip.StatusDead || m.Status == gossip.StatusLeft:
			// Its last word on its state (active, draining) is history.
			mj.State = mj.Status
		}
		if ranges {
			owned, following := v.Table.Ranges(m.Name)
			o, f := rangesJSON(owned), rangesJSON(following)
			mj.OwnedRanges, mj.FollowingRanges = &o, &f
		}
		out.Members = append(out.Members, mj)
	}
	return out
}

func rangesJSON(rs []ring.Range) [][2]uint16 {
	out := make([][2]uint16, len(rs))
	for i, r := range rs {
		out[i] = [2]uint16{r.From, r.To}
	}
	return out
}

// Forget declares the dead member name gone for good, its data lost with
// it (gossip.Membership.Forget). Every member then counts it as left: its
// slots' grants and its vote no longer count, so a cluster that lost a
// majority of its voters for good can go on (slots.Voters), and the slots
// it owned that nobody holds a grant of are taken by their table owners
// with the best copy the live members hold, or empty (slots, census.go).
// Only a member this node sees dead, or left, may be forgotten.
func (a api) Forget(name string) error {
	n := a.n
	if n.cluster == nil {
		return &Error{Code: CodeInvalidArgument, Field: "name", Message: "a standalone node has no members to forget"}
	}
	if _, ok := n.view.Load().member(name); !ok || name == n.cfg.Name {
		return &Error{Code: CodeNotFound, Field: "name", Message: fmt.Sprintf("no other member is named %q", name)}
	}
	if err := n.cluster.Gossip().Forget(name); err != nil {
		if errors.Is(err, gossip.ErrNotDead) {
			return &Error{Code: CodeConflict, Field: "name", Message: err.Error()}
		}
		return &Error{Code: CodeNotFound, Field: "name", Message: err.Error()}
	}
	n.log.Warn("member forgotten by an operator: it counts as left", "member", name)
	return nil
}

// SlotEpoch returns slot s's epoch as this node knows it: the epoch at
// which it owns, seals or follows s; 0 otherwise and on a standalone node.
func (a api) SlotEpoch(s uint16) uint64 {
	if a.n.ctl == nil {
		return 0
	}
	switch role, epoch, _ := a.n.ctl.State(s); role {
	case slots.RoleOwner, slots.RoleSealing, slots.RoleFollower:
		return epoch
	}
	return 0
}

// PutFlow creates or replaces flow f on this owner of its slot
// (writer_flow.go).
func (a api) PutFlow(ctx context.Context, f *storage.Flow) (*storage.Flow, bool, error) {
	a.awaitHeld(ctx, f.Slot)
	op := &flowOp{writeOp: writeOp{kind: opFlowPut, now: a.n.now().UnixNano()}, flow: f}
	if err := a.submit(ctx, op); err != nil {
		return nil, false, err
	}
	if op.refused != nil {
		return nil, false, op.refused
	}
	return op.out, op.created, nil
}

// GetFlow reads flow key and its limiter's state on this owner.
func (a api) GetFlow(ctx context.Context, key string) (httpapi.FlowState, error) {
	slot := slots.Of(key)
	if !a.awaitHeld(ctx, slot) {
		return httpapi.FlowState{}, errNotOwner
	}
	op := &flowOp{writeOp: writeOp{kind: opFlowGet, now: a.n.now().UnixNano()}, key: key, slot: slot}
	if err := a.submit(ctx, op); err != nil {
		return httpapi.FlowState{}, err
	}
	if op.refused != nil {
		return httpapi.FlowState{}, op.refused
	}
	if op.out == nil {
		return httpapi.FlowState{}, httpapi.ErrFlowNotFound
	}
	l := op.live
	return httpapi.FlowState{Flow: op.out, InFlight: l.InFlight, RateCount: l.RateCount, Waiting: l.Waiting,
		OldestWaitingDue: l.OldestWaitingDue}, nil
}

// DeleteFlow deletes flow key: its held fires go at once, unlimited.
func (a api) DeleteFlow(ctx context.Context, key string) error {
	slot := slots.Of(key)
	a.awaitHeld(ctx, slot)
	op := &flowOp{writeOp: writeOp{kind: opFlowDel, now: a.n.now().UnixNano()}, key: key, slot: slot}
	if err := a.submit(ctx, op); err != nil {
		return err
	}
	if op.refused == errNotFound {
		return httpapi.ErrFlowNotFound
	}
	if op.refused != nil {
		return op.refused
	}
	return nil
}

// ScanFlows lists the stored flows (GET /v1/flows).
func (a api) ScanFlows(from storage.Position, owned func(uint16) bool, f func(*storage.Flow) bool) error {
	return a.n.store.ScanFlows(from, owned, f)
}
