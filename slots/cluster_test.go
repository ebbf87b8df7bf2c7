package slots

import (
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chime-scheduler/chime/ring"
)

// voteAll runs every multi-node test's machines with Config.Vote.
var voteAll = flag.Bool("vote", true, "run the multi-node tests' machines with Config.Vote (as node does); -vote=false runs them without")

// base is the fake monotonic origin; scripts give times as offsets.
var base = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// message is an in-flight message between two machines.
type message struct {
	from, to string
	ev       Event
	at       time.Time // deliverable from
	has      bool      // ghost: a snapshot's sender had the data
}

// cluster wires Machines through an in-test message queue that can drop,
// delay and partition messages. It checks the per-node and cross-node
// invariants after every Step.
type cluster struct {
	t        testing.TB
	numSlots int
	names    []string // every node ever created, sorted
	m        map[string]*Machine
	alive    map[string]bool
	group    map[string]int // partition group; equal groups reach each other
	draining map[string]bool
	paused   map[string]time.Time // frozen process (GC or VM stall) until then
	// busy: a loaded node's run loop is stuck until then (a long step,
	// a starved goroutine): its network and failure detector work, but
	// messages to it and its ticks wait. When it resumes it re-reads its
	// view, as node does after a tick gap.
	busy map[string]time.Time
	// busyIsPause makes a busy node's resume Tick not say that its
	// process ran on: the whole gap counts as a pause (before issue 18).
	busyIsPause bool
	ticks       int
	probeEvery  int // ticks between signs of life (0 or 1: every tick)
	stable      int // stable cluster size for the majority check
	disk        map[string]map[Slot]SlotState
	queue       []message
	now         time.Time
	epochs      map[string][]Epoch // highest epoch each node ever reported
	out         *strings.Builder   // effects log, nil to discard

	// Ghost state for the invariants (not visible to the machines).
	// has[n][s]: n's disk holds the slot's data by a legal chain: it
	// bootstrapped the slot, or installed a snapshot from a node that had
	// it. A machine may only claim a valid replica it has.
	has map[string][]bool
	// owners[s][e] is the one node that ever took epoch e of slot s, and
	// ownerBoot[s][e] its boot (restart count) when it took it.
	owners    []map[Epoch]string
	ownerBoot []map[Epoch]int

	// boot[n] counts n's restarts; known[o][n] is the boot of n that o
	// has heard of (memberlist metadata carries it).
	boot  map[string]int
	known map[string]map[string]int
	// wiped[n]: n's data dir was wiped and it has not restarted since;
	// emptyBoot[n]: the boot of n that started with a wiped data dir
	// (memberlist metadata carries it: MemberAlive.Empty).
	wiped     map[string]bool
	emptyBoot map[string]int

	// Fault knobs for the simulation.
	rng      *rand.Rand
	sealBump bool
	trace    bool // print every event and effect
	dropProb float64
	maxDelay time.Duration
	maxMoves int // Config.MaxMoves of machines created from now on (0: the default)
	// deadAfter is Config.DeadAfter of machines created from now on, and,
	// if set, the failure detector's minimum time to declare a node dead:
	// deathsOf declares none unreached for less, and redetect holds when
	// each node may declare the next (see undetected).
	deadAfter time.Duration
	unreach   map[[2]string]time.Time
	redetect  map[string]time.Time
	// flap[{a, b}]: a's failure detector declared b dead, wrongly (a
	// loaded machine missed its probes), until then, when b's refutation
	// reaches it; messages between them flow on meanwhile.
	flap map[[2]string]time.Time
	// voters, if set, counts each node's majority as node does (Voters,
	// kept across restarts) instead of against stable.
	voters map[string]*Voters
	// starts counts machines created: each gets the next Incarnation.
	starts uint64
	// vote: machines created from now on run with Config.Vote; consents
	// is each node's last PersistConsents (its disk).
	vote     bool
	consents map[string][]Consent
	// balanced: tables come from ring.Assign, as node computes them
	// (loads bounded to ±5 %). Otherwise plain rendezvous hashing: the
	// scripts and the simulation model a cluster with 4–64 slots, where
	// the bound would force every member to ⌊⌋/⌈⌉ of the slots, unlike a
	// real cluster of a handful of members over 16384 slots, whose table
	// is exactly plain HRW's (ring.TestAssignIsHRWWithinBound). So they
	// keep the placements, and the regression seeds, they were written for.
	balanced bool
	// lean (the scale test): the O(NumSlots) checks run on every running
	// node once per leanEvery ticks instead of after every Step (checkAll),
	// and reachability is not tracked (deadAfter must be 0). The O(1)
	// checks of each effect (two firing, an epoch taken twice or going
	// down, a replica never received) still run on every one.
	lean      bool
	leanEvery int
	// left: nodes that drained and left the cluster for good: others
	// learn MemberDead{Left} and they are no voters any more.
	left map[string]bool
	// forgot: of left, nodes an operator declared gone for good (chime
	// cluster forget): others learn MemberDead{Left, Forgot}.
	forgot     map[string]bool
	tableCache map[string]ring.Table // lean: tables by member names
	// pub is what a node has published of each machine's slots, as node's
	// executor keeps it (checkMoved).
	pub map[*Machine][]pubState
	// asks counts each node's requests for a copy and offers, by target
	// and slot, in the current second of fake time (checkAsks).
	asks    map[askKey]int
	asksSec int64
}

