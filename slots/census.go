package slots

import "slices"

// This file holds the census: how the table owner takes a slot whose
// owner an operator declared gone for good (MemberDead.Forgot) when
// nobody holds its grant. Reference: DESIGN §4 "A dead owner's slot
// nobody holds a grant of".
//
// Without a grant nobody may take a dead owner's slot over: the owner may
// have acknowledged writes on a replica only it knew of, and nothing
// bounds its firing (lease.go). The slot waits for the owner to return.
// An operator who knows it will not (its machine is lost) forgets it
// (node: chime cluster forget): its data is gone with it, and so is its
// firing. What the live members hold is then all there is: the table
// owner asks every live member for its position (a census: an offer with
// Census set), fetches any copy longer than its own, and once every live
// member said it holds nothing longer (NoReplica at the same epoch), it
// takes the slot with that copy, or empty if nobody holds one. Every write
// the owner acknowledged is on a replica that acknowledged its grant or
// release (a write waits for that), so unless that replica also died
// (then it is dead too, and must be forgotten as well, or the census
// waits for it) its copy is among those asked; only writes the owner
// acknowledged alone (degraded, its follower dead) are lost, with it.
//
// The census runs only where its answer is complete: the slot's epoch was
// owned by a forgotten node (we heard it own the epoch, or it is epoch 1,
// which only the bootstrap table's owner takes); every node this node
// counts dead or left was forgotten too (a merely dead one may hold the
// longest copy, or a grant); its view is quorate; and it holds no grant,
// release or handover of the slot (those take the usual way, and a
// member that holds one answers the census the usual way, never with
// NoReplica). A member whose copy was read back from disk (a restart) and
// not resynced since cannot vouch for it: it does not answer, and the
// slot waits as before.
//
// A run whose earlier run's data is lost to it (it came back empty, or
// forgotten: Disowned), or any node once an operator forgot one, counts
// the epoch's owner as forgotten for the slots the table gives it and
// found nobody to hand over (importStep reported them unavailable) while
// it knows no owner of their epoch but itself: a lost run may have owned
// them, and it can never return; a live owner, or a holder of its grant,
// would not answer NoReplica, and a dead one keeps the census waiting.
// A forget also drops the voided grants of the forgotten owner
// (dropForgotten): a member holding one answers no census.
// And a node that handed its epoch without a copy to a node that comes
// back empty counts that node's lost run as epoch+1's owner
// (endHandovers). The other conditions stand: every dead member
// forgotten, a quorate view, no grant, release or handover held.
//
// An owner runs a census too when the only nodes that may hold its grant
// were forgotten and their leases ran out, so that it cannot fire: such a
// node did not leave on purpose, and may have promoted before it died
// (its new epoch's writes are on its follower, if that is alive). The
// owner asks every live member the same way; one that knows a higher
// epoch rejects the offer, and the owner steps down; once every one
// answered NoReplica at its epoch, it takes a new epoch, censusJump
// higher, with its copy, past any the forgotten node took.
//
// The epoch taken is censusJump above the highest one the census saw. A
// forgotten node that comes back with its data is told so as it joins and
// claims nothing (Disowned, disown); one that is not told (every member it
// joined through restarted since the forget) reclaims at most its own
// epoch+1 where it gave no grant, which the jump is above, and meets the
// higher epoch at its first message.

// censusJump is how far above the highest epoch it saw the census takes a
// slot: above what a forgotten owner that returns with its data reclaims
// (its epoch+1), and above a few epochs forgotten nodes may have taken
// unseen by every live member (handed from one to another).
const censusJump = 8

// reclaimJump is how far above its epoch a restarted owner takes it back
// by census (reclaimCensus): above what a forgotten grantee may have
// promoted to (epoch+1) and a few epochs handed on unseen, and below
// censusJump, so that a census run after this owner is forgotten in turn,
// from the epoch the live members saw before, takes a different epoch.
// With the same jump both took epoch+8 (sim seed 26908: the owner took it
// and crashed before anyone heard, and was forgotten).
const reclaimJump = censusJump / 2

