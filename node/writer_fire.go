package node

// The writer's side of firing: starting the fires of expired wheel
// entries (writing their intents) and applying their results.

import (
	"errors"
	"slices"
	"time"

	"github.com/chime-scheduler/chime/node/chain"
	"github.com/chime-scheduler/chime/node/dispatch"
	"github.com/chime-scheduler/chime/node/firing"
	"github.com/chime-scheduler/chime/node/flow"
	"github.com/chime-scheduler/chime/storage"
)

// undispatched handles a fire the dispatcher refused (it is stopping, or
// its queue is full). The fire stays persisted as in flight: the loop tries
// it again shortly, and a restart or the slot's next owner repeats it with
// the same fire id. It no longer counts as running, so a seal for a handover
// (a drain) does not wait for a callback that never started. Before, the
// entry stayed, and a drain that raced a fire of its slot waited for its cap.
// Writer goroutine only.
func (w *writer) undispatched(j *dispatch.Job) {
	if j.Notice {
		w.noticeUndispatched(j)
		return
	}
	w.metrics.FireDeferred.Inc()
	// Forgotten by the writer (dropRefused): this may run on the syncer,
	// beside the writer's own use of w.running.
	w.refused.Lock()
	w.refused.fires = append(w.refused.fires, runningRef{id: j.TaskID, seq: j.Seq})
	w.refused.Unlock()
	if j.Started != nil && j.Started.Load() == 0 {
		// Never sent: its start in a flow's rate window counts from now.
		// Its in-flight mark is the writer's to drop (flowAllow, when the
		// fire starts again; a delete): this may run on the syncer.
		j.Started.Store(w.now().UnixNano())
	}
	w.notify([]wakeChange{{ID: j.TaskID, At: w.now().UnixNano() + int64(fireRetryDelay)}})
}

// runningRef names one attempt in w.running.
type runningRef struct {
	id  string
	seq uint64
}

// dropRefused forgets the attempts the dispatcher refused (undispatched)
// since the last call. Writer goroutine.
func (w *writer) dropRefused() {
	w.refused.Lock()
	fires := w.refused.fires
	w.refused.fires = nil
	w.refused.Unlock()
	for _, r := range fires {
		if rf, ok := w.running[r.id]; ok && rf.seq == r.seq {
			w.stopRunning(r.id)
		}
	}
}

// fireRetryDelay is how long an expired entry waits when the dispatcher's
// backlog is full: the fire is not started (no intent written) until there
// is room, so overload delays fires but never loses one.
const fireRetryDelay = 50 * time.Millisecond

// maxQuarantined bounds the writer's set of tasks whose record does not
// decode; beyond it such a task is read (and skipped) again at each fire.
const maxQuarantined = 10000

// fireLimit is how many fires may be at the dispatcher at once (queued or
// running); a fire start beyond it is deferred (fireRetryDelay).
func (w *writer) fireLimit() int {
	return w.cfg.Dispatch.MaxQueued + w.cfg.Dispatch.Concurrency
}

// fireRoom is how many more fires the dispatcher can take now: below the
// writer's limit and its own queue's (MaxQueued; fewer than Concurrency
// run while one host's limit binds). Of the fires running here only those
// in a worker are out of that queue; the others are queued, or on their
// way to it (their group has not submitted them yet), or finished with
// their result on its way, so room errs low. Any goroutine; the loop holds
// expired entries back while it is not positive (loop.go, the ready lane)
// instead of sending them to be deferred.
func (w *writer) fireRoom() int {
	busy := int(w.busy.Load())
	room := w.fireLimit() - busy
	if w.inWorkers != nil {
		room = min(room, w.cfg.Dispatch.MaxQueued-(busy-w.inWorkers()))
	}
	return room
}

// roomKickAt is how much room must open before a waiting loop is woken: a
// chunk's worth, so that it does not send its held entries one at a time.
func (w *writer) roomKickAt() int {
	return max(1, min(fireChunk/8, w.fireLimit()/4))
}

// stopRunning forgets id's attempt at the dispatcher, and wakes the loop
// if it waits for that room. Writer goroutine.
func (w *writer) stopRunning(id string) {
	delete(w.running, id)
	w.busy.Store(int64(len(w.running)))
	if w.roomOpened != nil && w.roomWanted.Load() && w.fireRoom() >= w.roomKickAt() && w.roomWanted.CompareAndSwap(true, false) {
		w.roomOpened()
	}
}

