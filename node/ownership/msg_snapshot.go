package ownership

import (
	"encoding/binary"

	"github.com/chime-scheduler/chime/slots"
)

// The snapshot family: a node that imports or resyncs a slot asks the
// holder for a full copy (the copy itself goes through replication), and a
// node asked for a copy or a handover that holds no valid replica says so.

// SnapshotRequest asks the receiver for a full copy of a slot
// (slots.RequestSnapshot; at the receiver slots.SnapshotRequest).
//
//	kind slot epoch
type SnapshotRequest struct {
	Slot  slots.Slot
	Epoch slots.Epoch // the requester's epoch of the slot, possibly stale
}

func (SnapshotRequest) kind() uint8 { return kindSnapshotRequest }
func (SnapshotRequest) size() int   { return msgFixed }

func (m SnapshotRequest) appendTo(b []byte) []byte { return appendSlotEpoch(b, m.Slot, m.Epoch) }

func decodeSnapshotRequest(r *decoder) Msg {
	m := r.snapReqs.next(r.left)
	m.Slot, m.Epoch = r.slotEpoch()
	return m
}

func (m SnapshotRequest) event(from string) any {
	return slots.SnapshotRequest{Slot: m.Slot, Epoch: m.Epoch, From: from}
}

// NoReplica says the sender holds no valid replica of a slot
// (slots.SendNoReplica; at the receiver slots.NoReplica).
//
//	kind slot flags(noReplicaCensus) epoch
type NoReplica struct {
	Slot  slots.Slot
	Epoch slots.Epoch // the sender's epoch of the slot
	// Census: the answer to a census offer (slots.NoReplica.Census).
	Census bool
}

// Flags of a NoReplica.
const noReplicaCensus uint8 = 1

func (NoReplica) kind() uint8 { return kindNoReplica }
func (NoReplica) size() int   { return msgFixed }

func (m NoReplica) appendTo(b []byte) []byte {
	b = appendSlot(b, m.Slot)
	b = append(b, flag(m.Census, noReplicaCensus))
	return binary.AppendUvarint(b, uint64(m.Epoch))
}

func decodeNoReplica(r *decoder) Msg {
	m := r.noReplicas.next(r.left)
	m.Slot = r.slot()
	m.Census = r.flags(noReplicaCensus)&noReplicaCensus != 0
	m.Epoch = r.epoch()
	return m
}

func (m NoReplica) event(from string) any {
	return slots.NoReplica{Slot: m.Slot, Epoch: m.Epoch, From: from, Census: m.Census}
}
