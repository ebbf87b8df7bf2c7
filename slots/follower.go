package slots

import "slices"

// This file holds the follower's rules: applying heartbeats, serving and
// installing snapshots. Reference: DESIGN §5.

func (m *Machine) onReplicated(ev Replicated) {
	s, si := ev.Slot, &m.slots[ev.Slot]
	if ev.From == m.cfg.Self || m.reject(s, ev.Epoch, ev.From) {
		return
	}
	if ev.Epoch > si.epoch {
		m.stepDown(s, ev.Epoch, ev.From)
		si = &m.slots[s]
	}
	if si.role == RoleOwner || si.role == RoleSealing {
		return // another owner at our epoch: cannot arise (see onEpochSeen)
	}
	if ev.From == si.leader {
		si.leaderOwns, si.leaderGone, si.leaderFollows = true, false, false // only owners heartbeat
	}
	if si.handedCopy && ev.From == si.handedTo && ev.Epoch == si.handedEpoch+1 {
		// The importer owns the epoch we handed it (only owners
		// heartbeat): it needs neither the handover nor our copy now.
		m.handoverTaken(s)
	}
	if si.beatFrom == ev.From && !ev.Sent.After(si.beatSeen) {
		// Not newer than one applied (a snapshot sent in the same tick
		// counts as applied): it must not revive a revoked grant.
		return
	}
	if !si.synced && ev.Epoch == 1 && ev.Seq == 0 && si.epoch == 1 && si.seq == 0 && !si.restored && !si.wasOwner && !si.handedCopy && m.inPosition(s) {
		// The owner of epoch 1 is at seq 0: the slot as the bootstrap
		// made it, empty (epoch 1 comes only from a bootstrap, and only
		// its owner writes at it), which a node that never held the slot
		// holds too (one that read the epoch back from disk at a restart
		// resyncs as before: its store is not known to be empty). Take
		// the heartbeat as that copy's snapshot, grant included:
		// otherwise the follower waits for the owner's snapshot (another
		// round trip, and another after a heartbeat that overtook it),
		// and an owner killed meanwhile leaves a slot nobody holds a
		// grant of (TestOwnerCrashAtFormation; DESIGN §4).
		m.signOfLife(ev.From)
		m.onSnapshot(SnapshotComplete{Slot: s, Epoch: 1, From: ev.From, Sent: ev.Sent, Grant: ev.Grant, Owner: true, Inc: ev.Inc, Term: ev.Term})
		return
	}
	si.beatFrom, si.beatSeen = ev.From, ev.Sent
	m.signOfLife(ev.From) // it evidently lives
	if !si.synced || si.leader != ev.From {
		// Not (or not yet) a replica of From's: no grant. Fetch one if the
		// table gives us the slot. A release we hold from it (dropped
		// copy) is kept while it repeats it.
		if si.releasedTo != "" && (si.leader != ev.From || !(ev.Release == si.releasedTo || ev.Grant) || !m.backed()) {
			si.releasedTo = ""
		}
		if si.releasedTo != "" {
			si.grantedUntil = m.now.Add(m.cfg.Lease)
		}
		if !si.synced && m.inPosition(s) {
			// The owner of our epoch heartbeats us: it is the one to copy
			// from. Remember it even while a request to another node is
			// pending, or the next retry asks that one again (an importer
			// asked a copyless table follower for 14 s while the owner
			// heartbeated it, sim seed 3815).
			si.leader, si.leaderOwns, si.leaderGone, si.leaderFollows = ev.From, true, false, false
			si.tried = slices.DeleteFunc(si.tried, func(n string) bool { return n == ev.From })
			if !si.pending || !m.now.Before(si.retryAt) {
				m.emit(RequestSnapshot{Slot: s, Epoch: si.epoch, From: ev.From})
				m.setPending(s)
			}
		}
		if si.synced && si.leader != ev.From && si.role == RoleFollower && m.inPosition(s) &&
			(!si.pending || !m.now.Before(si.retryAt)) {
			// Our copy follows another node (a follower's copy fetched
			// after a restart), but the owner of our epoch heartbeats us
			// (only owners heartbeat): take its copy, or we never accept its
			// grant and the slot never fires (sim seed 34010). Ours stays
			// valid until then.
			m.emit(RequestSnapshot{Slot: s, Epoch: si.epoch, From: ev.From})
			m.setPending(s)
		}
		m.emit(Ack{Slot: s, Epoch: si.epoch, Seq: si.seq, To: ev.From, Sent: ev.Sent, Released: si.releasedTo, Inc: m.heldInc(s), Gen: m.pairGen, Term: m.heldTerm(s)})
		return
	}
	si.seq = max(si.seq, ev.Seq)
	si.leaderOwns, si.leaderGone, si.leaderFollows = true, false, false // only owners heartbeat
	m.acceptGrant(s, ev.Grant, ev.Release, ev.Inc, ev.Term)
	m.noteGrant(s) // the ack carries the generation that includes this grant
	m.emit(Ack{Slot: s, Epoch: si.epoch, Seq: si.seq, To: ev.From, Sent: ev.Sent, Grant: si.grantor, Synced: true, Released: si.releasedTo,
		Inc: m.heldInc(s), Gen: m.pairGen, Term: m.heldTerm(s)})
}

