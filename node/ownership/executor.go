// Package ownership runs a cluster node's slot ownership: the executor
// owns the pure state machine slots.Machine (DESIGN §4: epochs, leases,
// sealed handover, promotion after a crash, unavailable slots), feeds it
// events (views, ticks, messages from other nodes, what the writer
// applied) on one goroutine and carries out the effects it returns:
// persist, start and stop firing, stream snapshots, seal, drop, and send
// the machine's messages to other nodes (wire.go, msg_*.go). It knows the
// node only through the small interfaces of Deps; the node wires them.
//
// The data path reads what the executor publishes after every step on the
// Board, without locks.
package ownership

import (
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"time"

	"github.com/chime-scheduler/chime/node/clock"
	"github.com/chime-scheduler/chime/ring"
	"github.com/chime-scheduler/chime/ring/gossip"
	"github.com/chime-scheduler/chime/slots"
)

// Persister makes the machine's state durable.
type Persister interface {
	// PersistStates makes the machine's Persist effects durable.
	PersistStates([]slots.Persist) error
	// SetVoters makes the voters durable (see slots.Voters).
	SetVoters([]string) error
	// SetConsents makes the machine's consents durable
	// (slots.PersistConsents), replacing the ones before.
	SetConsents([]slots.Consent) error
}

// SlotData carries out the machine's decisions on a slot's data.
type SlotData interface {
	// DropSlots deletes slots' data, durably, unless a slot's data
	// generation moved past the one given (a newer snapshot).
	DropSlots(ss []uint16, gens []uint64) error
	// IdleSlots returns the slots of ss with no callback running, once
	// their results are durable.
	IdleSlots(ss []uint16) ([]uint16, error)
	// Seq returns slot s's data position (its last replicated seq).
	Seq(s uint16) uint64
}

// Snapshots streams a full copy of a slot to a node.
type Snapshots interface {
	// SendSnapshot queues the copy the machine's effect asks for: its
	// Epoch is the machine's, the data keeps its own position; Grant,
	// Owner, Inc, Term and Final travel with it to the receiver's
	// SnapshotComplete.
	SendSnapshot(ef slots.SendSnapshot)
	// FollowerReady says that a slot's replicas can take it over now (the
	// board's Replicas says safe again): writes that waited may be done.
	FollowerReady()
}

// Sender delivers encoded batches to another node.
type Sender interface {
	// Send posts bodies to node to in order, stopping at the first
	// failure, within a timeout of its own; nil means all arrived.
	Send(to ring.Member, bodies [][]byte) error
}

// Deps is what the executor needs of the node.
type Deps struct {
	Persister Persister
	Data      SlotData
	Snapshots Snapshots
	Sender    Sender
	Clock     clock.Clock // the executor's only source of time
	Log       *slog.Logger
	// Gained is told of the slots this node started owning at a new
	// epoch (to load their due tasks).
	Gained func(ss []uint16)
	// Genesis is told, on a goroutine of its own, that this fresh node
	// got slot state: table is the checksum of the table it bootstrapped
	// a new cluster with, 0 if it joined one.
	Genesis func(table uint64)
	// Stalled is given each stall report (stalls.go).
	Stalled func(*StallReport)
	// RunForgotten reports whether an operator forgot an earlier run of
	// this node (gossip.Membership.RunForgotten): the machine then drops
	// the claims its data holds (slots.Disowned) before its first table.
	RunForgotten func() bool
	// EarlierRun, set for a node that started with no slot state, asks
	// the members up in members whether its name had an earlier run
	// (node: GET /internal/v1/run). Asked once, at the first view with a
	// member up besides this node that holds slot state (a cluster that
	// exists, not one forming), before that view's table: yes means
	// that run's claims and consents went with its data dir, and the
	// machine takes nothing it held (slots.Disowned), as after a forget.
	EarlierRun func(members []gossip.Member) bool
}

