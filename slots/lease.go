package slots

import (
	"container/heap"
	"math/bits"
	"slices"
	"time"
)

// This file holds the lease: how an owner grants one node the right to
// promote, and fires only while no such node can have done so.
// Reference: DESIGN §4 "Lease", research/cluster-design.md §2.4(3).
//
// Grants. An owner sends Grant on the heartbeats (and the snapshot) for
// one node at a time, its grantee: its follower. A node accepts a grant
// only while it holds a valid replica from that owner, is the table's owner
// or follower of the slot and sees a majority; it then is the slot's
// grantor (slotInfo.grantor) and acks with Ack.Grant. Only a grantor
// promotes (or hands the slot to the table owner for a dead owner), and
// only once the owner is declared dead or restarted, Lease+Margin has
// passed since the last grant it accepted (its own clock), and its view is
// quorate (Config.Settle). It gives the grant up on a heartbeat without
// Grant (acking Grant=false), on losing its replica, on a lost majority
// (a silence or a pause of DeadAfter; a view that lost its majority for
// less keeps it, see backed) and after a pause. A snapshot grants but
// never revokes.
//
// Suspects. The owner lists every node it sent a grant to at this epoch
// that may still hold it, with leaseUntil: the time (owner's clock) before
// which that node cannot promote. A fresh grant sent at t covers t+Lease,
// since the node counts from receipt; an ack of a grant sent at t extends
// it to t+Lease. A suspect leaves the list when it acks a heartbeat sent
// no earlier than its last grant with Grant=false (a follower applies
// heartbeats and snapshots only in increasing Sent order, so no grant sent
// up to then can revive it). The owner fires only while every suspect is
// covered, grants a new node only once no other suspect is left, and hands
// the slot over only when no suspect but the importer is left. So at most
// one node can promote from an epoch, and never while its owner fires. The
// persisted SlotState.Grantee names the suspects, so that an owner that
// restarts knows whose consent takes its epoch back.
//
// Releases. A grant moves from the old follower to the next grantee (an
// importer, the table's new owner catching up as the owner's follower, or
// a new table follower) in two steps: the old grantee must give it up
// before the next may get it. An owner that died between the two would
// leave nobody able to act on its epoch, and the slot unavailable with two
// full copies alive. So until the next grantee acked its grant, the owner
// does not revoke the old one outright: it releases it to that node
// (Heartbeat.Release). The holder of a release acks it (Ack.Released) and
// may, like a grantor, act once the owner is declared dead, Lease+Margin
// after the last release it accepted and with a quorate view, but only by
// handing the slot to that node when it offers, never by promoting. Its
// acks extend its lease as a grant's do, and the owner keeps it a suspect
// (the owner still fires only while it is covered), but one that does not
// block that node's grant or the seal for it: whichever acts, the grantor
// or the holder of the release, that one node takes epoch+1, and only
// once. A follower keeps its grant as a release to its heir when it drops
// its copy (the owner announced a caught-up follower) or is granted while
// its own table moved it out of position; it needs no copy to hand over,
// since the heir's holds every acknowledged write. A node that holds the
// owner's grant itself takes a handover from a third node only once that
// grant has run out.
//
// Degraded mode (DESIGN §4: "unless the follower is declared dead and the
// owner still sees a majority"). A suspect declared dead is dropped from
// the list (kept in slotInfo.dropped, still persisted and heartbeated
// without Grant) if the owner's view is quorate and it has heard from a
// majority continuously since Settle before that suspect's lease ran out:
// the suspect could only have promoted with a settled majority view after
// its lease, which would have overlapped ours, and cut off it gives the
// grant up. While it has dropped suspects the owner fires only with
// evidence of a majority; a lost majority (a silence or a pause of
// DeadAfter or more, see backed) makes them suspects again until they
// answer. It seals for an importer only
// with that evidence, and the handover carries them
// (SendHandover.Dropped): the importer keeps them as dropped suspects of
// its own, under the same rules (inherit).

