package node

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chime-scheduler/chime/ring"
	"github.com/chime-scheduler/chime/ring/gossip"
	"github.com/chime-scheduler/chime/slots"
)

// ctl runs this node's slot ownership in a cluster: it owns the pure state
// machine slots.Machine (DESIGN §4: epochs, leases, sealed handover,
// promotion after a crash, unavailable slots), feeds it events (views,
// ticks, messages from other nodes, what the writer applied) on one
// goroutine and carries out the effects it returns: persist through the
// writer, start and stop firing, stream snapshots through the shipper,
// seal, drop, and send the machine's messages to other nodes over
// /internal/v1/ctl.
//
// The data path reads what ctl publishes after every step, without locks:
// per slot the role, the epoch and whether this node fires it (pub), and
// the nodes an owner replicates to (reps).
type ctl struct {
	n      *Node
	m      *slots.Machine
	cfg    slots.Config
	voters slots.Voters // whom the majority is counted among (run loop only)
	// savedVoters are the voters last persisted: a restart starts from them.
	savedVoters []string

	mu    sync.Mutex
	queue []any // slots.Event or a ctl-internal event
	kick  chan struct{}
	stop  chan struct{}
	done  chan struct{}

	// pub packs each slot's published state: epoch<<8 | firing<<7 | role.
	pub   [slots.Count]atomic.Uint64
	repMu sync.RWMutex
	reps  [slots.Count][]string

	// flags: under-replicated and unavailable slots (MarkUnderReplicated,
	// MarkUnavailable), counted for metrics and readiness.
	flagMu   sync.Mutex
	underRep map[uint16]bool
	unavail  map[uint16]bool
	counts   atomic.Pointer[slots.Counts]
	tabled   atomic.Bool // the machine has had a table

	// The ctl goroutine's own state.
	view         *view
	lastTick     time.Time
	fresh        bool // no slot state yet: may bootstrap a new cluster
	sealing      map[uint16]bool
	out          map[string][]ctlMsg
	sending      map[string]bool        // a batch to that node is in flight
	lastSent     map[string]time.Time   // last batch sent to that node
	snapAsked    map[slotNode]time.Time // last snapshot asked on a gap
	dropGen      map[uint16]uint64      // data generation the machine last saw per slot
	tablePending bool                   // re-deliver the table (after a pause)
	hadTable     bool                   // the machine has had a table (published as tabled)
	lastStuckLog time.Time
	ticks        uint64
	lastPersist  time.Duration
	traceEvery   int
	stuckSince   map[uint16]time.Time
	notFiring    []time.Time // per slot: since when an owned slot is not firing (health.go)
	watch        stallWatch  // how long the process itself stalled (slots.Tick.Stalled)
}

// Internal ctl events.
type (
	ctlView struct{ old, v *view }
	ctlSent struct {
		to string
		ok bool
	}
	// ctlDebug asks for the machine's description of a slot.
	ctlDebug struct {
		slot uint16
		out  chan string
	}
	// ctlOwnedReport asks which slots this node still owns or seals, with
	// the machine's description of a few (drain diagnostics).
	ctlOwnedReport struct {
		out chan string
	}
	// ctlSnap: a snapshot was applied (durably) as data generation gen.
	ctlSnap struct {
		ev  slots.SnapshotComplete
		gen uint64
	}
	ctlGapSeen struct {
		slot  uint16
		epoch uint64
		from  string
	}
)

// Kinds of ctlMsg.
const (
	kBeat uint8 = 1 + iota
	kAck
	kSnapReq
	kNoReplica
	kOffer
	kHandover
	kAnnounce
	kReject
)

// Flags of ctlMsg.
const (
	fGrant  uint8 = 1
	fYes    uint8 = 2 // Synced (ack), WasOwner (offer)
	fRepl   uint8 = 4 // Announce.Replicated
	fOwner  uint8 = 8 // EpochSeen.Owner
	fSynced uint8 = 16
)

// ctlMsg is one machine message on the wire (see encodeCtl).
type ctlMsg struct {
	K    uint8
	Slot uint16
	E    uint64
	Q    uint64
	T    int64
	F    uint8
	N    string
}

type ctlBatch struct {
	From string
	Msgs []ctlMsg
}

