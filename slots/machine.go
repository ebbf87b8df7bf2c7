package slots

import (
	"fmt"
	"math/bits"
	"slices"
	"strings"
	"time"

	"github.com/chime-scheduler/chime/ring"
)

// Machine is one node's ownership state for every slot. It is a pure state
// machine: Step takes an Event and returns the Effects node must carry out.
// It reads no clock (time arrives in Tick), starts no goroutine and does no
// I/O. Between Steps, State, Firing, Replicas, Leader, UnderReplicated,
// Unavailable and Counts read it. It is not safe for concurrent use;
// node's run loop owns it. See the package doc for its invariants.
type Machine struct {
	cfg      Config
	now      time.Time
	table    ring.Table
	hasTable bool
	members  map[string]bool // names in table
	names    []string        // names in table, sorted
	dead     map[string]bool // declared dead and not seen since
	left     map[string]bool // of dead: left the cluster (see MemberDead)
	forgot   map[string]bool // of left: forgotten by an operator (MemberDead.Forgot)
	// forgotRun: names an operator forgot a run of, kept when the name
	// returns (revive): an epoch we heard that run own is a forgotten
	// owner's to the census (census.go) even once its next run is back,
	// disowned; a slot whose census had not completed by then stayed with
	// nobody for good (sim seed 1943, -simstrict).
	forgotRun map[string]bool
	// genesis is the bootstrap table, if this node bootstrapped in this
	// run: its owner of a slot took epoch 1 (census.go).
	genesis    ring.Table
	hasGenesis bool
	// disowned: an earlier run of this node was forgotten (Disowned): it
	// cannot vouch for what that run held, so it never answers a restarted
	// owner as its grantee (census.go).
	disowned bool
	sees     int // TableChanged.Sees minus members declared dead since
	stable   int
	majority bool
	// viewLost is when the view last lost its majority (zero while it
	// shows one, or never had one); cutOff that a lost majority
	// (lostMajority) came since (see backed).
	viewLost time.Time
	cutOff   bool
	// heard is when each other node last gave a sign of life: a message or
	// a MemberAlive. Members heard from within Settle are evidence of a
	// majority that a stale view cannot fake (see quorate).
	heard      map[string]time.Time
	evMajority bool      // heard from a majority within Settle (as of the last Tick)
	evSince    time.Time // since when the evidence has held, lapses shorter than DeadAfter aside
	evBroken   bool      // a lapse of DeadAfter or more (lostMajority): evSince restarts
	evPending  bool      // paused: the evidence is judged on the next regular Tick
	// viewAt is when the membership view last changed (see Config.Settle).
	viewAt time.Time
	// staleView is set by a pause (a gap between ticks over Settle/4): the
	// view may lag by the pause, so it is not acted on before a new table.
	staleView bool
	// bootstrap is true only while a TableChanged with Bootstrap is handled.
	bootstrap bool
	// ticking is true only while a Tick is handled: heartbeats and retries
	// go out on ticks so that other events stay small.
	ticking bool
	slots   []slotInfo
	out     []Effect
	// Config.MaxMoves places for planned moves (see admitMove): the
	// holders, each until its attempt is over, and the slots waiting for
	// a place, first come first served, with when each last asked.
	moving    map[Slot]time.Time
	moveQueue []Slot
	moveAsked map[Slot]time.Time

	// Pair leases (lease.go, "Pairs").
	inc      uint64                // Config.Incarnation (1 if unset)
	pairGen  uint64                // this node's pair generation (PairAck.Gen)
	pairAt   time.Time             // last PairHeartbeat round
	pairRecv map[pairKey]time.Time // when the last PairReplicated of each owner incarnation arrived (own clock)
	peers    map[string]*peer      // each other node's PairAcks to us
	// lastGlobal is global() after the last advance of every slot: a Tick
	// that finds it moved advances every slot, else only the slots not
	// idle (tickIdle).
	lastGlobal globalKey
	busy       []uint64 // bit s: slot s is not idle (see tickSlots)
	// idleOwned: bit s: slot s was idle in role owner when advance last
	// left it (see setIdle): the only idle slots a full Tick pass looks at.
	idleOwned []uint64
	refreshQ  refreshQueue // the idle owners by refreshAt (refreshDue)
	// moved: bit s: advance changed slot s's role, epoch, firing or
	// replica since the last TakeMoved.
	moved []uint64

	// The horizon (horizon.go): the bound of the firing slots, each
	// one's near deadline (zero: none), the slots that have one
	// (nearBits) or fire (fireBits), the earliest near deadline (a lower
	// bound), the near deadlines changed since TakeNearChanges, and
	// whether the next Tick must recompute them (hzForce).
	horizon     time.Time
	near        []time.Time
	nearBits    []uint64
	fireBits    []uint64
	nearMin     time.Time
	nearChanged []Slot
	nearDirty   []uint64
	hzForce     bool
	// evLast is when the need-th most recent sign of life of a majority
	// arrived, as of the last updateEvidence: degraded firing ends at
	// evLast+Settle.
	evLast time.Time

	// The exclusive vote (vote.go, Config.Vote): the first Tick's time;
	// the consents given (persisted) and received, and when each was last
	// asked for; the voters (TableChanged.Voters, nil: anyone); the end
	// of the promises held (promisedUntil), recomputed when promDirty.
	started      time.Time
	term         uint64                        // our vote term: Heartbeat.Term
	consents     map[consentKey]uint64         // consented up to this term
	votes        map[pairKey]map[string]uint64 // consents received, by term
	askedConsent map[pairKey]time.Time
	firstAsked   map[slotWait]time.Time // each slot's first ask of a wait not over yet
	voterSet     map[string]bool
	voterList    []string              // voterSet, sorted
	promCache    map[promKey]time.Time // promisedUntil
	promDirty    bool
	// distrust: nodes that came back with an empty data dir while we ran
	// (MemberAlive.Empty): their promises never count (vote.go).
	distrust map[string]bool

	// quietFrom: each consent's answer of how long its giver had heard
	// nothing from the owner (restore.go), by owner incarnation.
	quietFrom map[pairKey]map[string]quietAnswer
	// sure is the last Tick at which this node ran (no pause), showed a
	// majority and held the evidence of one: where a lapse that voids
	// grants began (grantVoid).
	sure time.Time
}