// askKey is one node's asks of one kind to one node for one slot.
type askKey struct {
	from, to string
	slot     Slot
	kind     byte
}

// maxAsksPerSecond bounds one node's requests for a copy (or offers) to
// one node for one slot in a second of fake time. The machines ask again
// at their retries, a Lease apart, and each member once per round: more is
// a loop at message rate, each answer bringing the next ask (sim seed 5956
// with -simsteps 400: a holder without a copy answered NoReplica to the
// importer's requests for it, each answer brought the next request, and
// every repeat of the handover added a request to the loop).
const maxAsksPerSecond = 10

// checkAsks counts one ask and fails the test once a node asks one node
// for one slot more often than maxAsksPerSecond.
func (c *cluster) checkAsks(k askKey) {
	if sec := c.now.Unix(); sec != c.asksSec || c.asks == nil {
		c.asks, c.asksSec = map[askKey]int{}, sec
	}
	c.asks[k]++
	if c.asks[k] == maxAsksPerSecond+1 {
		c.t.Errorf("at %v %s asked %s %c for slot %d more than %d times in a second: a loop at message rate",
			c.now.Sub(base), k.from, k.to, k.kind, k.slot, maxAsksPerSecond)
	}
}

// pubState is what node publishes of a slot.
type pubState struct {
	role           Role
	epoch          Epoch
	firing, synced bool
}

// checkMoved asserts that a node publishing only what its executor does
// after m.Step(ev) returned effs sees every change: the slot of ev (SlotOf),
// the slots of effs that persist or start or stop firing, the slots
// TakeMoved reports, and every slot after a member's death or restart or a
// new table. Any other change would stay unpublished (the data path would
// fire or refuse on a stale role) until node's periodic republishing.
func (c *cluster) checkMoved(name string, m *Machine, ev Event, effs []Effect) {
	c.t.Helper()
	if c.pub == nil {
		c.pub = map[*Machine][]pubState{}
	}
	pub := c.pub[m]
	if pub == nil {
		pub = make([]pubState, m.NumSlots())
		c.pub[m] = pub
		for s := range pub {
			pub[s] = m.pubState(Slot(s))
		}
		m.TakeMoved(func(Slot) {})
		return
	}
	seen := map[Slot]bool{}
	if s, ok := SlotOf(ev); ok {
		seen[s] = true
	}
	for _, e := range effs {
		switch e := e.(type) {
		case Persist:
			seen[e.Slot] = true
		case StartFiring:
			seen[e.Slot] = true
		case StopFiring:
			seen[e.Slot] = true
		}
	}
	m.TakeMoved(func(s Slot) { seen[s] = true })
	all := false
	switch ev := ev.(type) {
	case MemberDead, TableChanged:
		all = true
	case MemberAlive:
		all = ev.Restarted
	}
	for s := range pub {
		now := m.pubState(Slot(s))
		if now != pub[s] && !all && !seen[Slot(s)] {
			c.t.Fatalf("%s after %T%+v: slot %d went from %+v to %+v unreported", name, ev, ev, s, pub[s], now)
		}
		pub[s] = now
	}
}

func (m *Machine) pubState(s Slot) pubState {
	si := &m.slots[s]
	return pubState{si.role, si.epoch, si.firing, si.synced}
}

func newCluster(t testing.TB, numSlots int) *cluster {
	return &cluster{
		t: t, numSlots: numSlots, m: map[string]*Machine{}, alive: map[string]bool{},
		group: map[string]int{}, draining: map[string]bool{}, disk: map[string]map[Slot]SlotState{},
		paused: map[string]time.Time{}, busy: map[string]time.Time{},
		unreach: map[[2]string]time.Time{}, redetect: map[string]time.Time{}, flap: map[[2]string]time.Time{},
		epochs: map[string][]Epoch{}, now: base, has: map[string][]bool{},
		boot: map[string]int{}, known: map[string]map[string]int{}, wiped: map[string]bool{}, emptyBoot: map[string]int{},
		owners: make([]map[Epoch]string, numSlots), ownerBoot: make([]map[Epoch]int, numSlots),
		vote: *voteAll,
	}
}

