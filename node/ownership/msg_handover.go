package ownership

import (
	"encoding/binary"

	"github.com/chime-scheduler/chime/slots"
)

// The handover family: an importer holding a caught-up replica offers to
// take a slot over; the holder seals it and, once quiet, hands it over.

// Offer asks the holder of a slot to hand it over (slots.OfferHandover; at
// the receiver slots.HandoverOffer).
//
//	kind slot flags(offerWasOwner) epoch seq grantee
type Offer struct {
	Slot  slots.Slot
	Epoch slots.Epoch // of the importer's caught-up replica
	Seq   uint64
	// WasOwner: the importer owned Epoch before it restarted.
	WasOwner bool
	// Grantee is then its persisted grantee, the one node that may hold
	// its grant.
	Grantee string
}

// Flags of an Offer.
const offerWasOwner uint8 = 1

func offerOf(e slots.OfferHandover) *Offer {
	return &Offer{Slot: e.Slot, Epoch: e.Epoch, Seq: e.Seq, WasOwner: e.WasOwner, Grantee: e.Grantee}
}

func (Offer) kind() uint8 { return kindOffer }
func (m Offer) size() int { return msgFixed + len(m.Grantee) }

func (m Offer) appendTo(b []byte) []byte {
	b = appendSlot(b, m.Slot)
	b = append(b, flag(m.WasOwner, offerWasOwner))
	b = binary.AppendUvarint(b, uint64(m.Epoch))
	b = binary.AppendUvarint(b, m.Seq)
	return appendName(b, m.Grantee)
}

func decodeOffer(r *decoder) Msg {
	m := r.offers.next(r.left)
	m.Slot = r.slot()
	m.WasOwner = r.flags(offerWasOwner)&offerWasOwner != 0
	m.Epoch = r.epoch()
	m.Seq = r.uvarint()
	m.Grantee = r.name()
	return m
}

func (m Offer) event(from string) slots.Event {
	return slots.HandoverOffer{Slot: m.Slot, Epoch: m.Epoch, Seq: m.Seq, From: from, WasOwner: m.WasOwner, Grantee: m.Grantee}
}

// Handover hands a sealed slot over to the importer that offered
// (slots.SendHandover; at the receiver slots.HandoverDone).
//
//	kind slot flags(handoverGrant) epoch seq
type Handover struct {
	Slot  slots.Slot
	Epoch slots.Epoch
	Seq   uint64 // the slot's last seq at the holder: the importer's copy must have it
	// Grant: the holder kept the importer's grant at Epoch+1 (it has a
	// copy and saw a majority; slots.SendHandover.Grant).
	Grant bool
}

// Flags of a Handover.
const handoverGrant uint8 = 1

func (Handover) kind() uint8 { return kindHandover }
func (Handover) size() int   { return msgFixed }

func (m Handover) appendTo(b []byte) []byte {
	b = appendSlot(b, m.Slot)
	b = append(b, flag(m.Grant, handoverGrant))
	b = binary.AppendUvarint(b, uint64(m.Epoch))
	return binary.AppendUvarint(b, m.Seq)
}

func decodeHandover(r *decoder) Msg {
	m := r.handovers.next(r.left)
	m.Slot = r.slot()
	m.Grant = r.flags(handoverGrant)&handoverGrant != 0
	m.Epoch = r.epoch()
	m.Seq = r.uvarint()
	return m
}

func (m Handover) event(from string) slots.Event {
	return slots.HandoverDone{Slot: m.Slot, Epoch: m.Epoch, Seq: m.Seq, From: from, Grant: m.Grant}
}