// slotInfo is the machine's state for one slot.
type slotInfo struct {
	role   Role
	epoch  Epoch  // highest epoch known; persisted
	seq    uint64 // last applied seq at epoch; persisted
	synced bool   // holds a valid replica at epoch
	firing bool   // StartFiring sent and no StopFiring since
	leader string // the node believed to hold epoch (self when owner); a hint when !synced
	// grantee is the persisted SlotState.Grantee: for an owner its suspects
	// (see lease.go), kept at the same epoch after a restart.
	grantee  string
	wasOwner bool // owned epoch before a restart: take it back via grantee
	// heldOffer: the table owner that offered while we held a dead
	// owner's grant we could not act on yet (handover.go, onOffer).
	heldOffer string

	// Owner side (kept while sealing).
	follower      string    // replication target: fed a snapshot, then heartbeats
	followerAcked bool      // follower acked holding the replica at epoch
	suspects      []suspect // nodes that may hold a grant at epoch (see lease.go)
	dropped       []suspect // suspects forgotten as dead (degraded mode)
	beatAt        time.Time // last heartbeat round
	beatSent      bool
	snapAt        time.Time // last SendSnapshot to follower
	offerFrom     string    // importer waiting for the grants to be revoked
	sealFor       string    // importer the seal is for
	// sealVoid: this node lost its majority (lostMajority) while sealing:
	// the importer may have promoted from our grant meanwhile, and would
	// not list us as a grantee of the epoch it took (see handOver).
	sealVoid bool

	// Follower side.
	leaderOwns bool // leader heartbeated us: it owns epoch
	// leaderFollows: our copy came from leader as a follower's copy at
	// epoch (SnapshotComplete.Owner false): it does not own epoch and
	// never will, so an offer to it seals nothing (needs no move place).
	leaderFollows bool
	leaderGone    bool // leader restarted since: it no longer fires epoch
	// leaderPast: leaderGone because the leader moved past the epoch
	// without taking it (NoReplica), not because a restart was reported:
	// a restart notice may come after the grant of the new incarnation
	// (sim seed 37507), so only this one spares the vote's consents.
	leaderPast   bool
	grantor      bool      // holds the owner's grant: may promote (see lease.go)
	releasedTo   string    // holds a release to this importer instead (see lease.go)
	grantedUntil time.Time // the owner may fire until then (own clock)
	beatFrom     string    // sender of the newest heartbeat or snapshot applied
	beatSeen     time.Time // its Sent; older ones are ignored
	// grantInc is the incarnation of the leader that gave the grant or
	// release held (Heartbeat.Inc; 0: unknown, e.g. a snapshot's): only
	// its PairReplicated renew it. held* record the grant or release as of
	// the last noteGrant: a change bumps pairGen (see lease.go, "Pairs").
	grantInc  uint64
	grantTerm uint64 // its Heartbeat.Term (Config.Vote; 0: unknown)
	// grantVoters: our voters when we accepted it (vote.go: the consents
	// to acting on it need a majority of them too).
	grantVoters []string
	// void: the grant we held was voided by a lapse (lostMajority), and
	// what restoreGrant needs to restore it; nil otherwise.
	void       *grantVoid
	held       bool
	heldLeader string
	heldEpoch  Epoch
	heldInc    uint64

	// Owner side of pair leases: ackLost, the follower's last ack said
	// its copy is not valid; refreshAt is when a quiet slot next sends a
	// heartbeat of its own anyway.
	ackLost   bool
	refreshAt time.Time
	queuedAt  time.Time // refreshAt as queued in Machine.refreshQ; zero: not queued
	// idle: the last advance found nothing a Tick could move (tickIdle).
	idle bool

	// Importing.
	pending    bool // request or offer outstanding until retryAt
	retryAt    time.Time
	offerFirst time.Time // first OfferHandover sent at epoch
	offerTo    string    // the last one's target, and when (onEpochSeen)
	offerAt    time.Time
	// restored: the epoch was read back from disk at start (a restart),
	// not learnt since; what the node's store holds of it is unknown.
	restored bool
	askedAt  time.Time // last AskOffer sent (release holder)
	tried    []string  // nodes asked this round that could not help
	// A handover to us (HandoverDone) not taken yet: take takeEpoch+1 once
	// we see a majority and hold the final copy (fetched at takeEpoch+1 from
	// takeFrom if ours lacks takeSeq).
	takeFrom  string
	takeEpoch Epoch
	takeSeq   uint64
	// takeLost: takeFrom came back with an empty data dir since it handed
	// us the epoch (MemberAlive.Empty): no run of it holds the final copy.
	takeLost bool
	// takeDropped: the holder's dropped suspects (HandoverDone.Dropped),
	// which become ours when we take the epoch.
	takeDropped []string
	// takeOwn: our own copy held every write the take needs (synced at
	// takeEpoch, up to takeSeq) when another node's word moved us to
	// takeEpoch+1 before we took it (stepDown): the data is unchanged, so
	// we take the epoch with it once takeAfter (the end of a grant we held
	// of our old owner, plus Margin) has passed. Without it the take
	// waited for the holder's final copy, which a holder that handed over
	// without one never has (sim seed 23059 without the forget).
	takeOwn   bool
	takeAfter time.Time
	// takeFinal: our copy (at takeEpoch+1) is the final one of takeEpoch,
	// served by its restarted owner (SnapshotComplete.Final), not the
	// holder's: the holder handed over without one. Set by the copy,
	// lost with it (reset).
	takeFinal bool

	// After handing the slot over at handedEpoch. handedCopy: we kept the
	// final copy. The handover is persisted (SlotState.Handed, HandedBare
	// without the copy) while epoch is handedEpoch+1.
	handedTo string
	// handedDropped: the dropped suspects the handover carried (repeated
	// with it, persisted with it).
	handedDropped []string
	handedEpoch   Epoch
	handedSeq     uint64
	handedCopy    bool
	// finalOf: our data is the complete copy of epoch finalOf, up to
	// finalSeq, which we owned (a restarted owner, wasOwner) before news of
	// a later epoch moved us on (stepDown). Nobody writes at finalOf any
	// more, and we wrote every write acknowledged at it: an importer that
	// was handed finalOf without a copy it may trust asks us for it
	// (takeSource, onSnapshotRequest). Kept while the data stays (reset),
	// persisted (SlotState.FinalOf); dropped with the data or when a copy
	// replaces it.
	finalOf  Epoch
	finalSeq uint64
	// tookBy: the importer that got our handover of epoch-1 (handoverTaken
	// ended the record), persisted (SlotState.HandedTook) while epoch
	// stays. A handover of epoch-1 from another node is not ours to take:
	// that importer took epoch, or hands it on. Without it a node that
	// had handed on the epoch a dead holder's grant let it hand over (the
	// holder's own handover to it never arrived), restarted and took that
	// epoch a second time when the holder repeated its handover (sim seed
	// 3301 with -simsteps 400).
	tookBy string

	// The census (census.go): the forgotten owner of epoch, whether a
	// round was asked and who answered NoReplica since; censusEmpty: we
	// took the slot empty after one (for the test harness).
	censusOwner string
	// censusLost: censusOwner is not forgotten, but the run of it that
	// owned the epoch is gone with its data (endHandovers, giveUpTake):
	// the census may run for it as for a forgotten one.
	censusLost  bool
	censusAsked bool
	// granteeVoid: the grantee this restarted owner must take its epoch
	// back from answered that it cannot vouch (it was disowned).
	granteeVoid bool
	censusAt    time.Time // the last round (censusRound)
	censusDone  []string
	censusEmpty bool

	underRep, unavail bool // last flags emitted
}

