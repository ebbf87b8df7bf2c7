package slots

import "slices"

// This file holds the per-slot dispatch and the epoch fencing rules.
// Reference: DESIGN §4. The other rules live by concern: owner.go (firing,
// followers), lease.go (grants and the lease), follower.go (replicas and
// snapshots), handover.go (import, seal, handover, promotion).

// onTable installs a new table and re-plans every slot.
func (m *Machine) onTable(ev TableChanged) {
	// The same table again (node re-reads the view after a pause) only
	// refreshes the view: the plans stand, and so do their retry times, or
	// a busy node would re-ask every slot's handover after every stall.
	same := m.hasTable && ev.Table.Checksum() == m.table.Checksum()
	m.table, m.hasTable = ev.Table, true
	m.viewAt, m.staleView = m.now, false
	m.sees, m.stable = ev.Sees, ev.StableSize
	m.voterSet, m.voterList, m.promDirty = nil, nil, true
	if ev.Voters != nil {
		m.voterSet = make(map[string]bool, len(ev.Voters))
		for _, v := range ev.Voters {
			m.voterSet[v] = true
		}
		m.voterList = slices.Clone(ev.Voters)
		slices.Sort(m.voterList)
	}
	clear(m.members)
	m.names = m.names[:0]
	for _, mb := range ev.Table.Members() {
		m.members[mb.Name] = true
		m.names = append(m.names, mb.Name)
		m.revive(mb.Name) // alive again
	}
	m.setMajority(2*ev.Sees > ev.StableSize)
	if !m.evPending {
		// After a pause the tables node delivers (it re-reads the view at
		// once) come before the signs of life that arrived meanwhile: the
		// evidence is judged on the next regular Tick (see Step, Tick), or
		// the pause would read as a silence.
		m.updateEvidence()
	}
	for s := range m.slots {
		if same {
			break
		}
		// Plans changed: ask again at once.
		m.slots[s].pending, m.slots[s].tried = false, nil
	}
	m.bootstrap = ev.Bootstrap
	if ev.Bootstrap {
		m.genesis, m.hasGenesis = ev.Table, true // its owners took epoch 1 (census.go)
	}
	m.advanceAll()
	m.bootstrap = false
}

// advance moves slot s as far as its current state allows, then reconciles
// firing. Calling it twice in a row emits nothing new, except heartbeats and
// retries, which go out on ticks.
func (m *Machine) advance(s Slot) {
	si := &m.slots[s]
	r, e, f, y := si.role, si.epoch, si.firing, si.synced
	m.advanceSlot(s)
	if si.role != r || si.epoch != e || si.firing != f || si.synced != y {
		m.moved[s/64] |= 1 << (s % 64) // TakeMoved
	}
}

