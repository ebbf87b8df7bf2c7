package slots

// This file holds the owner's rules: taking an epoch, keeping a follower fed
// and deciding whether to fire. Reference: DESIGN §4, §5.

// becomeOwner takes epoch e for s with a valid replica (the caller holds
// one: bootstrap, promotion or handover). sus are the nodes that may hold
// a grant at e already, and holder a node known to hold the replica (both:
// the old holder after a handover).
func (m *Machine) becomeOwner(s Slot, e Epoch, sus []suspect, holder string) {
	si := m.reset(s, RoleOwner, e)
	si.synced, si.leader, si.suspects = true, m.cfg.Self, sus
	si.takeFrom = ""
	si.finalOf, si.finalSeq = 0, 0 // we write at e from now on
	si.follower, si.followerAcked = holder, holder != ""
	if len(sus) > 0 {
		si.grantee = sus[0].name
	}
	m.setUnavailable(s, false)
	m.persist(s) // durable before anyone hears of e
	i := len(m.out)
	m.emit(Announce{Slot: s, Epoch: e})
	m.ownerStep(s)
	if m.slots[s].follower != "" && m.slots[s].followerAcked {
		m.out[i] = Announce{Slot: s, Epoch: e, Replicated: true}
	}
}

// ownerStep keeps an owner's follower fed, its grants in order and its
// lease renewed.
func (m *Machine) ownerStep(s Slot) {
	si := &m.slots[s]
	owner, tableFollower := m.position(s)
	if si.offerFrom != "" && (si.offerFrom != owner || m.dead[si.offerFrom]) {
		si.offerFrom = "" // that importer is gone: grant our follower again
	}
	if si.follower != "" && (m.dead[si.follower] || !m.inTable(si.follower)) {
		si.follower, si.followerAcked = "", false
	}
	// The follower is the table follower; while the table names another
	// owner, it is that importer, which catches up as our follower first.
	want := tableFollower
	if owner != m.cfg.Self {
		want = owner
	}
	if m.alive(want) && want != si.follower {
		si.follower, si.followerAcked = want, false
		m.sendSnapshot(s)
	} else if m.ticking && si.follower != "" && !si.followerAcked && !m.now.Before(si.snapAt.Add(m.cfg.Lease)) {
		m.sendSnapshot(s) // lost or stuck: try again
	}
	m.dropDeadSuspects(s)
	if m.ownerCensusFor(s) {
		// Only forgotten nodes may hold our grant and their leases ran
		// out: bump the epoch past them after a census (census.go).
		if m.ownerCensusStep(s) {
			return
		}
	} else {
		m.censusStop(s)
	}
	if m.ticking && (!si.beatSent || !m.now.Before(si.beatAt.Add(m.cfg.Lease/4))) {
		m.beat(s)
	}
	m.setUnderReplicated(s, si.follower == "" || !si.followerAcked)
	// Stopped for a grantee declared dead that may have promoted before we
	// can rule it out (or, with the vote, a dropped one the promises do not
	// cover): the slot waits for that node to come back.
	m.setUnavailable(s, m.majority && (!m.leased(s) && m.waitsForDead(s) || len(si.dropped) > 0 && m.evMajority && !m.droppedBacked(s)))
}

// waitsForDead reports whether an uncovered suspect of s is declared dead
// or lost (markLost).
func (m *Machine) waitsForDead(s Slot) bool {
	for i, x := range m.slots[s].suspects {
		if !m.now.Before(m.until(&m.slots[s].suspects[i])) && (m.dead[x.name] || x.lost) {
			return true
		}
	}
	return false
}

// sendSnapshot streams the slot to the follower, granting it the lease if
// it is the grantee: the snapshot is its first heartbeat.
func (m *Machine) sendSnapshot(s Slot) {
	si := &m.slots[s]
	si.snapAt = m.now
	m.emit(SendSnapshot{Slot: s, Epoch: si.epoch, Seq: si.seq, To: si.follower, Sent: m.now, Grant: m.grant(s, si.follower), Owner: true,
		Inc: m.inc, Term: m.term})
}

// reconcile emits StartFiring or StopFiring when the right to fire changed:
// an owner with a valid replica that sees a majority fires while no node
// can have promoted (every grant it gave is still covered by its lease, or
// by the promises of a majority: leased).
func (m *Machine) reconcile(s Slot) {
	si := &m.slots[s]
	want := si.role == RoleOwner && si.synced && m.hasTable && m.majority && m.leased(s) &&
		(len(si.dropped) == 0 || m.evMajority && m.droppedBacked(s)) // degraded: see dropDeadSuspects
	if want {
		m.bound(s, !si.firing) // see horizon.go
	}
	if want == si.firing {
		return
	}
	si.firing = want
	m.setFiring(s, want)
	if want {
		m.emit(StartFiring{Slot: s, Epoch: si.epoch})
	} else {
		m.emit(StopFiring{Slot: s})
	}
}

// stopFiring emits StopFiring if s fires.
func (m *Machine) stopFiring(s Slot) {
	if si := &m.slots[s]; si.firing {
		si.firing = false
		m.setFiring(s, false)
		m.emit(StopFiring{Slot: s})
	}
}