// encodeCtl encodes a batch compactly: a version byte, the sender, then per
// message kind, slot, flags, and varints for epoch, seq, sent and the
// grantee's length. Tens of thousands go out per second; reflection-based
// msgpack was a tenth of an idle node's CPU.
func encodeCtl(b ctlBatch) []byte {
	out := make([]byte, 0, 8+len(b.From)+len(b.Msgs)*20)
	out = append(out, 1)
	out = binary.AppendUvarint(out, uint64(len(b.From)))
	out = append(out, b.From...)
	out = binary.AppendUvarint(out, uint64(len(b.Msgs)))
	for _, m := range b.Msgs {
		out = append(out, m.K, byte(m.Slot>>8), byte(m.Slot), m.F)
		out = binary.AppendUvarint(out, m.E)
		out = binary.AppendUvarint(out, m.Q)
		out = binary.AppendVarint(out, m.T)
		out = binary.AppendUvarint(out, uint64(len(m.N)))
		out = append(out, m.N...)
	}
	return out
}

// encodeCtlChunks encodes msgs from sender as batches of at most limit
// bytes each (the receiver's body limit), in order; an empty msgs is one
// empty batch (a ping).
func encodeCtlChunks(from string, msgs []ctlMsg, limit int) [][]byte {
	const fixed = 1 + 10 + 10 // version, sender length, count
	var out [][]byte
	start, size := 0, fixed+len(from)
	for i, m := range msgs {
		// A message's largest encoding: kind, slot, flags, three varints,
		// the name's length and the name.
		ms := 4 + 3*binary.MaxVarintLen64 + binary.MaxVarintLen64 + len(m.N)
		if i > start && size+ms > limit {
			out = append(out, encodeCtl(ctlBatch{From: from, Msgs: msgs[start:i]}))
			start, size = i, fixed+len(from)
		}
		size += ms
	}
	return append(out, encodeCtl(ctlBatch{From: from, Msgs: msgs[start:]}))
}

// decodeCtl is the inverse of encodeCtl; it fails on malformed input.
func decodeCtl(p []byte) (ctlBatch, error) {
	var b ctlBatch
	bad := errors.New("ctl: malformed batch")
	if len(p) == 0 || p[0] != 1 {
		return b, bad
	}
	p = p[1:]
	str := func() (string, bool) {
		n, k := binary.Uvarint(p)
		if k <= 0 || n > uint64(len(p)-k) {
			return "", false
		}
		v := string(p[k : k+int(n)])
		p = p[k+int(n):]
		return v, true
	}
	uv := func() (uint64, bool) {
		v, k := binary.Uvarint(p)
		if k <= 0 {
			return 0, false
		}
		p = p[k:]
		return v, true
	}
	var ok bool
	if b.From, ok = str(); !ok {
		return b, bad
	}
	n, ok := uv()
	if !ok || n > uint64(len(p)) {
		return b, bad
	}
	b.Msgs = make([]ctlMsg, 0, n)
	for range n {
		if len(p) < 4 {
			return b, bad
		}
		m := ctlMsg{K: p[0], Slot: uint16(p[1])<<8 | uint16(p[2]), F: p[3]}
		p = p[4:]
		var ok1, ok2 bool
		m.E, ok1 = uv()
		m.Q, ok2 = uv()
		t, k := binary.Varint(p)
		if !ok1 || !ok2 || k <= 0 {
			return b, bad
		}
		p = p[k:]
		m.T = t
		if m.N, ok = str(); !ok {
			return b, bad
		}
		b.Msgs = append(b.Msgs, m)
	}
	if len(p) != 0 {
		return b, bad
	}
	return b, nil
}

// maxOutbox bounds the messages waiting for one node; older ones are
// dropped (every message is best effort: the machine repeats what matters).
const maxOutbox = 1 << 17

func newCtl(n *Node, cfg slots.Config, metas map[uint16]storageMetaView) (*ctl, error) {
	persisted := make(map[slots.Slot]slots.SlotState, len(metas))
	for s, m := range metas {
		if m.role == 0 && m.epoch == 0 {
			continue
		}
		persisted[slots.Slot(s)] = slots.SlotState{Role: slots.Role(m.role), Epoch: slots.Epoch(m.epoch), Seq: m.seq, Grantee: m.grantee}
	}
	m, err := slots.New(cfg, persisted)
	if err != nil {
		return nil, err
	}
	c := &ctl{n: n, m: m, cfg: cfg, kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
		underRep: map[uint16]bool{}, unavail: map[uint16]bool{}, sealing: map[uint16]bool{},
		out: map[string][]ctlMsg{}, sending: map[string]bool{}, lastSent: map[string]time.Time{},
		snapAsked: map[slotNode]time.Time{}, dropGen: map[uint16]uint64{}, fresh: len(persisted) == 0}
	for s := range slots.Count {
		c.publish(uint16(s))
	}
	c.counts.Store(&slots.Counts{})
	c.traceEvery = max(0, n.cfg.Cluster.TraceSlots)
	return c, nil
}