// Config is the executor's configuration.
type Config struct {
	// Machine configures the machine. Its Incarnation, if 0, is drawn at
	// random by New: a new value for every start of the node.
	Machine slots.Config
	// SettleTime is how long the view must not change before a fresh
	// node bootstraps a new cluster.
	SettleTime time.Duration
	// OverdueAfter: an owned slot not firing that long is stalled.
	OverdueAfter time.Duration
	// TraceEvery logs the machine's events of every k-th slot (0: none).
	TraceEvery int
	// MaxBody is the receiver's limit on a batch's size.
	MaxBody int
	// Beat, when set, is the period the ticks fall on: every tick is at a
	// multiple of Beat since the Unix epoch (node: the gossip interval,
	// whose rounds memberlist starts on the same multiples, see
	// gossip.Membership.Start). The loop's own wake-ups then coincide
	// with the membership's and with the other nodes' (tickEvery).
	Beat time.Duration
}

// maxOutbox bounds the messages waiting for one node; older ones are
// dropped (every message is best effort: the machine repeats what matters).
const maxOutbox = 1 << 17

// Executor runs the machine: one goroutine (Run), stopped by Close.
type Executor struct {
	m      *slots.Machine
	cfg    Config
	b      *Board
	d      Deps
	self   string
	voters slots.Voters // whom the majority is counted among
	// savedVoters are the voters last persisted: a restart starts from them.
	savedVoters []string
	// disowned: the machine was told that an earlier run was forgotten or
	// lost with its data (slots.Disowned); read off the executor's
	// goroutine too (Disowned).
	disowned atomic.Bool
	// askedEarlier: Deps.EarlierRun was asked (once).
	askedEarlier bool

	stop chan struct{}
	done chan struct{}

	// The run goroutine's own state.
	view     *View
	lastTick time.Time
	fresh    bool // no slot state yet: may bootstrap a new cluster
	sealing  map[uint16]bool
	// reps is what publish last gave the board as each slot's replicas
	// (read and written on the executor's goroutine only); repScratch is
	// publish's buffer.
	reps       [slots.Count]replicaSet
	repScratch []string
	// nearRaise: slots whose near bound the machine changed and the board
	// may still hold lower (raised after the firing bits, bounds.go).
	nearRaise    []slots.Slot
	out          map[string][]Msg
	sending      map[string]*inFlight       // a batch to that node is in flight
	couriers     map[string]chan courierJob // the goroutine delivering each node's batches (courier)
	lastSent     map[string]time.Time       // last batch sent to that node
	snapAsked    map[slotNode]time.Time     // last snapshot asked on a gap
	dropGen      map[uint16]uint64          // data generation the machine last saw per slot
	tablePending bool                       // re-deliver the table (after a pause)
	hadTable     bool                       // the machine has had a table (published as tabled)
	tableSum     uint64                     // the checksum of the last table it was given (published)
	lastStuckLog time.Time
	ticks        uint64
	lastPersist  time.Duration
	stuckSince   map[uint16]time.Time
	sets         slotSets    // each slot's role and firing as published, and the table's slots
	notFiring    []time.Time // per slot: since when an owned slot is not firing (stalls.go)
	notFiringSet slotSet     // the slots whose notFiring is set
	watch        stallWatch  // how long the process itself stalled (slots.Tick.Stalled)
	lastStalls   *StallReport
	// lastStallCheck is when checkStalls last ran (every stallCheckEvery).
	lastStallCheck time.Time

	// The genesis table (msg_genesis.go). genesisNames are the members of
	// the table this node bootstrapped a new cluster with (in memory: a
	// straggler asks while the cluster forms), genesisSum its checksum.
	genesisNames []string
	genesisSum   uint64
	// A fresh node asking for another genesis table: since when it waits
	// (zero: not waiting), when it last asked, the verified table that
	// holds it (nil: none yet), and the checksums of tables that do not.
	genesisWait  time.Time
	genesisAsked time.Time
	genesisOf    string // the member last asked; only its answer counts
	genesisTable *ring.Table
	genesisNotIn map[uint64]bool
}

