package slots

import "fmt"

// checkInvariants reports the first broken per-node invariant, or nil:
//   - a firing slot is owned, holds a valid replica at epoch >= 1, and the
//     machine sees a majority;
//   - an owner holds a valid replica at epoch >= 1;
//   - a sealing or unavailable slot does not fire; an unavailable slot holds
//     no valid replica and has reported MarkUnavailable;
//   - after a handover the epoch is above the one handed over.
//
// Invariants between nodes (one firing owner per slot among nodes that see
// a majority, one owner per epoch, epochs never decrease) are checked by the
// multi-node tests. Tests call it after every Step. O(NumSlots).
func (m *Machine) checkInvariants() error {
	for s := range m.slots {
		si := &m.slots[s]
		switch {
		case si.firing && (si.role != RoleOwner || !si.synced || si.epoch == 0 || !m.majority):
			return fmt.Errorf("slots: %s slot %d fires as %v synced=%v majority=%v", m.cfg.Self, s, m.State(Slot(s)), si.synced, m.majority)
		case si.role == RoleOwner && (!si.synced || si.epoch == 0):
			return fmt.Errorf("slots: %s slot %d owned without a replica: %v", m.cfg.Self, s, m.State(Slot(s)))
		case si.role == RoleUnavailable && !si.unavail:
			return fmt.Errorf("slots: %s slot %d unavailable but not flagged", m.cfg.Self, s)
		case si.handedTo != "" && si.epoch <= si.handedEpoch:
			return fmt.Errorf("slots: %s slot %d handed over epoch %d but holds %d", m.cfg.Self, s, si.handedEpoch, si.epoch)
		}
	}
	return nil
}