// epochOwner returns the node that owned slot s's epoch as far as this
// node knows, or "".
func (m *Machine) epochOwner(s Slot) string {
	si := &m.slots[s]
	switch {
	case si.censusOwner != "":
		return si.censusOwner
	case si.synced && si.leaderOwns:
		return si.leader
	case si.epoch <= 1 && m.hasGenesis:
		if o, ok := m.genesis.Owner(s); ok {
			return o.Name
		}
	}
	return ""
}

// censusFor returns the forgotten owner of slot s's epoch if the census
// may run for s now (see the file comment), else "".
func (m *Machine) censusFor(s Slot) string {
	si := &m.slots[s]
	if len(m.forgotRun) == 0 && !si.censusLost && !m.disowned || si.role == RoleOwner || si.role == RoleSealing || si.grantor || si.releasedTo != "" ||
		si.void != nil || si.wasOwner || si.takeFrom != "" || m.handsOver(s) || si.restored && !si.synced && si.seq > 0 {
		return ""
	}
	o := m.epochOwner(s)
	// ourRun: we own the slot by the table, know no other owner of its
	// epoch and found nobody to hand it to us (importStep: every live
	// member asked could not), and runs were lost: ours came back without
	// what it held (empty, or forgotten), or an operator forgot nodes.
	// A lost run may have owned the epoch: we count it as ours. The census
	// completes only if no live member can act on the epoch (each answers
	// NoReplica or with its copy, never so if it owns the epoch or holds a
	// grant, release or handover of it) and every dead one was forgotten:
	// the owner, whoever it was, is gone with its run. Requiring that we
	// know the owner forgotten left slots with nobody for good: a returning
	// forgotten run holding a follower's copy of an epoch it had owned, or
	// a table owner that had never heard the forgotten owner (sim seeds
	// 429 and 557 with -simstrict).
	ourRun := (m.disowned || len(m.forgotRun) > 0) && si.role == RoleUnavailable && (o == "" || o == m.cfg.Self) && m.isTableOwner(s, m.cfg.Self)
	if ourRun {
		o = m.cfg.Self
	}
	if o == "" || !m.forgotRun[o] && !ourRun && !(si.censusLost && o == si.censusOwner) || !m.quorate() || !m.backed() {
		return ""
	}
	for n := range m.dead {
		if !m.forgot[n] {
			return ""
		}
	}
	return o
}

// endHandovers applies the forget of node name (lost false), or the loss
// of its run with its data (lost true: it came back empty), to the
// handovers without a copy we gave it (handOver: we only gave up acting on
// our epoch, and it was to take epoch+1 with its own copy). It may have
// taken that epoch, and fired, before it died, and that copy is gone, so
// we stop repeating a handover to it and count it as epoch+1's owner, a
// forgotten or lost one, so that a census takes the slot (censusFor; we
// hold no grant of that epoch). A later run of it takes nothing from us:
// a forgotten one is disowned, and so is an empty one, which has no copy
// either (giveUpTake). Repeating the handover instead left the slot with
// nobody for good (sim seed 8429: the importer crashed as we handed over,
// and both copies of the slot were on forgotten nodes). A handover with a
// copy holds the importer's grant at epoch+1 and takes the usual way while
// we hold that grant (or a voided one we may restore); once a lapse voided
// it for good (a handover's grant is never restored: voidGrant) the
// record is all that is left, and it ends the same way: every write the
// importer may have acknowledged at epoch+1 is on the follower it granted,
// us or a node that holds its grant now and promotes the usual way, and the
// census takes the longest copy, ours among them (sim seed 23605: a pause
// voided a draining holder's grant of the importer, which had crashed
// before the handover reached it, and the slot waited for it after the
// forget). A lost run's handover ends only at epoch+1: the name lives on.
func (m *Machine) endHandovers(name string, lost bool) {
	for s := range m.slots {
		si := &m.slots[s]
		if si.handedTo != name || si.handedCopy && (si.grantor || si.void != nil) || si.role == RoleOwner || si.role == RoleSealing {
			continue
		}
		next := si.epoch == si.handedEpoch+1
		if lost && !next {
			continue
		}
		if next {
			si.censusOwner, si.censusLost = name, lost
		}
		si.handedTo, si.handedEpoch, si.handedSeq, si.handedCopy, si.handedDropped = "", 0, 0, false, nil
		if next {
			m.persist(Slot(s)) // the record was (SlotState.HandedBare)
		}
	}
}

