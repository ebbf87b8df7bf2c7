package ownership

import (
	"encoding/binary"
	"strings"

	"github.com/chime-scheduler/chime/slots"
)

// The handover family: an importer holding a caught-up replica offers to
// take a slot over; the holder seals it and, once quiet, hands it over.

// Offer asks the holder of a slot to hand it over (slots.OfferHandover; at
// the receiver slots.HandoverOffer).
//
//	kind slot flags(offerWasOwner|offerCensus|offerCopy) epoch seq grantee
type Offer struct {
	Slot  slots.Slot
	Epoch slots.Epoch // of the importer's caught-up replica
	Seq   uint64
	// WasOwner: the importer owned Epoch before it restarted.
	WasOwner bool
	// Grantee is then its persisted grantee, the one node that may hold
	// its grant.
	Grantee string
	// Census: a census of a forgotten owner's slot asks for the
	// receiver's position; Copy: the sender holds a valid copy at (Epoch,
	// Seq) (slots.HandoverOffer.Census).
	Census, Copy bool
}

// Flags of an Offer.
const (
	offerWasOwner uint8 = 1
	offerCensus   uint8 = 2
	offerCopy     uint8 = 4
)

func offerOf(e slots.OfferHandover) *Offer {
	return &Offer{Slot: e.Slot, Epoch: e.Epoch, Seq: e.Seq, WasOwner: e.WasOwner, Grantee: e.Grantee, Census: e.Census, Copy: e.Copy}
}

func (Offer) kind() uint8 { return kindOffer }
func (m Offer) size() int { return msgFixed + len(m.Grantee) }

func (m Offer) appendTo(b []byte) []byte {
	b = appendSlot(b, m.Slot)
	b = append(b, flag(m.WasOwner, offerWasOwner)|flag(m.Census, offerCensus)|flag(m.Copy, offerCopy))
	b = binary.AppendUvarint(b, uint64(m.Epoch))
	b = binary.AppendUvarint(b, m.Seq)
	return appendName(b, m.Grantee)
}

func decodeOffer(r *decoder) Msg {
	m := r.offers.next(r.left)
	m.Slot = r.slot()
	f := r.flags(offerWasOwner | offerCensus | offerCopy)
	m.WasOwner, m.Census, m.Copy = f&offerWasOwner != 0, f&offerCensus != 0, f&offerCopy != 0
	m.Epoch = r.epoch()
	m.Seq = r.uvarint()
	m.Grantee = r.name()
	return m
}

func (m Offer) event(from string) any {
	return slots.HandoverOffer{Slot: m.Slot, Epoch: m.Epoch, Seq: m.Seq, From: from, WasOwner: m.WasOwner, Grantee: m.Grantee, Census: m.Census, Copy: m.Copy}
}

// AskOffer asks the node a release names to offer for a slot whose owner
// died (slots.AskOffer; at the receiver slots.OfferAsked).
//
//	kind slot epoch
type AskOffer struct {
	Slot  slots.Slot
	Epoch slots.Epoch // of the release the sender holds
}

func (AskOffer) kind() uint8 { return kindAskOffer }
func (AskOffer) size() int   { return msgFixed }

func (m AskOffer) appendTo(b []byte) []byte { return appendSlotEpoch(b, m.Slot, m.Epoch) }

func decodeAskOffer(r *decoder) Msg {
	m := r.askOffers.next(r.left)
	m.Slot, m.Epoch = r.slotEpoch()
	return m
}

func (m AskOffer) event(from string) any {
	return slots.OfferAsked{Slot: m.Slot, Epoch: m.Epoch, From: from}
}

// Handover hands a sealed slot over to the importer that offered
// (slots.SendHandover; at the receiver slots.HandoverDone).
//
//	kind slot flags(handoverGrant, handoverDropped) epoch seq [uvarint(count) name*]
type Handover struct {
	Slot  slots.Slot
	Epoch slots.Epoch
	Seq   uint64 // the slot's last seq at the holder: the importer's copy must have it
	// Grant: the holder kept the importer's grant at Epoch+1 (it has a
	// copy and saw a majority; slots.SendHandover.Grant).
	Grant bool
	// Dropped: nodes the holder forgot as dead that may hold its grant at
	// Epoch (slots.SendHandover.Dropped); present when the flag is set.
	Dropped []string
}

// Flags of a Handover.
const (
	handoverGrant   uint8 = 1
	handoverDropped uint8 = 2
)

// maxDropped bounds Handover.Dropped: a sealed owner's dropped suspects
// are nodes that held its grant at one epoch, a handful in practice, and
// never more than the members (the bytes left bound it further).
const maxDropped = 1024

func (Handover) kind() uint8 { return kindHandover }
func (m Handover) size() int {
	n := msgFixed
	for _, d := range m.Dropped {
		n += binary.MaxVarintLen64 + len(d)
	}
	return n
}

func (m Handover) appendTo(b []byte) []byte {
	b = appendSlot(b, m.Slot)
	b = append(b, flag(m.Grant, handoverGrant)|flag(len(m.Dropped) > 0, handoverDropped))
	b = binary.AppendUvarint(b, uint64(m.Epoch))
	b = binary.AppendUvarint(b, m.Seq)
	if len(m.Dropped) > 0 {
		b = binary.AppendUvarint(b, uint64(len(m.Dropped)))
		for _, d := range m.Dropped {
			b = appendName(b, d)
		}
	}
	return b
}

func decodeHandover(r *decoder) Msg {
	m := r.handovers.next(r.left)
	m.Slot = r.slot()
	f := r.flags(handoverGrant | handoverDropped)
	m.Grant = f&handoverGrant != 0
	m.Epoch = r.epoch()
	m.Seq = r.uvarint()
	m.Dropped = nil
	if f&handoverDropped != 0 {
		n := r.uvarint()
		if r.err != nil {
			return m
		}
		if n == 0 || n > maxDropped {
			r.fail("handover drops %d nodes, want 1 to %d", n, maxDropped)
			return m
		}
		m.Dropped = make([]string, 0, n)
		for range n {
			d := r.name()
			if r.err != nil {
				return m
			}
			if d == "" || strings.Contains(d, ",") {
				r.fail("handover drops node %q", d)
				return m
			}
			m.Dropped = append(m.Dropped, d)
		}
	}
	return m
}

func (m Handover) event(from string) any {
	return slots.HandoverDone{Slot: m.Slot, Epoch: m.Epoch, Seq: m.Seq, From: from, Grant: m.Grant, Dropped: m.Dropped}
}
