package gossip

import (
	"time"

	"github.com/hashicorp/memberlist"
)

// delegate receives memberlist's callbacks. It is a separate type so that
// Membership's method set does not expose them.
//
// memberlist calls the EventDelegate methods while holding its node lock,
// from its packet and stream goroutines (and from Join, Start and Leave).
// They therefore read the *memberlist.Node only inside the call (its fields
// are rewritten in place afterwards), copy what they need, update the view
// under Membership.mu and do a non-blocking send; they never call back into
// memberlist and never wait.
type delegate struct {
	m *Membership
}

var (
	_ memberlist.Delegate      = (*delegate)(nil)
	_ memberlist.EventDelegate = (*delegate)(nil)
)

// NodeMeta implements memberlist.Delegate: the local encoded Meta, or nil
// if it does not fit in limit (never the case with MetaMaxSize, which
// Start and SetState enforce).
func (d *delegate) NodeMeta(limit int) []byte {
	p := d.m.local.Load()
	if p == nil || len(p.encoded) > limit {
		return nil
	}
	return p.encoded
}

// NotifyMsg implements memberlist.Delegate. The only message is the
// leave intent (intent.go); anything else is logged at debug and dropped.
// The buffer is decoded (copied) before return, as memberlist reuses it.
func (d *delegate) NotifyMsg(b []byte) {
	li, err := decodeMessage(b)
	if err != nil {
		d.m.log.Debug("gossip: dropped gossip message", "err", err)
		return
	}
	d.m.leaveIntent(li)
}

// GetBroadcasts implements memberlist.Delegate: queued leave intents.
func (d *delegate) GetBroadcasts(overhead, limit int) [][]byte {
	return d.m.bcast.GetBroadcasts(overhead, limit)
}

// LocalState implements memberlist.Delegate: the leave intents of the
// members this node counts as leaving or left, for every push/pull (a join
// and every PushPullInterval). Gossip sends an intent a bounded number of
// times, partly to members already dead; a member that missed every copy
// (a lossy link, a short partition) would count an operator-forgotten
// node as a voter for good and, with two of them, never see a majority
// again: its slots waited for good (node TestFaultForgetLostNodes, about
// one run in a hundred). The push/pull repairs that within an interval.
func (d *delegate) LocalState(bool) []byte {
	lis := d.m.intentState()
	if len(lis) == 0 {
		return nil
	}
	return encodeIntentState(lis)
}

// MergeRemoteState implements memberlist.Delegate: the other side's leave
// intents, each handled as if gossiped (leaveIntent).
func (d *delegate) MergeRemoteState(b []byte, _ bool) {
	if len(b) == 0 {
		return
	}
	lis, err := decodeIntentState(b)
	if err != nil {
		d.m.log.Debug("gossip: dropped remote state", "err", err)
		return
	}
	for _, li := range lis {
		d.m.leaveIntent(li)
	}
}

// intentState returns the leave intents that still describe the run of
// their member this node knows (a member that came back as a new run has
// none), at most maxStateIntents.
func (m *Membership) intentState() []leaveIntent {
	m.mu.Lock()
	defer m.mu.Unlock()
	var lis []leaveIntent
	for name, li := range m.mu.intents {
		if e := m.mu.view[name]; e == nil || e.m.Meta.BootID != li.BootID || !(e.leaving || e.m.Status == StatusLeft) {
			continue
		}
		if len(lis) == maxStateIntents {
			break
		}
		lis = append(lis, li)
	}
	return lis
}

// NotifyJoin implements memberlist.EventDelegate.
func (d *delegate) NotifyJoin(n *memberlist.Node) { d.m.apply(EventJoin, n) }

// NotifyUpdate implements memberlist.EventDelegate.
func (d *delegate) NotifyUpdate(n *memberlist.Node) { d.m.apply(EventUpdate, n) }

// NotifyLeave implements memberlist.EventDelegate.
func (d *delegate) NotifyLeave(n *memberlist.Node) { d.m.apply(EventLeave, n) }

