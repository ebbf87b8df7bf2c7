package slots

import (
	"slices"
	"time"
)

// This file holds the moves of a slot between nodes: importing, the planned
// handover (offer, seal, final (epoch, seq)) and promotion after a crash.
// Reference: DESIGN §4 "Planned move", "Crash", "Never own from nothing".

// importStep drives a slot the table gives this node but whose epoch it
// does not hold: catch up, then take it by handover or by promotion.
func (m *Machine) importStep(s Slot) {
	si := &m.slots[s]
	_, tableFollower := m.position(s)
	if si.role != RoleUnavailable {
		si.role = RoleImporting
	}
	if o := m.censusFor(s); o != "" {
		// Its owner was forgotten and nobody holds its grant (census.go).
		m.censusStep(s, o)
		return
	} else if !m.reclaimsByCensus(s) {
		m.censusStop(s) // the usual way again
	}
	if si.pending && m.now.Before(si.retryAt) {
		return
	}
	if si.wasOwner {
		m.reclaim(s)
		return
	}
	if si.synced {
		leaderUp := m.alive(si.leader) && !si.leaderGone
		switch {
		case !leaderUp && si.grantor:
			// Crash: the owner we hold the grant of is dead (or restarted).
			// We promote once our view is trustworthy (takeQuorate) and
			// the lease it may still fire under is over.
			if m.takeQuorate() && !m.now.Before(m.grantedUntil(s).Add(m.cfg.Margin)) {
				if m.consented(s) {
					m.becomeOwner(s, si.epoch+1, nil, "")
					break
				}
				// Waiting for the vote's consents (vote.go): once that
				// takes a lease, say so (a majority of the grant's voters
				// may be down, and then the slot waits for them).
				if at, ok := m.firstAsked[slotWait{pairKey{si.leader, si.grantInc}, s}]; ok && !m.now.Before(at.Add(m.cfg.Lease)) {
					si.role = RoleUnavailable
					m.setUnavailable(s, true)
				}
			}
		default:
			// Planned move: ask the owner we copied from to seal and hand
			// over, on every retry once it heartbeated us. Otherwise
			// another node may hold the grant of a dead owner (or be a
			// restarted owner that gave none) and hand the slot over: try
			// the node we copied from (unless we handed it this epoch: it
			// has not taken it yet), the table follower, then every
			// member, one per retry.
			if leaderUp && si.leaderOwns && !slices.Contains(si.tried, si.leader) {
				if m.admitMove(s) { // else it waits for a place (Config.MaxMoves)
					m.offer(s, si.leader)
				}
				return
			}
			if b := si.beatFrom; b != "" && b != si.leader && m.alive(b) && !slices.Contains(si.tried, b) {
				// The owner of our epoch heartbeats us (only owners do)
				// while our copy follows another node, a follower that
				// cannot hand over (one fetched after a restart): offer to
				// the owner. A draining owner waits for just that, and it
				// is outside the table, which the candidates below are
				// (sim seed 8094 without the forget).
				if m.admitMove(s) {
					si.tried = append(si.tried, b)
					m.offer(s, b)
				}
				return
			}
			cands := []string{tableFollower}
			if leaderUp && si.handedTo != si.leader {
				cands = []string{si.leader, tableFollower}
			}
			for _, c := range append(cands, m.names...) {
				if m.alive(c) && !slices.Contains(si.tried, c) {
					if c == si.leader && !si.leaderFollows && !m.admitMove(s) {
						return // the owner would seal: wait for a place
					}
					si.tried = append(si.tried, c)
					m.offer(s, c)
					return
				}
			}
			// Nobody can hand it over: our copy alone does not make us the
			// owner. Report it until a holder turns up.
			si.role = RoleUnavailable
			m.setUnavailable(s, true)
			if m.ticking {
				si.tried = nil // start over next time
				m.setPending(s)
			}
		}
		return
	}
	// No valid replica: fetch one from a node that may hold the epoch: the
	// owner we know of, the table follower, then every member, one after
	// another as they answer NoReplica. A node that joined while the
	// epoch's holders were down knows no owner, and its table follower
	// need not hold the epoch: asking only those two left the slot
	// unfired for good while a synced follower holding a dead (or
	// restarted) owner's grant waited for the importer's offer. An
	// unavailable slot stays so until a copy arrives.
	ask := func(c string) (asked bool) {
		if c == m.cfg.Self || !m.alive(c) || slices.Contains(si.tried, c) {
			return false
		}
		if m.admitMove(s) { // else it waits for a place (Config.MaxMoves)
			m.emit(RequestSnapshot{Slot: s, Epoch: si.epoch, From: c})
			m.setPending(s)
		}
		return true
	}
	if ask(si.leader) || ask(tableFollower) || slices.ContainsFunc(m.askable(), ask) {
		return
	}
	// Nobody we can ask holds the epoch: never own from nothing.
	si.role = RoleUnavailable
	m.setUnavailable(s, true)
	if m.ticking {
		si.tried = nil // ask again next time: a holder may be back
		m.setPending(s)
	}
}