// genesisPatience is how long a fresh node waits for the members of a
// genesis table it asked for before it joins as a new member (the node
// that advertised it may be gone, or run an older version).
const genesisPatience = 10 * time.Second

type slotNode struct {
	slot uint16
	node string
}

// New builds the executor of a node whose persisted slot states are
// persisted and persisted voters voters, publishing on b. A node with no
// slot state is fresh: it may bootstrap a new cluster. A zero
// cfg.Machine.Incarnation is replaced by a random nonzero one, so that
// every start of the node has its own (slots.Config.Incarnation).
func New(cfg Config, persisted map[slots.Slot]slots.SlotState, voters []string, b *Board, d Deps) (*Executor, error) {
	for cfg.Machine.Incarnation == 0 {
		cfg.Machine.Incarnation = rand.Uint64()
	}
	m, err := slots.New(cfg.Machine, persisted)
	if err != nil {
		return nil, err
	}
	e := &Executor{m: m, cfg: cfg, b: b, d: d, self: cfg.Machine.Self, voters: *slots.NewVoters(voters), savedVoters: voters,
		stop: make(chan struct{}), done: make(chan struct{}),
		sealing: map[uint16]bool{}, out: map[string][]Msg{}, sending: map[string]*inFlight{}, couriers: map[string]chan courierJob{}, lastSent: map[string]time.Time{},
		snapAsked: map[slotNode]time.Time{}, dropGen: map[uint16]uint64{}, fresh: len(persisted) == 0}
	for s := range slots.Count {
		e.publish(uint16(s))
	}
	return e, nil
}

// tickEvery is how often the machine gets a Tick: below Lease/8 and a
// third of the pause gap, so a delayed tick does not read as a pause, and
// a multiple or a divisor of Config.Beat when set (tickPeriod).
func (e *Executor) tickEvery() time.Duration {
	return tickPeriod(min(e.cfg.Machine.Lease/8, e.cfg.Machine.Pause/3), e.cfg.Beat)
}

// tickPeriod returns the longest period up to d that is a multiple of
// beat or divides it: d rounded down to a multiple of beat, or when beat
// is longer than d, beat divided by the smallest count that brings it to
// d or below (so ticks still fall on every beat). d itself when beat is 0.
//
// Ticks on the beat are what make an idle node cheap (issue 17 item 1):
// most of its CPU goes to waking up, not to the work it wakes for. Ticks
// on a period of their own (133 ms in the local profile), memberlist's
// gossip rounds (100 ms) and probes, and each peer's pings at its own
// phase woke an idle node ~26 times a second; on the gossip beat, with
// every node's ticks at the same instants, ~13 (runtime trace), and its
// CPU fell by about a quarter (docs/BENCHMARKS.md).
func tickPeriod(d, beat time.Duration) time.Duration {
	if beat <= 0 || d <= 0 {
		return d
	}
	if beat <= d {
		return d.Truncate(beat)
	}
	n := (beat + d - 1) / d
	return beat / n
}

// pingEvery is how long the loop lets pass without a batch to a live
// member before it sends one, empty if need be: the signs of life the
// machine's evidence of a majority counts (slots.Config.Settle), four
// chances per Settle. Pings every Settle/2 (the pair beats' period, one
// batch per beat) cut an idle node's requests further, but on the fault
// tests' lossy links the evidence lapsed more often and the tests ran
// ~15 % longer (TestFaultJoin, TestFaultAckOwnerCrash): lapses stop what
// acts on a majority, so the cheaper cadence was not worth it.
func (e *Executor) pingEvery() time.Duration { return e.cfg.Machine.Settle / 4 }

// Close stops Run and waits for it.
func (e *Executor) Close() {
	close(e.stop)
	<-e.done
}