// apply records one membership change in the view and hands a copy to the
// consumer without blocking. See the delegate doc for the rules it obeys.
func (m *Membership) apply(kind EventKind, n *memberlist.Node) {
	// memberlist does not maintain n.State (its own nodeState shadows it),
	// so the status follows from the callback and the leave intents.
	mem := Member{Name: n.Name, Addr: n.Address(), Status: StatusAlive}
	meta, metaErr := DecodeMeta(n.Meta)
	if metaErr == nil {
		mem.Meta = meta
	}
	now := time.Now()

	m.mu.Lock()
	if m.mu.closed {
		m.mu.Unlock()
		return
	}
	if metaErr != nil {
		m.mu.stats.MetaErrors++
	}
	e := m.mu.view[mem.Name]
	if e == nil {
		e = &entry{}
		m.mu.view[mem.Name] = e
	}
	switch {
	case kind == EventLeave && e.leaving:
		mem.Status, mem.Forgotten = StatusLeft, e.forgot
	case kind == EventLeave:
		mem.Status = StatusDead
	case kind == EventJoin || mem.Meta.BootID != e.m.Meta.BootID:
		e.leaving, e.forgot = false, false // back, or a new run of the node
	}
	if b := e.m.Meta.BootID; b != 0 && b != mem.Meta.BootID && metaErr == nil {
		e.prevBoot = b // a new run replaces the one we knew (EarlierRun)
	}
	logDropped := m.emitLocked(e, kind, mem, now)
	m.mu.Unlock()

	m.logDropped(logDropped)
	if metaErr != nil {
		m.log.Warn("gossip: undecodable member meta, treating state as unknown",
			logMember, mem.Name, "err", metaErr)
	}
}

// leaveIntent handles a leave intent: the member (in the run the intent
// names) is marked leaving, so its death reads as StatusLeft; if it is
// already dead it becomes left now; one we never saw is added as left. An intent seen for the first time is
// gossiped on, so it reaches members the leaver's own gossip missed.
func (m *Membership) leaveIntent(li leaveIntent) {
	now := time.Now()
	if li.Name == m.cfg.Name {
		if l := m.local.Load(); li.Forgot && l != nil && li.BootID != l.meta.BootID {
			m.runForgotten.Store(true) // an earlier run of ours (RunForgotten)
		}
		return
	}
	m.mu.Lock()
	if m.mu.closed {
		m.mu.Unlock()
		return
	}
	prev, seen := m.mu.intents[li.Name]
	if seen && prev.BootID == li.BootID {
		li.Forgot = li.Forgot || prev.Forgot // a forget stays one
	}
	first := !seen || prev.BootID != li.BootID || li.Forgot && !prev.Forgot
	m.mu.intents[li.Name] = li
	var logDropped uint64
	switch e := m.mu.view[li.Name]; {
	case e == nil:
		// A member we never saw (memberlist does not hand a joiner the
		// members that were dead when it joined): it is gone for good all
		// the same, and the slots we took over may still name it as a
		// suspect (slots.MemberDead), which only this can clear.
		e = &entry{leaving: true, forgot: li.Forgot}
		m.mu.view[li.Name] = e
		mem := Member{Name: li.Name, Meta: Meta{BootID: li.BootID}, Status: StatusLeft, Forgotten: li.Forgot}
		logDropped = m.emitLocked(e, EventLeave, mem, now)
	case e.m.Meta.BootID == li.BootID:
		e.leaving, e.forgot = true, li.Forgot
		if e.m.Status == StatusDead || e.m.Status == StatusLeft && li.Forgot && !e.m.Forgotten {
			mem := e.m
			mem.Status, mem.Forgotten = StatusLeft, li.Forgot
			logDropped = m.emitLocked(e, EventLeave, mem, now)
		}
	}
	m.mu.Unlock()

	m.logDropped(logDropped)
	if first {
		m.bcast.QueueBroadcast(newIntentBroadcast(li, nil))
	}
}

// emitLocked stores mem as e's new value, numbers the change and sends it
// to Events without blocking. On overflow it counts the drop, signals
// Resync and returns how many drops to log now (0 while rate limited).
func (m *Membership) emitLocked(e *entry, kind EventKind, mem Member, now time.Time) (logDropped uint64) {
	if e.m.Status != mem.Status {
		e.since = now
	}
	e.m = mem
	m.mu.seq++
	ev := Event{Kind: kind, Member: mem, Seq: m.mu.seq, At: now}
	select {
	case m.events <- ev:
		return 0
	default:
	}
	m.mu.stats.EventsDropped++
	m.mu.droppedSinceLog++
	select {
	case m.resync <- struct{}{}:
	default: // already signalled
	}
	if m.mu.lastDropLog.IsZero() || now.Sub(m.mu.lastDropLog) >= m.cfg.DropLogInterval {
		logDropped, m.mu.droppedSinceLog, m.mu.lastDropLog = m.mu.droppedSinceLog, 0, now
	}
	return logDropped
}

// logDropped logs a WARN about n dropped events, if n > 0.
func (m *Membership) logDropped(n uint64) {
	if n > 0 {
		m.log.Warn("gossip: membership events dropped, consumer must resync",
			"dropped", n, "buffer", cap(m.events))
	}
}

// numUp counts the members that are alive or suspect, for the retransmit
// limit of queued intents. It takes only mu, which is never held while
// calling memberlist or the queue, so the lock order stays acyclic.
func (m *Membership) numUp() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, e := range m.mu.view {
		if e.m.Up() {
			n++
		}
	}
	return max(n, 1)
}