// run ticks every 100 ms for d, delivering what each tick causes.
func (c *cluster) run(d time.Duration) {
	c.t.Helper()
	for end := c.now.Add(d); c.now.Before(end); {
		c.tick(c.now.Add(100 * time.Millisecond))
		c.deliver(100)
	}
}

func (c *cluster) config(name string) Config {
	cfg := DefaultLocalConfig(name)
	cfg.NumSlots = c.numSlots
	cfg.DeadAfter = c.deadAfter
	cfg.Vote = c.vote
	cfg.Consents = c.consents[name]
	if c.maxMoves != 0 {
		cfg.MaxMoves = c.maxMoves
	}
	return cfg
}

// add creates (or restarts, with its disk) node name.
func (c *cluster) add(name string, persisted map[Slot]SlotState) {
	c.t.Helper()
	cfg := c.config(name)
	c.starts++
	cfg.Incarnation = c.starts
	m, err := New(cfg, persisted)
	if err != nil {
		c.t.Fatal(err)
	}
	if !slices.Contains(c.names, name) {
		c.names = append(c.names, name)
		slices.Sort(c.names)
		c.epochs[name] = make([]Epoch, c.numSlots)
		c.has[name] = make([]bool, c.numSlots)
	}
	if c.disk[name] == nil {
		c.disk[name] = map[Slot]SlotState{}
	}
	for s, st := range persisted {
		c.disk[name][s] = st
	}
	c.m[name] = m
	c.alive[name] = true
	for s := range c.numSlots {
		c.checkEpoch(name, Slot(s))
	}
	m.Step(Tick{Now: c.now})
	if !c.lean {
		c.checkMoved(name, m, nil, nil) // what this node published first
	}
}

func (c *cluster) crash(name string) {
	c.alive[name] = false
	c.queue = slices.DeleteFunc(c.queue, func(msg message) bool { return msg.to == name || msg.from == name })
}

func (c *cluster) restart(name string) {
	if c.voters != nil && c.voters[name] != nil {
		// A new process, with the voters it persisted (node saves them
		// whenever they change).
		c.voters[name] = NewVoters(c.voters[name].Members())
	}
	c.boot[name]++
	if c.wiped[name] {
		c.emptyBoot[name], c.wiped[name] = c.boot[name], false
	}
	c.known[name] = nil // a new process has heard of nobody's boot yet
	c.add(name, maps(c.disk[name]))
}

// wipe restarts crashed node name with an empty data dir, as an operator
// brings back a node the cluster forgot: a new node that reuses the name.
func (c *cluster) wipe(name string) {
	c.wiped[name] = true
	clear(c.disk[name])
	delete(c.consents, name)
	if c.voters != nil {
		delete(c.voters, name)
	}
	c.epochs[name] = make([]Epoch, c.numSlots)
	c.has[name] = make([]bool, c.numSlots)
	// The epochs it took that no other node knows of are gone with its
	// data: taking one again is not a second owner of it (a restarted
	// owner whose grantee came back empty takes its epoch+1 anew, sim seed
	// 18557).
	for s := range c.numSlots {
		for e, o := range c.owners[s] {
			if o != name {
				continue
			}
			known := false // by a node's state, now or on its disk
			for _, n := range c.names {
				if n != name && c.epochs[n][s] >= e {
					known = true
				}
			}
			if !known {
				delete(c.owners[s], e)
			}
		}
	}
	c.restart(name)
}