// storageMetaView is what newCtl needs of a stored SlotMeta.
type storageMetaView struct {
	role    uint8
	epoch   uint64
	seq     uint64
	grantee string
}

// post queues events for the ctl goroutine. It never blocks.
func (c *ctl) post(evs ...any) {
	c.mu.Lock()
	c.queue = append(c.queue, evs...)
	c.mu.Unlock()
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// tickEvery is how often the machine gets a Tick: below Lease/8 and a
// third of the pause gap, so a delayed tick does not read as a pause.
func (c *ctl) tickEvery() time.Duration { return min(c.cfg.Lease/8, c.cfg.Pause/3) }

func (c *ctl) close() {
	close(c.stop)
	<-c.done
}

func (c *ctl) run() {
	defer close(c.done)
	c.watch.last.Store(time.Now().UnixNano())
	go c.watch.run(c.stop)
	t := time.NewTicker(c.tickEvery())
	defer t.Stop()
	for {
		tick := false
		select {
		case <-c.stop:
			return
		case <-c.kick:
		case <-t.C:
			tick = true
		}
		t0 := time.Now()
		c.mu.Lock()
		batch := c.queue
		c.queue = nil
		c.mu.Unlock()
		var effs []slots.Effect
		all, counts := false, false // publish every slot; recount
		touched := map[uint16]bool{}
		if tick {
			now := time.Now().Round(0)
			stalled := c.watch.take(now)
			if !c.lastTick.IsZero() && now.Sub(c.lastTick) > c.cfg.Pause {
				c.n.log.Warn("ownership ticks paused: the view is re-read", "gap", now.Sub(c.lastTick).Round(time.Millisecond),
					"process_stalled", stalled.Round(time.Millisecond))
				c.tablePending = true
			}
			c.lastTick = now
			effs = append(effs, c.m.Step(slots.Tick{Now: now, Stalled: stalled, StallKnown: true})...)
			c.ticks++
			counts = c.ticks%4 == 0
			all = c.ticks%16 == 0 // a safety net: everything is republished now and then
			if c.tablePending && c.view != nil {
				c.tablePending = false
				te, stepped := c.tableEvent(c.view)
				effs = append(effs, te...)
				all = all || stepped
			}
			c.pingIdle(now)
		}
		for _, ev := range batch {
			switch ev := ev.(type) {
			case ctlView:
				effs = append(effs, c.onView(ev.old, ev.v)...)
				all = true
			case ctlDebug:
				ev.out <- c.m.Debug(slots.Slot(ev.slot))
			case ctlOwnedReport:
				ev.out <- c.ownedReport(3)
			case ctlSent:
				c.sending[ev.to] = false
				if ev.ok {
					effs = append(effs, c.m.Step(slots.MemberAlive{Name: ev.to})...)
				}
			case ctlGapSeen:
				k := slotNode{ev.slot, ev.from}
				if at, ok := c.snapAsked[k]; ok && time.Since(at) < c.cfg.Lease {
					continue
				}
				c.snapAsked[k] = time.Now()
				touched[ev.slot] = true
				effs = append(effs, c.m.Step(slots.SnapshotRequest{Slot: slots.Slot(ev.slot), Epoch: slots.Epoch(ev.epoch), From: ev.from})...)
			case ctlSnap:
				c.dropGen[uint16(ev.ev.Slot)] = ev.gen
				touched[uint16(ev.ev.Slot)] = true
				effs = append(effs, c.m.Step(ev.ev)...)
			case slots.Event:
				s, ok := eventSlot(ev)
				if ok {
					touched[s] = true
				}
				out := c.m.Step(ev)
				if ok && c.traced(s) {
					c.trace(s, ev, out)
				}
				effs = append(effs, out...)
			}
		}
		if tick && time.Since(c.lastStuckLog) > 3*time.Second {
			c.logStuck()
		}
		if tick && c.ticks%4 == 0 {
			c.checkStalls(time.Now())
		}
		if tick && len(c.sealing) > 0 {
			effs = append(effs, c.checkSeals()...)
		}
		for _, ev := range batch {
			if e, ok := ev.(slots.MemberAlive); ok && e.Restarted {
				all = true
			}
			if _, ok := ev.(slots.MemberDead); ok {
				all = true
			}
		}
		t1 := time.Now()
		c.execute(effs, touched, all, all || counts)
		if d := time.Since(t0); d > time.Second {
			c.n.log.Warn("slow ownership step", "events", len(batch), "effects", len(effs), "step", t1.Sub(t0).Round(time.Millisecond),
				"execute", time.Since(t1).Round(time.Millisecond), "persist", c.lastPersist.Round(time.Millisecond))
		}
		c.flush()
	}
}

// onView turns a new view into the machine's events.
func (c *ctl) onView(old, v *view) []slots.Effect {
	c.view = v
	var effs []slots.Effect
	for _, ch := range memberChangeList(old.members, v.members) {
		switch ch.kind {
		case "dead", "left":
			effs = append(effs, c.m.Step(slots.MemberDead{Name: ch.name, Left: ch.kind == "left"})...)
		case "restart":
			effs = append(effs, c.m.Step(slots.MemberAlive{Name: ch.name, Restarted: true})...)
		case "join":
			effs = append(effs, c.m.Step(slots.MemberAlive{Name: ch.name})...)
		}
	}
	te, _ := c.tableEvent(v)
	return append(effs, te...)
}

// tableEvent steps the machine with v's table. A node with no slot state
// whose table holds only such nodes, or nodes that started a new cluster
// with this very table (Meta.Genesis), is part of a brand-new cluster: it
// waits until the view has settled, then bootstraps (the first owners take
// epoch 1, each the slots the shared table gives it). Any other table goes
// to the machine at once.
func (c *ctl) tableEvent(v *view) (_ []slots.Effect, stepped bool) {
	if len(v.table.Members()) == 0 {
		return nil, false // not joined yet
	}
	boot := false
	if c.fresh {
		in := map[string]bool{}
		for _, m := range v.table.Members() {
			in[m.Name] = true
		}
		sum := v.table.Checksum()
		genesis := true
		for _, m := range v.members {
			if in[m.Name] && !m.Meta.Fresh && m.Meta.Genesis != sum {
				genesis = false // it holds data: this cluster is not new
			}
		}
		if genesis {
			if !v.settled(c.n.now(), c.n.cfg.Cluster.SettleTime) {
				return nil, false // the tick re-checks (see pingIdle)
			}
			boot = true
		}
	}
	// The majority is counted among the voters (slots.Voters): the
	// members that hold data (active or draining) and did not leave, as
	// long as this node sees a majority of the ones it had.
	var members, alive []string
	for _, m := range v.members {
		if m.Meta.State != gossip.StateActive && m.Meta.State != gossip.StateDraining {
			continue
		}
		switch m.Status {
		case gossip.StatusAlive:
			alive = append(alive, m.Name)
			members = append(members, m.Name)
		case gossip.StatusSuspect, gossip.StatusDead:
			members = append(members, m.Name)
		}
	}
	sees, stable := c.voters.Count(members, alive)
	if !c.voters.Is(c.savedVoters) {
		// Durable before the machine acts on them, so that a restart does
		// not start from its first view (see slots.Voters).
		vs := c.voters.Members()
		if err := c.n.store.SetVoters(vs); err != nil {
			c.n.log.Error("save voters", "voters", vs, "err", err)
		} else {
			c.savedVoters = vs
		}
	}
	effs := c.m.Step(slots.TableChanged{Table: v.table, StableSize: stable, Sees: sees, Bootstrap: boot})
	c.hadTable = true
	if c.fresh && (boot || len(effs) > 0) {
		c.fresh = false
		var g uint64
		if boot {
			g = v.table.Checksum()
		}
		go c.n.cluster.setGenesis(g)
	}
	return effs, true
}

// pingIdle sends an empty batch to every live member not written to within
// Settle/4: its answer is a sign of life for the machine's majority
// evidence. It also retries a bootstrap that waited for the view to settle.
func (c *ctl) pingIdle(now time.Time) {
	v := c.view
	if v == nil {
		return
	}
	if c.fresh {
		c.tablePending = true
	}
	for _, m := range v.members {
		if m.Name == c.n.cfg.Name || m.Status != gossip.StatusAlive {
			continue
		}
		if now.Sub(c.lastSent[m.Name]) >= c.cfg.Settle/4 {
			if _, ok := c.out[m.Name]; !ok {
				c.out[m.Name] = []ctlMsg{}
			}
		}
	}
}

// execute carries out effects: every Persist first (durable before
// anything else happens), then the rest in order.
func (c *ctl) execute(effs []slots.Effect, touched map[uint16]bool, all, recount bool) {
	var persist []slots.Persist
	for _, e := range effs {
		if p, ok := e.(slots.Persist); ok {
			persist = append(persist, p)
		}
	}
	c.lastPersist = 0
	if len(persist) > 0 {
		pt := time.Now()
		err := c.n.writer.persistStates(persist)
		c.lastPersist = time.Since(pt)
		if err != nil {
			c.n.log.Error("persist slot ownership: effects not carried out", "err", err)
			return
		}
	}
	var gained, drops []uint16
	for _, e := range effs {
		switch e := e.(type) {
		case slots.Persist:
			touched[uint16(e.Slot)] = true
		case slots.StartFiring:
			touched[uint16(e.Slot)] = true
			gained = append(gained, uint16(e.Slot))
		case slots.StopFiring:
			touched[uint16(e.Slot)] = true
		case slots.Heartbeat:
			c.send(e.To, ctlMsg{K: kBeat, Slot: uint16(e.Slot), E: uint64(e.Epoch), Q: e.Seq, T: e.Sent.UnixNano(), F: flag(e.Grant, fGrant), N: e.Release})
		case slots.Ack:
			c.send(e.To, ctlMsg{K: kAck, Slot: uint16(e.Slot), E: uint64(e.Epoch), Q: e.Seq, T: e.Sent.UnixNano(),
				F: flag(e.Grant, fGrant) | flag(e.Synced, fSynced), N: e.Released})
		case slots.RequestSnapshot:
			c.send(e.From, ctlMsg{K: kSnapReq, Slot: uint16(e.Slot), E: uint64(e.Epoch)})
		case slots.SendNoReplica:
			c.send(e.To, ctlMsg{K: kNoReplica, Slot: uint16(e.Slot), E: uint64(e.Epoch)})
		case slots.OfferHandover:
			c.send(e.To, ctlMsg{K: kOffer, Slot: uint16(e.Slot), E: uint64(e.Epoch), Q: e.Seq, F: flag(e.WasOwner, fYes), N: e.Grantee})
		case slots.SendHandover:
			touched[uint16(e.Slot)] = true
			c.send(e.To, ctlMsg{K: kHandover, Slot: uint16(e.Slot), E: uint64(e.Epoch), Q: e.Seq, F: flag(e.Grant, fGrant)})
		case slots.RejectLowerEpoch:
			c.send(e.To, ctlMsg{K: kReject, Slot: uint16(e.Slot), E: uint64(e.Epoch)})
		case slots.Announce:
			if v := c.view; v != nil {
				for _, m := range v.table.Members() {
					if m.Name != c.n.cfg.Name {
						c.send(m.Name, ctlMsg{K: kAnnounce, Slot: uint16(e.Slot), E: uint64(e.Epoch), F: fOwner | flag(e.Replicated, fRepl)})
					}
				}
			}
		case slots.SendSnapshot:
			touched[uint16(e.Slot)] = true
			c.n.ship.sendSnapshot(uint16(e.Slot), uint64(e.Epoch), e.To, e.Sent, e.Grant, e.Owner)
		case slots.Seal:
			touched[uint16(e.Slot)] = true
			c.sealing[uint16(e.Slot)] = true
		case slots.DropSlot:
			touched[uint16(e.Slot)] = true
			drops = append(drops, uint16(e.Slot))
		case slots.MarkUnderReplicated:
			c.flagMu.Lock()
			setFlag(c.underRep, uint16(e.Slot), e.On)
			c.flagMu.Unlock()
		case slots.MarkUnavailable:
			c.flagMu.Lock()
			setFlag(c.unavail, uint16(e.Slot), e.On)
			c.flagMu.Unlock()
		}
	}
	if len(drops) > 0 {
		gens := make([]uint64, len(drops))
		for i, s := range drops {
			gens[i] = c.dropGen[s]
		}
		if err := c.n.writer.dropSlots(drops, gens); err != nil {
			c.n.log.Error("drop slot data", "err", err)
		}
	}
	if all {
		for s := range slots.Count {
			c.publish(uint16(s))
		}
	} else {
		for s := range touched {
			c.publish(s)
		}
	}
	if len(gained) > 0 {
		c.n.metrics.takeovers.Add(float64(len(gained)))
		c.n.loop.gain(gained)
	}
	if recount {
		cnt := c.m.Counts()
		c.counts.Store(&cnt)
	}
	if c.hadTable {
		c.tabled.Store(true)
	}
}

func flag(on bool, f uint8) uint8 {
	if on {
		return f
	}
	return 0
}

func setFlag(m map[uint16]bool, s uint16, on bool) {
	if on {
		m[s] = true
	} else {
		delete(m, s)
	}
}

// traced reports whether slot s's machine events are logged
// (CHIME_TRACE_SLOTS=k logs every k-th slot; a debugging aid).
func (c *ctl) traced(s uint16) bool { return c.traceEvery > 0 && int(s)%c.traceEvery == 0 }

func (c *ctl) trace(s uint16, ev slots.Event, out []slots.Effect) {
	switch ev.(type) {
	case slots.Replicated, slots.ReplAck, slots.Applied:
		interesting := false
		for _, e := range out {
			switch e.(type) {
			case slots.Heartbeat, slots.Ack:
			default:
				interesting = true
			}
		}
		if !interesting {
			return
		}
	}
	var es []string
	for _, e := range out {
		if _, ok := e.(slots.Heartbeat); !ok {
			es = append(es, e.String())
		}
	}
	c.n.log.Info("slot trace", "slot", s, "event", fmt.Sprintf("%T%+v", ev, ev), "effects", es, "now", c.m.Debug(slots.Slot(s)))
}

// logStuck logs the machine's view of a few slots that this node should own
// and has not taken for a while, to diagnose a slot that stays unavailable.
func (c *ctl) logStuck() {
	c.lastStuckLog = time.Now()
	if c.stuckSince == nil {
		c.stuckSince = map[uint16]time.Time{}
	}
	logged := 0
	for s := range slots.Count {
		r := c.m.State(slots.Slot(s)).Role
		stuck := r == slots.RoleImporting || r == slots.RoleUnavailable
		if r == slots.RoleFollower && c.view != nil {
			if l := c.m.Leader(slots.Slot(s)); l != "" {
				if m, ok := c.view.member(l); ok && m.Status == gossip.StatusDead {
					stuck = true // following a dead owner
				}
			}
		}
		if !stuck {
			delete(c.stuckSince, uint16(s))
			continue
		}
		since, ok := c.stuckSince[uint16(s)]
		if !ok {
			c.stuckSince[uint16(s)] = time.Now()
			continue
		}
		if time.Since(since) > 5*time.Second && logged < 2 {
			logged++
			c.n.log.Warn("slot not taken over yet", "slot", s, "for", time.Since(since).Round(time.Second), "machine", c.m.Debug(slots.Slot(s)))
		}
	}
}

// ownedReport counts the slots this node owns or seals and describes up to
// max of them (Machine.Debug).
func (c *ctl) ownedReport(max int) string {
	var b strings.Builder
	owned, sealing := 0, 0
	for s := range slots.Count {
		switch c.m.State(slots.Slot(s)).Role {
		case slots.RoleOwner:
			owned++
		case slots.RoleSealing:
			sealing++
		default:
			continue
		}
		if owned+sealing <= max {
			fmt.Fprintf(&b, "; slot %d: %s", s, c.m.Debug(slots.Slot(s)))
		}
	}
	return fmt.Sprintf("owned %d, sealing %d%s", owned, sealing, b.String())
}

// checkSeals reports Sealed for the sealing slots that have no callback
// running any more (their results are committed).
func (c *ctl) checkSeals() []slots.Effect {
	var ss []uint16
	for s := range c.sealing {
		if c.m.State(slots.Slot(s)).Role != slots.RoleSealing {
			delete(c.sealing, s)
			continue
		}
		ss = append(ss, s)
	}
	if len(ss) == 0 {
		return nil
	}
	idle, err := c.n.writer.sealCheck(ss)
	if err != nil {
		return nil
	}
	var effs []slots.Effect
	for _, s := range idle {
		delete(c.sealing, s)
		seq := c.n.writer.repl.position(s).Seq
		effs = append(effs, c.m.Step(slots.Sealed{Slot: slots.Slot(s), Seq: seq})...)
	}
	return effs
}

// publish makes slot s's machine state visible to the data path.
func (c *ctl) publish(s uint16) {
	st := c.m.State(slots.Slot(s))
	v := uint64(st.Epoch)<<8 | uint64(st.Role)
	if c.m.Firing(slots.Slot(s)) {
		v |= 1 << 7
	}
	c.pub[s].Store(v)
	owner := st.Role == slots.RoleOwner || st.Role == slots.RoleSealing
	c.repMu.RLock()
	had := c.reps[s] != nil
	c.repMu.RUnlock()
	if !owner && !had {
		return // the common case: nothing to replicate to, before or now
	}
	reps := c.m.Replicas(slots.Slot(s))
	c.repMu.RLock()
	same := slices.Equal(reps, c.reps[s])
	c.repMu.RUnlock()
	if !same {
		c.repMu.Lock()
		c.reps[s] = reps
		c.repMu.Unlock()
	}
}

// state returns slot s's published role, epoch and whether it fires.
func (c *ctl) state(s uint16) (role slots.Role, epoch uint64, firing bool) {
	if int(s) >= slots.Count {
		return 0, 0, false
	}
	v := c.pub[s].Load()
	return slots.Role(v & 0x7f), v >> 8, v&(1<<7) != 0
}

// holds reports the epoch at which this node holds slot s as its owner
// (owner or sealing), 0 if it does not.
func (c *ctl) holds(s uint16) uint64 {
	r, e, _ := c.state(s)
	if r == slots.RoleOwner || r == slots.RoleSealing {
		return e
	}
	return 0
}

// replicas returns the nodes slot s's writes go to.
func (c *ctl) replicas(s uint16) []string {
	if int(s) >= slots.Count {
		return nil
	}
	c.repMu.RLock()
	defer c.repMu.RUnlock()
	return c.reps[s]
}

// flagged returns the slots flagged under-replicated and unavailable.
func (c *ctl) flagged() (under, unavail []uint16) {
	c.flagMu.Lock()
	for s := range c.underRep {
		under = append(under, s)
	}
	for s := range c.unavail {
		unavail = append(unavail, s)
	}
	c.flagMu.Unlock()
	slices.Sort(under)
	slices.Sort(unavail)
	return under, unavail
}

// send queues msg for node to.
func (c *ctl) send(to string, msg ctlMsg) {
	q := c.out[to]
	if len(q) >= maxOutbox {
		q = q[len(q)-maxOutbox/2:]
	}
	c.out[to] = append(q, msg)
}

// flush sends each node's queued messages as one batch, one batch in
// flight per node; what queues meanwhile goes with the next.
func (c *ctl) flush() {
	v := c.view
	if v == nil {
		return
	}
	for to, msgs := range c.out {
		if c.sending[to] {
			continue
		}
		delete(c.out, to)
		mem, ok := v.member(to)
		if !ok || mem.Status == gossip.StatusDead || mem.Status == gossip.StatusLeft {
			continue // lost: the machine repeats what matters
		}
		c.sending[to] = true
		c.lastSent[to] = time.Now()
		target := ring.Member{Name: to, HTTPAddr: mem.Meta.HTTPAddr}
		bodies := encodeCtlChunks(c.n.cfg.Name, msgs, maxCtlBody)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), c.cfg.Settle)
			defer cancel()
			ok := true
			for _, body := range bodies {
				res, err := c.n.fwd.do(ctx, target, http.MethodPost, "/internal/v1/ctl", body,
					http.Header{"Content-Type": {"application/octet-stream"}}, 0)
				if err != nil || res.status != http.StatusOK {
					c.n.log.Debug("ownership messages", "to", to, "err", err, "status", res.status, "answer", string(res.body))
					ok = false
					break
				}
			}
			c.post(ctlSent{to: to, ok: ok})
		}()
	}
}