func (w *writer) applyFire(b *storage.Batch, g *syncGroup, op *fireOp) int {
	n := 0
	limit := w.fireLimit()
	var kicks []*flow.State // flows whose held fires came up: kicked at the end
	defer func() {
		for _, fs := range kicks {
			g.wakes = w.flows.Kick(g.wakes, fs, op.now)
		}
	}()
	for _, e := range op.fires {
		if w.flows.Holding() {
			if fs := w.flows.Unwait(e.ID); fs != nil && !slices.Contains(kicks, fs) {
				kicks = append(kicks, fs)
			}
		}
		if _, ok := w.quarantined[e.ID]; ok {
			continue // the loader files it again at every scan; it stays out
		}
		t, err := w.get(e.ID)
		if errors.Is(err, storage.ErrCorrupt) {
			// Not retried every second: it cannot decode the next time
			// either. Counted and logged once by the store.
			if len(w.quarantined) < maxQuarantined {
				w.quarantined[e.ID] = struct{}{}
			}
			continue
		}
		if err != nil {
			w.log.Error("read task to fire", "task", e.ID, "err", err)
			g.wakes = append(g.wakes, wakeChange{ID: e.ID, At: op.now + int64(time.Second)})
			continue
		}
		if t == nil {
			continue // deleted since it was filed
		}
		if ok, held := w.fires(t.Slot); held {
			// The ownership loop is late renewing the slot's bound: the
			// fire waits for it (or for the slot to stop firing).
			w.metrics.FireHeld.Inc()
			g.wakes = append(g.wakes, wakeChange{ID: e.ID, At: op.now + int64(fireRetryDelay)})
			continue
		} else if !ok {
			continue // the slot moved away: its new owner fires it; a catch-up scan refiles it if it comes back
		}
		if !w.acks.acked(e.ID) {
			// The write that made it due is not acknowledged yet: no
			// fire before its 2xx (writer_ackgate.go).
			w.metrics.FireUnacked.Inc()
			g.wakes = append(g.wakes, wakeChange{ID: e.ID, At: op.now + int64(ackGateRetry)})
			continue
		}
		if w.ctl != nil {
			w.flows.NoteSlot(t.Slot, w.ctl.Holds(t.Slot), op.now) // for the flow limiter's knownSince
		}
		w.claimChildren(g, t, op.now)
		w.claimNotice(g, t, op.now) // notice.go: never waits for the fire
		if w.isRunning(t) {
			continue // an attempt is at the dispatcher; its result re-files the task
		}
		if len(w.running) >= limit {
			g.wakes = append(g.wakes, wakeChange{ID: e.ID, At: op.now + int64(fireRetryDelay)})
			w.metrics.FireDeferred.Inc()
			continue
		}
		// A flow key with limits (package node/flow): its callback attempts
		// (not the ACK's) start on a copy, so that a held one leaves the
		// record as it was.
		var fs *flow.State
		if key := t.Spec.FlowKey; key != "" && (t.Inflight == nil || !t.Inflight.Ack) {
			var err error
			if fs, err = w.flows.Of(key, t.Slot, op.now); err != nil {
				w.log.Error("read flow to fire: the fire waits", "task", e.ID, "flow", key, "err", err)
				g.wakes = append(g.wakes, wakeChange{ID: e.ID, At: op.now + int64(time.Second)})
				continue
			}
			if fs != nil {
				t = cloneTask(t)
			}
		}
		// A host whose circuit is open: the fire starts on a copy, so
		// that a held one leaves the record as it was.
		var host string
		if w.breakers != nil {
			u := t.Spec.CallbackURL
			if t.Inflight != nil && t.Inflight.Ack {
				u = t.Spec.AckURL // an ACK attempt goes to the ack_url's host
			}
			if host = dispatch.HostKey(u); w.breakers.Gating(host) {
				if fs == nil {
					t = cloneTask(t)
				}
			} else {
				host = ""
			}
		}
		prev := t.Wake()
		switch firing.Begin(t, op.now, int64(w.cfg.MisfireGrace)) {
		case firing.StartNothing:
			g.wakes = append(g.wakes, wakeChange{ID: t.ID, At: w.wakeOf(t)})
			continue
		case firing.StartExpire:
			// Its retention has passed: deleted with its history through
			// the same path as an API delete, so the follower deletes it
			// too and a next owner of the slot does not bring it back.
			w.del(b, g, t)
			w.metrics.Expired.Inc()
			n++
			continue
		case firing.StartSkipped:
			w.metrics.MisfireSkipped.Inc()
			w.put(b, g, t, prev, op.now)
			n++
			continue
		}
		if fs != nil {
			if !w.flows.Allow(fs, t.ID, prev, op.now) {
				w.metrics.FlowHolds.Inc()
				g.wakes = append(g.wakes, wakeChange{ID: t.ID, At: w.heldWake(op.now+int64(w.cfg.Window/2), op.now)})
				if !slices.Contains(kicks, fs) {
					kicks = append(kicks, fs)
				}
				continue
			}
		}
		if host != "" {
			if ok, at := w.gate(host, t, prev, op.now); !ok {
				g.wakes = append(g.wakes, wakeChange{ID: t.ID, At: at})
				continue
			}
		}
		if t.Inflight.Attempt == 1 && !t.Inflight.Ack { // an ACK waits ack_delay_ms on purpose
			w.metrics.StartLag.WithLabelValues("loop").Observe(float64(op.now-t.Inflight.Due) / 1e9)
			w.metrics.StartLag.WithLabelValues("writer").Observe(float64(w.now().UnixNano()-op.now) / 1e9)
		}
		w.running[t.ID] = runningFire{seq: t.Inflight.Seq, flow: fs}
		w.busy.Store(int64(len(w.running)))
		w.put(b, g, t, prev, op.now)
		j := firing.JobFor(t)
		j.Epoch, _ = w.holds(t.Slot) // X-Chime-Slot-Epoch in a cluster; 0 (no header) standalone
		if fs != nil {
			j.Started = w.flows.Started(fs, t.ID, t.Inflight.Seq)
			if fs.Waiting() && !slices.Contains(kicks, fs) {
				kicks = append(kicks, fs) // room left: the next held ones go too
			}
		}
		g.jobs = append(g.jobs, j)
		n++
	}
	return n
}

