package node

import (
	"reflect"
	"testing"

	"github.com/chime-scheduler/chime/slots"
	"github.com/chime-scheduler/chime/storage"
)

// TestSlotStates: the ownership states a node restarts with are the ones
// its machine persisted, the handover record included (a holder that
// restarted before its importer fetched the final copy serves it, see
// slots.SlotState.Handed); metas written before that record existed read
// back without one, a copy held as a past owner's (WasOwner) stays one, a
// handover without a copy (HandedBare) stays one even with no role, the
// importer that took a handover (HandedTook) is read back, so is the mark
// of a past owner's complete copy (FinalOf) while the data is still of
// that epoch, and metas with neither a role nor an epoch are none.
func TestSlotStates(t *testing.T) {
	metas := map[uint16]storage.SlotMeta{
		1: {Epoch: 4, Seq: 17, Role: uint8(slots.RoleOwner), OwnEpoch: 4, OwnSeq: 17, Grantee: "n2"},
		2: {Epoch: 2, Seq: 1, Role: uint8(slots.RoleFollower), OwnEpoch: 3, OwnSeq: 1, Handed: "n4", HandedSeq: 1},
		3: {Epoch: 1, Seq: 5},
		4: {Epoch: 1, Seq: 9, Role: uint8(slots.RoleFollower), OwnEpoch: 2, OwnSeq: 9, WasOwner: true},
		5: {Epoch: 1, Seq: 3, OwnEpoch: 2, Handed: "n1", HandedBare: true},
		6: {Epoch: 1, Seq: 3, OwnEpoch: 2, HandedTook: "n3"},
		7: {Epoch: 1, Seq: 8, Role: uint8(slots.RoleFollower), OwnEpoch: 2, OwnSeq: 8, FinalOf: 1},
		8: {Epoch: 2, Seq: 9, Role: uint8(slots.RoleFollower), OwnEpoch: 2, OwnSeq: 8, FinalOf: 1},
	}
	want := map[slots.Slot]slots.SlotState{
		1: {Role: slots.RoleOwner, Epoch: 4, Seq: 17, Grantee: "n2"},
		2: {Role: slots.RoleFollower, Epoch: 3, Seq: 1, Handed: "n4", HandedSeq: 1},
		4: {Role: slots.RoleFollower, Epoch: 2, Seq: 9, WasOwner: true},
		5: {Role: slots.RoleNone, Epoch: 2, Handed: "n1", HandedBare: true},
		6: {Role: slots.RoleNone, Epoch: 2, HandedTook: "n3"},
		7: {Role: slots.RoleFollower, Epoch: 2, Seq: 8, FinalOf: 1},
		8: {Role: slots.RoleFollower, Epoch: 2, Seq: 8},
	}
	if got := slotStates(metas); !reflect.DeepEqual(got, want) {
		t.Errorf("slotStates = %v, want %v", got, want)
	}
}
