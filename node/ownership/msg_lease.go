package ownership

import (
	"encoding/binary"
	"time"

	"github.com/chime-scheduler/chime/slots"
)

// The lease family: an owner's heartbeat to each replica, and the
// replica's answer, which renews the owner's lease while it holds the
// owner's grant; and the pair messages, one heartbeat and one answer per
// pair of nodes that renew every grant between the two at once.

// Beat is an owner's heartbeat (slots.Heartbeat; at the receiver
// slots.Replicated).
//
//	kind slot flags(beatGrant) epoch seq sent release inc term
type Beat struct {
	Slot  slots.Slot
	Epoch slots.Epoch
	Seq   uint64
	Sent  time.Time // the owner's clock, echoed in the Ack
	Grant bool      // offers the receiver the lease
	// Release names the node whose grant the owner gives up ("" none).
	Release string
	Inc     uint64 // the owner's incarnation (slots.Heartbeat.Inc)
	Term    uint64 // its vote term (slots.Heartbeat.Term)
}

// Flags of a Beat.
const beatGrant uint8 = 1

func beatOf(e slots.Heartbeat) *Beat {
	return &Beat{Slot: e.Slot, Epoch: e.Epoch, Seq: e.Seq, Sent: e.Sent, Grant: e.Grant, Release: e.Release, Inc: e.Inc, Term: e.Term}
}

func (Beat) kind() uint8 { return kindBeat }
func (m Beat) size() int { return msgFixed + 2*binary.MaxVarintLen64 + len(m.Release) }

func (m Beat) appendTo(b []byte) []byte {
	b = appendSlot(b, m.Slot)
	b = append(b, flag(m.Grant, beatGrant))
	b = binary.AppendUvarint(b, uint64(m.Epoch))
	b = binary.AppendUvarint(b, m.Seq)
	b = appendTime(b, m.Sent)
	b = appendName(b, m.Release)
	b = binary.AppendUvarint(b, m.Inc)
	return binary.AppendUvarint(b, m.Term)
}

func decodeBeat(r *decoder) Msg {
	m := r.beats.next(r.left)
	m.Slot = r.slot()
	m.Grant = r.flags(beatGrant)&beatGrant != 0
	m.Epoch = r.epoch()
	m.Seq = r.uvarint()
	m.Sent = r.time()
	m.Release = r.name()
	m.Inc = r.uvarint()
	m.Term = r.uvarint()
	return m
}

func (m Beat) event(from string) any {
	return slots.Replicated{Slot: m.Slot, Epoch: m.Epoch, Seq: m.Seq, From: from, Sent: m.Sent, Grant: m.Grant, Release: m.Release, Inc: m.Inc, Term: m.Term}
}

// Ack answers a Beat or a snapshot (slots.Ack; at the receiver
// slots.ReplAck).
//
//	kind slot flags(ackGrant|ackSynced) epoch seq sent released inc gen term
type Ack struct {
	Slot  slots.Slot
	Epoch slots.Epoch
	Seq   uint64
	Sent  time.Time // the Sent of the heartbeat or snapshot answered
	Grant bool      // the sender holds the owner's grant
	// Synced: the sender holds a valid replica of the slot at Epoch.
	Synced bool
	// Released names the node whose grant was given up, as asked.
	Released string
	// Inc is the incarnation of the grant held (slots.Ack.Inc), Gen the
	// sender's pair generation (slots.PairAck.Gen), Term the vote term of
	// the grant held (slots.Ack.Term).
	Inc, Gen, Term uint64
}

// Flags of an Ack.
const (
	ackGrant  uint8 = 1
	ackSynced uint8 = 2
)

func ackOf(e slots.Ack) *Ack {
	return &Ack{Slot: e.Slot, Epoch: e.Epoch, Seq: e.Seq, Sent: e.Sent, Grant: e.Grant, Synced: e.Synced, Released: e.Released, Inc: e.Inc, Gen: e.Gen, Term: e.Term}
}

func (Ack) kind() uint8 { return kindAck }
func (m Ack) size() int { return msgFixed + 3*binary.MaxVarintLen64 + len(m.Released) }

func (m Ack) appendTo(b []byte) []byte {
	b = appendSlot(b, m.Slot)
	b = append(b, flag(m.Grant, ackGrant)|flag(m.Synced, ackSynced))
	b = binary.AppendUvarint(b, uint64(m.Epoch))
	b = binary.AppendUvarint(b, m.Seq)
	b = appendTime(b, m.Sent)
	b = appendName(b, m.Released)
	b = binary.AppendUvarint(b, m.Inc)
	b = binary.AppendUvarint(b, m.Gen)
	return binary.AppendUvarint(b, m.Term)
}