// acceptGrant applies the Grant flag and the Release of a heartbeat or
// snapshot from the leader (see lease.go); inc is the heartbeat's Inc, 0
// for a snapshot without Config.Vote; term its vote term.
func (m *Machine) acceptGrant(s Slot, grant bool, release string, inc, term uint64) {
	si := &m.slots[s]
	si.grantInc, si.grantTerm = inc, term
	if si.grantVoters == nil || !slices.Equal(si.grantVoters, m.voterList) {
		si.grantVoters = m.voterList
	}
	si.grantor = grant && si.synced && m.backed() && m.inPosition(s)
	si.releasedTo = ""
	if !si.grantor && si.synced && m.backed() {
		switch {
		case release != "" && release != m.cfg.Self:
			si.releasedTo = release
		case grant:
			// A grant from an owner whose table still makes us its
			// follower, while ours moved us out of the slot's position:
			// we may not promote, but may hand the slot to the node the
			// owner is about to release us to.
			si.releasedTo = m.heir(s)
		}
	}
	if si.grantor || si.releasedTo != "" {
		si.grantedUntil = m.now.Add(m.cfg.Lease)
	}
}

// onSnapshotRequest serves a copy if this node may speak for the epoch: it
// owns or seals it, or it holds a valid replica and the requester is the
// owner it followed (restarted), the importer it handed the slot to, or its
// owner is dead (the requester is a new table owner and will get the slot
// from us by handover).
func (m *Machine) onSnapshotRequest(ev SnapshotRequest) {
	s, si := ev.Slot, &m.slots[ev.Slot]
	switch {
	case ev.Epoch == si.epoch+1 && si.wasOwner && si.role != RoleOwner && si.role != RoleSealing:
		// We owned the epoch and restarted; our grantee handed it back to
		// us (it follows us at epoch+1 and repeats its HandoverDone, which
		// this request overtook). Stepping down would void our copy, the
		// one that holds every acknowledged write, and the slot would wait
		// for good (sim seed 2776): wait for the handover, then serve it.
		// A request from another node at epoch+1 proves no more: the
		// table owner learns the epoch from the grantee that follows us
		// at it (sim seed 12334 without the forget, where the handover
		// came back only after our next restart). Whoever took epoch+1
		// instead tells us itself (reclaim asks it). We hold nothing at
		// epoch+1: say so at our epoch, which counts for no census.
		if ev.From != si.grantee {
			m.emit(SendNoReplica{Slot: s, Epoch: si.epoch, To: ev.From})
		}
	case ev.Epoch > si.epoch:
		m.stepDown(s, ev.Epoch, "")
		m.emit(SendNoReplica{Slot: s, Epoch: ev.Epoch, To: ev.From})
	case si.role == RoleOwner || si.role == RoleSealing:
		if ev.From == si.follower {
			// It lost its replica.
			si.followerAcked = false
			m.sendSnapshot(s)
			m.setUnderReplicated(s, true)
			m.reconcile(s)
			return
		}
		m.emit(SendSnapshot{Slot: s, Epoch: si.epoch, Seq: si.seq, To: ev.From, Sent: m.now, Owner: true})
	case si.synced && (si.leader == ev.From || si.handedTo == ev.From || !m.alive(si.leader) || si.leaderGone):
		m.emit(SendSnapshot{Slot: s, Epoch: si.epoch, Seq: si.seq, To: ev.From, Sent: m.now})
	case si.handedCopy && si.handedTo == ev.From && si.epoch == si.handedEpoch+1:
		// We handed the slot to the requester and kept the final copy,
		// then restarted (else it is valid, above). That copy is still the
		// final one: nobody writes at our epoch before the importer takes
		// it, and it asks for the copy only until then. Nobody else may
		// hold the writes it lacks: serve it, or the slot waits for good.
		m.emit(SendSnapshot{Slot: s, Epoch: si.epoch, Seq: si.seq, To: ev.From, Sent: m.now})
	case si.finalOf != 0 && ev.Epoch == si.finalOf && !si.synced && si.epoch > si.finalOf:
		// We owned that epoch before a restart and moved on since, our
		// data unchanged: it holds every write acknowledged at it. The
		// asker was handed it without a copy it may trust (takeSource).
		// Answering NoReplica left the slot with nobody for good (sim
		// seed 8429 without the forget: the holder of a release handed
		// the epoch to an importer whose copy, read back after a crash,
		// no longer counted; ours was the only one).
		m.emit(SendSnapshot{Slot: s, Epoch: si.finalOf, Seq: si.finalSeq, To: ev.From, Sent: m.now})
	case si.finalOf != 0 && ev.Epoch == si.finalOf+1 && !si.synced && si.epoch > si.finalOf:
		// The same copy for an importer handed the next epoch without
		// one (a release holder hands over on the strength of the
		// importer's copy, which it may lose since: sim seed 9126 with
		// -simsteps 400 and without the forget, where the importer
		// drained and dropped it). It takes the epoch with it
		// (onSnapshot: Final).
		m.emit(SendSnapshot{Slot: s, Epoch: ev.Epoch, Seq: si.finalSeq, To: ev.From, Sent: m.now, Final: true})
	case si.wasOwner && si.grantee == "" && ev.Epoch <= si.epoch && m.isTableOwner(s, ev.From):
		// We owned the epoch before a restart and nobody holds a grant at
		// it (our grantee gave it back): our copy is the one complete one,
		// and the table owner asks for it. Hand the slot over, as to its
		// offer (see onOffer); it fetches the final copy from us. It may
		// not know our epoch yet (a node that joined while we were down
		// asks at the epoch it knows, 0): the epoch is still ours to hand
		// over, and answering NoReplica left the slot unfired for good.
		m.handOver(s, ev.From, si.seq, true)
	default:
		m.emit(SendNoReplica{Slot: s, Epoch: si.epoch, To: ev.From})
	}
}

