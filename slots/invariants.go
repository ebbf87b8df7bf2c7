package slots

import "fmt"

// checkInvariants reports the first broken per-node invariant, or nil:
//   - a firing slot is owned, holds a valid replica at epoch >= 1, sees a
//     majority, every node that may hold its grant is covered by the lease
//     (or, Config.Vote, by the promises of a majority: leased), and in
//     degraded mode it has evidence of a majority (and droppedBacked);
//   - an owner holds a valid replica at epoch >= 1;
//   - only an owner (or sealing owner) keeps suspects, and its persisted
//     grantee names them;
//   - a grantor holds a valid replica;
//   - an unavailable slot has reported MarkUnavailable;
//   - after a handover the epoch is above the one handed over, and the
//     final copy kept for the importer is held (role not none);
//   - a firing slot's right to fire (fireUntil) ends no sooner than its
//     bound (Horizon, or Near if set, see horizon.go), and fireBits and
//     nearBits match the slots' state.
//
// Invariants between nodes (at most one node fires a slot, one owner per
// epoch ever, epochs never decrease, no replica without a copy) are checked
// by the multi-node tests. Tests call it after every Step. O(NumSlots).
//
// Also the bookkeeping a Tick's full pass rests on (tickSlots): a slot's
// busy bit is set exactly when it is not idle, and a slot in neither busy
// nor idleOwned is one the pass may skip (tickIdle); an idle owner is
// queued for its refresh, and stays quiet until the next Tick's pass over
// every idle owner (fullPassDue) at the latest.
func (m *Machine) checkInvariants() error {
	fullPass := -1 // fullPassDue, computed at its first use: 0 false, 1 true
	for s := range m.slots {
		si := &m.slots[s]
		owner := si.role == RoleOwner || si.role == RoleSealing
		busy, idleOwned := m.busy[s/64]&(1<<(s%64)) != 0, m.idleOwned[s/64]&(1<<(s%64)) != 0
		switch {
		case busy == si.idle:
			return fmt.Errorf("slots: %s slot %d idle=%v but busy bit %v", m.cfg.Self, s, si.idle, busy)
		case !busy && !idleOwned && !m.tickIdle(Slot(s)):
			return fmt.Errorf("slots: %s slot %d skipped by a full Tick pass but not idle (%v)", m.cfg.Self, s, si.role)
		case !busy && idleOwned && !si.queuedAt.Equal(si.refreshAt):
			return fmt.Errorf("slots: %s idle owner %d not queued for its refresh at %v", m.cfg.Self, s, si.refreshAt)
		case !busy && idleOwned && !m.now.Before(si.refreshAt):
			return fmt.Errorf("slots: %s idle owner %d missed its refresh at %v", m.cfg.Self, s, si.refreshAt)
		case !busy && idleOwned && !m.quiet(Slot(s)) && !m.fullPassDueOnce(&fullPass):
			return fmt.Errorf("slots: %s idle owner %d no longer quiet, and no Tick will look at it", m.cfg.Self, s)
		case si.firing && (si.role != RoleOwner || !si.synced || si.epoch == 0 || !m.majority || !m.leased(Slot(s)) ||
			len(si.dropped) > 0 && (!m.evMajority || !m.droppedBacked(Slot(s)))):
			return fmt.Errorf("slots: %s slot %d fires as %v synced=%v majority=%v covered=%v", m.cfg.Self, s,
				m.State(Slot(s)), si.synced, m.majority, m.covered(Slot(s)))
		case si.role == RoleOwner && (!si.synced || si.epoch == 0):
			return fmt.Errorf("slots: %s slot %d owned without a replica: %v", m.cfg.Self, s, m.State(Slot(s)))
		case !owner && (len(si.suspects) > 0 || len(si.dropped) > 0):
			return fmt.Errorf("slots: %s slot %d keeps suspects as %v", m.cfg.Self, s, si.role)
		case owner && si.grantee != granteeOf(si):
			return fmt.Errorf("slots: %s slot %d persisted grantee %q, suspects %v dropped %v", m.cfg.Self, s,
				si.grantee, si.suspects, si.dropped)
		case si.grantor && !si.synced:
			return fmt.Errorf("slots: %s slot %d holds a grant without a replica", m.cfg.Self, s)
		case si.role == RoleUnavailable && !si.unavail:
			return fmt.Errorf("slots: %s slot %d unavailable but not flagged", m.cfg.Self, s)
		case si.handedTo != "" && si.epoch <= si.handedEpoch:
			return fmt.Errorf("slots: %s slot %d handed over epoch %d but holds %d", m.cfg.Self, s, si.handedEpoch, si.epoch)
		case si.handedCopy && (si.role == RoleNone || si.handedTo == ""):
			return fmt.Errorf("slots: %s slot %d keeps the final copy for %q as %v", m.cfg.Self, s, si.handedTo, si.role)
		case si.firing != (m.fireBits[s/64]&(1<<(s%64)) != 0) || m.near[s].IsZero() == (m.nearBits[s/64]&(1<<(s%64)) != 0):
			return fmt.Errorf("slots: %s slot %d firing=%v near=%v but its bits differ", m.cfg.Self, s, si.firing, m.near[s])
		}
		if si.firing {
			if d, ok := m.fireUntil(Slot(s)); ok && d.Before(m.horizon) && (m.near[s].IsZero() || d.Before(m.near[s])) {
				return fmt.Errorf("slots: %s slot %d may fire until %v, but its bound is horizon %v near %v", m.cfg.Self, s,
					d, m.horizon, m.near[s])
			}
		}
	}
	return nil
}

// fullPassDue reports whether the next Tick looks at every idle owner:
// the majority, the evidence or the view moved, or a peer's pair lease
// is about to be marked stale (staleTick).
func (m *Machine) fullPassDue() bool {
	if m.global() != m.lastGlobal {
		return true
	}
	for _, p := range m.peers {
		if !p.stale && p.gen != 0 && !m.now.Before(p.acked.Add(m.cfg.Lease/2)) {
			return true
		}
	}
	return false
}

// fullPassDueOnce is fullPassDue, computed once per check into *memo.
func (m *Machine) fullPassDueOnce(memo *int) bool {
	if *memo < 0 {
		*memo = 0
		if m.fullPassDue() {
			*memo = 1
		}
	}
	return *memo == 1
}