// askable returns the nodes an importer without a copy asks for one, one
// after another: the table's members, then any other node heard from that
// is alive. A draining node is outside the table but may hold the epoch:
// one that crashed while draining and came back (its restarted owner's
// copy the only complete one, which it hands over at the table owner's
// request: onSnapshotRequest) was never asked, and the slot stayed with
// nobody for good (sim seed 774 without the forget). Only requests for a
// copy go to such nodes, not offers: a draining node holding a dead
// owner's grant handed the epoch to an importer that asked it so, while
// the owner's own handover to it was under way, which it took too: two
// owners of one epoch (sim seeds 29132, 21879 on a first version).
func (m *Machine) askable() []string {
	names := m.names
	for n := range m.heard {
		if !m.members[n] && m.alive(n) {
			if len(names) == len(m.names) {
				names = slices.Clone(m.names)
			}
			names = append(names, n)
		}
	}
	slices.Sort(names[len(m.names):])
	return names
}

// reclaim takes back an epoch this node owned before it restarted. Its own
// copy holds every write acknowledged at that epoch (none is acknowledged
// before the owner's commit), so it needs no other node's data, only the
// certainty that nobody else can act on the epoch: no grant was out
// (persisted grantee ""), or the one grantee hands the epoch back.
func (m *Machine) reclaim(s Slot) {
	si := &m.slots[s]
	if m.reclaimsByCensus(s) {
		m.reclaimCensus(s)
		return
	}
	switch {
	case si.grantee == "":
		if m.quorate() {
			m.becomeOwner(s, si.epoch+1, nil, "")
		}
	case si.grantee != "*" && m.alive(si.grantee):
		m.offer(s, si.grantee)
	default:
		// The grantee is gone (or unknown): it may still promote.
		si.role = RoleUnavailable
		m.setUnavailable(s, true)
		if m.ticking {
			m.setPending(s)
		}
	}
}

// admitMove reports whether slot s may make an attempt at a planned move
// (a snapshot request or an offer): Config.MaxMoves slots may at once. A
// slot takes a place for one attempt (until its retry is due, Lease) and
// keeps it for the next only if nobody waits; the others wait in the order
// they first asked. So a slot that cannot move (its holder does not answer)
// does not keep the others from moving.
func (m *Machine) admitMove(s Slot) bool {
	if m.cfg.MaxMoves <= 0 {
		return true
	}
	if until, ok := m.moving[s]; ok {
		if m.now.Before(until) {
			return true
		}
		delete(m.moving, s) // its attempt is over: it asks again
	}
	free := m.cfg.MaxMoves - len(m.moving)
	if _, waits := m.moveAsked[s]; !waits {
		if free > 0 && len(m.moveQueue) == 0 {
			m.moving[s] = m.now.Add(m.cfg.Lease)
			return true
		}
		m.moveQueue = append(m.moveQueue, s)
	}
	m.moveAsked[s] = m.now
	for k := range min(free, len(m.moveQueue)) {
		if m.moveQueue[k] == s {
			m.moveQueue = slices.Delete(m.moveQueue, k, k+1)
			delete(m.moveAsked, s)
			m.moving[s] = m.now.Add(m.cfg.Lease)
			return true
		}
	}
	return false
}

// pruneMoves frees the places of slots that stopped importing (taken
// over, unavailable, no longer ours) or whose attempt is over (a slot that
// moved on to a takeover after a crash makes no further attempt), and
// forgets waiting slots that are no longer to be taken (taken over, no
// longer ours) or did not ask for two Leases (they stopped waiting). A
// waiting slot asks when its retry is due, a Lease after its last attempt
// and on the first Tick after that, and between rounds of asking it may be
// unavailable: forgetting it after one Lease, or while unavailable,
// dropped it from the queue before it asked again, so it went to the back
// every time and, behind a queue longer than the places, never got one (a
// crash during a join left slots unowned for good;
// TestJoinOwnerCrashWithMovesQueued).
// O(MaxMoves + waiting slots), on Ticks.
func (m *Machine) pruneMoves() {
	for s, until := range m.moving {
		if m.slots[s].role != RoleImporting || !m.now.Before(until) {
			delete(m.moving, s) // done, or its attempt is over
		}
	}
	m.moveQueue = slices.DeleteFunc(m.moveQueue, func(s Slot) bool {
		if r := m.slots[s].role; r != RoleImporting && r != RoleUnavailable || m.now.Sub(m.moveAsked[s]) > 2*m.cfg.Lease {
			delete(m.moveAsked, s)
			return true
		}
		return false
	})
}