func (m *Machine) onSnapshot(ev SnapshotComplete) {
	s, si := ev.Slot, &m.slots[ev.Slot]
	if ev.From == m.cfg.Self || m.reject(s, ev.Epoch, ev.From) {
		return
	}
	if si.role == RoleOwner || si.role == RoleSealing {
		if ev.Epoch == si.epoch {
			// We hold it. A member answering our census (ownerCensusFor)
			// with its copy knows no later epoch and holds no grant of
			// ours: it has answered. Nobody writes at our epoch but us,
			// so the copy holds nothing acknowledged that we lack (its
			// seq may run ahead of the one we keep: writes beyond an
			// older epoch's seal, or ours, applied since). Not counting
			// it asked it again every Lease, for good while it kept the
			// copy (sim seed 18287 with -simfiredafterforget).
			if si.censusAsked && !slices.Contains(si.censusDone, ev.From) {
				si.censusDone = append(si.censusDone, ev.From)
				m.advance(s)
			}
			return
		}
		m.stepDown(s, ev.Epoch, ev.From)
		si = &m.slots[s]
	}
	owner, _ := m.position(s)
	// The holder's copy of the epoch it handed us, or the final copy of
	// the epoch before, served by its restarted owner (Final).
	take := si.takeFrom != "" && ev.Epoch == si.takeEpoch+1 && (si.takeFrom == ev.From || ev.Final)
	if !m.inPosition(s) && !take {
		if ev.Epoch > si.epoch {
			m.stepDown(s, ev.Epoch, ev.From)
		}
		// Not ours to hold; say so, so a grant in it is not counted.
		m.emit(Ack{Slot: s, Epoch: ev.Epoch, Seq: si.seq, To: ev.From, Sent: ev.Sent})
		return
	}
	stale := si.epoch == ev.Epoch && si.beatFrom == ev.From && !ev.Sent.After(si.beatSeen)
	// A stale snapshot of the leader our valid copy follows (sent before a
	// heartbeat we applied): that heartbeat's word on the grant stands, and
	// our copy is at least as new (node never rolls a copy back, see
	// SnapshotComplete). Revoking the grant here would leave nobody able
	// to promote if the owner died before its next heartbeat.
	keep := stale && si.synced && si.leader == ev.From
	prevGrantor, prevReleased, prevUntil, prevSeq, prevInc, prevTerm := si.grantor, si.releasedTo, si.grantedUntil, si.seq, si.grantInc, si.grantTerm
	// A grant or a release we hold from this very owner at this epoch.
	heldGrant, heldRelease := false, ""
	if si.leader == ev.From && si.epoch == ev.Epoch && si.synced {
		heldGrant, heldRelease = si.grantor, si.releasedTo
	}
	offerFirst := si.offerFirst
	role := RoleFollower
	if owner == m.cfg.Self {
		role = RoleImporting
		if si.role == RoleUnavailable {
			// A copy alone does not make the slot ours: it stays
			// unavailable until a holder hands it over or we take it
			// (importStep says when nobody can). Clearing the flag at
			// each copy made a slot that nobody could take look as if
			// it were moving (sim seed 26249).
			role = RoleUnavailable
		}
	}
	si = m.reset(s, role, ev.Epoch)
	si.finalOf, si.finalSeq = 0, 0 // the copy replaces our data
	if si.leader != ev.From {
		si.leaderOwns, si.leaderGone, si.leaderFollows = false, false, false
	}
	si.seq, si.synced, si.leader = ev.Seq, true, ev.From
	if !stale {
		// The sender's word on whether it owns the epoch (a heartbeat
		// applied after it speaks for it otherwise). A leader we saw own
		// an older epoch may follow at this one (it handed the slot on):
		// asking it to seal would go unanswered for good.
		si.leaderFollows = !ev.Owner
		si.leaderOwns = si.leaderOwns && ev.Owner
	}
	if si.beatFrom != ev.From || ev.Sent.After(si.beatSeen) {
		si.beatFrom, si.beatSeen = ev.From, ev.Sent
	}
	if take {
		si.offerFirst = offerFirst // for takeOver's cover
		si.takeFinal = ev.Final
	}
	if keep {
		si.grantor, si.grantedUntil, si.seq, si.grantInc = prevGrantor && m.backed() && m.inPosition(s), prevUntil, max(si.seq, prevSeq), prevInc
		si.grantTerm = prevTerm
		if !si.grantor && m.backed() {
			si.releasedTo = prevReleased
		}
	} else {
		// A snapshot grants, but revokes nothing: an owner revokes a grant
		// or a release by a heartbeat, releasing the grant to the next
		// grantee first until that one acked it (lease.go, "Releases").
		// A grant or a release we hold from this owner at this epoch
		// stands; our ack says so, and the owner counts it. Treating a
		// snapshot without Grant as a revocation left nobody able to act
		// on the epoch when the owner, whose table moved the slot's
		// follower to and fro (a flap), sent its grantee a snapshot while
		// the next grantee had not taken its grant, and died
		// (TestFollowerCrashWithFlaps).
		grant, inc, term := ev.Grant && !stale, uint64(0), uint64(0)
		if m.cfg.Vote {
			inc, term = ev.Inc, ev.Term // the granting incarnation (vote.go)
		}
		if heldGrant || heldRelease != "" {
			grant, inc, term = grant || heldGrant, prevInc, prevTerm
		}
		m.acceptGrant(s, grant, heldRelease, inc, term)
	}
	if role != RoleUnavailable {
		m.setUnavailable(s, false)
	}
	m.persist(s)
	m.noteGrant(s)
	m.emit(Ack{Slot: s, Epoch: si.epoch, Seq: si.seq, To: ev.From, Sent: ev.Sent, Grant: si.grantor, Synced: true, Released: si.releasedTo,
		Inc: m.heldInc(s), Gen: m.pairGen, Term: m.heldTerm(s)})
	m.advance(s)
}

