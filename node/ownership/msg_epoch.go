package ownership

import (
	"encoding/binary"

	"github.com/chime-scheduler/chime/slots"
)

// The epoch family: news of a slot's epoch. A new owner announces its
// epoch to every member of the table; a node that gets a message of an
// epoch lower than its own rejects it with its epoch. Both reach the
// machine as slots.EpochSeen, from an owner (Announce) or not (Reject).

// Announce tells every member that the sender owns a slot at Epoch
// (slots.Announce; at the receiver slots.EpochSeen with Owner set).
//
//	kind slot flags(announceReplicated) epoch
type Announce struct {
	Slot  slots.Slot
	Epoch slots.Epoch
	// Replicated: the owner's follower holds the replica.
	Replicated bool
}

// Flags of an Announce.
const announceReplicated uint8 = 1

func (Announce) kind() uint8 { return kindAnnounce }
func (Announce) size() int   { return msgFixed }

func (m Announce) appendTo(b []byte) []byte {
	b = appendSlot(b, m.Slot)
	b = append(b, flag(m.Replicated, announceReplicated))
	return binary.AppendUvarint(b, uint64(m.Epoch))
}

func decodeAnnounce(r *decoder) Msg {
	m := r.announces.next(r.left)
	m.Slot = r.slot()
	m.Replicated = r.flags(announceReplicated)&announceReplicated != 0
	m.Epoch = r.epoch()
	return m
}

func (m Announce) event(from string) any {
	return slots.EpochSeen{Slot: m.Slot, Epoch: m.Epoch, From: from, Owner: true, Replicated: m.Replicated}
}

// Reject answers a message of a lower epoch than the sender's
// (slots.RejectLowerEpoch; at the receiver slots.EpochSeen).
//
//	kind slot epoch
type Reject struct {
	Slot  slots.Slot
	Epoch slots.Epoch // the sender's epoch of the slot
}

func (Reject) kind() uint8 { return kindReject }
func (Reject) size() int   { return msgFixed }

func (m Reject) appendTo(b []byte) []byte { return appendSlotEpoch(b, m.Slot, m.Epoch) }

func decodeReject(r *decoder) Msg {
	m := r.rejects.next(r.left)
	m.Slot, m.Epoch = r.slotEpoch()
	return m
}

func (m Reject) event(from string) any {
	return slots.EpochSeen{Slot: m.Slot, Epoch: m.Epoch, From: from}
}