// Run steps the machine until Close.
func (e *Executor) Run() {
	defer close(e.done)
	defer e.dismissCouriers(nil)
	e.watch.last.Store(e.d.Clock.Now().UnixNano())
	ticks := make(chan struct{}, 1)
	watching := make(chan struct{})
	go func() {
		defer close(watching)
		e.watch.run(e.d.Clock, e.tickEvery(), ticks, e.stop)
	}()
	defer func() { <-watching }()
	for {
		tick := false
		select {
		case <-e.stop:
			return
		case <-e.b.kick:
		case <-ticks:
			tick = true
		}
		e.step(tick)
	}
}

// step feeds the machine a tick (if tick) and the posted events, and
// carries out the effects.
func (e *Executor) step(tick bool) {
	t0 := e.d.Clock.Now()
	batch := e.b.take()
	var effs []slots.Effect
	all, counts := false, false // publish every slot; recount
	touched := map[uint16]bool{}
	effs = e.sentFirst(batch, effs)
	if tick {
		now := e.d.Clock.Now().Round(0)
		stalled := e.watch.take(now)
		if !e.lastTick.IsZero() && now.Sub(e.lastTick) > e.cfg.Machine.Pause {
			e.d.Log.Warn("ownership ticks paused: the view is re-read", "gap", now.Sub(e.lastTick).Round(time.Millisecond),
				"process_stalled", stalled.Round(time.Millisecond))
			e.tablePending = true
		}
		e.lastTick = now
		effs = append(effs, e.m.Step(slots.Tick{Now: now, Stalled: stalled, StallKnown: true})...)
		e.ticks++
		counts = e.ticks%8 == 0
		// A safety net: everything is republished now and then, and the
		// counts checked against the machine's. Every effect, view change
		// and what the machine reports moved (TakeMoved) publishes what it
		// touched anyway, so a gap would be a bug (the slots cluster
		// harness checks for one: checkMoved). Each round reads all 16,384
		// slot records: at 16 ticks it was ~10 % of an idle node's CPU, at
		// 64 ~2 % (docs/BENCHMARKS.md, issue 17 item 1).
		all = e.ticks%512 == 0
		if e.tablePending && e.view != nil {
			e.tablePending = false
			te, stepped := e.tableEvent(e.view)
			effs = append(effs, te...)
			all = all || stepped
		}
		e.pingIdle(now)
	}
	for _, ev := range batch {
		switch ev := ev.(type) {
		case viewEvent:
			effs = append(effs, e.onView(ev.old, ev.cur)...)
			all = true
		case genesisAsked:
			if e.genesisNames != nil && ev.sum == e.genesisSum {
				e.send(ev.from, &GenesisTable{Sum: e.genesisSum, Names: e.genesisNames})
			}
		case genesisTold:
			if e.onGenesisTold(ev) && e.view != nil {
				te, stepped := e.tableEvent(e.view)
				effs = append(effs, te...)
				all = all || stepped
			}
		case debugEvent:
			ev.out <- e.m.Debug(slots.Slot(ev.slot))
		case ownedReportEvent:
			ev.out <- e.ownedReport(3)
		case sentEvent:
			// Handled before the Tick (sentFirst).
		case gapEvent:
			k := slotNode{ev.slot, ev.from}
			now := e.d.Clock.Now()
			if at, ok := e.snapAsked[k]; ok && now.Sub(at) < e.cfg.Machine.Lease {
				continue
			}
			e.snapAsked[k] = now
			touched[ev.slot] = true
			effs = append(effs, e.m.Step(slots.SnapshotRequest{Slot: slots.Slot(ev.slot), Epoch: slots.Epoch(ev.epoch), From: ev.from})...)
		case snapEvent:
			e.dropGen[uint16(ev.ev.Slot)] = ev.gen
			touched[uint16(ev.ev.Slot)] = true
			effs = append(effs, e.m.Step(ev.ev)...)
		case slots.Event:
			s, ok := eventSlot(ev)
			if ok {
				touched[s] = true
			}
			out := e.m.Step(ev)
			if ok && e.traced(s) {
				e.trace(s, ev, out)
			}
			effs = append(effs, out...)
		}
	}
	if tick && len(e.sealing) > 0 {
		effs = append(effs, e.checkSeals()...)
	}
	for _, ev := range batch {
		if a, ok := ev.(slots.MemberAlive); ok && a.Restarted {
			all = true
		}
		if _, ok := ev.(slots.MemberDead); ok {
			all = true
		}
	}
	// What the Tick and the member and table events changed, besides
	// the slots' own events.
	e.m.TakeMoved(func(s slots.Slot) { touched[uint16(s)] = true })
	t1 := e.d.Clock.Now()
	e.lowerBounds()
	if e.execute(effs, touched, all, all || counts) {
		e.raiseBounds()
	}
	// After execute: they read what it published (slotSets).
	if tick && e.d.Clock.Now().Sub(e.lastStuckLog) > 3*time.Second {
		e.logStuck()
	}
	if now := e.d.Clock.Now(); tick && now.Sub(e.lastStallCheck) >= stallCheckEvery {
		e.lastStallCheck = now
		e.checkStalls(now)
	}
	if d := e.d.Clock.Now().Sub(t0); d > time.Second {
		e.d.Log.Warn("slow ownership step", "events", len(batch), "effects", len(effs), "step", t1.Sub(t0).Round(time.Millisecond),
			"execute", e.d.Clock.Now().Sub(t1).Round(time.Millisecond), "persist", e.lastPersist.Round(time.Millisecond))
	}
	e.flush()
}

