package ownership

import (
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/chime-scheduler/chime/ring"
	"github.com/chime-scheduler/chime/ring/gossip"
	"github.com/chime-scheduler/chime/slots"
)

// execute carries out effects: every Persist first (durable before
// anything else happens), then the rest in order; then it publishes the
// slots touched (every slot if all) and recounts if recount. It reports
// false if the persist failed: nothing else was carried out.
func (e *Executor) execute(effs []slots.Effect, touched map[uint16]bool, all, recount bool) bool {
	var persist []slots.Persist
	var consents *slots.PersistConsents
	for _, ef := range effs {
		switch p := ef.(type) {
		case slots.Persist:
			persist = append(persist, p)
		case slots.PersistConsents:
			consents = &p // the last one holds them all
		}
	}
	if consents != nil {
		// Durable before any consent goes out (and before the persist of
		// a promotion that rests on ours).
		if err := e.d.Persister.SetConsents(consents.Consents); err != nil {
			e.d.Log.Error("persist consents: effects not carried out", "err", err)
			return false
		}
	}
	e.lastPersist = 0
	if len(persist) > 0 {
		pt := e.d.Clock.Now()
		err := e.d.Persister.PersistStates(persist)
		e.lastPersist = e.d.Clock.Now().Sub(pt)
		if err != nil {
			e.d.Log.Error("persist slot ownership: effects not carried out", "err", err)
			return false
		}
	}
	var gained, drops []uint16
	for _, ef := range effs {
		switch ef := ef.(type) {
		case slots.Persist:
			touched[uint16(ef.Slot)] = true
		case slots.StartFiring:
			touched[uint16(ef.Slot)] = true
			gained = append(gained, uint16(ef.Slot))
		case slots.StopFiring:
			touched[uint16(ef.Slot)] = true
		case slots.Heartbeat:
			e.send(ef.To, beatOf(ef))
		case slots.Ack:
			e.send(ef.To, ackOf(ef))
		case slots.PairHeartbeat:
			e.send(ef.To, pairBeatOf(ef))
		case slots.PairAck:
			e.send(ef.To, pairAckOf(ef))
		case slots.RequestSnapshot:
			e.send(ef.From, &SnapshotRequest{Slot: ef.Slot, Epoch: ef.Epoch})
		case slots.SendNoReplica:
			e.send(ef.To, &NoReplica{Slot: ef.Slot, Epoch: ef.Epoch, Census: ef.Census})
		case slots.OfferHandover:
			e.send(ef.To, offerOf(ef))
		case slots.AskOffer:
			e.send(ef.To, &AskOffer{Slot: ef.Slot, Epoch: ef.Epoch})
		case slots.AskConsent:
			e.send(ef.To, &Consent{Owner: ef.Owner, Inc: ef.Inc, Term: ef.Term, Ask: true})
		case slots.GiveConsent:
			e.send(ef.To, &Consent{Owner: ef.Owner, Inc: ef.Inc, Term: ef.Term, Quiet: ef.Quiet})
		case slots.SendHandover:
			touched[uint16(ef.Slot)] = true
			e.send(ef.To, &Handover{Slot: ef.Slot, Epoch: ef.Epoch, Seq: ef.Seq, Grant: ef.Grant, Dropped: ef.Dropped})
		case slots.RejectLowerEpoch:
			e.send(ef.To, &Reject{Slot: ef.Slot, Epoch: ef.Epoch})
		case slots.Announce:
			if v := e.view; v != nil {
				msg := &Announce{Slot: ef.Slot, Epoch: ef.Epoch, Replicated: ef.Replicated}
				for _, m := range v.Table.Members() {
					if m.Name != e.self {
						e.send(m.Name, msg)
					}
				}
			}
		case slots.SendSnapshot:
			touched[uint16(ef.Slot)] = true
			e.d.Snapshots.SendSnapshot(ef)
		case slots.Seal:
			touched[uint16(ef.Slot)] = true
			e.sealing[uint16(ef.Slot)] = true
		case slots.DropSlot:
			touched[uint16(ef.Slot)] = true
			drops = append(drops, uint16(ef.Slot))
		case slots.MarkUnderReplicated:
			e.b.setFlag(e.b.underRep, uint16(ef.Slot), ef.On)
		case slots.MarkUnavailable:
			e.b.setFlag(e.b.unavail, uint16(ef.Slot), ef.On)
		}
	}
	if len(drops) > 0 {
		gens := make([]uint64, len(drops))
		for i, s := range drops {
			gens[i] = e.dropGen[s]
		}
		if err := e.d.Data.DropSlots(drops, gens); err != nil {
			e.d.Log.Error("drop slot data", "err", err)
		}
	}
	changed := false
	if all {
		for s := range slots.Count {
			changed = e.publish(uint16(s)) || changed
		}
	} else {
		for s := range touched {
			changed = e.publish(s) || changed
		}
	}
	if len(gained) > 0 {
		e.d.Gained(gained)
	}
	if recount {
		cnt := e.sets.counts(e.b.flagCounts())
		if all {
			// Every slot was just published: the sets must agree with the
			// machine, unless a flag went without its Mark effect.
			if full := e.m.Counts(); full != cnt {
				e.d.Log.Error("ownership counts disagree with the machine", "published", cnt, "machine", full)
				cnt = full
			}
		}
		changed = changed || cnt != *e.b.counts.Load()
		e.b.counts.Store(&cnt)
	}
	if changed {
		e.b.notify() // after the counts: a waiter on Changed sees them
	}
	if e.hadTable {
		e.b.tabled.Store(true)
		e.b.tableSum.Store(e.tableSum)
	}
	return true
}