func (m *Machine) setPending(s Slot) {
	si := &m.slots[s]
	si.pending, si.retryAt = true, m.now.Add(m.cfg.Lease)
}

func (m *Machine) offer(s Slot, to string) {
	si := &m.slots[s]
	if si.offerFirst.IsZero() {
		si.offerFirst = m.now
	}
	si.offerTo, si.offerAt = to, m.now
	m.emit(OfferHandover{Slot: s, Epoch: si.epoch, Seq: si.seq, To: to, WasOwner: si.wasOwner, Grantee: si.grantee})
	m.setPending(s)
}

func (m *Machine) onOffer(ev HandoverOffer) {
	s, si := ev.Slot, &m.slots[ev.Slot]
	if si.handedTo == ev.From && ev.Epoch == si.handedEpoch {
		// The importer missed our SendHandover: repeat it.
		m.repeatHandover(s)
		return
	}
	if m.reject(s, ev.Epoch, ev.From) {
		return
	}
	if ev.WasOwner && si.handedTo == ev.From && ev.Epoch == si.handedEpoch+1 && ev.Epoch == si.epoch {
		// The importer we handed the slot to says it owned the epoch: it
		// took our handover. Kept, the record (a restart reads it back)
		// held us out of its census for good (sim seed 14966 without the
		// forget: it restarted too, with its grantee unknown).
		m.handoverTaken(s)
	}
	ours := si.epoch == ev.Epoch && si.leader == ev.From && (si.synced || si.grantor || si.void != nil)
	if m.disowned && ev.WasOwner && ev.Grantee == m.cfg.Self && si.role != RoleOwner && si.role != RoleSealing && !ours {
		// A restarted owner asks us, its grantee, for its epoch back, but
		// the run it granted was forgotten and what it did is lost with
		// it (it may have promoted): say we cannot vouch (census.go).
		// Unless this run followed it at the epoch: then the grant may be
		// ours, and saying we cannot vouch let the owner take its epoch
		// back by census while we promoted on that grant (sim seed 1717
		// with -simwipefault 2: our run had come back empty long before).
		if ev.Epoch > si.epoch {
			m.stepDown(s, ev.Epoch, "")
		}
		m.emit(SendNoReplica{Slot: s, Epoch: ev.Epoch, To: ev.From, Census: ev.Census})
		return
	}
	if ev.Epoch > si.epoch {
		m.stepDown(s, ev.Epoch, "")
		if ev.Census && m.slots[s].epoch == ev.Epoch && !m.slots[s].synced {
			m.emit(SendNoReplica{Slot: s, Epoch: ev.Epoch, To: ev.From, Census: ev.Census})
		}
		return
	}
	if ev.Census && ev.WasOwner && ev.Epoch == si.epoch {
		// The owner of our epoch restarted and takes it back by asking
		// every member (reclaimCensus): it knows no one grantee, or its
		// grantee cannot vouch. A voided grant of it we hold would keep
		// the census from completing (sim seed 1373, -simstrict).
		m.yieldGrant(s, ev.From)
	}
	if ev.Census && !ev.WasOwner && ev.Epoch == si.epoch && ev.From == si.leader && si.leaderOwns {
		// The owner of our epoch itself runs a census (ownerCensusFor: a
		// grantee it cannot rule out was forgotten) and takes a later
		// epoch once every live member answered: a grant or release of
		// its own we hold would act on the old epoch beside it, and
		// holding it we never answer (sim seed 1239 with
		// -simfiredafterforget: a release to the importer of a planned
		// move held the census up for good). It asks us to give it up.
		m.yieldGrant(s, ev.From)
	}
	if ev.Census && m.censusAnswer(ev) {
		return
	}
	owner, _ := m.position(s)
	if ev.WasOwner && ev.Grantee == m.cfg.Self && owner != ev.From && si.role != RoleOwner && si.role != RoleSealing {
		// Our owner restarted and names us the one node that may hold its
		// grant. With a copy, act on it (promote, or hand over to the table
		// owner); without one we never can: give the epoch up, so that it
		// hands its own copy to the table owner.
		if !si.synced {
			m.handOver(s, ev.From, si.seq, false)
			return
		}
		if !m.inTable(m.cfg.Self) {
			// We drain: we never promote, and table owners offer to the
			// table's members only. Give the epoch back as to the table
			// owner; the restarted owner takes it and the table owner
			// moves it on (sim seed 17 without the forget: we held the
			// grant for good).
			m.handOver(s, ev.From, si.seq, true)
			return
		}
		si.grantor, si.leaderGone, si.leaderPast = true, true, false
		m.advance(s)
		return
	}
	if owner != ev.From {
		if owner == m.cfg.Self && !ev.WasOwner && m.releaseDue(s, ev.From) {
			// The node we hold a dead owner's release to offers (we, the
			// table owner, asked it: AskOffer): the epoch is its to take
			// (we import the slot from it afterwards).
			m.handOverRelease(s, ev.From)
		}
		return // our table disagrees; the importer retries
	}
	switch {
	case si.role == RoleOwner:
		if !m.majority {
			return // the importer retries
		}
		si.offerFrom = ev.From
		if m.canSeal(s, ev.From) {
			m.seal(s)
			return
		}
		// Revoke the other grants now; onAck seals once they are gone.
		m.beat(s)
		m.reconcile(s)
	case si.role == RoleSealing:
		// Sealed continues it.
	case ev.WasOwner && ev.Grantee == m.cfg.Self:
		// The importer owned the epoch, restarted, and we are the one node
		// that may hold its grant: give the epoch back (it keeps its own
		// copy, which holds every acknowledged write).
		m.handOver(s, ev.From, si.seq, si.synced)
	case si.wasOwner && si.grantee == "":
		// We owned the epoch, restarted, and gave no grant: nobody else can
		// act on it and our copy is complete. Hand it to the table owner.
		m.handOver(s, ev.From, si.seq, true)
	case m.releaseDue(s, ev.From):
		m.handOverRelease(s, ev.From)
	case si.wasOwner:
		// We owned the epoch and restarted, and may not hand it over yet
		// (a grant may be out): our copy holds every write acknowledged at
		// it, so never say we hold none. A census counted that answer: the
		// table owner took the slot empty while we took it back by our
		// own census, two owners of one epoch (sim seed 523 with
		// -simwipefault 2). The importer asks again; we take the epoch and
		// hand it over.
	case !si.synced:
		if si.takeFrom == "" { // else we are about to take it
			m.emit(SendNoReplica{Slot: s, Epoch: si.epoch, To: ev.From, Census: ev.Census})
		}
	case si.handedTo == ev.From && !ev.WasOwner:
		// We handed the epoch before to the importer, which never took
		// it: nobody but us can hold a grant at it.
		m.handOver(s, ev.From, si.seq, true)
	case si.grantor && (!m.alive(si.leader) || si.leaderGone):
		// Our owner is dead and we hold its grant: once its lease ran
		// out (and the vote consents) hand over instead of promoting,
		// since the table names the importer owner. Not yet: hold the
		// offer and answer it then (heldOffer). The importer offers to
		// one member per retry; an offer that came a moment early was
		// otherwise next answered a whole round of them later (sim seed
		// 28403: 8 s, our view having changed just before it).
		if m.grantDue(s) {
			m.handOver(s, ev.From, si.seq, true)
			return
		}
		si.heldOffer = ev.From
	case si.void != nil && si.synced && !m.alive(si.leader):
		// A lapse voided our dead owner's grant, which we may restore
		// (restore.go): hold the offer too, answered once restored and
		// due (sim seeds 18134, 20907: answered at the importer's next
		// round, 4 s later, it landed on the check after the faults).
		si.heldOffer = ev.From
	case m.waitsForImporter(s) && !ev.Census:
		// We cannot hand it over until the dead importer of our handover
		// comes back or is forgotten: say so, so that the table owner
		// moves on to the next member at once and, finding nobody,
		// reports the slot unavailable (importStep). Silence held each
		// of its rounds up a retry; at the check after the faults the
		// slot showed importing, not unavailable (sim seed 23605). Not
		// to a census: a NoReplica there says we hold nothing longer.
		m.emit(SendNoReplica{Slot: s, Epoch: si.epoch, To: ev.From})
	}
}