// giveUpTake ends the take of slot s by this disowned run when every live
// member said it holds no copy of the epoch (takeSource): the handover was
// to our earlier run and rested on its copy, gone with it. That run owned
// the epoch handed on, lost to us: the census takes the slot (censusFor),
// with the longest copy a live member holds, or empty. Asking the holder
// again and again left the slot with nobody for good (wipe seeds 596 and
// 38023: a restarted owner was handed its epoch back without a copy and
// was wiped before it took it).
func (m *Machine) giveUpTake(s Slot) {
	si := &m.slots[s]
	si.takeFrom, si.takeEpoch, si.takeSeq, si.takeDropped, si.takeLost = "", 0, 0, nil, false
	si.censusOwner, si.censusLost = m.cfg.Self, true
	si.tried = nil
}

// censusPeers returns the live members the census asks, sorted: the
// table's and any other node heard from (a draining one may hold a copy).
func (m *Machine) censusPeers() []string {
	peers := make([]string, 0, len(m.names))
	for _, n := range m.names {
		if m.alive(n) {
			peers = append(peers, n)
		}
	}
	for n := range m.heard {
		if m.alive(n) && !m.members[n] {
			peers = append(peers, n)
		}
	}
	slices.Sort(peers)
	return peers
}

// censusStep runs the census for slot s, whose epoch forgotten node o
// owned: it takes the slot once every live member answered, else asks
// them all (censusRound). The slot is unavailable meanwhile.
func (m *Machine) censusStep(s Slot, o string) {
	si := &m.slots[s]
	si.censusOwner = o
	if m.censusComplete(s) {
		m.censusTake(s)
		return
	}
	si.role = RoleUnavailable
	m.setUnavailable(s, true)
	m.censusRound(s, si.synced)
}

// censusComplete reports whether every live member answered the census
// of s asked at its current epoch.
func (m *Machine) censusComplete(s Slot) bool {
	si := &m.slots[s]
	if !si.censusAsked {
		return false
	}
	for _, n := range m.censusPeers() {
		if !slices.Contains(si.censusDone, n) {
			return false
		}
	}
	return true
}

// censusRound asks every live member for its position in s (an offer
// with Census; copy: we hold a valid copy at our position), at most once
// per Lease: an answer never brings the next round forward (the answers
// of one round each moved it on, and rounds multiplied: sim seed 401).
func (m *Machine) censusRound(s Slot, copy bool) {
	si := &m.slots[s]
	if si.censusAsked && m.now.Before(si.censusAt.Add(m.cfg.Lease)) {
		return
	}
	si.censusAsked, si.censusDone, si.censusAt = true, si.censusDone[:0], m.now
	// A restarted owner taking its epoch back says so: a copy read back
	// from disk answers it (no copy holds a write of the epoch its owner
	// lacks: censusAnswer), and with no one grantee known ("*") every
	// member that holds its grant gives it up (yieldGrant). A forgotten
	// grantee's returning run held such a copy, and did not answer a
	// census it could not tell was the owner's (sim seed 1373,
	// -simstrict).
	reclaim := m.reclaimsByCensus(s)
	grantee := ""
	if reclaim {
		grantee = si.grantee
	}
	for _, n := range m.censusPeers() {
		m.emit(OfferHandover{Slot: s, Epoch: si.epoch, Seq: si.seq, To: n, Census: true, Copy: copy, WasOwner: reclaim, Grantee: grantee})
	}
}

// reclaimsByCensus reports whether restarted owner s takes its epoch back
// by a census (reclaimCensus) rather than from its grantee: that node
// cannot vouch for the epoch (granteeVoid; or it was forgotten and its
// next run will say so), or several nodes may hold its grant
// (SlotState.Grantee "*"), any of which may promote once its lease runs
// out. Waiting for one of them to act left the slot with nobody for good
// once they all lived on (sim seed 647 without the forget: every node
// back, two holding synced copies, none a grant).
func (m *Machine) reclaimsByCensus(s Slot) bool {
	si := &m.slots[s]
	return si.wasOwner && si.role != RoleOwner && si.role != RoleSealing && (si.granteeVoid || si.grantee == "*" || m.forgot[si.grantee])
}