// publish makes slot s's machine state visible to the data path and
// reports whether its role, epoch or firing changed.
func (e *Executor) publish(s uint16) bool {
	role, epoch, firing := e.m.Pub(slots.Slot(s))
	e.sets.note(s, role, firing, e.m.Synced(slots.Slot(s)))
	v := uint64(epoch)<<8 | uint64(role)
	if firing {
		v |= 1 << 7
	}
	changed := e.b.setPub(s, v)
	owner := role == slots.RoleOwner || role == slots.RoleSealing
	if !owner && e.reps[s].nodes == nil {
		e.sets.pending.put(s, false)
		return changed // the common case: nothing to replicate to, before or now
	}
	// Compared with the executor's own copy of what it published: no lock
	// and no allocation unless the replicas changed (publish runs for
	// every slot now and then).
	e.repScratch = e.m.AppendReplicas(e.repScratch[:0], slots.Slot(s))
	pending := e.m.FollowerPending(slots.Slot(s))
	e.sets.pending.put(s, pending)
	if !slices.Equal(e.repScratch, e.reps[s].nodes) || pending != e.reps[s].pending {
		var reps []string
		if len(e.repScratch) > 0 {
			reps = slices.Clone(e.repScratch)
		}
		was := e.reps[s].pending
		e.reps[s] = replicaSet{reps, pending}
		e.b.setReplicas(s, reps, pending)
		if was && !pending {
			e.d.Snapshots.FollowerReady()
		}
	}
	return changed
}

// checkSeals reports Sealed for the sealing slots that have no callback
// running any more (their results are committed).
func (e *Executor) checkSeals() []slots.Effect {
	var ss []uint16
	for s := range e.sealing {
		if e.m.State(slots.Slot(s)).Role != slots.RoleSealing {
			delete(e.sealing, s)
			continue
		}
		ss = append(ss, s)
	}
	if len(ss) == 0 {
		return nil
	}
	idle, err := e.d.Data.IdleSlots(ss)
	if err != nil {
		return nil
	}
	var effs []slots.Effect
	for _, s := range idle {
		delete(e.sealing, s)
		effs = append(effs, e.m.Step(slots.Sealed{Slot: slots.Slot(s), Seq: e.d.Data.Seq(s)})...)
	}
	return effs
}

// send queues msg for node to.
func (e *Executor) send(to string, msg Msg) {
	q := e.out[to]
	if len(q) >= maxOutbox {
		q = q[len(q)-maxOutbox/2:]
	}
	e.out[to] = append(q, msg)
}

// inFlight is a batch on its way to a node. Its sender posts the outcome
// (sentEvent) without waking the loop unless more waits for that node:
// the next step takes it, a Tick at the latest, so an idle node's
// deliveries cost no wake-up of their own (issue 17 item 1).
type inFlight struct {
	waiting atomic.Bool // the loop queued more for the node meanwhile
}

// deferrable reports whether msgs may wait for the node's next batch or
// ping (pingEvery after the last batch at most): pair acks only. An ack
// renews the owner's lease from the time the owner sent its pair beat, so
// a later ack renews the same lease, only later; beats go every Lease/4,
// so the lease holds through several late acks. Sending each ack at once
// was a third of an idle cluster's ctl requests.
func deferrable(msgs []Msg) bool {
	for _, m := range msgs {
		if _, ok := m.(*PairAck); !ok {
			return false
		}
	}
	return true
}

// flush sends each node's queued messages as one batch, one batch in
// flight per node; what queues meanwhile goes with the next. Queued pair
// acks alone wait until a ping is due (deferrable).
func (e *Executor) flush() {
	v := e.view
	if v == nil {
		return
	}
	now := e.d.Clock.Now()
	for to, msgs := range e.out {
		if deferrable(msgs) && now.Sub(e.lastSent[to]) < e.pingEvery() {
			continue
		}
		if f := e.sending[to]; f != nil {
			f.waiting.Store(true)
			continue
		}
		delete(e.out, to)
		mem, ok := v.member(to)
		if !ok || mem.Status == gossip.StatusDead || mem.Status == gossip.StatusLeft {
			continue // lost: the machine repeats what matters
		}
		f := &inFlight{}
		e.sending[to] = f
		e.lastSent[to] = now
		c, ok := e.couriers[to]
		if !ok {
			c = make(chan courierJob, 1)
			e.couriers[to] = c
			go e.courier(c)
		}
		// Never blocks: one batch in flight per node (sending).
		c <- courierJob{to: ring.Member{Name: to, HTTPAddr: mem.Meta.HTTPAddr}, bodies: encodeChunks(e.self, msgs, e.cfg.MaxBody), f: f}
	}
}