// Disowned reports whether this run took nothing its data or its name's
// earlier run held (slots.Disowned): that run was forgotten, or its data
// dir was lost (Deps.EarlierRun).
func (e *Executor) Disowned() bool { return e.disowned.Load() }

// holdersUp reports whether a member other than self that holds slot
// state (not Meta.Fresh: an existing cluster, not one forming) is up in
// ms. A node joins a cluster whose members are all fresh only as it forms,
// and then its name has no earlier run that held anything.
func holdersUp(ms []gossip.Member, self string) bool {
	for _, m := range ms {
		if m.Name != self && m.Up() && !m.Meta.Fresh {
			return true
		}
	}
	return false
}

// onView turns a new view into the machine's events.
func (e *Executor) onView(old, v View) []slots.Effect {
	e.view = &v
	e.dismissCouriers(e.view)
	for s := range slots.Count {
		e.sets.tabled.put(uint16(s), v.Owns != nil && v.Owns(uint16(s)))
	}
	var effs []slots.Effect
	if !e.disowned.Load() && e.d.RunForgotten != nil && e.d.RunForgotten() {
		// Before any table: what our data says we owned was taken without
		// us (chime cluster forget on another member).
		e.disowned.Store(true)
		e.d.Log.Warn("an operator forgot an earlier run of this node: the slots its data says it owned or handed over are not claimed")
		effs = append(effs, e.m.Step(slots.Disowned{})...)
	}
	if !e.disowned.Load() && !e.askedEarlier && e.d.EarlierRun != nil && holdersUp(v.Members, e.cfg.Machine.Self) {
		e.askedEarlier = true
		if e.d.EarlierRun(v.Members) {
			e.disowned.Store(true)
			e.d.Log.Warn("this node started with an empty data dir but its name had an earlier run: it claims nothing that run held (forget a node before bringing it back empty)")
			effs = append(effs, e.m.Step(slots.Disowned{})...)
		}
	}
	for _, ch := range memberChanges(old.Members, v.Members) {
		switch ch.kind {
		case "dead", "left", "forgot":
			effs = append(effs, e.m.Step(slots.MemberDead{Name: ch.name, Left: ch.kind != "dead", Forgot: ch.kind == "forgot"})...)
		case "restart":
			effs = append(effs, e.m.Step(slots.MemberAlive{Name: ch.name, Restarted: true, Empty: ch.empty})...)
		case "join":
			effs = append(effs, e.m.Step(slots.MemberAlive{Name: ch.name})...)
		}
	}
	te, _ := e.tableEvent(e.view)
	return append(effs, te...)
}