// advanceSlot is advance without the record of what moved.
func (m *Machine) advanceSlot(s Slot) {
	si := &m.slots[s]
	owner, follower := m.position(s)
	self := m.cfg.Self
	switch si.role {
	case RoleOwner:
		m.reconcile(s) // a lapsed lease stops firing before anything is sent
		m.ownerStep(s)
	case RoleSealing:
		// Waiting for Sealed.
	default: // none, follower, importing, unavailable
		if m.tryTake(s); si.role == RoleOwner {
			break
		}
		if m.voteWait(s) && m.quorate() && !m.now.Before(m.grantedUntil(s).Add(m.cfg.Margin)) {
			// Collect the consents before the importer offers (vote.go):
			// it offers once per round of every member.
			m.consented(s)
		}
		m.restoreGrant(s)
		if m.answerHeldOffer(s, owner) {
			break // handed over: we follow the importer at epoch+1
		}
		if !m.backed() {
			// Cut off from the majority this node gives up its grant: the
			// owner, if it still sees a majority, continues without it
			// (DESIGN §4 Lease). A lapse shorter than DeadAfter does not
			// count (see checkViewLapse).
			m.voidGrant(s)
			si.grantor, si.releasedTo = false, ""
		}
		if si.handedTo != "" && si.leader == si.handedTo && !si.leaderOwns && si.epoch == si.handedEpoch+1 &&
			m.ticking && m.alive(si.handedTo) && (!si.pending || !m.now.Before(si.retryAt)) {
			// The importer has not taken the epoch we handed it yet (it
			// would heartbeat us): our SendHandover may be lost. Repeat it.
			m.repeatHandover(s)
			m.setPending(s)
		}
		if owner != self && m.ticking && si.wasOwner && si.restored && si.grantee == "" && !m.inTable(self) && m.quorate() &&
			si.role != RoleOwner && si.role != RoleSealing {
			// We owned the epoch, gave no grant, restarted, and drain:
			// nobody else can act on the epoch, and a table owner holding a
			// copy offers to the table's members only (askable). Take it
			// back; the table owner
			// then moves it the usual way (sim seeds 17, 700 without the
			// forget: the slot stayed with nobody for good).
			if m.becomeOwner(s, si.epoch+1, nil, ""); si.role == RoleOwner {
				break
			}
		} else if owner != self && m.ticking && m.reclaimsByCensus(s) {
			// We owned the epoch, restarted, and the table moved the slot
			// away, but no one node may hold our grant: take the epoch
			// back once every member said it holds none (reclaimStep).
			if m.reclaimStep(s); si.role == RoleOwner {
				break
			}
		} else if si.wasOwner && owner != self && m.ticking && m.alive(si.grantee) &&
			(!si.pending || !m.now.Before(si.retryAt)) {
			// We owned the epoch, restarted, and the table moved the slot
			// away: release our grantee, the one node that may act on the
			// epoch, so that it promotes or hands the slot to its new owner.
			m.offer(s, si.grantee)
		}
		if x := si.releasedTo; m.ticking && owner == self && m.releaseDue(s, x) && m.alive(x) && m.inTable(x) && !m.now.Before(si.askedAt.Add(m.cfg.Lease)) {
			// Our owner died while we held its release to x, and our
			// table gives us the slot: x takes the epoch at its offer (we
			// import it from x afterwards), but it offers only for a slot
			// its table gives it. Ask it to (repeated every Lease). Only
			// the table owner asks: any release holder asking made two
			// holders hand the epoch to each other (sim seed 1227), or a
			// holder hand it over beside its live owner (seed 2305).
			si.askedAt = m.now
			m.emit(AskOffer{Slot: s, Epoch: si.epoch, To: x})
		}
		switch {
		case !m.hasTable:
		case owner == self:
			if m.bootstrap && si.role == RoleNone && si.epoch == 0 {
				// Brand-new cluster: the only way to own from nothing.
				m.becomeOwner(s, 1, nil, "")
				break
			}
			m.importStep(s)
		case follower == self:
			m.setUnavailable(s, false)
			if si.role != RoleNone || si.synced {
				si.role = RoleFollower
			}
		default:
			m.setUnavailable(s, false)
			if si.role == RoleImporting || si.role == RoleUnavailable {
				si.role = RoleFollower
			}
			if si.role == RoleFollower && !si.synced && !si.wasOwner && !si.handedCopy {
				m.drop(s)
			}
			// A synced follower outside the table keeps its replica until
			// the owner announces a caught-up follower or a new epoch; a
			// restarted owner keeps its copy until its epoch is taken, and
			// a restarted holder the final copy it handed over until the
			// importer takes the epoch.
		}
	}
	m.reconcile(s)
	m.noteGrant(s)
	m.setIdle(s, owner)
}

// waitsForImporter reports whether slot s waits for a dead node we handed
// its epoch to: that node has not taken it (it would heartbeat us), we may
// not hand the epoch to anyone else (it may have taken it), and we hold no
// grant of it to act on (a lapse voided it, or we restarted since): nobody
// can fire the slot until it comes back or is forgotten (endHandovers).
func (m *Machine) waitsForImporter(s Slot) bool {
	si := &m.slots[s]
	return m.handsOver(s) && !si.leaderOwns && !m.alive(si.handedTo) && !si.grantor && si.void == nil
}

// drop deletes the slot's data and forgets the role; the epoch is kept so
// lower epochs are still rejected, and the leader as a hint.
func (m *Machine) drop(s Slot) {
	si := &m.slots[s]
	holding := si.role != RoleNone || si.synced || si.finalOf != 0
	si = m.reset(s, RoleNone, si.epoch)
	si.wasOwner, si.handedCopy, si.takeOwn = false, false, false // the copy is gone
	si.finalOf, si.finalSeq = 0, 0
	if holding {
		m.emit(DropSlot{Slot: s})
		m.persist(s)
	}
	m.setUnderReplicated(s, false)
}