// courierJob is one batch for a courier to deliver.
type courierJob struct {
	to     ring.Member
	bodies [][]byte
	f      *inFlight
}

// courier delivers the batches to one node, one at a time, until jobs is
// closed (the node is dead or gone from the view, or the loop stopped),
// and posts each outcome (sentEvent). A goroutine per node rather than
// per batch: each new one grew its stack through the HTTP client's calls,
// copying it twice or three times a batch, 4 % of an idle node's CPU
// (issue 17 item 1, docs/BENCHMARKS.md).
func (e *Executor) courier(jobs <-chan courierJob) {
	for j := range jobs {
		err := e.d.Sender.Send(j.to, j.bodies)
		if err != nil {
			e.d.Log.Debug("ownership messages", "to", j.to.Name, "err", err)
		}
		ev := sentEvent{to: j.to.Name, ok: err == nil}
		if j.f.waiting.Load() {
			e.b.post(ev)
		} else {
			e.b.postQuiet(ev)
		}
	}
}

// dismissCouriers stops the couriers of the nodes v does not hold alive
// (all of them when v is nil); a batch in flight is still delivered.
func (e *Executor) dismissCouriers(v *View) {
	for to, c := range e.couriers {
		if v != nil {
			if m, ok := v.member(to); ok && m.Status != gossip.StatusDead && m.Status != gossip.StatusLeft {
				continue
			}
		}
		close(c)
		delete(e.couriers, to)
	}
}

// traced reports whether slot s's machine events are logged
// (Config.TraceEvery; a debugging aid).
func (e *Executor) traced(s uint16) bool {
	return e.cfg.TraceEvery > 0 && int(s)%e.cfg.TraceEvery == 0
}

func (e *Executor) trace(s uint16, ev slots.Event, out []slots.Effect) {
	switch ev.(type) {
	case slots.Replicated, slots.ReplAck, slots.Applied:
		interesting := false
		for _, ef := range out {
			switch ef.(type) {
			case slots.Heartbeat, slots.Ack, slots.PairHeartbeat, slots.PairAck:
			default:
				interesting = true
			}
		}
		if !interesting {
			return
		}
	}
	var es []string
	for _, ef := range out {
		switch ef.(type) {
		case slots.Heartbeat, slots.PairHeartbeat:
		default:
			es = append(es, ef.String())
		}
	}
	e.d.Log.Info("slot trace", "slot", s, "event", fmt.Sprintf("%T%+v", ev, ev), "effects", es, "now", e.m.Debug(slots.Slot(s)))
}

// logStuck logs the machine's view of a few slots that this node should own
// and has not taken for a while, to diagnose a slot that stays unavailable.
// It reads the published sets (slotSets), and the machine only for the
// slots it logs, or the followers' leaders while a member is dead.
func (e *Executor) logStuck() {
	now := e.d.Clock.Now()
	e.lastStuckLog = now
	if e.stuckSince == nil {
		e.stuckSince = map[uint16]time.Time{}
	}
	var dead []string // sorted, as the view's members
	if e.view != nil {
		for _, m := range e.view.Members {
			if m.Status == gossip.StatusDead {
				dead = append(dead, m.Name)
			}
		}
	}
	t := &e.sets
	stuck := func(s uint16) bool {
		if t.stuck.has(s) {
			return true
		}
		if len(dead) == 0 || !t.follower.has(s) {
			return false
		}
		_, gone := slices.BinarySearch(dead, e.m.Leader(slots.Slot(s)))
		return gone // following a dead owner
	}
	for s := range e.stuckSince {
		if !stuck(s) {
			delete(e.stuckSince, s)
		}
	}
	logged := 0
	each(func(i int) uint64 {
		if len(dead) > 0 {
			return t.stuck[i] | t.follower[i]
		}
		return t.stuck[i]
	}, func(s uint16) {
		if !stuck(s) {
			return
		}
		since, ok := e.stuckSince[s]
		if !ok {
			e.stuckSince[s] = now
			return
		}
		if now.Sub(since) > 5*time.Second && logged < 2 {
			logged++
			e.d.Log.Warn("slot not taken over yet", "slot", s, "for", now.Sub(since).Round(time.Second), "machine", e.m.Debug(slots.Slot(s)))
		}
	})
}

// ownedReport counts the slots this node owns or seals and describes up to
// max of them (Machine.Debug).
func (e *Executor) ownedReport(max int) string {
	var b strings.Builder
	owned, sealing := 0, 0
	for s := range slots.Count {
		switch e.m.State(slots.Slot(s)).Role {
		case slots.RoleOwner:
			owned++
		case slots.RoleSealing:
			sealing++
		default:
			continue
		}
		if owned+sealing <= max {
			fmt.Fprintf(&b, "; slot %d: %s", s, e.m.Debug(slots.Slot(s)))
		}
	}
	return fmt.Sprintf("owned %d, sealing %d%s", owned, sealing, b.String())
}