// grantDue reports whether this node, holding the grant of slot s from
// an owner that is dead (or gone), may act on it now: its view is
// trustworthy (takeQuorate), the lease the owner fired under ran out and
// (with the vote) a majority consents.
func (m *Machine) grantDue(s Slot) bool {
	return m.takeQuorate() && !m.now.Before(m.grantedUntil(s).Add(m.cfg.Margin)) && m.consented(s)
}

// answerHeldOffer hands slot s to the importer whose offer we held
// (onOffer) once our dead owner's grant may be acted on, and forgets the
// offer when it is no longer one to answer. It reports whether it
// handed the slot over.
func (m *Machine) answerHeldOffer(s Slot, tableOwner string) bool {
	si := &m.slots[s]
	x := si.heldOffer
	switch {
	case x == "":
	case !si.grantor && si.void == nil || !si.synced || si.role == RoleOwner || si.role == RoleSealing || x != tableOwner || !m.alive(x):
		si.heldOffer = ""
	case si.grantor && (!m.alive(si.leader) || si.leaderGone) && m.grantDue(s):
		si.heldOffer = ""
		m.handOver(s, x, si.seq, true)
		return true
	}
	return false
}

// releaseDue reports whether this node, holding a release of slot s to
// x, must hand the epoch to x now: its owner is dead and the lease it
// fired under ran out.
func (m *Machine) releaseDue(s Slot, x string) bool {
	si := &m.slots[s]
	return x != "" && si.releasedTo == x && si.role != RoleOwner && si.role != RoleSealing && m.takeQuorate() &&
		(!m.alive(si.leader) || si.leaderGone) && !m.now.Before(m.grantedUntil(s).Add(m.cfg.Margin)) && m.consented(s)
}