// New returns the machine for cfg.Self. persisted is the state node read back
// from storage (nil for a new node). Every persisted slot starts stale, as a
// follower without a valid replica: it neither fires nor promotes until it
// has resynced from the slot's current holder, which is how a restarted node
// learns whether its epoch was superseded (see Restarted). New copies what
// it needs and keeps no reference to persisted. Nothing fires before the
// first TableChanged.
func New(cfg Config, persisted map[Slot]SlotState) (*Machine, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	m := &Machine{
		cfg: cfg, dead: make(map[string]bool), left: make(map[string]bool), forgot: make(map[string]bool), forgotRun: make(map[string]bool), members: make(map[string]bool), heard: make(map[string]time.Time),
		evBroken: true, slots: make([]slotInfo, cfg.NumSlots), moving: make(map[Slot]time.Time), moveAsked: make(map[Slot]time.Time),
		inc: max(cfg.Incarnation, 1), pairRecv: make(map[pairKey]time.Time), peers: make(map[string]*peer),
		busy: make([]uint64, (cfg.NumSlots+63)/64), idleOwned: make([]uint64, (cfg.NumSlots+63)/64),
		moved: make([]uint64, (cfg.NumSlots+63)/64),
		near:  make([]time.Time, cfg.NumSlots), nearBits: make([]uint64, (cfg.NumSlots+63)/64),
		fireBits: make([]uint64, (cfg.NumSlots+63)/64), nearDirty: make([]uint64, (cfg.NumSlots+63)/64),
		consents: make(map[consentKey]uint64), votes: make(map[pairKey]map[string]uint64), quietFrom: make(map[pairKey]map[string]quietAnswer), askedConsent: make(map[pairKey]time.Time), firstAsked: make(map[slotWait]time.Time),
		promCache: make(map[promKey]time.Time), term: 1,
	}
	m.loadConsents(cfg.Consents)
	for s := range cfg.NumSlots {
		m.busy[s/64] |= 1 << (s % 64)
	}
	// Generations of different incarnations differ (see PairAck.Gen).
	m.pairGen = m.inc<<32 | 1
	for s, st := range persisted {
		if int(s) >= cfg.NumSlots {
			return nil, fmt.Errorf("slots: persisted slot %d outside [0, %d)", s, cfg.NumSlots)
		}
		si := &m.slots[s]
		si.epoch, si.seq, si.restored = st.Epoch, st.Seq, st.Epoch > 0
		if st.Epoch > 0 && st.HandedTook != cfg.Self {
			si.tookBy = st.HandedTook
		}
		if st.FinalOf != 0 && st.FinalOf < st.Epoch {
			si.finalOf, si.finalSeq = st.FinalOf, st.Seq // the data is as stepDown left it
		}
		if st.Role != RoleNone || st.WasOwner {
			si.role = RoleFollower
		}
		if st.Role == RoleOwner || st.Role == RoleSealing || st.WasOwner {
			si.wasOwner, si.grantee = true, st.Grantee
		}
		if st.Handed != "" && st.Epoch > 0 && (st.Role != RoleNone || st.HandedBare) && st.Handed != cfg.Self {
			// A handover the importer may not have taken yet: we repeat
			// it and serve it the final copy we kept, if we kept one.
			si.handedTo, si.handedEpoch, si.handedSeq, si.handedCopy = st.Handed, st.Epoch-1, st.HandedSeq, !st.HandedBare
			if st.HandedDropped != "" {
				si.handedDropped = strings.Split(st.HandedDropped, ",")
			}
			si.leader = st.Handed
		}
	}
	return m, nil
}