//
// Pairs. A heartbeat per slot every Lease/4 costs every node a message, an
// ack and two machine steps per slot it shares, idle or not. So the lease
// is also renewed per node pair: every Lease/4 an owner sends each other
// member one PairHeartbeat (Sent, its incarnation Inc), and the per-slot
// heartbeat goes out only while the slot is not quiet (see quiet), plus
// once every pairRefresh leases. A PairHeartbeat never grants: a node
// that receives it at r counts every grant or release it holds from that
// incarnation of the sender (grantInc, learnt from the heartbeat that
// granted it) as accepted at r (grantedUntil). Its PairAck carries the
// node's pair generation (pairGen), which changes whenever a grant or
// release it held ends or changes hands (noteGrant): given up, replaced,
// or acted on by promoting or handing over. The owner extends a
// suspect's lease to Sent+Lease on a PairAck only if the suspect acked
// its grant with Inc = ours and the same generation (suspect.gen). Then
// nothing changed in between: either the node held that very grant when
// the pair heartbeat arrived, which renewed it, or it took the grant later,
// from a heartbeat it received after it; and it cannot have acted on the
// grant before. So the node promotes no earlier than Lease+Margin after
// the arrival of any pair heartbeat whose ack the owner counts, exactly as
// for the per-slot heartbeat, and the inequality the lease rests on holds.
// A node that gives a grant up on its own (a lapsed majority, a pause)
// changes its generation: the owner's slots with it stop being quiet and
// heartbeat again, which grants again.

// pairRefresh is how many leases a quiet slot goes without a heartbeat of
// its own. The pair heartbeats renew its lease meanwhile; the refresh is
// only a safety net, and every round costs each owner a message, an ack
// and two machine steps per slot it owns: at 4 leases an idle 3-node
// cluster sent ~2,400 per-slot heartbeats a second (one round over all
// 16,384 slots every 8 s with a 2 s lease), at 32 one round a minute.
const pairRefresh = 32

// pairKey names one incarnation of an owner.
type pairKey struct {
	node string
	inc  uint64
}

// peer is what an owner knows of another node's PairAcks.
type peer struct {
	gen   uint64    // generation of the newest PairAck
	acked time.Time // newest Sent acked at gen (owner's clock)
	last  time.Time // newest Sent acked at any generation
	stale bool      // no ack at gen for Lease/2: its quiet slots are not idle
	// promised is the newest Sent acked with a promise (Config.Vote,
	// vote.go): it consents to no takeover of our grants of terms floor and
	// up before promised+Lease.
	promised time.Time
	floors   map[string]uint64 // PairAck.Floors: by taker
}

// suspect is a node that may hold a grant from this owner at its epoch.
//
// An ack clears a suspect only if its heartbeat was sent after both the
// last grant (grantSent) and the last release (releaseSent) sent to it: an
// ack of an older one, crossing a release on its way, cleared the suspect,
// the release arrived after and its ack, from a non-suspect, was ignored,
// and its holder later handed the epoch over while this owner, sure nobody
// held anything of it, fired on (sim seed 14340: one slot fired by two
// nodes).
type suspect struct {
	name        string
	grantSent   time.Time // last grant sent to it (owner's clock)
	releaseSent time.Time // last release sent to it (Heartbeat.Release; owner's clock)
	leaseUntil  time.Time // it cannot promote before (owner's clock), PairAcks aside (see until)
	releasedTo  string    // it acked a release to this importer (and no grant since)
	acked       bool      // it acked a grant
	gen         uint64    // its pair generation when it acked our grant with our Inc; 0 for none
	peer        *peer     // m.peers[name] once gen was set
	// term: the vote term of the grant or release of ours it last acked
	// (our incarnation); 0: none, or unknown. Acting on it needs consents
	// for that term (vote.go).
	term uint64
	// voters: our voters when it last acked that grant; promises must
	// come from a majority of them too (vote.go, "Counting").
	voters []string
	// lost: its run restarted with an empty data dir (MemberAlive.Empty)
	// after this grant's lease ran out. That run may have promoted, and
	// what it did is lost with its data: no ack of a later run speaks for
	// it, so none extends or clears the entry (see markLost).
	lost bool
}

// until returns when suspect x cannot promote before: its leaseUntil, or
// later by the PairAcks of its generation.
func (m *Machine) until(x *suspect) time.Time {
	u := x.leaseUntil
	if x.gen == 0 {
		return u
	}
	if p := x.peer; p != nil && p.gen == x.gen {
		if v := p.acked.Add(m.cfg.Lease); v.After(u) {
			u = v
		}
	}
	return u
}