// handOverRelease hands the epoch of s to x, the node we hold our dead
// owner's release to, at x's offer. Without our copy (we dropped it once
// x had caught up) we hand over no position: x's copy holds every
// acknowledged write.
func (m *Machine) handOverRelease(s Slot, x string) {
	si := &m.slots[s]
	seq := si.seq
	if !si.synced {
		seq = 0
	}
	m.handOver(s, x, seq, si.synced)
}

// onOfferAsked answers a release holder's AskOffer: we offer for the
// epoch if we hold a copy of it and have not taken or been handed it.
// The holder decides (onOffer, releaseDue), as at any offer.
func (m *Machine) onOfferAsked(ev OfferAsked) {
	s, si := ev.Slot, &m.slots[ev.Slot]
	if ev.Epoch != si.epoch || si.role == RoleOwner || si.role == RoleSealing || si.wasOwner ||
		si.takeFrom != "" || si.grantor || si.releasedTo != "" || !m.alive(ev.From) || !m.inTable(m.cfg.Self) {
		// A node that holds a grant or a release of its own acts on it
		// (promotes, or hands over at its target's offer): two holders
		// offering to each other would hand the epoch over twice (sim
		// seed 1227: each held a release to the other, from owner
		// heartbeats that named a different follower each time). Nor
		// does a node outside the table (draining): it would take the
		// epoch and drop it (sim seed 5854).
		return
	}
	if !si.synced {
		// Our owner released to us before we caught up, then died: the
		// asker may hold a copy (it serves one, its owner being dead).
		// Fetch it; the next ask finds us synced.
		m.emit(RequestSnapshot{Slot: s, Epoch: si.epoch, From: ev.From})
		return
	}
	m.offer(s, ev.From)
}

// canSeal reports whether owner s may seal for importer x: it sees a
// majority and no node but x may hold a grant (x offering at our epoch has
// not promoted). A node forgotten as dead (dropped) may still hold one;
// we seal anyway while we have the evidence of a majority that lets us
// fire beside it, and the handover carries it (SendHandover.Dropped): the
// importer keeps it as its own dropped suspect and the same rules
// (inherit). Refusing to seal left every slot whose follower died stuck
// with its owner until that node came back or was forgotten: a node that
// joined after a crash never became ready.
func (m *Machine) canSeal(s Slot, x string) bool {
	if !m.majority {
		return false
	}
	si := &m.slots[s]
	for _, sp := range si.suspects {
		if sp.lost || sp.name != x && sp.releasedTo != x {
			return false
		}
	}
	return len(si.dropped) == 0 || m.evMajority
}

func (m *Machine) seal(s Slot) {
	si := &m.slots[s]
	si.role, si.sealFor, si.offerFrom, si.sealVoid = RoleSealing, si.offerFrom, "", false
	m.reconcile(s)
	m.setUnderReplicated(s, false)
	m.emit(Seal{Slot: s})
}

func (m *Machine) onSealed(ev Sealed) {
	if si := &m.slots[ev.Slot]; si.role == RoleSealing {
		m.handOver(ev.Slot, si.sealFor, max(si.seq, ev.Seq), true)
	}
}