func (w *writer) applyDone(b *storage.Batch, g *syncGroup, op *doneOp) int {
	r := &op.res
	if r.Job.Notice {
		return w.applyNoticeDone(b, g, r, op.now) // a result callback (notice.go)
	}
	id := r.Job.TaskID
	t, err := w.get(id)
	if rf, ok := w.running[id]; ok && rf.seq == r.Job.Seq {
		w.stopRunning(id)
		if rf.flow != nil {
			g.wakes = w.flows.Done(g.wakes, rf.flow, id, r.Job.Seq, op.now)
		}
	}
	if r.StatusCode == 0 && r.Err == dispatch.Shutdown {
		// Cut off by a shutdown, not answered by the endpoint: leave the fire
		// in flight so the next start repeats it with the same fire id and
		// attempt, instead of spending one of its retries.
		return 0
	}
	w.metrics.ObserveResult(r)
	spare := false
	if w.breakers != nil {
		spare = w.recordCircuit(g, r, op.now)
	}
	host := callbackHost(r.Job.URL) // one redaction for both keys
	w.hosts.Observe(host, host+callbackPath(r.Job.URL), r.FinishedAt.Sub(r.StartedAt))
	if err != nil {
		w.log.Error("read task to finish fire", "task", id, "err", err)
		return 0
	}
	if t == nil {
		return 0 // deleted while its callback ran
	}
	if _, ok := w.holds(t.Slot); !ok {
		// Another node owns the slot now: the record is theirs, and they
		// repeat the fire (same fire id). While this node still holds the
		// slot (sealing for a handover, or owning it without a lease) the
		// result is recorded and replicated: the next owner gets it.
		return 0
	}
	prev := t.Wake()
	ex, fr := firing.FinishAttempt(t, r, op.now, w.rnd, spare)
	switch fr {
	case firing.FinishStale:
		// Replaced while its callback ran: the new definition is filed
		// already, unless it was waiting for this attempt.
		g.wakes = append(g.wakes, wakeChange{ID: t.ID, At: w.wakeOf(t)})
		return 0
	case firing.FinishRetry:
		w.metrics.Retries.Inc()
	case firing.FinishSuccess, firing.FinishFailed:
		// The chain's children are recorded with the outcome, in the
		// same write: they replicate with it (chain.go). After an ACK
		// phase the outcome is the ACK's, the parent's result the
		// callback's.
		res := ex.Result
		if ex.Ack && t.LastFire != nil {
			res = t.LastFire.Result
		}
		ex.Children = chain.AddChildren(t, r.Job.Seq, fr == firing.FinishFailed, ex.FinishedAt, res)
		w.addNotice(t, r.Job.Seq, fr == firing.FinishFailed, op.now) // result callback, same write (notice.go)
	}
	b.AppendExecution(t, ex)
	w.put(b, g, t, prev, op.now)
	return 1
}