// grantedUntil returns when the grant or release this node holds for s
// was last renewed, plus Lease: by the heartbeat or snapshot that gave it
// or by a PairReplicated of the same incarnation of its leader.
func (m *Machine) grantedUntil(s Slot) time.Time {
	si := &m.slots[s]
	u := si.grantedUntil
	if si.grantInc != 0 && (si.grantor || si.releasedTo != "") {
		if r, ok := m.pairRecv[pairKey{si.leader, si.grantInc}]; ok {
			if v := r.Add(m.cfg.Lease); v.After(u) {
				u = v
			}
		}
	}
	return u
}

// heldInc is the Ack.Inc of slot s: the incarnation whose PairReplicated
// renew the grant or release held, 0 for none.
func (m *Machine) heldInc(s Slot) uint64 {
	if si := &m.slots[s]; si.grantor || si.releasedTo != "" {
		return si.grantInc
	}
	return 0
}

// heldTerm is the Ack.Term of slot s: the vote term of the grant or
// release held, 0 for none.
func (m *Machine) heldTerm(s Slot) uint64 {
	if si := &m.slots[s]; si.grantor || si.releasedTo != "" {
		return si.grantTerm
	}
	return 0
}

// noteGrant bumps pairGen if the grant or release held for s ended or
// changed hands (leader, epoch or incarnation) since the last call. Step
// calls it after every slot event and advance after every slot.
func (m *Machine) noteGrant(s Slot) {
	si := &m.slots[s]
	held := si.grantor || si.releasedTo != ""
	if si.held && (!held || si.heldLeader != si.leader || si.heldEpoch != si.epoch || si.heldInc != si.grantInc) {
		m.pairGen++
	}
	si.held = held
	if held {
		si.heldLeader, si.heldEpoch, si.heldInc = si.leader, si.epoch, si.grantInc
	}
}

// quiet reports whether owner s may skip its per-slot heartbeat: its one
// suspect is its caught-up follower, which holds our grant at our
// incarnation and whose PairAcks of that generation keep arriving. Writes
// do not end it: the follower's last ack need only say it holds a valid
// replica (the replication stream, acknowledged per write, keeps that
// copy current, and its machine learns the seq from its own applies).
// Requiring an ack at the owner's current seq heartbeated every slot a
// write touched every Lease/4 while writes flowed: 6–8 % of a 3-node
// cluster's CPU during creates, against ~3 % now (docs/BENCHMARKS.md).
func (m *Machine) quiet(s Slot) bool {
	si := &m.slots[s]
	if si.role != RoleOwner || !m.majority || si.follower == "" || !si.followerAcked || si.ackLost ||
		si.offerFrom != "" || len(si.dropped) > 0 || len(si.suspects) != 1 {
		return false
	}
	x := &si.suspects[0]
	if x.name != si.follower || !x.acked || x.releasedTo != "" || x.gen == 0 || m.dead[x.name] ||
		m.cfg.Vote && (x.term != m.term || !slices.Equal(x.voters, m.voterList)) {
		// (With the vote, a grant acked at an older term or under other
		// voters is granted again at once: see vote.go, "Counting".)
		return false
	}
	p := x.peer
	return p != nil && p.gen == x.gen && m.now.Before(p.acked.Add(m.cfg.Lease/2))
}

// tickIdle reports whether a Tick's advance would leave slot s as it is,
// so the Tick may skip it: si.idle (advance found nothing left to do that
// only an event could change) and, for an owner, a quiet slot whose pair
// lease holds for Lease/2 more and whose refresh is not due. Whatever else
// could change that (a slot event, a view change, a Tick that moves the
// majority, the evidence or a pause) resets si.idle or runs every slot.
func (m *Machine) tickIdle(s Slot) bool {
	si := &m.slots[s]
	if !si.idle {
		return false
	}
	if si.role != RoleOwner {
		return true
	}
	return m.now.Before(si.refreshAt) && m.quiet(s)
}

// setBusy marks slot s not idle: every Tick advances it until advance
// finds it idle again.
func (m *Machine) setBusy(s Slot) {
	m.slots[s].idle = false
	m.busy[s/64] |= 1 << (s % 64)
}

// staleTick marks the peers whose PairAcks stopped for Lease/2 and reports
// whether any did: their quiet slots must be looked at now, well before
// their lease (Lease after the last ack) runs out.
func (m *Machine) staleTick() bool {
	any := false
	for _, p := range m.peers {
		if !p.stale && p.gen != 0 && !m.now.Before(p.acked.Add(m.cfg.Lease/2)) {
			p.stale, any = true, true
		}
	}
	return any
}