// repeatHandover sends the handover of s again. A grant we keep counts as
// accepted now: the importer covers us until its first offer + Lease at
// this epoch (takeOver), and it may have restarted since we handed over
// (sim seed 2332: a grant from the first handover ran out while the
// restarted importer, covering us from its new offer, fired).
func (m *Machine) repeatHandover(s Slot) {
	si := &m.slots[s]
	if si.grantor {
		si.grantedUntil = m.now.Add(m.cfg.Lease)
	}
	m.emit(SendHandover{Slot: s, Epoch: si.handedEpoch, Seq: si.handedSeq, To: si.handedTo, Grant: si.grantor,
		Dropped: si.handedDropped})
}

// handOver gives (epoch, seq) to importer `to` and becomes its follower at
// epoch+1, which `to` will take. If it has a copy (the final data of
// epoch), that is a valid replica at epoch+1 and, in position, it holds
// `to`'s grant: should `to` die before acking, this node promotes (to
// epoch+2). Without a copy it only gives up acting on epoch.
func (m *Machine) handOver(s Slot, to string, seq uint64, copy bool) {
	si := &m.slots[s]
	e := si.epoch
	void := si.role == RoleSealing && si.sealVoid
	var dropped []string // a sealed owner's (canSeal)
	if si.role == RoleSealing {
		for _, x := range si.dropped {
			if x.name != to {
				dropped = append(dropped, x.name)
			}
		}
	}
	si = m.reset(s, RoleFollower, e+1)
	si.seq, si.synced, si.leader = seq, copy, to
	si.handedTo, si.handedEpoch, si.handedSeq, si.handedCopy = to, e, seq, copy
	si.handedDropped = dropped
	// The importer lists us as the one node that may hold its grant
	// (takeOver) until we ack a heartbeat without it; hold it even outside
	// the table's position for the slot, or a crash of the importer before
	// it granted its new follower would leave nobody to promote or hand
	// over (the slot would stay unavailable with two full copies alive).
	// A seal that outlived a lost majority of ours (a long pause) keeps
	// no grant: the importer, our grantee, may have promoted to epoch+1
	// meanwhile and then lists nobody (sim seed 14850: two owners fired
	// once the importer kept its grant through a flap of its view).
	si.grantor = copy && m.majority && !void
	if si.grantor {
		si.grantedUntil = m.now.Add(m.cfg.Lease)
	}
	m.setUnderReplicated(s, false)
	m.persist(s) // durable before the importer can take epoch+1
	m.emit(SendHandover{Slot: s, Epoch: e, Seq: seq, To: to, Grant: si.grantor, Dropped: dropped})
	m.advance(s)
}

func (m *Machine) onHandover(ev HandoverDone) {
	s, si := ev.Slot, &m.slots[ev.Slot]
	if si.role == RoleOwner && si.epoch == ev.Epoch+1 {
		return // duplicate
	}
	// We may have heard of epoch+1, the one handed to us, from a third
	// party before this: it is still ours to take (unless another node
	// demonstrably owns it).
	// Not if we handed that epoch on ourselves, to another node: epoch+1
	// is that node's (sim seed 5760: the handover of a holder that then
	// crashed reached us only after we, its grantee, had handed its epoch
	// to the table owner; taking it too made two owners of epoch+1).
	// Nor if that node took it already (tookBy).
	handedOn := si.handedTo != "" && si.handedTo != ev.From && si.handedEpoch == ev.Epoch ||
		si.tookBy != "" && si.tookBy != ev.From && si.epoch == ev.Epoch+1
	if !(ev.Epoch+1 == si.epoch && si.role != RoleOwner && si.role != RoleSealing && !si.wasOwner &&
		(!si.leaderOwns || si.leader == ev.From) && !handedOn) && m.reject(s, ev.Epoch, ev.From) {
		return
	}
	owner, _ := m.position(s)
	if si.wasOwner && ev.From == si.grantee && ev.Epoch == si.epoch && owner != m.cfg.Self && !ev.Grant {
		// The grantee we released gave the epoch up to us without keeping
		// a grant: epoch+1 is ours and nobody holds a grant at it. We hand
		// our copy on to the table owner when it offers (it takes
		// epoch+2). A grantee that kept a grant at epoch+1 (its table
		// named us owner when it handed over) may act on it should we not
		// take the epoch: we take it, whatever our table says (below),
		// and a planned move follows. Treating that grant as none let
		// the grantee hand epoch+1 to the table owner while we promoted
		// to epoch+2 from it: two owners of one epoch (sim seed 4448).
		si.epoch, si.grantee = si.epoch+1, ""
		si.handedTo, si.handedCopy, si.takeFrom = "", false, ""
		m.persist(s)
		return
	}
	if si.role == RoleOwner && ev.Epoch == si.epoch {
		// We own the epoch already (we took it from an earlier handover)
		// and the sender handed it to us once more, moving to epoch+1 as
		// our follower: take that one too.
		si.takeDropped = ev.Dropped
		m.takeOver(s, si.epoch+1, ev.From, ev.Seq == si.seq)
		return
	}
	if si.role == RoleOwner || si.role == RoleSealing {
		return
	}
	// The holder handed us epoch+1 and may already follow us: take it,
	// now or once we see a majority, whatever the table says (if it names
	// another owner, a planned move follows).
	if ev.From != si.takeFrom || ev.Epoch != si.takeEpoch {
		si.takeLost = false
	}
	if ev.From != si.takeFrom || ev.Epoch != si.takeEpoch || ev.Seq != si.takeSeq {
		// Act on it now. Not on a repeat of the one we hold (the answer to
		// our next offer): what we could not do at the first we do at the
		// retry. Acting at once, an importer short of a majority offered
		// again, the holder repeated, and so on at message rate (sim seeds
		// 219, 592, 12334).
		si.pending = false
	}
	si.takeFrom, si.takeEpoch, si.takeSeq, si.takeDropped = ev.From, ev.Epoch, ev.Seq, ev.Dropped
	m.advance(s)
}