// yieldGrant gives up the grant, release or voided grant slot s holds
// from owner, which restarted and takes its epoch back by asking every
// member (reclaimsByCensus): once all answered, it takes a later epoch
// itself, and nothing we hold from its earlier run may act beside that.
// Its copy holds every write it acknowledged.
func (m *Machine) yieldGrant(s Slot, owner string) {
	si := &m.slots[s]
	if si.role == RoleOwner || si.role == RoleSealing {
		return
	}
	if si.leader == owner {
		si.grantor, si.releasedTo, si.heldOffer = false, "", ""
	}
	if si.void != nil && si.void.leader == owner {
		si.void = nil
	}
	m.noteGrant(s)
}

// censusStop forgets an unfinished census of s (it no longer applies).
func (m *Machine) censusStop(s Slot) {
	if si := &m.slots[s]; si.censusAsked {
		si.censusAsked, si.censusDone = false, nil
	}
}

// censusTake takes slot s after a complete census: with our copy, which
// no live member's is longer than, or empty.
func (m *Machine) censusTake(s Slot) {
	si := &m.slots[s]
	e := max(si.epoch, 1) + censusJump
	empty := !si.synced
	if empty {
		m.drop(s) // whatever we hold of it is not a copy
	}
	m.becomeOwner(s, e, nil, "")
	m.slots[s].censusEmpty = empty
}

// censusAnswer answers a census offer (HandoverOffer.Census) at our epoch
// if we hold nothing that takes the usual way (see the file comment): a
// copy longer than the asker's is sent to it, else NoReplica says we hold
// nothing longer. It reports whether it answered; if not, the offer is
// handled as any other.
func (m *Machine) censusAnswer(ev HandoverOffer) bool {
	s, si := ev.Slot, &m.slots[ev.Slot]
	if si.role == RoleOwner || si.role == RoleSealing || si.grantor || si.releasedTo != "" || si.void != nil ||
		si.wasOwner || si.takeFrom != "" || m.handsOver(s) || si.heldOffer != "" {
		return false
	}
	switch {
	case si.synced && (si.seq > ev.Seq || !ev.Copy) && !(ev.WasOwner && ev.Epoch == si.epoch):
		// Not to the owner of our epoch: our copy is of its writes, and
		// its seq is the one it persisted last, which a restart reads
		// back behind the copy it wrote. The copy sent instead was never
		// installed by a draining owner, and its census never completed
		// (sim seed 34062 without the forget).
		m.emit(SendSnapshot{Slot: s, Epoch: si.epoch, Seq: si.seq, To: ev.From, Sent: m.now})
	case si.synced || !si.restored || si.seq == 0 || si.role == RoleNone || ev.WasOwner && ev.Epoch == si.epoch:
		// A slot read back as RoleNone holds no copy (drop persists that
		// role after the data is gone), and no copy holds a write at an
		// epoch its owner lacks: a restarted owner asking for its own
		// epoch (reclaimsByCensus) needs no copy of ours. Either one kept
		// such a census from completing for good (sim seeds 504 and 587
		// without the forget: a draining node back holding none, a
		// follower back with a copy the owner's holds all of).
		m.emit(SendNoReplica{Slot: s, Epoch: si.epoch, To: ev.From, Census: true})
	default:
		// A copy read back from disk and not resynced: it may hold writes
		// nobody else does, and we cannot say how far it is valid. No
		// answer: the census waits, as the slot did before.
	}
	return true
}

// handsOver reports whether slot s holds a handover of its epoch: the
// importer may still take it (epoch is handedEpoch+1), and State persists
// it. A record of an
// older one can stay in memory once the epoch moved on (stepDown outside
// the slot's position keeps it), and it held a member out of a restarted
// owner's census for good (sim seed 23697 without the forget).
func (m *Machine) handsOver(s Slot) bool {
	si := &m.slots[s]
	return si.handedTo != "" && si.epoch == si.handedEpoch+1
}