func (m *Machine) setUnderReplicated(s Slot, on bool) {
	if si := &m.slots[s]; si.underRep != on {
		si.underRep = on
		m.emit(MarkUnderReplicated{Slot: s, On: on})
	}
}

func (m *Machine) setUnavailable(s Slot, on bool) {
	if si := &m.slots[s]; si.unavail != on {
		si.unavail = on
		m.emit(MarkUnavailable{Slot: s, On: on})
	}
}

// reject answers a message below our epoch; it returns true if the message
// must not be applied. Late messages at the epoch we handed over, from the
// importer we handed it to, are dropped silently: the importer takes
// epoch+1 itself, and learning of it from us first would make it step down
// instead.
func (m *Machine) reject(s Slot, e Epoch, from string) bool {
	si := &m.slots[s]
	if e >= si.epoch {
		return false
	}
	if from != si.handedTo || e != si.handedEpoch {
		m.emit(RejectLowerEpoch{Slot: s, Epoch: si.epoch, To: from})
	}
	return true
}

// stepDown adopts a higher epoch e, known to from (the new owner, when the
// message comes from it): stop firing at once, persist e, and either resync
// (the table still gives this node the slot) or drop the now stale data.
func (m *Machine) stepDown(s Slot, e Epoch, from string) {
	m.stopFiring(s) // first: stop at once
	si := &m.slots[s]
	final, finalSeq := si.epoch, si.seq
	if !si.wasOwner || si.role == RoleOwner || si.role == RoleSealing || e <= si.epoch {
		final, finalSeq = si.finalOf, si.finalSeq
	}
	if !m.inPosition(s) {
		if final != 0 && e > final {
			// A restarted owner's copy is the one complete copy of its
			// epoch wherever the table puts the slot: the importer of
			// the next epoch may have been handed it without a copy
			// (onSnapshotRequest serves it). Dropped here, the slot had
			// nobody for good (sim seed 9126 with -simsteps 400 and
			// without the forget: the owner, restarted and draining,
			// heard of the next epoch and dropped the only copy). It
			// goes once an owner of a later epoch speaks (onEpochSeen).
			si = m.reset(s, RoleNone, e)
			si.finalOf, si.finalSeq, si.leader = final, finalSeq, from
			m.setUnderReplicated(s, false)
			m.persist(s)
			return
		}
		if si.role != RoleNone || si.synced {
			si.epoch = e
			m.drop(s)
		} else {
			m.reset(s, RoleNone, e)
			m.persist(s) // epoch knowledge survives restarts too
		}
		if si = &m.slots[s]; si.leader != from {
			// What we knew of the old leader is not the new one's (drop
			// keeps it, the epoch being set first): carried over, a stale
			// leaderOwns made an importer we had handed the slot to reject
			// our handover for an epoch nobody owned (sim seed 25092).
			si.leaderOwns, si.leaderGone, si.leaderFollows, si.leaderPast = false, false, false, false
		}
		si.leader = from
		return
	}
	si = m.reset(s, RoleFollower, e)
	si.leader = from
	// A restarted owner's copy stays the one complete copy of its epoch
	// (slotInfo.finalOf): the importer of the next may need it.
	si.finalOf, si.finalSeq = final, finalSeq
	m.setUnderReplicated(s, false)
	m.persist(s)
	m.advance(s)
}

// finalTaken drops the final copy of an epoch we owned (slotInfo.finalOf)
// that we keep outside the table's position (stepDown) once the owner of
// a later epoch speaks: whoever took the epoch after ours took it with
// every write acknowledged at ours. It reports whether it dropped it.
func (m *Machine) finalTaken(s Slot, ev EpochSeen) bool {
	si := &m.slots[s]
	if !ev.Owner || si.finalOf == 0 || ev.Epoch <= si.finalOf || si.role != RoleNone || m.inPosition(s) {
		return false
	}
	m.drop(s)
	return true
}