// eventSlot returns the slot a machine message is about.
func eventSlot(ev slots.Event) (uint16, bool) {
	switch ev := ev.(type) {
	case slots.Replicated:
		return uint16(ev.Slot), true
	case slots.ReplAck:
		return uint16(ev.Slot), true
	case slots.SnapshotRequest:
		return uint16(ev.Slot), true
	case slots.SnapshotComplete:
		return uint16(ev.Slot), true
	case slots.NoReplica:
		return uint16(ev.Slot), true
	case slots.HandoverOffer:
		return uint16(ev.Slot), true
	case slots.HandoverDone:
		return uint16(ev.Slot), true
	case slots.EpochSeen:
		return uint16(ev.Slot), true
	case slots.Sealed:
		return uint16(ev.Slot), true
	}
	return 0, false
}

// handleCtl receives another node's machine messages.
func (n *Node) handleCtl(w http.ResponseWriter, r *http.Request) {
	from, body, e := n.readSigned(r, "ctl", maxCtlBody)
	if e != nil {
		writeError(w, e)
		return
	}
	b, err := decodeCtl(body)
	if err != nil {
		writeError(w, invalid("body", "ctl: %v", err))
		return
	}
	if n.ctl == nil || b.From == "" || (from != "" && b.From != from) {
		writeError(w, invalid("from", "ctl: the body names sender %q, the signature %q", b.From, from))
		return
	}
	evs := make([]any, 0, len(b.Msgs)+1)
	evs = append(evs, slots.MemberAlive{Name: b.From})
	for _, m := range b.Msgs {
		if int(m.Slot) >= slots.Count {
			continue
		}
		s, ep, t := slots.Slot(m.Slot), slots.Epoch(m.E), time.Unix(0, m.T)
		switch m.K {
		case kBeat:
			evs = append(evs, slots.Replicated{Slot: s, Epoch: ep, Seq: m.Q, From: b.From, Sent: t, Grant: m.F&fGrant != 0, Release: m.N})
		case kAck:
			evs = append(evs, slots.ReplAck{Slot: s, Epoch: ep, Seq: m.Q, From: b.From, Sent: t, Grant: m.F&fGrant != 0, Synced: m.F&fSynced != 0, Released: m.N})
		case kSnapReq:
			evs = append(evs, slots.SnapshotRequest{Slot: s, Epoch: ep, From: b.From})
		case kNoReplica:
			evs = append(evs, slots.NoReplica{Slot: s, Epoch: ep, From: b.From})
		case kOffer:
			evs = append(evs, slots.HandoverOffer{Slot: s, Epoch: ep, Seq: m.Q, From: b.From, WasOwner: m.F&fYes != 0, Grantee: m.N})
		case kHandover:
			evs = append(evs, slots.HandoverDone{Slot: s, Epoch: ep, Seq: m.Q, From: b.From, Grant: m.F&fGrant != 0})
		case kAnnounce, kReject:
			evs = append(evs, slots.EpochSeen{Slot: s, Epoch: ep, From: b.From, Owner: m.F&fOwner != 0, Replicated: m.F&fRepl != 0})
		}
	}
	n.ctl.post(evs...)
	w.WriteHeader(http.StatusOK)
}