// tickSlots is a Tick's pass over the slots: the slots marked busy, and
// the idle owners whose refresh came due (refreshQ). When the majority,
// the evidence or the view moved it advances every slot; when a peer's
// pair lease went stale it also looks at every idle owner (their quiet
// may have ended). An idle slot stays idle until an event about it, a
// peer's new generation (fixPairLeases), its refresh or one of those
// passes: nothing else can change what a Tick would do with it, so an
// idle cluster's Tick touches no slot at all between refreshes
// (checkInvariants checks it after every simulated Step).
func (m *Machine) tickSlots() {
	switch {
	case m.global() != m.lastGlobal:
		m.advanceAll()
	case m.staleTick():
		// A slot is idle exactly when its busy bit is clear (setIdle,
		// setBusy, reset), and an idle slot in any role but owner stays
		// as it is (tickIdle): only the busy slots and the idle owners
		// need a look, not every slotInfo.
		for w := range m.busy {
			word := m.busy[w] | m.idleOwned[w]
			for word != 0 {
				b := word & -word
				word &^= b
				if s := Slot(w*64 + bits.TrailingZeros64(b)); !m.tickIdle(s) {
					m.advance(s)
				}
			}
		}
	default:
		for w, word := range m.busy {
			for word != 0 {
				b := word & -word
				word &^= b
				m.advance(Slot(w*64 + bits.TrailingZeros64(b)))
			}
		}
	}
	m.refreshDue()
}

// refreshDue advances the idle owners whose refresh (refreshAt) is due.
// refreshQ holds one entry per idle owner, at the refreshAt it was queued
// with (slotInfo.queuedAt); an entry whose slot left the idle owners or
// was queued again since is dropped when it comes up.
func (m *Machine) refreshDue() {
	for len(m.refreshQ) > 0 && !m.now.Before(m.refreshQ[0].at) {
		e := heap.Pop(&m.refreshQ).(refreshEntry)
		si := &m.slots[e.s]
		if !e.at.Equal(si.queuedAt) {
			continue
		}
		si.queuedAt = time.Time{}
		if m.idleOwned[e.s/64]&(1<<(e.s%64)) != 0 && !m.tickIdle(e.s) {
			m.advance(e.s)
		}
	}
}

// refreshEntry is an idle owner queued for its refresh.
type refreshEntry struct {
	at time.Time
	s  Slot
}

// refreshQueue is a min-heap of refreshEntry by at (container/heap).
type refreshQueue []refreshEntry