// tryTake takes the epoch a holder handed us (slotInfo.takeFrom) once we
// see a majority: with our own copy if it is complete (a restarted owner's
// always is), else with the holder's final copy, which it serves us at
// takeEpoch+1.
func (m *Machine) tryTake(s Slot) {
	si := &m.slots[s]
	if si.takeFrom == "" || si.role == RoleOwner || si.role == RoleSealing || !m.majority {
		return
	}
	if si.grantor && si.leader != si.takeFrom && m.now.Before(m.grantedUntil(s).Add(m.cfg.Margin)) {
		// Handed over by a third node (the holder of a release) while we
		// hold our owner's grant: it may fire until that runs out.
		return
	}
	if (!m.alive(si.takeFrom) || si.takeLost) && si.synced && si.epoch == si.takeEpoch && si.leader == si.takeFrom &&
		si.leaderOwns && m.quorate() {
		// The holder died before we got its final copy (or came back
		// empty: no run of it holds the copy now, sim seed 703 with
		// -simwipefault 2, where the importer asked the new run for good).
		// It heartbeated us, so we were its replica: we lack only writes
		// it never had acknowledged. Take the epoch with our copy.
		si.takeSeq = si.seq
	}
	switch {
	case si.epoch == si.takeEpoch && (si.wasOwner || si.synced && si.seq >= si.takeSeq):
		// A restarted owner's own copy holds every acknowledged write of
		// its epoch (the holder may lack part of it).
		m.takeOver(s, si.epoch+1, si.takeFrom, si.synced && si.seq == si.takeSeq)
	case si.epoch == si.takeEpoch+1 && si.synced && si.leader == si.takeFrom && si.seq >= si.takeSeq:
		m.takeOver(s, si.epoch, si.takeFrom, true) // the final copy arrived
	case si.epoch == si.takeEpoch+1 && si.synced && si.takeFinal && si.seq >= si.takeSeq:
		// The final copy of the epoch handed on, from the restarted owner
		// of that epoch (onSnapshotRequest): the holder holds none.
		m.takeOver(s, si.epoch, si.takeFrom, false)
	case si.epoch == si.takeEpoch+1 && si.takeOwn && si.seq >= si.takeSeq:
		// Our own copy, complete when a third node's word of the epoch
		// handed to us moved us to it (slotInfo.takeOwn).
		if m.now.Before(si.takeAfter) {
			return
		}
		m.takeOver(s, si.epoch, si.takeFrom, si.seq == si.takeSeq)
	case si.epoch <= si.takeEpoch+1:
		if !m.alive(si.takeFrom) && m.isTableOwner(s, m.cfg.Self) {
			// Only the holder is known to hold the final copy: while it
			// is dead the slot waits for it, and says so (importStep,
			// which would, waits for the request pending below). The
			// copy, once it arrives, ends that (onSnapshot).
			si.role = RoleUnavailable
			m.setUnavailable(s, true)
		}
		if !si.pending || !m.now.Before(si.retryAt) {
			src, round := m.takeSource(s)
			if src == "" {
				m.giveUpTake(s)
				m.setPending(s)
				return
			}
			if round && m.forgot[si.takeFrom] && !si.synced {
				// The holder was forgotten, and nobody up holds a copy
				// we may take with: its run held the only one, which
				// the operator declared lost. Nobody else can act on
				// the epoch: a census takes it (giveUpTake, censusFor)
				// with the longest copy left (sim seed 884 with
				// -simfiredafterforget: the holder sealed and died
				// before its final copy reached us).
				m.giveUpTake(s)
				m.setPending(s)
				return
			}
			if round && m.isTableOwner(s, m.cfg.Self) {
				// Nobody up holds a copy we may take the epoch with:
				// the slot waits for a node that is down (the
				// restarted owner of the epoch, whose copy is the final
				// one), and says so, as importStep does (sim seed 8429
				// with -simsteps 400 and without the forget, once the
				// rounds took in members outside the table). The copy,
				// once it arrives, ends that.
				si.role = RoleUnavailable
				m.setUnavailable(s, true)
			}
			m.emit(RequestSnapshot{Slot: s, Epoch: si.epoch, From: src})
			m.setPending(s)
		}
	}
}