// onCensusNoReplica counts a census answer that From holds nothing longer
// than our copy of s at our epoch.
func (m *Machine) onCensusNoReplica(ev NoReplica) {
	si := &m.slots[ev.Slot]
	if si.censusAsked && ev.Epoch == si.epoch && !slices.Contains(si.censusDone, ev.From) {
		si.censusDone = append(si.censusDone, ev.From)
	}
}

// ownerCensusFor reports whether owner s must run a census: every node
// that may hold its grant and is not covered (its lease ran out, no
// promises cover it; or dead) was forgotten, one's lease ran out (it
// cannot fire), and the census's answer would be complete (see
// censusFor). A live suspect still covered (the follower of a planned
// move, which acks) does not keep it out: requiring every suspect
// forgotten left the slot unfired for good after the forget of one node
// (sim seeds 781, 1239 with -simfiredafterforget). Such a suspect gives
// its grant up when the census asks (onOffer, yieldGrant).
func (m *Machine) ownerCensusFor(s Slot) bool {
	si := &m.slots[s]
	if len(m.forgot) == 0 || si.role != RoleOwner || len(si.suspects) == 0 || m.covered(s) || !m.quorate() || !m.backed() {
		return false
	}
	for i := range si.suspects {
		if x := &si.suspects[i]; !m.forgot[x.name] && (!m.now.Before(m.until(x)) && !m.promised(x) || m.dead[x.name]) {
			return false
		}
	}
	for n := range m.dead {
		if !m.forgot[n] {
			return false
		}
	}
	return true
}

// ownerCensusStep runs owner s's census (ownerCensusFor): it takes the
// next epoch once every live member answered, else asks them. It reports
// whether it took the epoch.
func (m *Machine) ownerCensusStep(s Slot) bool {
	si := &m.slots[s]
	if m.censusComplete(s) {
		m.becomeOwner(s, si.epoch+censusJump, nil, "")
		return true
	}
	m.censusRound(s, true)
	return false
}

// disown drops slot s's claims of an earlier, forgotten run (Disowned):
// it is a stale replica at its epoch, if it holds anything.
func (m *Machine) disown(s Slot) {
	si := &m.slots[s]
	claims := si.wasOwner || si.grantee != "" || si.handedTo != "" || si.role == RoleOwner || si.role == RoleSealing
	m.makeStale(s)
	si = &m.slots[s]
	si.wasOwner, si.grantee = false, ""
	si.handedTo, si.handedEpoch, si.handedSeq, si.handedCopy, si.handedDropped = "", 0, 0, false, nil
	if claims {
		m.persist(s)
	}
}

// reclaimCensus takes back the epoch of a restarted owner (reclaim) whose
// grantee cannot vouch for it: that node's earlier run was forgotten
// (Disowned) and may have promoted. Our copy holds every write we
// acknowledged; what the forgotten run did afterwards is on its follower if
// anywhere, and a live member that knows a higher epoch rejects the census.
// Once every live member answered at our epoch we take reclaimJump past it.
// Only where the answer is complete (every node counted dead forgotten,
// a quorate view); else the slot waits, unavailable.
func (m *Machine) reclaimCensus(s Slot) {
	si := &m.slots[s]
	si.role = RoleUnavailable
	m.setUnavailable(s, true)
	m.reclaimStep(s)
}

// reclaimStep runs the census of reclaimCensus, and takes the epoch once it
// is complete, wherever the table puts slot s: a restarted owner the table
// moved the slot away from takes it back all the same and then hands it
// to the table owner the usual way.
func (m *Machine) reclaimStep(s Slot) {
	si := &m.slots[s]
	complete := m.quorate() && m.backed()
	for n := range m.dead {
		if !m.forgot[n] {
			complete = false
		}
	}
	if !complete {
		m.censusStop(s)
		return
	}
	if m.censusComplete(s) {
		m.becomeOwner(s, si.epoch+reclaimJump, nil, "")
		return
	}
	m.censusRound(s, true)
}