// handleSlotDebug shows the ownership machine's view of one slot.
func (n *Node) handleSlotDebug(w http.ResponseWriter, r *http.Request) {
	if _, _, e := n.readSigned(r, "slots", 0); e != nil {
		writeError(w, e)
		return
	}
	s, err := strconv.Atoi(r.PathValue("slot"))
	if err != nil || s < 0 || s >= slots.Count || n.ctl == nil {
		writeError(w, invalid("slot", "want a slot number below %d in a cluster", slots.Count))
		return
	}
	ch := make(chan string, 1)
	n.ctl.post(ctlDebug{slot: uint16(s), out: ch})
	select {
	case d := <-ch:
		writeJSON(w, http.StatusOK, map[string]any{"node": n.cfg.Name, "slot": s, "machine": d})
	case <-r.Context().Done():
	}
}

// member returns the member named name.
func (v *view) member(name string) (gossip.Member, bool) {
	i, ok := slices.BinarySearchFunc(v.members, name, func(m gossip.Member, n string) int {
		switch {
		case m.Name < n:
			return -1
		case m.Name > n:
			return 1
		}
		return 0
	})
	if !ok {
		return gossip.Member{}, false
	}
	return v.members[i], true
}

// memberChangeList is memberChanges with the member names.
func memberChangeList(old, cur []gossip.Member) []namedChange {
	prev := make(map[string]gossip.Member, len(old))
	for _, m := range old {
		prev[m.Name] = m
	}
	var out []namedChange
	for _, m := range cur {
		p, seen := prev[m.Name]
		switch {
		case !seen || (!p.Up() && m.Up() && p.Meta.BootID == m.Meta.BootID):
			if m.Up() {
				out = append(out, namedChange{"join", m.Name})
			}
		case p.Meta.BootID != m.Meta.BootID:
			out = append(out, namedChange{"restart", m.Name})
		case p.Status != gossip.StatusLeft && m.Status == gossip.StatusLeft:
			// It left: once it handed its slots over, or when its drain
			// gave up (a cap, a peer it could not reach). Then its slots
			// fail over as from a dead node, once its leases ran out. Or,
			// dead already, an operator forgot it (gone for good).
			out = append(out, namedChange{"left", m.Name})
		case p.Up() && !m.Up():
			out = append(out, namedChange{"dead", m.Name})
		}
		delete(prev, m.Name)
	}
	for _, p := range prev {
		if p.Up() {
			out = append(out, namedChange{"dead", p.Name}) // dropped from the membership unseen
		}
	}
	slices.SortFunc(out, func(a, b namedChange) int { return strings.Compare(a.name, b.name) })
	return out
}

type namedChange struct{ kind, name string }

type slotNode struct {
	slot uint16
	node string
}

// String describes the machine's counts (logs).
func (c *ctl) String() string {
	k := c.counts.Load()
	return fmt.Sprintf("owned=%d firing=%d following=%d importing=%d under=%d unavailable=%d",
		k.Owned, k.Firing, k.Following, k.Importing, k.UnderReplicated, k.Unavailable)
}