func (m *Machine) onNoReplica(ev NoReplica) {
	si := &m.slots[ev.Slot]
	if si.censusAsked && ev.Epoch == si.epoch && ev.Census {
		// A census answer (census.go): the round stays pending.
		m.onCensusNoReplica(ev)
		m.advance(ev.Slot)
		return
	}
	if si.wasOwner && ev.From == si.grantee && ev.Epoch == si.epoch && si.role != RoleOwner && si.role != RoleSealing {
		// Our grantee cannot vouch for our epoch (disowned, census.go).
		si.granteeVoid = true
		si.pending = false
		m.advance(ev.Slot)
		return
	}
	if ev.From == si.takeFrom && ev.Epoch > si.takeEpoch && si.synced && si.epoch == si.takeEpoch &&
		si.leader == ev.From && si.leaderOwns {
		// The holder that handed us the epoch lost its copy before we got
		// the final one: take it with ours. It heartbeated us, so we were
		// its replica and lack only writes never acknowledged.
		si.takeSeq = si.seq
	}
	if ev.From == si.handedTo && si.leader == ev.From && ev.Epoch > si.handedEpoch {
		// The importer we handed the epoch to moved past it without
		// taking it (and without a handover pending): it never will. It
		// is gone as far as our epoch goes; we may act on our grant.
		si.leaderGone, si.leaderPast = true, true
	}
	if !slices.Contains(si.tried, ev.From) {
		si.tried = append(si.tried, ev.From)
	}
	if ev.From == si.takeFrom && !si.synced {
		// The holder of the handover to us has no copy for us: ask again
		// at the retry, not at once. Each answer brought the next request,
		// and each repeat of the handover one more of them: a loop at
		// message rate (sim seed 12334, a handover to our forgotten run,
		// whose copy it rested on; 5956 with -simsteps 400 and 8429
		// without the forget, a copyless handover to us after our copy
		// stopped counting as valid). The retry of a disowned run, or of
		// one whose copy was read back, asks the other members
		// (takeSource): a restarted owner of the epoch serves its copy
		// (slotInfo.finalOf).
		m.advance(ev.Slot)
		return
	}
	if si.leader == ev.From && !si.synced && !(si.handedTo == ev.From && si.epoch == si.handedEpoch+1) {
		// A stale hint. Not the importer of our handover, which has not
		// taken the epoch yet: we repeat the handover while it leads
		// (advanceSlot), and it may never have got the first one (sim
		// seed 2349 without the forget: we crashed as we handed over, it
		// said NoReplica to our copy request after our restart, and the
		// slot stayed with nobody).
		si.leader, si.leaderOwns, si.leaderGone, si.leaderFollows = "", false, false, false
	}
	si.pending = false
	m.advance(ev.Slot)
}