// takeSource is the node to ask for the copy of the epoch handed to us:
// the holder, unless we are disowned (our earlier run was forgotten) and
// the holder answered that it has none. Then the handover was to that
// run and rested on its copy (a copyless handover back to a restarted
// owner), which we no longer vouch for; the epoch's acknowledged writes
// are on that run's follower, which serves the copy to its old leader
// (onSnapshotRequest): every other member in turn. The take then rests on
// that copy, at the holder's final seq or beyond (tryTake). Asking only
// the holder left the slot with nobody for good (sim seed 26269). Once
// all answered NoReplica nobody holds the epoch: "" (giveUpTake) if our
// view is quorate, else the holder again.
//
// A run whose own copy of the handed epoch was read back from disk (we
// restarted since we offered) asks the other members the same way once
// the holder said it has none: the holder of a release hands the epoch
// over without a copy, on the strength of ours, which no longer counts,
// and a restarted owner of the epoch still holds the complete one
// (slotInfo.finalOf). It never gives up: nobody else can act on the
// epoch while we hold its handover, so it asks the holder and the
// members again, a round per retry. So does an importer handed the epoch
// without a copy of its own (at takeEpoch+1, unsynced), whose holder has
// none either: the restarted owner of takeEpoch serves its copy as the
// final one (SendSnapshot.Final). The members are every node we hear
// from, not only the table's (askable): a draining owner is out of it.
// round reports that a whole round found nobody to take with.
func (m *Machine) takeSource(s Slot) (src string, round bool) {
	si := &m.slots[s]
	readBack := si.restored && si.epoch == si.takeEpoch
	bare := si.epoch == si.takeEpoch+1 // no copy of ours, at the epoch handed to us
	lost := m.forgot[si.takeFrom]      // the holder's run is gone, with its copy
	if !m.disowned && !readBack && !bare && !lost || si.synced || !lost && !slices.Contains(si.tried, si.takeFrom) {
		return si.takeFrom, false
	}
	for _, c := range m.askable() {
		if c != m.cfg.Self && m.alive(c) && !slices.Contains(si.tried, c) {
			return c, false
		}
	}
	if m.disowned && m.quorate() {
		return "", true // nobody holds it: giveUpTake
	}
	si.tried = nil
	return si.takeFrom, true
}

// takeOver takes epoch e, handed over by holder, which may promote from
// the moment it handed over: it cannot before our first offer + Lease.
// caughtUp says it holds all our data: it becomes our follower as is.
func (m *Machine) takeOver(s Slot, e Epoch, holder string, caughtUp bool) {
	var cover time.Time
	if first := m.slots[s].offerFirst; !first.IsZero() {
		cover = first.Add(m.cfg.Lease)
	}
	f := ""
	if caughtUp {
		f = holder
	}
	dropped := m.slots[s].takeDropped
	m.becomeOwner(s, e, []suspect{{name: holder, leaseUntil: cover}}, f)
	m.inherit(s, holder, dropped)
}

// inherit makes the nodes the holder had forgotten as dead (its dropped
// suspects, SendHandover.Dropped) dropped suspects of ours at the epoch we
// took: they may still hold the holder's grant at the epoch before, so we
// fire only with evidence of a majority, heartbeat them until they answer,
// and make them suspects again should that evidence lapse, exactly as the
// holder did (lease.go, "Degraded mode"). The holder vouched for them when
// it sealed (canSeal); from then on we do.
func (m *Machine) inherit(s Slot, holder string, dropped []string) {
	si := &m.slots[s]
	si.takeDropped = nil
	if si.role != RoleOwner {
		return
	}
	for _, n := range dropped {
		if n == m.cfg.Self || n == holder || m.left[n] || m.suspectIndex(s, n) >= 0 || m.droppedIndex(s, n) >= 0 {
			continue
		}
		si.dropped = append(si.dropped, suspect{name: n})
	}
	m.persistGrantee(s)
	m.ownerStep(s)
}