// Step applies ev and returns the effects, in the order node must carry them
// out. The returned slice is the caller's. Cost: O(1) for slot events and
// signs of life, O(NumSlots) for TableChanged, MemberDead, a MemberAlive
// that changes the view, Tick and Restarted.
func (m *Machine) Step(ev Event) []Effect {
	m.out = nil
	if s, ok := SlotOf(ev); ok && m.valid(s) {
		m.setBusy(s) // advanced again by the next Tick at least
	}
	if f := sender(ev); f != "" && f != m.cfg.Self {
		m.heard[f] = m.now
	}
	switch ev := ev.(type) {
	case TableChanged:
		m.onTable(ev)
	case MemberDead:
		m.viewAt = m.now
		if ev.Left && ev.Name != m.cfg.Self {
			m.left[ev.Name] = true
		}
		if ev.Forgot && ev.Name != m.cfg.Self {
			m.left[ev.Name], m.forgot[ev.Name], m.forgotRun[ev.Name] = true, true, true
			m.endHandovers(ev.Name, false)
			m.dropForgotten(ev.Name)
		}
		if !m.dead[ev.Name] && ev.Name != m.cfg.Self {
			m.dead[ev.Name] = true
			// Count it out at once, before the new table arrives: a stale
			// majority must not keep this node firing. A name we never
			// heard of (one that left before we saw it) was never counted.
			if _, heard := m.heard[ev.Name]; heard || m.members[ev.Name] {
				m.sees--
				m.setMajority(2*m.sees > m.stable)
			}
		}
		m.advanceAll()
	case MemberAlive:
		if !ev.Restarted && (!m.dead[ev.Name] || m.left[ev.Name]) {
			break // a sign of life, nothing new for the view
		}
		// Majority grows only with the next table.
		m.viewAt = m.now
		m.revive(ev.Name)
		if ev.Restarted && ev.Name != m.cfg.Self {
			if ev.Empty && !m.distrust[ev.Name] {
				if m.distrust == nil {
					m.distrust = map[string]bool{}
				}
				m.distrust[ev.Name], m.promDirty = true, true
			}
			if p := m.peers[ev.Name]; p != nil {
				if p.gen != 0 {
					// Keep what its acks gave the suspects: their right to
					// fire must not end sooner than the horizon says.
					m.fixPairLeases(ev.Name, p)
				}
				*p = peer{} // its acks spoke for the old process (suspects keep the pointer)
				m.promDirty = true
			}
			if ev.Empty {
				m.markLost(ev.Name)
				for s := range m.slots {
					if si := &m.slots[s]; si.takeFrom == ev.Name {
						si.takeLost = true
					}
				}
				m.endHandovers(ev.Name, true)
			}
			for s := range m.slots {
				m.forgetIncarnation(Slot(s), ev.Name)
			}
		}
		m.advanceAll()
	case Tick:
		gap := ev.Now.Sub(m.now)
		paused := !m.now.IsZero() && gap > m.cfg.pause()
		if ev.Now.After(m.now) {
			m.now = ev.Now
		}
		if m.started.IsZero() {
			m.started = m.now
		}
		if paused {
			// We were paused (GC, VM stall, or our own long step): what
			// happened meanwhile is not in our view yet.
			m.staleView, m.viewAt = true, m.now
		}
		stall := gap
		if ev.StallKnown {
			stall = min(gap, ev.Stalled)
		}
		if paused && stall >= m.cfg.deadAfter() {
			// A pause this long may have let the others declare us dead
			// and an owner forget our grant (degraded mode): we cannot
			// vouch for a majority throughout, and our grants are void.
			// A shorter one cannot: memberlist declares a node dead only
			// after a failed probe and the minimum suspicion timeout
			// (Config.DeadAfter; local profile 1.5 s, Settle 1 s). Nor can
			// a long gap of this loop alone while the process ran on
			// (Tick.Stalled).
			m.lostMajority()
		}
		if !paused {
			m.checkViewLapse()
		}
		if paused {
			// The signs of life that arrived during the pause are still
			// queued behind this Tick: judge the evidence on the next one.
			m.evPending = true
		} else {
			m.evPending = false
			m.updateEvidence()
		}
		if !paused && m.majority && m.evMajority {
			m.sure = m.now
		}
		m.ticking = true
		m.pruneMoves()
		m.pairBeat()
		m.tickSlots()
		if m.horizonDue() {
			m.refreshHorizon()
		}
		m.ticking = false
	case ConsentAsked:
		m.onConsentAsked(ev)
	case ConsentGiven:
		m.onConsentGiven(ev)
	case Restarted:
		for s := range m.slots {
			m.makeStale(Slot(s))
		}
		m.advanceAll()
	case Disowned:
		m.disowned = true
		for s := range m.slots {
			m.disown(Slot(s))
		}
		m.advanceAll()
	case Applied:
		if m.valid(ev.Slot) {
			if si := &m.slots[ev.Slot]; si.synced && ev.Seq > si.seq {
				si.seq = ev.Seq
			}
		}
	case Replicated:
		if m.valid(ev.Slot) {
			m.onReplicated(ev)
		}
	case ReplAck:
		if m.valid(ev.Slot) {
			m.onAck(ev)
		}
	case PairReplicated:
		m.onPairBeat(ev)
	case PairReplAck:
		m.onPairAck(ev)
	case SnapshotRequest:
		if m.valid(ev.Slot) {
			m.onSnapshotRequest(ev)
		}
	case SnapshotComplete:
		if m.valid(ev.Slot) {
			m.onSnapshot(ev)
		}
	case NoReplica:
		if m.valid(ev.Slot) {
			m.onNoReplica(ev)
		}
	case HandoverOffer:
		if m.valid(ev.Slot) {
			m.onOffer(ev)
		}
	case OfferAsked:
		if m.valid(ev.Slot) {
			m.onOfferAsked(ev)
		}
	case Sealed:
		if m.valid(ev.Slot) {
			m.onSealed(ev)
		}
	case HandoverDone:
		if m.valid(ev.Slot) {
			m.onHandover(ev)
		}
	case EpochSeen:
		if m.valid(ev.Slot) {
			m.onEpochSeen(ev)
		}
	}
	if s, ok := SlotOf(ev); ok && m.valid(s) {
		m.noteGrant(s)
		if m.slots[s].firing {
			m.bound(s, false) // an ack may have replaced a lease by a shorter one
		}
	}
	out := m.out
	m.out = nil
	return out
}