func (q refreshQueue) Len() int           { return len(q) }
func (q refreshQueue) Less(i, j int) bool { return q[i].at.Before(q[j].at) }
func (q refreshQueue) Swap(i, j int)      { q[i], q[j] = q[j], q[i] }
func (q *refreshQueue) Push(x any)        { *q = append(*q, x.(refreshEntry)) }
func (q *refreshQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

// setIdle records at the end of advance whether slot s needs no Tick
// (see tickIdle); tableOwner is the table's owner of s.
func (m *Machine) setIdle(s Slot, tableOwner string) {
	si := &m.slots[s]
	switch si.role {
	case RoleOwner:
		si.idle = si.firing && !si.underRep && !si.unavail && si.beatSent && m.hasTable && m.now.Before(si.refreshAt) && m.quiet(s)
	case RoleNone, RoleFollower:
		si.idle = m.hasTable && m.majority && tableOwner != m.cfg.Self && !si.firing && !si.unavail && !si.wasOwner &&
			si.takeFrom == "" && si.handedTo == "" && si.heldOffer == "" && !si.pending && !m.voteWait(s)
	default:
		si.idle = false
	}
	if si.idle {
		m.busy[s/64] &^= 1 << (s % 64)
	} else {
		m.busy[s/64] |= 1 << (s % 64)
	}
	if si.idle && si.role == RoleOwner {
		m.idleOwned[s/64] |= 1 << (s % 64)
		if !si.queuedAt.Equal(si.refreshAt) {
			si.queuedAt = si.refreshAt
			heap.Push(&m.refreshQ, refreshEntry{si.refreshAt, s})
		}
	} else {
		m.idleOwned[s/64] &^= 1 << (s % 64)
	}
}

// globalKey is what a Tick may change that tickIdle does not look at:
// if it moved, every slot is advanced.
type globalKey struct {
	majority, evMajority, staleView, quorate bool
	dead, left                               int
}

func (m *Machine) global() globalKey {
	return globalKey{m.majority, m.evMajority, m.staleView, m.quorate(), len(m.dead), len(m.left)}
}

// pairBeat sends a PairHeartbeat to every other member every Lease/4, and
// forgets the pair heartbeats received that renew nothing any more.
func (m *Machine) pairBeat() {
	if !m.hasTable || m.now.Before(m.pairAt.Add(m.cfg.Lease/4)) {
		return
	}
	m.pairAt = m.now
	for _, n := range m.voteNames() {
		if n != m.cfg.Self && !m.dead[n] {
			m.emit(PairHeartbeat{To: n, Sent: m.now, Inc: m.inc})
		}
	}
	for k, r := range m.pairRecv {
		if r.Add(m.cfg.Lease + m.cfg.Margin).Before(m.now) {
			delete(m.pairRecv, k)
		}
	}
}

// onPairBeat renews every grant held from that incarnation of the sender
// (lazily: grantedUntil) and acks with our generation.
func (m *Machine) onPairBeat(ev PairReplicated) {
	if ev.From == m.cfg.Self {
		return
	}
	k := pairKey{ev.From, ev.Inc}
	if r, ok := m.pairRecv[k]; !ok || m.now.After(r) {
		m.pairRecv[k] = m.now
	}
	if len(m.consents) > 0 || len(m.votes) > 0 {
		m.forgetConsents(ev.From, ev.Inc) // older incarnations are gone
	}
	m.emit(PairAck{To: ev.From, Sent: ev.Sent, Inc: ev.Inc, Gen: m.pairGen, Promise: m.cfg.Vote, Floors: m.floors(ev.From, ev.Inc)})
}

// ackTerm is the vote term of our grant that ack ev says its sender holds:
// 0 unless it holds one of our incarnation inc.
func ackTerm(ev ReplAck, inc uint64) uint64 {
	if ev.Inc != inc {
		return 0
	}
	return ev.Term
}

// onPairAck records a PairAck of one of our pair heartbeats. A newer
// generation first fixes the extensions the old one gave (a suspect whose
// ack carried it keeps them), then replaces it.
func (m *Machine) onPairAck(ev PairReplAck) {
	if ev.Inc != m.inc || ev.From == m.cfg.Self {
		return
	}
	p := m.peerOf(ev.From)
	switch {
	case ev.Gen == p.gen:
		if ev.Sent.After(p.acked) {
			p.acked, p.stale = ev.Sent, false
		}
	case ev.Sent.After(p.last):
		if p.gen != 0 {
			m.fixPairLeases(ev.From, p)
		}
		p.gen, p.acked, p.stale = ev.Gen, ev.Sent, false
	}
	if ev.Sent.After(p.last) {
		p.last = ev.Sent
	}
	if ev.Promise && ev.Sent.After(p.promised) {
		p.promised, m.promDirty = ev.Sent, true
	}
	if ev.Promise {
		for _, f := range ev.Floors {
			if f.Term > p.floors[f.Taker] {
				if p.floors == nil {
					p.floors = map[string]uint64{}
				}
				p.floors[f.Taker], m.promDirty = f.Term, true
				m.onFloor(f.Term)
			}
		}
	}
}

// peerOf returns the record of name's PairAcks, creating it.
func (m *Machine) peerOf(name string) *peer {
	p := m.peers[name]
	if p == nil {
		p = &peer{}
		m.peers[name] = p
	}
	return p
}

// fixPairLeases folds p's extensions into the leaseUntil of every
// suspect name of generation p.gen, before p moves to another generation.
// O(NumSlots), once per change of a peer's generation.
func (m *Machine) fixPairLeases(name string, p *peer) {
	u := p.acked.Add(m.cfg.Lease)
	for s := range m.slots {
		si := &m.slots[s]
		for i := range si.suspects {
			if x := &si.suspects[i]; x.name == name && x.gen == p.gen {
				if u.After(x.leaseUntil) {
					x.leaseUntil = u
				}
				m.setBusy(Slot(s)) // no longer quiet: heartbeat (grant) again
			}
		}
	}
}

// grantee is the node the owner grants the lease to: its follower, provided
// it sees a majority (or lost it without a lost majority since: see
// backed; revoking its follower's grant on a flap of its view left nobody
// able to act on the epoch when it died right after), no other node may
// still hold a grant and no importer waits for the grants to be revoked.
// "" means grant nobody.
func (m *Machine) grantee(s Slot) string {
	si := &m.slots[s]
	f := si.follower
	if si.role != RoleOwner || f == "" || !m.backed() || (si.offerFrom != "" && si.offerFrom != f) {
		return ""
	}
	for _, x := range si.suspects {
		if x.lost || x.name != f && x.releasedTo != f {
			return ""
		}
	}
	return f
}

// releaseTarget is the node the owner releases its other suspects' grants
// to: its follower (the importer while the table names another owner), the
// next grantee; "" for none. Once that node acked its grant, beat revokes
// the others outright. A flap of the view (see backed) revokes nothing.
func (m *Machine) releaseTarget(s Slot) string {
	si := &m.slots[s]
	if si.role != RoleOwner || !m.backed() || si.follower == "" || !m.alive(si.follower) {
		return ""
	}
	return si.follower
}

// heir is, for a follower that may not hold the grant its owner gives it
// (our table moved it out of the slot's position), the node the grant is
// about to move to in our view: the table's owner if it is not our
// leader (an importer), else the table's follower. "" for none.
func (m *Machine) heir(s Slot) string {
	owner, follower := m.position(s)
	x := owner
	if owner == m.slots[s].leader {
		x = follower
	}
	if x == m.cfg.Self {
		return ""
	}
	return x
}

// grant reports whether a message to `to` now carries Grant, and if so
// records the grant.
func (m *Machine) grant(s Slot, to string) bool {
	if to == "" || to != m.grantee(s) {
		return false
	}
	si := &m.slots[s]
	if i := m.suspectIndex(s, to); i >= 0 {
		si.suspects[i].grantSent, si.suspects[i].releasedTo = m.now, ""
	} else {
		si.suspects = append(si.suspects, suspect{name: to, grantSent: m.now, leaseUntil: m.now.Add(m.cfg.Lease)})
		m.persistGrantee(s) // before the grant leaves
	}
	return true
}

// persistGrantee persists SlotState.Grantee if the suspects changed it.
func (m *Machine) persistGrantee(s Slot) {
	si := &m.slots[s]
	if g := granteeOf(si); g != si.grantee {
		si.grantee = g
		m.persist(s)
	}
}

// granteeOf is SlotState.Grantee for an owner: its one suspect (dropped
// ones included: they may still hold the grant), "" for none, "*" for
// several.
func granteeOf(si *slotInfo) string {
	switch n := len(si.suspects) + len(si.dropped); {
	case n == 0:
		return ""
	case n > 1:
		return "*"
	case len(si.suspects) == 1:
		return si.suspects[0].name
	default:
		return si.dropped[0].name
	}
}

func (m *Machine) suspectIndex(s Slot, name string) int {
	return slices.IndexFunc(m.slots[s].suspects, func(x suspect) bool { return x.name == name })
}

func (m *Machine) droppedIndex(s Slot, name string) int {
	return slices.IndexFunc(m.slots[s].dropped, func(x suspect) bool { return x.name == name })
}

// beat sends one heartbeat round: to the follower and every suspect not
// declared dead. Only the grantee's carries Grant; the others' acks show
// they gave their grant up.
func (m *Machine) beat(s Slot) {
	si := &m.slots[s]
	if si.beatSent && m.quiet(s) {
		if m.now.Before(si.refreshAt) {
			si.beatAt = m.now
			return
		}
		si.refreshAt = m.now.Add(pairRefresh * m.cfg.Lease)
	}
	targets := make([]string, 0, 1+len(si.suspects)+len(si.dropped))
	if si.follower != "" {
		targets = append(targets, si.follower)
	}
	for _, x := range append(slices.Clone(si.suspects), si.dropped...) {
		if !slices.Contains(targets, x.name) {
			targets = append(targets, x.name)
		}
	}
	rel := m.releaseTarget(s)
	if i := m.suspectIndex(s, rel); i >= 0 && si.suspects[i].acked && si.suspects[i].releasedTo == "" {
		// The grant arrived: the others need no release any more.
		rel = ""
	}
	for _, to := range targets {
		if m.dead[to] {
			continue
		}
		hb := Heartbeat{Slot: s, Epoch: si.epoch, Seq: si.seq, To: to, Sent: m.now, Grant: m.grant(s, to), Inc: m.inc, Term: m.term}
		if i := m.suspectIndex(s, to); !hb.Grant && rel != "" && to != rel && i >= 0 && !si.suspects[i].lost {
			hb.Release = rel
			si.suspects[i].releaseSent = m.now
		}
		m.emit(hb)
	}
	if !si.beatSent {
		// The first round: the slots a node takes at once (a bootstrap,
		// a failover) would otherwise beat in the same tick forever after,
		// one burst of NumSlots messages every Lease/4. Their second
		// round comes a slot-dependent fraction of the interval early
		// (never late: a beat sooner only renews the lease sooner), which
		// spreads the rounds over beatPhases ticks.
		si.beatAt, si.beatSent = m.now.Add(-beatPhase(s, m.cfg.Lease)), true
		return
	}
	si.beatAt = m.now
}

// beatPhases is how many phases the heartbeat rounds are spread over.
const beatPhases = 4

// beatPhase is slot s's phase within the heartbeat interval Lease/4.
func beatPhase(s Slot, lease time.Duration) time.Duration {
	return time.Duration(int(s)%beatPhases) * lease / (4 * beatPhases)
}

// covered reports whether no suspect can have promoted by now.
func (m *Machine) covered(s Slot) bool {
	for i := range m.slots[s].suspects {
		if !m.now.Before(m.until(&m.slots[s].suspects[i])) {
			return false
		}
	}
	return true
}

// dropDeadSuspects moves suspects declared dead to slotInfo.dropped
// (degraded mode, see the file comment) if our view is quorate and we have
// heard from a majority continuously since Settle before their lease (plus
// Margin) ran out.
//
// A suspect that left the cluster is forgotten at once: a node stops its
// ownership machine before it leaves, and comes back only as a new
// incarnation, which holds no grant. Not one an operator forgot
// (MemberDead.Forgot): it did not leave, it died, and may have promoted
// first; it stays a suspect as a dead one does, and if its lease cannot be
// ruled out the owner bumps its epoch past it after a census (census.go).
// Dropping it at once let an owner cut off when its grantee promoted fire
// its old epoch beside the new one, and hand that epoch on a second time
// (sim seed 224 with the forget phase).
func (m *Machine) dropDeadSuspects(s Slot) {
	si := &m.slots[s]
	if len(m.left) > 0 && (len(si.suspects) > 0 || len(si.dropped) > 0) {
		gone := func(x suspect) bool { return m.left[x.name] && !m.forgot[x.name] }
		si.suspects = slices.DeleteFunc(si.suspects, gone)
		si.dropped = slices.DeleteFunc(si.dropped, gone)
		m.persistGrantee(s)
	}
	if !m.quorate() {
		return
	}
	si.suspects = slices.DeleteFunc(si.suspects, func(x suspect) bool {
		if (m.dead[x.name] || x.lost) && !m.evSince.After(m.until(&x).Add(m.cfg.Margin-m.cfg.Settle)) {
			x.leaseUntil, x.gen, x.lost = m.until(&x), 0, false
			si.dropped = append(si.dropped, x)
			return true
		}
		return false
	})
	m.persistGrantee(s)
}

func (m *Machine) onAck(ev ReplAck) {
	s, si := ev.Slot, &m.slots[ev.Slot]
	if m.reject(s, ev.Epoch, ev.From) {
		return
	}
	if ev.Epoch > si.epoch {
		m.stepDown(s, ev.Epoch, ev.From)
		return
	}
	if si.role != RoleOwner && si.role != RoleSealing {
		return
	}
	if ev.From == si.follower {
		si.ackLost = !ev.Synced
	}
	if ev.From == si.follower && ev.Synced && !si.followerAcked {
		si.followerAcked = true
		// Tells a previous follower outside the table that it may drop.
		m.emit(Announce{Slot: s, Epoch: si.epoch, Replicated: true})
	}
	i := m.suspectIndex(s, ev.From)
	switch {
	case i >= 0 && si.suspects[i].lost:
		// A later run's ack says nothing of the run that held the grant.
	case ev.Grant && i >= 0:
		if l := ev.Sent.Add(m.cfg.Lease); l.After(si.suspects[i].leaseUntil) {
			si.suspects[i].leaseUntil = l
		}
		si.suspects[i].acked = true
		si.suspects[i].leaseUntil = m.until(&si.suspects[i])
		si.suspects[i].gen = 0
		si.suspects[i].term, si.suspects[i].voters = ackTerm(ev, m.inc), m.voterList
		if ev.Inc == m.inc {
			si.suspects[i].gen, si.suspects[i].peer = ev.Gen, m.peerOf(ev.From)
		}
		if d := m.droppedIndex(s, ev.From); d >= 0 && !ev.Sent.Before(si.dropped[d].grantSent) {
			// It holds the grant we gave it since it was dropped (it came
			// back, and we granted it again): the suspect counts that
			// grant now, as the case below does when it is no suspect
			// yet. Kept, the dropped entry waited for promises of its
			// older grant that never came, and the slot never fired
			// again (sim seed 28063 without the forget).
			si.dropped = slices.Delete(si.dropped, d, d+1)
			m.persistGrantee(s)
		}
	case ev.Released != "" && i >= 0 && !ev.Sent.Before(si.suspects[i].grantSent):
		// It gave the grant up for a release to the importer: still a
		// suspect (it may hand the slot over), but not in the importer's way.
		if l := ev.Sent.Add(m.cfg.Lease); l.After(si.suspects[i].leaseUntil) {
			si.suspects[i].leaseUntil = l
		}
		si.suspects[i].leaseUntil = m.until(&si.suspects[i])
		si.suspects[i].releasedTo, si.suspects[i].acked, si.suspects[i].gen = ev.Released, false, 0
		si.suspects[i].term, si.suspects[i].voters = ackTerm(ev, m.inc), m.voterList
	case ev.Grant && m.droppedIndex(s, ev.From) >= 0:
		// A grant we stopped counting when its holder was declared dead:
		// count it again until it is revoked. (Other grant acks from
		// non-suspects are older than the ack that revoked the grant.)
		si.dropped = slices.Delete(si.dropped, m.droppedIndex(s, ev.From), m.droppedIndex(s, ev.From)+1)
		si.suspects = append(si.suspects, suspect{name: ev.From, grantSent: ev.Sent, leaseUntil: ev.Sent.Add(m.cfg.Lease),
			term: ackTerm(ev, m.inc), voters: m.voterList})
		m.persistGrantee(s)
	case m.droppedIndex(s, ev.From) >= 0 && !ev.Sent.Before(si.dropped[m.droppedIndex(s, ev.From)].grantSent):
		// It came back without our grant: it never can promote now.
		si.dropped = slices.Delete(si.dropped, m.droppedIndex(s, ev.From), m.droppedIndex(s, ev.From)+1)
		m.persistGrantee(s)
	case i >= 0 && !ev.Sent.Before(si.suspects[i].grantSent) && !ev.Sent.Before(si.suspects[i].releaseSent):
		si.suspects = slices.Delete(si.suspects, i, i+1)
		m.persistGrantee(s)
	}
	if si.role == RoleOwner {
		m.setUnderReplicated(s, si.follower == "" || !si.followerAcked)
		if si.offerFrom != "" && m.canSeal(s, si.offerFrom) {
			m.seal(s)
			return
		}
	}
	m.reconcile(s)
}

// markLost applies the restart of node name with an empty data dir
// (MemberAlive.Empty) to the grants it held of ours: a grant whose lease
// ran out before we heard of the restart may have been acted on by the
// lost run (a promotion our view missed, cut off), and the new run, which
// knows nothing of it, cannot say. Such a suspect is marked lost: no later
// ack extends or clears it, nobody is granted or sealed for while it is
// left, and it goes as a dead grantee's does: dropped if we heard from a
// majority throughout since before its lease ran out (dropDeadSuspects;
// it could not have promoted), else the slot waits, unavailable, until a
// higher epoch reaches us (the lost run's follower, if it promoted) or an
// operator forgets the node. A grant whose lease still ran was never acted
// on: the run ended before it could promote. O(NumSlots).
//
// An owner census for lost suspects (as for forgotten ones, census.go)
// was tried: it took a slot's epoch+censusJump, and with the owner then
// crashed and forgotten, another census from the same epoch took the same
// one (sim seeds 5950, 10741 with -simwipefault 2).
func (m *Machine) markLost(name string) {
	for s := range m.slots {
		si := &m.slots[s]
		if si.role != RoleOwner && si.role != RoleSealing {
			continue
		}
		for i := range si.suspects {
			if x := &si.suspects[i]; x.name == name && !x.lost && !m.now.Before(m.until(x)) {
				x.leaseUntil, x.gen, x.lost = m.until(x), 0, true
				m.setBusy(Slot(s))
			}
		}
	}
}