// tableEvent steps the machine with v's table. A node with no slot state
// whose table holds only such nodes, or nodes that started a new cluster
// with this very table (Meta.Genesis), is part of a brand-new cluster: it
// waits until the view has settled, then bootstraps (the first owners take
// epoch 1, each the slots the shared table gives it). Any other table goes
// to the machine at once.
func (e *Executor) tableEvent(v *View) (_ []slots.Effect, stepped bool) {
	if len(v.Table.Members()) == 0 {
		return nil, false // not joined yet
	}
	var boot *ring.Table // the table this node bootstraps a new cluster with
	if e.fresh {
		in := map[string]bool{}
		for _, m := range v.Table.Members() {
			in[m.Name] = true
		}
		sum := v.Table.Checksum()
		genesis, started := true, false // started: a member bootstrapped with this table
		var asked string                // a member that started a new cluster with another table
		var other uint64                // that table's checksum
		for _, m := range v.Members {
			if in[m.Name] && !m.Meta.Fresh && m.Meta.Genesis == sum {
				started = true
			}
			if in[m.Name] && !m.Meta.Fresh && m.Meta.Genesis != sum {
				genesis = false // it holds data: this cluster is not new
				if g := m.Meta.Genesis; g != 0 && !e.genesisNotIn[g] && m.Status == gossip.StatusAlive {
					asked, other = m.Name, g
				}
			}
		}
		now := e.d.Clock.Now()
		switch {
		case !in[e.self]:
			// Not in its own table yet (joining): nothing to bootstrap;
			// the table goes to the machine, which gives this node nothing.
		case genesis:
			// The view must settle first (it may lack members yet), unless
			// a member already bootstrapped with this very table: then the
			// table is decided, and waiting only leaves its slots unowned.
			if !started && !v.settled(now, e.cfg.SettleTime) {
				return nil, false // the tick re-checks (see pingIdle)
			}
			boot = &v.Table
		case e.genesisTable != nil:
			// Another member bootstrapped with a table that holds this
			// node before this node's view settled: bootstrap with that
			// table, as if it had settled with it, then take the current
			// one (which moves slots as any table change does).
			boot = e.genesisTable
		case asked != "" && (e.genesisWait.IsZero() || now.Sub(e.genesisWait) < genesisPatience):
			if e.genesisWait.IsZero() {
				e.genesisWait = now
			}
			if now.Sub(e.genesisAsked) >= e.cfg.Machine.Lease {
				e.genesisAsked, e.genesisOf = now, asked
				e.send(asked, &GenesisAsk{Sum: other})
			}
			return nil, false // the tick re-checks (see pingIdle)
		case asked != "":
			e.d.Log.Warn("no member told this node the table a new cluster started with: it joins as a new member",
				"asked", asked, "waited", now.Sub(e.genesisWait).Round(time.Millisecond))
		}
	}
	// The majority is counted among the voters (slots.Voters): the
	// members that hold data (active or draining) and did not leave, as
	// long as this node sees a majority of the ones it had.
	var members, alive []string
	for _, m := range v.Members {
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
	sees, stable := e.voters.Count(members, alive)
	if !e.voters.Is(e.savedVoters) {
		// Durable before the machine acts on them, so that a restart does
		// not start from its first view (see slots.Voters).
		vs := e.voters.Members()
		if err := e.d.Persister.SetVoters(vs); err != nil {
			e.d.Log.Error("save voters", "voters", vs, "err", err)
		} else {
			e.savedVoters = vs
		}
	}
	var effs []slots.Effect
	voters := e.voters.Members()
	if boot != nil {
		effs = e.m.Step(slots.TableChanged{Table: *boot, StableSize: stable, Sees: sees, Voters: voters, Bootstrap: true})
	}
	if boot == nil || boot.Checksum() != v.Table.Checksum() {
		effs = append(effs, e.m.Step(slots.TableChanged{Table: v.Table, StableSize: stable, Sees: sees, Voters: voters})...)
	}
	e.hadTable, e.tableSum = true, v.Table.Checksum()
	if e.fresh && (boot != nil || len(effs) > 0) {
		e.fresh = false
		var g uint64
		if boot != nil {
			g = boot.Checksum()
			e.genesisSum = g
			for _, m := range boot.Members() {
				e.genesisNames = append(e.genesisNames, m.Name)
			}
		}
		go e.d.Genesis(g)
	}
	return effs, true
}

// onGenesisTold takes the members of a genesis table this node asked for
// (msg_genesis.go), from the member it asked, while it is fresh: a table whose checksum they give
// and that holds this node is the one it bootstraps with (it reports
// true: step the table again); one that does not hold it is not asked
// for again.
func (e *Executor) onGenesisTold(ev genesisTold) bool {
	if !e.fresh || e.genesisTable != nil || ev.from != e.genesisOf {
		return false // not asked for (checking it costs a ring.Assign)
	}
	ms := make([]ring.Member, len(ev.names))
	for i, n := range ev.names {
		ms[i] = ring.Member{Name: n}
	}
	t := ring.Assign(ms, slots.Count)
	if t.Checksum() != ev.sum {
		e.d.Log.Warn("a genesis table's members do not give its checksum", "from", ev.from, "members", len(ev.names))
		return false
	}
	if !slices.Contains(ev.names, e.self) {
		if e.genesisNotIn == nil {
			e.genesisNotIn = map[uint64]bool{}
		}
		e.genesisNotIn[ev.sum] = true
		return true
	}
	e.d.Log.Info("bootstrapping with the table a new cluster started with", "from", ev.from, "members", len(ev.names))
	e.genesisTable = &t
	return true
}

// sentFirst handles the batches delivered (or not) to other nodes, before
// the Tick: a delivery is a sign of life of its receiver, stamped with the
// machine's time before the Tick, never later than it happened (most are
// posted without waking the loop, see inFlight).
func (e *Executor) sentFirst(batch []any, effs []slots.Effect) []slots.Effect {
	for _, ev := range batch {
		if ev, ok := ev.(sentEvent); ok {
			delete(e.sending, ev.to)
			if ev.ok {
				effs = append(effs, e.m.Step(slots.MemberAlive{Name: ev.to})...)
			}
		}
	}
	return effs
}

// pingDue reports whether a member last written to at last is due a
// ping at now: nothing was sent to it since the last multiple of every
// (since the Unix epoch) at or before now, so the pings fall on the same
// ticks on every node (Config.Beat), one per period on average whatever
// the tick period: on 100 ms ticks and a 250 ms period they go at 0, 300,
// 500 and 800 ms, four a second. Or every or more passed since last (by
// the monotonic clock), which holds when the wall clock steps back.
func pingDue(now, last time.Time, every time.Duration) bool {
	if now.Sub(last) >= every {
		return true
	}
	mark := now.UnixNano() - now.UnixNano()%int64(every)
	return last.UnixNano() < mark
}

// pingIdle sends an empty batch to every live member not written to within
// pingEvery: its answer is a sign of life for the machine's majority
// evidence. It also retries a bootstrap that waited for the view to settle.
func (e *Executor) pingIdle(now time.Time) {
	v := e.view
	if v == nil {
		return
	}
	if e.fresh {
		e.tablePending = true
	}
	for _, m := range v.Members {
		if m.Name == e.self || m.Status != gossip.StatusAlive {
			continue
		}
		if pingDue(now, e.lastSent[m.Name], e.pingEvery()) {
			if _, ok := e.out[m.Name]; !ok {
				e.out[m.Name] = []Msg{}
			}
		}
	}
}

// eventSlot returns the slot a machine message is about; what the
// writer applied (slots.Applied) changes nothing published and counts as
// none.
func eventSlot(ev slots.Event) (uint16, bool) {
	if _, ok := ev.(slots.Applied); ok {
		return 0, false
	}
	s, ok := slots.SlotOf(ev)
	return uint16(s), ok
}