func maps(m map[Slot]SlotState) map[Slot]SlotState {
	out := make(map[Slot]SlotState, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// running reports whether n's process is up and not paused. A pause ends
// with the node's next Tick (see tick): its first event after resuming.
func (c *cluster) running(n string) bool {
	_, paused := c.paused[n]
	return c.alive[n] && !paused
}

// reaches reports whether a message from a to b gets through partitions.
func (c *cluster) reaches(a, b string) bool {
	return c.running(a) && c.running(b) && c.group[a] == c.group[b]
}

// view returns the live members name reaches (itself included), and with
// deadAfter set also those it has not reached for less than that: its
// failure detector has not declared them dead yet.
func (c *cluster) view(name string) []string {
	var v []string
	for _, n := range c.names {
		if (c.reaches(name, n) || c.undetected(name, n)) && !c.flapped(name, n) {
			v = append(v, n)
		}
	}
	return v
}

// flapped reports whether a's failure detector wrongly holds b dead now.
func (c *cluster) flapped(a, b string) bool {
	until, ok := c.flap[[2]string{a, b}]
	return ok && c.now.Before(until)
}

// undetected reports whether, with deadAfter set, a has not reached b for
// less than deadAfter: too short for a's failure detector to declare b
// dead (memberlist's minimum suspicion timeout).
func (c *cluster) undetected(a, b string) bool {
	if c.deadAfter == 0 || !c.running(a) || a == b {
		return false
	}
	since, ok := c.unreach[[2]string{a, b}]
	return ok && c.now.Sub(since) < c.deadAfter
}

// trackReach records since when each node has not reached each other one.
func (c *cluster) trackReach() {
	if c.lean {
		return // deadAfter is 0: nothing reads it
	}
	for _, a := range c.names {
		for _, b := range c.names {
			k := [2]string{a, b}
			if _, ok := c.unreach[k]; a != b && !c.reaches(a, b) && !ok {
				c.unreach[k] = c.now
			} else if c.reaches(a, b) {
				delete(c.unreach, k)
			}
		}
	}
}

// step delivers ev to name, logs and routes the effects, and checks
// invariants.
func (c *cluster) step(name string, ev Event) {
	c.stepMsg(message{to: name, ev: ev})
}

// stepMsg delivers msg.ev to msg.to (see step).
func (c *cluster) stepMsg(msg message) {
	c.t.Helper()
	name, ev := msg.to, msg.ev
	m := c.m[name]
	effs := m.Step(ev)
	if c.trace {
		if _, tick := ev.(Tick); !tick || len(effs) > 0 {
			fmt.Printf("%v %s <- %T%+v\n", c.now.Sub(base), name, ev, ev)
		}
		for _, e := range effs {
			fmt.Printf("    %s: %v\n", name, e)
		}
	}
	if !c.lean {
		if err := m.checkInvariants(); err != nil {
			c.t.Fatalf("after %T%+v on %s: %v", ev, ev, name, err)
		}
		c.checkMoved(name, m, ev, effs)
		if s, ok := SlotOf(ev); ok && c.vote {
			c.checkTerms(s)
		}
	}
	if hb, ok := ev.(Replicated); ok && hb.Epoch == 1 && hb.Seq == 0 && c.owners[hb.Slot][1] == hb.From {
		// The owner of epoch 1 at seq 0 holds the empty slot the bootstrap
		// made: so does a node that takes its heartbeat as that copy.
		if si := m.slots[hb.Slot]; si.synced && si.epoch == 1 && si.leader == hb.From {
			c.has[name][hb.Slot] = true
		}
	}
	if snap, ok := ev.(SnapshotComplete); ok && msg.has {
		if si := m.slots[snap.Slot]; si.synced && (si.epoch == snap.Epoch && si.leader == snap.From || si.role == RoleOwner && si.epoch >= snap.Epoch) {
			// Installed the copy, and maybe took the epoch with it (or the
			// next one: a handover pending to us, the copy a census
			// brought from another member, sim seed 17866).
			c.has[name][snap.Slot] = true
		}
	}
	for _, e := range effs {
		if c.out != nil {
			fmt.Fprintf(c.out, "%s: %v\n", name, e)
		}
		// Firing starts only with StartFiring (or a resumed pause, see
		// tick); epochs and replicas change only with a Persist.
		switch e := e.(type) {
		case DropSlot:
			c.has[name][e.Slot] = false
		case StartFiring:
			c.checkFiring(e.Slot)
		case Persist:
			c.checkEpoch(name, e.Slot)
			if tc, ok := ev.(TableChanged); ok && tc.Bootstrap && e.State == (SlotState{Role: RoleOwner, Epoch: 1}) && c.disk[name][e.Slot].Epoch == 0 {
				c.has[name][e.Slot] = true // a new cluster starts every slot empty
			}
			if m.slots[e.Slot].role == RoleOwner && m.slots[e.Slot].censusEmpty {
				c.has[name][e.Slot] = true // every live member said it holds nothing (census.go)
			}
			if m.slots[e.Slot].synced && !c.has[name][e.Slot] {
				c.t.Fatalf("after %T%+v: %s claims a replica of slot %d it never received", ev, ev, name, e.Slot)
			}
			if e.State.Role != RoleOwner {
				break
			}
			if o, ok := c.owners[e.Slot][e.State.Epoch]; ok && o != name {
				c.t.Fatalf("slot %d epoch %d taken by %s, already taken by %s", e.Slot, e.State.Epoch, name, o)
			}
			if c.owners[e.Slot] == nil {
				c.owners[e.Slot], c.ownerBoot[e.Slot] = map[Epoch]string{}, map[Epoch]int{}
			}
			if _, ok := c.owners[e.Slot][e.State.Epoch]; !ok {
				c.ownerBoot[e.Slot][e.State.Epoch] = c.boot[name]
			}
			c.owners[e.Slot][e.State.Epoch] = name
		}
		c.route(name, e)
	}
	if !c.lean {
		c.checkHanded(name, func() string { return fmt.Sprintf("after %T%+v", ev, ev) })
	}
}

// checkHanded asserts that every handover record of name was persisted:
// it survives a restart only if it was persisted whenever it changed (New
// reads back the disk).
func (c *cluster) checkHanded(name string, when func() string) {
	c.t.Helper()
	m, disk := c.m[name], c.disk[name]
	check := func(s Slot, st, d SlotState) {
		if st.Handed != d.Handed || st.HandedSeq != d.HandedSeq {
			c.t.Fatalf("%s: %s slot %d holds handover %s#%d, persisted %s#%d", when(), name, s, st.Handed, st.HandedSeq, d.Handed, d.HandedSeq)
		}
	}
	// Both ways, reading the disk map only where a record is: the
	// machine's records, then the disk's.
	for s := range c.numSlots {
		if st := m.State(Slot(s)); st.Handed != "" || st.HandedSeq != 0 {
			check(Slot(s), st, disk[Slot(s)])
		}
	}
	for s, d := range disk {
		if d.Handed != "" || d.HandedSeq != 0 {
			check(s, m.State(s), d)
		}
	}
}

// checkAll runs the O(NumSlots) checks stepMsg leaves out in lean mode on
// every running node.
func (c *cluster) checkAll() {
	c.t.Helper()
	for _, n := range c.names {
		if !c.running(n) {
			continue
		}
		if err := c.m[n].checkInvariants(); err != nil {
			c.t.Fatalf("at %v on %s: %v", c.now.Sub(base), n, err)
		}
		c.checkHanded(n, func() string { return fmt.Sprintf("at %v", c.now.Sub(base)) })
	}
}

// route turns a message effect into a queued event for its receiver.
func (c *cluster) route(from string, e Effect) {
	send := func(to string, ev Event) {
		d := time.Duration(0)
		if c.rng != nil && c.maxDelay > 0 {
			d = time.Duration(c.rng.Int64N(int64(c.maxDelay)))
		}
		_, snap := ev.(SnapshotComplete)
		at := c.now.Add(d)
		if b := c.busy[to]; b.After(at) {
			at = b
		}
		c.queue = append(c.queue, message{from: from, to: to, ev: ev, at: at, has: snap && c.has[from][e.(SendSnapshot).Slot]})
	}
	switch e := e.(type) {
	case Persist:
		c.disk[from][e.Slot] = e.State
	case PersistConsents:
		if c.consents == nil {
			c.consents = map[string][]Consent{}
		}
		c.consents[from] = e.Consents
	case AskConsent:
		send(e.To, ConsentAsked{From: from, Owner: e.Owner, Inc: e.Inc, Term: e.Term})
	case GiveConsent:
		send(e.To, ConsentGiven{From: from, Owner: e.Owner, Inc: e.Inc, Term: e.Term, Quiet: e.Quiet})
	case Heartbeat:
		send(e.To, Replicated{Slot: e.Slot, Epoch: e.Epoch, Seq: e.Seq, From: from, Sent: e.Sent, Grant: e.Grant, Release: e.Release, Inc: e.Inc, Term: e.Term})
	case Ack:
		send(e.To, ReplAck{Slot: e.Slot, Epoch: e.Epoch, Seq: e.Seq, From: from, Sent: e.Sent, Grant: e.Grant, Synced: e.Synced, Released: e.Released,
			Inc: e.Inc, Gen: e.Gen, Term: e.Term})
	case PairHeartbeat:
		send(e.To, PairReplicated{From: from, Sent: e.Sent, Inc: e.Inc})
	case PairAck:
		send(e.To, PairReplAck{From: from, Sent: e.Sent, Inc: e.Inc, Gen: e.Gen, Promise: e.Promise, Floors: e.Floors})
	case SendSnapshot:
		send(e.To, SnapshotComplete{Slot: e.Slot, Epoch: e.Epoch, Seq: e.Seq, From: from, Sent: e.Sent, Grant: e.Grant, Owner: e.Owner,
			Inc: e.Inc, Term: e.Term, Final: e.Final})
	case RequestSnapshot:
		c.checkAsks(askKey{from, e.From, e.Slot, 'R'})
		send(e.From, SnapshotRequest{Slot: e.Slot, Epoch: e.Epoch, From: from})
	case SendNoReplica:
		send(e.To, NoReplica{Slot: e.Slot, Epoch: e.Epoch, From: from, Census: e.Census})
	case OfferHandover:
		c.checkAsks(askKey{from, e.To, e.Slot, 'O'})
		send(e.To, HandoverOffer{Slot: e.Slot, Epoch: e.Epoch, Seq: e.Seq, From: from, WasOwner: e.WasOwner, Grantee: e.Grantee, Census: e.Census, Copy: e.Copy})
	case AskOffer:
		send(e.To, OfferAsked{Slot: e.Slot, Epoch: e.Epoch, From: from})
	case Seal:
		// With sealBump, writes kept arriving until the seal: the final seq
		// moves past what the importer has.
		q := c.m[from].State(e.Slot).Seq
		if c.sealBump && c.rng.IntN(2) == 0 {
			q++
		}
		send(from, Sealed{Slot: e.Slot, Seq: q})
	case SendHandover:
		send(e.To, HandoverDone{Slot: e.Slot, Epoch: e.Epoch, Seq: e.Seq, From: from, Grant: e.Grant, Dropped: e.Dropped})
	case Announce:
		for _, n := range c.names {
			if n != from {
				send(n, EpochSeen{Slot: e.Slot, Epoch: e.Epoch, From: from, Owner: true, Replicated: e.Replicated})
			}
		}
	case RejectLowerEpoch:
		send(e.To, EpochSeen{Slot: e.Slot, Epoch: e.Epoch, From: from})
	}
}

// deliver delivers every deliverable queued message (and what they cause)
// until the queue holds only future or no messages, up to max rounds.
func (c *cluster) deliver(maxRounds int) {
	c.t.Helper()
	for range maxRounds {
		var now, later []message
		for _, msg := range c.queue {
			if msg.at.After(c.now) {
				later = append(later, msg)
			} else {
				now = append(now, msg)
			}
		}
		if len(now) == 0 {
			return
		}
		c.queue = later
		for _, msg := range now {
			if msg.from == msg.to && c.alive[msg.to] && !c.running(msg.to) {
				msg.at = c.now.Add(time.Millisecond) // a local completion waits out a pause
				c.queue = append(c.queue, msg)
				continue
			}
			if !c.reaches(msg.from, msg.to) && msg.from != msg.to || !c.running(msg.to) {
				continue
			}
			if msg.from != msg.to && c.rng != nil && c.rng.Float64() < c.dropProb {
				continue // the network loses it (a local completion is never lost)
			}
			c.stepMsg(msg)
		}
	}
}

// tables sends every live node the table of its own view, after telling
// it which of the members it reaches restarted since it last heard.
func (c *cluster) tables(bootstrap bool) {
	c.t.Helper()
	for _, n := range c.names {
		if c.running(n) {
			c.restartsOf(n)
		}
	}
	for _, n := range c.names {
		if c.running(n) {
			c.tableOf(n, bootstrap)
		}
	}
}

// deaths tells every live node which of the others it can no longer reach.
func (c *cluster) deaths() {
	c.t.Helper()
	for _, n := range c.names {
		if c.running(n) {
			c.deathsOf(n)
		}
	}
}

// refresh gives live node n its current view of the membership, as
// memberlist would once it detected every change: deaths, restarts, then
// the table.
func (c *cluster) refresh(n string) {
	c.t.Helper()
	if c.running(n) {
		c.deathsOf(n)
		c.restartsOf(n)
		c.tableOf(n, false)
	}
}

func (c *cluster) deathsOf(n string) {
	c.t.Helper()
	c.trackReach()
	for _, o := range c.names {
		switch {
		case o == n:
		case c.undetected(n, o):
			at := c.unreach[[2]string{n, o}].Add(c.deadAfter)
			if r, ok := c.redetect[n]; !ok || at.Before(r) {
				c.redetect[n] = at
			}
		case !c.reaches(n, o) || c.flapped(n, o):
			// Lean: only news (the machine ignores a repeat anyway).
			if !c.lean || !c.m[n].dead[o] || c.left[o] && !c.m[n].left[o] || c.forgot[o] && !c.m[n].forgot[o] {
				c.step(n, MemberDead{Name: o, Left: c.left[o], Forgot: c.forgot[o]})
			}
		case c.draining[o]:
			c.step(n, MemberAlive{Name: o}) // not in any table
		}
	}
}

// restartsOf tells n which members it reaches came back with a new boot id.
func (c *cluster) restartsOf(n string) {
	c.t.Helper()
	if c.known[n] == nil {
		c.known[n] = map[string]int{}
		for _, o := range c.names {
			c.known[n][o] = c.boot[o]
		}
	}
	for _, o := range c.view(n) {
		if c.known[n][o] < c.boot[o] {
			c.known[n][o] = c.boot[o]
			c.step(n, MemberAlive{Name: o, Restarted: true, Empty: c.emptyBoot[o] == c.boot[o]})
		}
	}
}

func (c *cluster) tableOf(n string, bootstrap bool) {
	c.t.Helper()
	v := c.view(n)
	var ms []ring.Member
	for _, name := range v {
		if !c.draining[name] {
			ms = append(ms, ring.Member{Name: name})
		}
	}
	sees, stable := len(v), c.stable
	var voters []string
	if c.voters != nil {
		if c.voters[n] == nil {
			c.voters[n] = &Voters{}
		}
		members := c.names
		if len(c.left) > 0 {
			members = slices.DeleteFunc(slices.Clone(c.names), func(o string) bool { return c.left[o] })
		}
		sees, stable = c.voters[n].Count(members, v)
		voters = c.voters[n].Members()
	}
	c.step(n, TableChanged{Table: c.assign(ms), StableSize: stable, Sees: sees, Voters: voters, Bootstrap: bootstrap})
}

// assign computes the table of ms (sorted by name) as configured; lean
// clusters remember the last few (every node of a view computes the same).
func (c *cluster) assign(ms []ring.Member) ring.Table {
	opts := ring.Options{Tolerance: math.Inf(1)} // plain HRW
	if c.balanced {
		opts = ring.Options{}
	}
	if !c.lean {
		return ring.AssignWith(ms, c.numSlots, opts)
	}
	var key strings.Builder
	for _, m := range ms {
		key.WriteString(m.Name)
		key.WriteByte(0)
	}
	if tab, ok := c.tableCache[key.String()]; ok {
		return tab
	}
	if len(c.tableCache) >= 16 {
		clear(c.tableCache)
	}
	if c.tableCache == nil {
		c.tableCache = map[string]ring.Table{}
	}
	tab := ring.AssignWith(ms, c.numSlots, opts)
	c.tableCache[key.String()] = tab
	return tab
}

func (c *cluster) tick(now time.Time) {
	c.t.Helper()
	c.now = now
	c.trackReach()
	for _, n := range c.names {
		if until, ok := c.paused[n]; ok && !now.Before(until) {
			delete(c.paused, n)
			c.step(n, Tick{Now: now}) // resumed: time jumps first
			for s := range c.numSlots {
				c.checkFiring(Slot(s)) // it may fire on from before the pause
			}
		}
	}
	resumed := map[string]bool{}
	for _, n := range c.names {
		if b, ok := c.busy[n]; ok && !now.Before(b) {
			delete(c.busy, n)
			if c.running(n) {
				resumed[n] = true
				// A gap: the view is stale, and node re-reads it at once.
				// It is the view the node had (its failure detector has
				// not caught up with anything new meanwhile). The process
				// ran on: node measures that (Tick.Stalled).
				c.step(n, Tick{Now: now, StallKnown: !c.busyIsPause})
				m := c.m[n]
				var voters []string
				if c.voters != nil && c.voters[n] != nil {
					voters = c.voters[n].Members()
				}
				c.step(n, TableChanged{Table: m.table, StableSize: m.stable, Sees: m.sees, Voters: voters})
			}
		}
	}
	for _, n := range c.names {
		if _, busy := c.busy[n]; c.running(n) && !busy && !resumed[n] {
			c.step(n, Tick{Now: now})
		}
	}
	// Signs of life (memberlist probe acks) between members that reach
	// each other and believe each other alive, every probeEvery ticks: the
	// machines' evidence of a majority. They change no state a Step could act on.
	c.ticks++
	if c.lean && c.leanEvery > 0 && c.ticks%c.leanEvery == 0 {
		c.checkAll()
	}
	if c.probeEvery > 1 && c.ticks%c.probeEvery != 0 {
		return
	}
	for _, a := range c.names {
		for _, b := range c.names {
			if until, busy := c.busy[b]; busy && a != b && c.reaches(a, b) {
				// A busy node's loop steps them when it resumes (node's
				// queue holds the pings other nodes sent it meanwhile).
				c.queue = append(c.queue, message{from: a, to: b, ev: MemberAlive{Name: a}, at: until})
				continue
			}
			if a != b && c.reaches(a, b) && !c.m[b].dead[a] {
				if effs := c.m[b].Step(MemberAlive{Name: a}); len(effs) > 0 {
					c.t.Fatalf("%s: MemberAlive{%s} as a sign of life caused %v", b, a, effs)
				}
				if !c.lean {
					c.checkMoved(b, c.m[b], MemberAlive{Name: a}, nil)
				}
			}
		}
	}
}

// checkEpoch asserts that name's epoch for slot s never decreases,
// restarts included.
func (c *cluster) checkEpoch(name string, s Slot) {
	c.t.Helper()
	e := c.m[name].State(s).Epoch
	if e < c.epochs[name][s] {
		c.t.Fatalf("%s slot %d epoch went from %d down to %d", name, s, c.epochs[name][s], e)
	}
	c.epochs[name][s] = e
}

// lastOwner returns the node that took slot s's highest epoch, and
// whether it still runs that very process and holds the epoch as owner:
// then it holds every acknowledged write and nothing can excuse the slot
// from firing, whoever else crashed.
func (c *cluster) lastOwner(s Slot) (name string, holds bool) {
	var top Epoch
	for e, n := range c.owners[s] {
		if e >= top {
			top, name = e, n
		}
	}
	if name == "" || !c.alive[name] || c.boot[name] != c.ownerBoot[s][top] {
		return name, false
	}
	st := c.m[name].State(s)
	return name, st.Epoch == top && st.Role == RoleOwner
}

// checkTerms asserts, with Config.Vote, that a node holding an owner's
// grant or release of slot s at its epoch holds at least the vote term
// that owner recorded from its ack (suspect.term): the owner fires on
// promises that cover that term, and acting on the grant asks consents for
// the term the holder knows (consented). A release that kept no term was
// acted on without any consent (sim seed 5316, one slot fired by two
// nodes); before the fix this tripped on most seeds.
func (c *cluster) checkTerms(s Slot) {
	c.t.Helper()
	for _, o := range c.names {
		om := c.m[o]
		if om == nil || !c.alive[o] || om.slots[s].role != RoleOwner && om.slots[s].role != RoleSealing {
			continue
		}
		for _, x := range om.slots[s].suspects {
			hm := c.m[x.name]
			if x.term == 0 || x.lost || hm == nil || !c.alive[x.name] {
				continue
			}
			h := &hm.slots[s]
			if h.leader == o && h.epoch == om.slots[s].epoch && (h.grantor || h.releasedTo != "") && h.grantTerm < x.term {
				c.t.Fatalf("slot %d: %s holds %s's grant or release (to %q) at epoch %d with term %d, below the %d %s recorded",
					s, x.name, o, h.releasedTo, h.epoch, h.grantTerm, x.term, o)
			}
		}
	}
}

// checkFiring asserts that no two live nodes fire slot s at once, in a
// majority or not: DESIGN §1.3 promises it among nodes that reach a
// majority, and the lease makes it hold for a node that has not noticed yet
// that it was cut off. Dead and paused nodes fire nothing: their process
// is gone or frozen, and a resumed one sees Tick before anything else.
func (c *cluster) checkFiring(s Slot) {
	c.t.Helper()
	firing := c.firing(s)
	if len(firing) > 1 {
		c.t.Fatalf("slot %d fired by %v at once", s, firing)
	}
}

// firing returns the running nodes that fire slot s. A node whose run
// loop is stuck (busy) fires on what its machine last published, but only
// until that slot's bound (horizon.go), as node's data path does.
func (c *cluster) firing(s Slot) []string {
	var firing []string
	for _, n := range c.names {
		if !c.running(n) || !c.m[n].Firing(s) {
			continue
		}
		if _, busy := c.busy[n]; busy && !c.m[n].mayFire(s, c.now) {
			continue
		}
		firing = append(firing, n)
	}
	return firing
}

// mayFire reports whether node's data path fires slot s at now: the
// machine says it fires s, and now is before its bound.
func (m *Machine) mayFire(s Slot, now time.Time) bool {
	return m.Firing(s) && now.Before(m.Horizon()) && (m.Near(s).IsZero() || now.Before(m.Near(s)))
}

func (c *cluster) states() string {
	var b strings.Builder
	for _, n := range c.names {
		status := ""
		if !c.alive[n] {
			status = " (down)"
		}
		fmt.Fprintf(&b, "%s%s: %s\n", n, status, c.m[n])
	}
	return b.String()
}