func (m *Machine) onEpochSeen(ev EpochSeen) {
	s, si := ev.Slot, &m.slots[ev.Slot]
	if ev.From == m.cfg.Self || m.reject(s, ev.Epoch, ev.From) {
		return
	}
	if ev.Epoch == si.epoch+1 && !ev.Owner && si.synced && si.offerTo != "" && si.offerTo != ev.From &&
		m.now.Before(si.offerAt.Add(m.cfg.Lease)) && (si.role == RoleImporting || si.role == RoleUnavailable) {
		// We import the slot and offered it to another node within the
		// last Lease: that node may have handed the epoch to us, its
		// handover still on the way, and this news of the next epoch from
		// a third node that does not own it may be that very handover's
		// (the holder rejects the old owner's heartbeats once it handed
		// over, and the old owner tells whoever writes to it). Stepping
		// down dropped the copy the handover rests on (a release holder
		// hands over without one of its own), and the epoch stayed with
		// nobody (sim seed 35387). Only for a Lease after the offer, and
		// never against the word of the node we offered to: news that
		// kept us at a stale epoch for good stalled sim seed 224.
		return
	}
	if ev.Epoch > si.epoch {
		m.stepDown(s, ev.Epoch, ev.From)
		m.finalTaken(s, ev)
		return
	}
	if m.finalTaken(s, ev) {
		return
	}
	if ev.Owner && ev.From == si.leader {
		si.leaderOwns, si.leaderGone, si.leaderFollows = true, false, false
	}
	if ev.From == si.handedTo && ev.Epoch == si.handedEpoch+1 && ev.Epoch == si.epoch {
		// The node we handed the slot to knows the epoch: it got our
		// handover, so advance need not repeat it.
		m.handoverTaken(s)
	}
	switch {
	case si.role == RoleOwner || si.role == RoleSealing:
		// Two owners at one epoch cannot arise from these rules; if it does
		// (e.g. corrupted state) the smaller name keeps it (R9 tie-break).
		if ev.Owner && ev.From < m.cfg.Self {
			m.stepDown(s, ev.Epoch, ev.From)
		}
	case !si.synced && ev.Owner:
		// The announcer holds the epoch: ask it when importing.
		si.leader, si.leaderOwns, si.leaderGone, si.leaderFollows = ev.From, false, false, false
	case si.role == RoleFollower && !m.inPosition(s) && ev.Owner && ev.Replicated && si.offerFirst.IsZero():
		// (A copy we offered at this epoch stays: a release holder may hand
		// the epoch to us on the strength of it, without a copy of its own
		// (handOverRelease), and that handover may still be on its way. Were
		// it dropped, the handed epoch would exist with no data behind it,
		// and the owner's copy too would go once it learnt of that epoch:
		// sim seed 29446. The copy goes when the epoch moves on.)
		// The owner has a caught-up follower: ours is not needed. A release
		// we hold outlives the copy (see lease.go): the importer's copy
		// holds every acknowledged write. So does a grant, as a release to
		// the node it is about to move to (heir): without a copy we can no
		// longer promote, but the owner may not have granted anyone else
		// yet, and if it dies now somebody must hand the slot over.
		// The release keeps what the grant it came from was (its
		// incarnation, vote term and voters): dropped with the copy, the
		// holder later handed the epoch over without asking for the
		// consents the owner's promises rest on (consented takes a grant
		// without Inc or Term as one from before the vote), while its
		// owner, cut off but promised, fired on: one slot fired by two
		// nodes (sim seed 5316 once a restarted node's messages wait for
		// its restart to be heard of).
		rel, until, inc, term, voters := si.releasedTo, m.grantedUntil(s), si.grantInc, si.grantTerm, si.grantVoters
		if si.grantor {
			rel = m.heir(s)
		}
		m.drop(s)
		if rel != "" && m.majority {
			r := &m.slots[s]
			r.releasedTo, r.grantedUntil, r.grantInc, r.grantTerm, r.grantVoters = rel, until, inc, term, voters
		}
	}
}

// handoverTaken forgets the handover of s (and that its copy is kept for
// the importer): the importer got it. A restart need not keep it either,
// only the importer's name (slotInfo.tookBy): a handover of the same
// epoch from another node is never ours to take.
func (m *Machine) handoverTaken(s Slot) {
	si := &m.slots[s]
	recorded := m.handsOver(s) // see State
	if recorded {
		si.tookBy = si.handedTo
	}
	si.handedTo, si.handedCopy, si.handedDropped = "", false, nil
	if recorded {
		m.persist(s)
	}
}