// State returns the durable state of slot s (what the last Persist for s
// wrote). O(1). Like every accessor it panics if s >= NumSlots().
func (m *Machine) State(s Slot) SlotState {
	si := &m.slots[s]
	st := SlotState{Role: si.role, Epoch: si.epoch, Seq: si.seq, Grantee: si.grantee,
		WasOwner: si.wasOwner && si.role != RoleOwner && si.role != RoleSealing}
	if m.handsOver(s) {
		st.Handed, st.HandedSeq, st.HandedDropped = si.handedTo, si.handedSeq, strings.Join(si.handedDropped, ",")
		st.HandedBare = !si.handedCopy
	}
	st.HandedTook = si.tookBy
	if si.finalOf != 0 && si.finalOf < si.epoch {
		st.FinalOf = si.finalOf
	}
	return st
}

// Pub returns what node publishes of slot s to its data path: the role,
// the epoch and whether it fires (State's Role and Epoch, Firing) without
// building a SlotState. O(1).
func (m *Machine) Pub(s Slot) (Role, Epoch, bool) {
	si := &m.slots[s]
	return si.role, si.epoch, si.firing
}

// Firing reports whether the machine has told node to fire slot s
// (StartFiring without a StopFiring since). O(1).
func (m *Machine) Firing(s Slot) bool { return m.slots[s].firing }

// Replicas returns the nodes an owner replicates slot s to: its follower
// and every node that may hold its grant (normally the same one node).
// Node sends every write to all of them, tagged (slot, epoch, seq), and
// acknowledges the client once all of them acked it: any of them may be
// the next owner, so each must hold every acknowledged write. Empty when
// this node does not own s, or runs it single-copy (degraded: the follower
// was declared dead and no new one is chosen yet). The caller owns the
// slice. O(1).
func (m *Machine) Replicas(s Slot) []string { return m.AppendReplicas(nil, s) }

// AppendReplicas appends Replicas(s) to dst and returns it (dst unchanged
// when there are none). O(1).
func (m *Machine) AppendReplicas(dst []string, s Slot) []string {
	si := &m.slots[s]
	if si.role != RoleOwner && si.role != RoleSealing {
		return dst
	}
	if si.follower != "" {
		dst = append(dst, si.follower)
	}
	for _, x := range si.suspects {
		if x.name != si.follower {
			dst = append(dst, x.name)
		}
	}
	return dst
}

// FollowerPending reports whether this node owns slot s with a follower
// that could not take the slot over yet if this node died: it has not
// acknowledged holding a valid replica (its snapshot is on the way), or
// no replica has acknowledged a grant (or a release) of the slot, so
// nobody may promote. The follower is among Replicas and gets every
// write, but a write acknowledged then would wait on the follower's disk
// until this node came back: a fresh follower applies the first write of
// an empty slot before its snapshot is installed, and a synced follower
// without the grant waits for the dead owner (the "only the holder holds
// the final copy" wait). Node acknowledges a write once every replica
// acked it and this is false. False with no follower (single copy,
// degraded). O(suspects).
func (m *Machine) FollowerPending(s Slot) bool {
	si := &m.slots[s]
	if (si.role != RoleOwner && si.role != RoleSealing) || si.follower == "" {
		return false
	}
	if !si.followerAcked {
		return true
	}
	for _, x := range si.suspects {
		if x.acked || x.releasedTo != "" {
			return false
		}
	}
	return true
}

// Leader returns the node whose replication stream this node applies for
// slot s: node applies an op tagged (s, epoch, seq) only if it comes from
// Leader(s) at State(s).Epoch. "" when this node holds no valid replica
// it follows (an owner returns its own name). O(1).
func (m *Machine) Leader(s Slot) string {
	if si := &m.slots[s]; si.synced {
		return si.leader
	}
	return ""
}

// TakeMoved calls f with every slot whose role, epoch, firing or replica
// (Pub, Synced) changed on a Tick or a member's or table's event since the
// last TakeMoved, ascending, and forgets them. The changes an event for
// one slot makes (SlotOf) are that slot's, and not reported here. A node
// republishes what it reports, rather than every slot: a pass over 16,384
// slot records costs more than the changes. O(NumSlots/64 + moved).
func (m *Machine) TakeMoved(f func(Slot)) {
	for w, word := range m.moved {
		if word == 0 {
			continue
		}
		m.moved[w] = 0
		for ; word != 0; word &= word - 1 {
			f(Slot(w*64 + bits.TrailingZeros64(word)))
		}
	}
}

// Synced reports whether this node holds a valid replica of slot s at
// State(s).Epoch (an owner's own copy counts). O(1).
func (m *Machine) Synced(s Slot) bool { return m.slots[s].synced }

// UnderReplicated reports whether this node owns slot s without a caught-up
// follower (the last MarkUnderReplicated for s). O(1).
func (m *Machine) UnderReplicated(s Slot) bool { return m.slots[s].underRep }

// Unavailable reports the last MarkUnavailable for slot s: this node is its
// table owner and cannot take it over (no live node it knows holds a replica
// it can take it from), or owns it but cannot fire because a grantee
// declared dead may have promoted and must come back first. O(1).
func (m *Machine) Unavailable(s Slot) bool { return m.slots[s].unavail }