func decodeAck(r *decoder) Msg {
	m := r.acks.next(r.left)
	m.Slot = r.slot()
	f := r.flags(ackGrant | ackSynced)
	m.Grant, m.Synced = f&ackGrant != 0, f&ackSynced != 0
	m.Epoch = r.epoch()
	m.Seq = r.uvarint()
	m.Sent = r.time()
	m.Released = r.name()
	m.Inc = r.uvarint()
	m.Gen = r.uvarint()
	m.Term = r.uvarint()
	return m
}

func (m Ack) event(from string) any {
	return slots.ReplAck{Slot: m.Slot, Epoch: m.Epoch, Seq: m.Seq, From: from, Sent: m.Sent, Grant: m.Grant, Synced: m.Synced, Released: m.Released, Inc: m.Inc, Gen: m.Gen, Term: m.Term}
}

// PairBeat renews every grant the sender's incarnation Inc gave the
// receiver (slots.PairHeartbeat; at the receiver slots.PairReplicated).
// It has no slot.
//
//	kind sent inc
type PairBeat struct {
	Sent time.Time // the owner's clock, echoed in the PairAck
	Inc  uint64    // the owner's incarnation
}

func pairBeatOf(e slots.PairHeartbeat) *PairBeat { return &PairBeat{Sent: e.Sent, Inc: e.Inc} }

func (PairBeat) kind() uint8 { return kindPairBeat }
func (PairBeat) size() int   { return 1 + 2*binary.MaxVarintLen64 }

func (m PairBeat) appendTo(b []byte) []byte {
	b = appendTime(b, m.Sent)
	return binary.AppendUvarint(b, m.Inc)
}

func decodePairBeat(r *decoder) Msg {
	m := r.pairBeats.next(r.left)
	m.Sent = r.time()
	m.Inc = r.uvarint()
	return m
}

func (m PairBeat) event(from string) any {
	return slots.PairReplicated{From: from, Sent: m.Sent, Inc: m.Inc}
}

// PairAck answers a PairBeat, echoing its Sent and Inc (slots.PairAck; at
// the receiver slots.PairReplAck). It has no slot.
//
//	kind sent inc gen flags(pairPromise) uvarint(count) (taker term)*
type PairAck struct {
	Sent time.Time // the Sent of the PairBeat answered
	Inc  uint64    // the Inc of the PairBeat answered
	Gen  uint64    // the sender's pair generation
	// Promise and Floors: the sender's promise (slots.PairAck.Promise).
	Promise bool
	Floors  []slots.Floor
}

// Flags of a PairAck.
const pairPromise uint8 = 1

// maxFloors bounds PairAck.Floors: one per node the sender consented to
// as a taker of the receiver's grants.
const maxFloors = 1024

func pairAckOf(e slots.PairAck) *PairAck {
	return &PairAck{Sent: e.Sent, Inc: e.Inc, Gen: e.Gen, Promise: e.Promise, Floors: e.Floors}
}

func (PairAck) kind() uint8 { return kindPairAck }
func (m PairAck) size() int {
	n := 2 + 4*binary.MaxVarintLen64
	for _, f := range m.Floors {
		n += 2*binary.MaxVarintLen64 + len(f.Taker)
	}
	return n
}

func (m PairAck) appendTo(b []byte) []byte {
	b = appendTime(b, m.Sent)
	b = binary.AppendUvarint(b, m.Inc)
	b = binary.AppendUvarint(b, m.Gen)
	b = append(b, flag(m.Promise, pairPromise))
	b = binary.AppendUvarint(b, uint64(len(m.Floors)))
	for _, f := range m.Floors {
		b = appendName(b, f.Taker)
		b = binary.AppendUvarint(b, f.Term)
	}
	return b
}

func decodePairAck(r *decoder) Msg {
	m := r.pairAcks.next(r.left)
	m.Sent = r.time()
	m.Inc = r.uvarint()
	m.Gen = r.uvarint()
	m.Promise = r.flags(pairPromise)&pairPromise != 0
	n := r.uvarint()
	if r.err == nil && (n > maxFloors || n > uint64(len(r.p)/2)) {
		r.fail("pair ack with %d floors", n)
	}
	if r.err != nil || n == 0 {
		return m
	}
	m.Floors = make([]slots.Floor, n)
	for i := range m.Floors {
		m.Floors[i] = slots.Floor{Taker: r.name(), Term: r.uvarint()}
		if r.err == nil && m.Floors[i].Taker == "" {
			r.fail("pair ack floor without a taker")
		}
	}
	return m
}

func (m PairAck) event(from string) any {
	return slots.PairReplAck{From: from, Sent: m.Sent, Inc: m.Inc, Gen: m.Gen, Promise: m.Promise, Floors: m.Floors}
}