// Counts is a summary of one node's slots, for metrics and /v1/cluster.
type Counts struct {
	Owned           int // role owner or sealing
	Firing          int
	Following       int // role follower holding a valid replica
	Importing       int // role importing: taking the slot over
	UnderReplicated int
	// FollowerPending: owned slots whose follower could not take them over
	// yet (FollowerPending): their writes wait.
	FollowerPending int
	Unavailable     int
}

// Counts summarizes every slot. O(NumSlots).
func (m *Machine) Counts() Counts {
	var c Counts
	for s := range m.slots {
		si := &m.slots[s]
		switch {
		case si.role == RoleOwner || si.role == RoleSealing:
			c.Owned++
		case si.role == RoleFollower && si.synced:
			c.Following++
		case si.role == RoleImporting:
			c.Importing++
		}
		if si.firing {
			c.Firing++
		}
		if si.underRep {
			c.UnderReplicated++
		}
		if m.FollowerPending(Slot(s)) {
			c.FollowerPending++
		}
		if si.unavail {
			c.Unavailable++
		}
	}
	return c
}

// NumSlots returns Config.NumSlots.
func (m *Machine) NumSlots() int { return len(m.slots) }

// String renders every slot as role@epoch#seq, with "*" for firing and "~"
// for a role whose replica is not (yet) valid, grouping adjacent equal slots:
//
//	owner@1#0*:[0-1] follower@1#0:[2] none@0#0:[3]
//
// O(NumSlots).
func (m *Machine) String() string {
	var b strings.Builder
	for i := 0; i < len(m.slots); {
		d := m.display(Slot(i))
		j := i
		for j+1 < len(m.slots) && m.display(Slot(j+1)) == d {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		if j > i {
			fmt.Fprintf(&b, "%s:[%d-%d]", d, i, j)
		} else {
			fmt.Fprintf(&b, "%s:[%d]", d, i)
		}
		i = j + 1
	}
	return b.String()
}

func (m *Machine) display(s Slot) string {
	si := &m.slots[s]
	d := m.State(s).String()
	if si.firing {
		d += "*"
	}
	if !si.synced && si.role != RoleNone {
		d += "~"
	}
	return d
}

func (m *Machine) valid(s Slot) bool { return int(s) < len(m.slots) }

func (m *Machine) emit(e Effect) { m.out = append(m.out, e) }

// position returns the table's owner and follower of s ("" if none).
func (m *Machine) position(s Slot) (owner, follower string) {
	if !m.hasTable {
		return "", ""
	}
	if o, ok := m.table.Owner(s); ok {
		owner = o.Name
	}
	if f, ok := m.table.Follower(s); ok {
		follower = f.Name
	}
	return owner, follower
}

// inPosition reports whether the table makes this node owner or follower
// of s: only such a node may hold a grant, promote or keep an importer's
// copy.
func (m *Machine) inPosition(s Slot) bool {
	o, f := m.position(s)
	return o == m.cfg.Self || f == m.cfg.Self
}

// isTableOwner reports whether the table names node n owner of s.
func (m *Machine) isTableOwner(s Slot, n string) bool {
	o, _ := m.position(s)
	return o != "" && o == n
}

func (m *Machine) inTable(name string) bool { return m.members[name] }

// alive reports whether name is another node not declared dead.
func (m *Machine) alive(name string) bool {
	return name != "" && name != m.cfg.Self && !m.dead[name]
}

// quorate reports whether this node may act on the belief that the nodes
// it does not see are a minority: its view shows a majority, has not
// changed for Config.Settle (and is not stale from a pause), and it heard
// from a majority within Settle. Views lag by the detection time and a
// topology that changed twice within it can leave a node believing in a
// majority it lost; evidence cannot be faked that way.
func (m *Machine) quorate() bool {
	return m.majority && !m.staleView && !m.now.Before(m.viewAt.Add(m.cfg.Settle)) && m.evMajority
}

// takeQuorate is quorate for acting on a dead leader's grant or release:
// with the vote its view need stay unchanged only Config.TakeSettle, as
// the act needs the leader's lease run out and a majority's consents too.
func (m *Machine) takeQuorate() bool {
	return m.majority && !m.staleView && !m.now.Before(m.viewAt.Add(m.cfg.takeSettle())) && m.evMajority
}

func (m *Machine) setMajority(ok bool) {
	switch {
	case ok:
		m.viewLost, m.cutOff = time.Time{}, false
	case m.majority:
		m.viewLost, m.cutOff = m.now, m.evBroken
	}
	m.majority = ok
}

// checkViewLapse counts a view without a majority as a lost majority
// (lostMajority) once the lapse reaches DeadAfter, as updateEvidence does a
// silence. A view loses its majority as soon as this node's failure
// detector declares enough members dead, and under load it does so wrongly,
// for a moment, while their messages flow on (the refutation follows within
// a second or so). Everything that acts on the majority stops at once
// (firing, promotions, seals, new grantees), but a lapse shorter than
// DeadAfter cannot have let the others declare this node dead (see
// Config.DeadAfter): until then it keeps the grants it holds (backed) and
// its dropped suspects. Before, every flap restored each dropped dead
// follower as a suspect only its own answer could clear, and made every
// grantor give its grant up: after a SIGKILL under load the slots the dead
// node owned or followed stalled for good (TestFollowerCrashWithFlaps; the
// process test lost 167 of 11,145 acknowledged tasks that way). Not judged
// on a Tick after a stall: the view node re-reads next may show the lapse
// over (a stall of the process itself is judged apart, Tick.Stalled).
func (m *Machine) checkViewLapse() {
	if !m.majority && !m.viewLost.IsZero() && !m.cutOff && m.now.Sub(m.viewLost) >= m.cfg.deadAfter() {
		m.lostMajority()
	}
}

// backed reports whether this node may keep (and take) grants as far as
// its view goes: it shows a majority, or lost it less than DeadAfter ago
// with no lost majority since (see checkViewLapse).
func (m *Machine) backed() bool {
	return m.majority || !m.viewLost.IsZero() && !m.cutOff
}

// lostMajority handles a lapse of the majority (view or evidence) or a
// pause: a grantee we forgot as dead (degraded mode) may promote while we
// cannot vouch for a majority, so it is a suspect again until it answers;
// and the grants we hold are void, as our owner may have forgotten us.
func (m *Machine) lostMajority() {
	m.evMajority, m.evBroken = false, true
	m.cutOff = !m.majority
	m.lastGlobal = globalKey{dead: -1} // the next Tick advances every slot
	for s := range m.slots {
		si := &m.slots[s]
		m.voidGrant(Slot(s))
		si.grantor, si.releasedTo = false, ""
		si.sealVoid = si.role == RoleSealing
		m.noteGrant(Slot(s))
		if len(si.dropped) == 0 {
			continue
		}
		for _, x := range si.dropped {
			if m.suspectIndex(Slot(s), x.name) < 0 {
				si.suspects = append(si.suspects, suspect{name: x.name, grantSent: x.grantSent, term: x.term, voters: x.voters})
			}
		}
		si.dropped = nil
		m.persistGrantee(Slot(s))
	}
}

// updateEvidence recomputes evMajority from heard. O(members log members).
//
// A lapse (no majority heard within Settle) stops what rests on the
// evidence at once: degraded firing, promotions, drops (quorate). Only a
// lapse whose silence reaches DeadAfter is a lapse of the majority
// (lostMajority): a shorter one cannot have let anyone declare us dead
// (see Config.DeadAfter), so the evidence counts as unbroken across it.
// On a loaded node acks arrive late; counting each late ack as a lost
// majority restored every dead grantee as a suspect that only its own
// answer could clear, and stalled its slots until it came back.
func (m *Machine) updateEvidence() {
	need := m.stable / 2 // others needed for a majority with self
	var times []time.Time
	for _, at := range m.heard {
		times = append(times, at)
	}
	// last is when we last heard from a majority (self included): the
	// need-th most recent sign of life.
	var last time.Time
	switch {
	case need <= 0:
		last = m.now
	case len(times) >= need:
		slices.SortFunc(times, func(a, b time.Time) int { return b.Compare(a) })
		last = times[need-1]
	}
	ok := !last.IsZero() && m.now.Sub(last) < m.cfg.Settle
	if last.Before(m.evLast) {
		m.hzForce = true // degraded slots' right ends sooner (see fireUntil)
	}
	m.evLast = last
	if ok && m.evBroken {
		m.evSince, m.evBroken = m.now, false
	}
	if !ok && !m.evBroken && (last.IsZero() || m.now.Sub(last) >= m.cfg.deadAfter()) {
		m.lostMajority()
	}
	m.evMajority = ok
}

// sender returns the node a message event comes from, "" for local events.
func sender(ev Event) string {
	switch ev := ev.(type) {
	case Replicated:
		return ev.From
	case ReplAck:
		return ev.From
	case PairReplicated:
		return ev.From
	case PairReplAck:
		return ev.From
	case SnapshotRequest:
		return ev.From
	case SnapshotComplete:
		return ev.From
	case NoReplica:
		return ev.From
	case HandoverOffer:
		return ev.From
	case OfferAsked:
		return ev.From
	case HandoverDone:
		return ev.From
	case EpochSeen:
		return ev.From
	case ConsentAsked:
		return ev.From
	case ConsentGiven:
		return ev.From
	case MemberAlive:
		return ev.Name
	}
	return ""
}

// SlotOf returns the slot an event is about: a message about one slot,
// Sealed or Applied (false for the rest).
func SlotOf(ev Event) (Slot, bool) {
	switch ev := ev.(type) {
	case Replicated:
		return ev.Slot, true
	case ReplAck:
		return ev.Slot, true
	case SnapshotRequest:
		return ev.Slot, true
	case SnapshotComplete:
		return ev.Slot, true
	case NoReplica:
		return ev.Slot, true
	case HandoverOffer:
		return ev.Slot, true
	case OfferAsked:
		return ev.Slot, true
	case Sealed:
		return ev.Slot, true
	case HandoverDone:
		return ev.Slot, true
	case EpochSeen:
		return ev.Slot, true
	case Applied:
		return ev.Slot, true
	}
	return 0, false
}

// revive forgets that name was declared dead or left.
func (m *Machine) revive(name string) {
	delete(m.dead, name)
	delete(m.left, name)
	delete(m.forgot, name)
}

// signOfLife forgets that name was declared dead, unless it left (see
// MemberDead).
func (m *Machine) signOfLife(name string) {
	if !m.left[name] {
		delete(m.dead, name)
	}
}

func (m *Machine) advanceAll() {
	for s := range m.slots {
		m.advance(Slot(s))
	}
	m.lastGlobal = m.global()
}

// persist emits Persist with the slot's current durable state.
func (m *Machine) persist(s Slot) {
	m.emit(Persist{Slot: s, State: m.State(s)})
}

// reset replaces slot s's state with a fresh one in role r at epoch e,
// without a valid replica. It stops firing first, and keeps what must
// survive: seq, the leader hint, the flags last emitted and, at the same
// epoch, the heartbeat order, the first offer and the handover record.
func (m *Machine) reset(s Slot, r Role, e Epoch) *slotInfo {
	m.stopFiring(s)
	old := m.slots[s]
	var oldUntil time.Time
	if old.takeFrom != "" && old.grantor && old.leader != old.takeFrom {
		oldUntil = m.grantedUntil(s)
	}
	si := &m.slots[s]
	m.busy[s/64] |= 1 << (s % 64) // not idle: see tickSlots
	*si = slotInfo{role: r, epoch: e, seq: old.seq, leader: old.leader, underRep: old.underRep, unavail: old.unavail,
		held: old.held, heldLeader: old.heldLeader, heldEpoch: old.heldEpoch, heldInc: old.heldInc,
		finalOf: old.finalOf, finalSeq: old.finalSeq}
	if e == old.epoch || e == old.takeEpoch+1 {
		// A handover in progress survives installing the final copy.
		si.takeFrom, si.takeEpoch, si.takeSeq, si.takeDropped = old.takeFrom, old.takeEpoch, old.takeSeq, old.takeDropped
		si.takeLost, si.takeOwn, si.takeAfter = old.takeLost, old.takeOwn, old.takeAfter
		if old.takeFrom != "" && e == old.takeEpoch+1 && old.epoch == old.takeEpoch && old.synced && old.seq >= old.takeSeq &&
			r != RoleNone && r != RoleOwner && r != RoleSealing {
			si.takeOwn = true
			if !oldUntil.IsZero() {
				si.takeAfter = oldUntil.Add(m.cfg.Margin)
			}
		}
	}
	if e == old.epoch {
		si.grantee, si.wasOwner = old.grantee, old.wasOwner || old.role == RoleOwner || old.role == RoleSealing
		si.leaderOwns, si.leaderGone, si.leaderFollows, si.leaderPast = old.leaderOwns, old.leaderGone, old.leaderFollows, old.leaderPast
		si.beatFrom, si.beatSeen, si.offerFirst = old.beatFrom, old.beatSeen, old.offerFirst
		si.offerTo, si.offerAt = old.offerTo, old.offerAt
		si.handedTo, si.handedEpoch, si.handedSeq, si.handedCopy = old.handedTo, old.handedEpoch, old.handedSeq, old.handedCopy
		si.handedDropped, si.restored, si.tookBy = old.handedDropped, old.restored, old.tookBy
		si.censusOwner, si.censusLost = old.censusOwner, old.censusLost
	}
	return si
}

// makeStale forgets that s holds a valid replica (restart): it must resync.
// Like New, it keeps the handover record the last Persist wrote
// (SlotState.Handed), and only that.
func (m *Machine) makeStale(s Slot) {
	si := &m.slots[s]
	r := RoleNone
	if si.role != RoleNone {
		r = RoleFollower
	}
	si = m.reset(s, r, si.epoch)
	si.beatFrom, si.beatSeen, si.offerFirst = "", time.Time{}, time.Time{}
	si.takeFrom, si.leaderOwns, si.leaderGone, si.leaderFollows = "", false, false, false
	if !m.handsOver(s) {
		si.handedTo, si.handedDropped = "", nil // not persisted (see State)
	}
}

// forgetIncarnation applies the restart of node n to slot s: if n was our
// owner, it no longer fires our epoch (a heartbeat from it clears that
// again: the notice may come late). A grant n held stays a suspect of ours
// until n answers a heartbeat: the notice may arrive after its new
// incarnation accepted a fresh grant.
func (m *Machine) forgetIncarnation(s Slot, n string) {
	if si := &m.slots[s]; si.leader == n && si.role != RoleOwner && si.role != RoleSealing {
		si.leaderGone, si.leaderPast = true, false
	}
}

// Debug describes everything the machine holds about slot s, for logs and
// the debug endpoint. The format is not stable.
func (m *Machine) Debug(s Slot) string {
	si := &m.slots[s]
	owner, follower := m.position(s)
	return fmt.Sprintf("%s table=%s/%s leader=%s owns=%v follows=%v gone=%v grantor=%v released=%s grantedUntil=%s follower=%s acked=%v suspects=%v dropped=%v "+
		"pending=%v retryAt=%s tried=%v move=%s take=%s@%d#%d handed=%s@%d#%d offerFrom=%s seal=%s majority=%v quorate=%v ev=%v stale=%v viewAt=%s heard=%v sees=%d stable=%d dead=%v now=%s "+
		"quiet=%v ackLost=%v grantInc=%d grantTerm=%d pairGen=%d peers=%s void=%s",
		m.display(s), owner, follower, si.leader, si.leaderOwns, si.leaderFollows, si.leaderGone, si.grantor, si.releasedTo, m.grantedUntil(s).Format("15:04:05.000"),
		si.follower, si.followerAcked, si.suspects, si.dropped, si.pending, si.retryAt.Format("15:04:05.000"), si.tried, m.moveState(s),
		si.takeFrom, si.takeEpoch, si.takeSeq, si.handedTo, si.handedEpoch, si.handedSeq, si.offerFrom, si.sealFor,
		m.majority, m.quorate(), m.evMajority, m.staleView, m.viewAt.Format("15:04:05.000"), m.heard, m.sees, m.stable, m.dead, m.now.Format("15:04:05.000"),
		m.quiet(s), si.ackLost, si.grantInc, si.grantTerm, m.pairGen, m.peersString(), m.voidString(s))
}

// peersString describes the PairAcks received (Debug).
func (m *Machine) peersString() string {
	var b strings.Builder
	for _, n := range m.names {
		if p := m.peers[n]; p != nil {
			fmt.Fprintf(&b, "%s:gen=%d,acked=%s ", n, p.gen, p.acked.Format("15:04:05.000"))
		}
	}
	return b.String()
}

// moveState describes slot s's place among the planned moves (Debug).
func (m *Machine) moveState(s Slot) string {
	if until, ok := m.moving[s]; ok {
		return "held until " + until.Format("15:04:05.000")
	}
	if k := slices.Index(m.moveQueue, s); k >= 0 {
		return fmt.Sprintf("waiting %d of %d (places held by %d)", k+1, len(m.moveQueue), len(m.moving))
	}
	return "-"
}
