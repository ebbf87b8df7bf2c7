package ownership

import (
	"encoding/binary"
	"time"

	"github.com/chime-scheduler/chime/slots"
)

// The lease family: an owner's heartbeat to each replica, and the
// replica's answer, which renews the owner's lease while it holds the
// owner's grant.

// Beat is an owner's heartbeat (slots.Heartbeat; at the receiver
// slots.Replicated).
//
//	kind slot flags(beatGrant) epoch seq sent release
type Beat struct {
	Slot  slots.Slot
	Epoch slots.Epoch
	Seq   uint64
	Sent  time.Time // the owner's clock, echoed in the Ack
	Grant bool      // offers the receiver the lease
	// Release names the node whose grant the owner gives up ("" none).
	Release string
}

// Flags of a Beat.
const beatGrant uint8 = 1

func beatOf(e slots.Heartbeat) *Beat {
	return &Beat{Slot: e.Slot, Epoch: e.Epoch, Seq: e.Seq, Sent: e.Sent, Grant: e.Grant, Release: e.Release}
}

func (Beat) kind() uint8 { return kindBeat }
func (m Beat) size() int { return msgFixed + len(m.Release) }

func (m Beat) appendTo(b []byte) []byte {
	b = appendSlot(b, m.Slot)
	b = append(b, flag(m.Grant, beatGrant))
	b = binary.AppendUvarint(b, uint64(m.Epoch))
	b = binary.AppendUvarint(b, m.Seq)
	b = appendTime(b, m.Sent)
	return appendName(b, m.Release)
}

func decodeBeat(r *decoder) Msg {
	m := r.beats.next(r.left)
	m.Slot = r.slot()
	m.Grant = r.flags(beatGrant)&beatGrant != 0
	m.Epoch = r.epoch()
	m.Seq = r.uvarint()
	m.Sent = r.time()
	m.Release = r.name()
	return m
}

func (m Beat) event(from string) slots.Event {
	return slots.Replicated{Slot: m.Slot, Epoch: m.Epoch, Seq: m.Seq, From: from, Sent: m.Sent, Grant: m.Grant, Release: m.Release}
}

// Ack answers a Beat or a snapshot (slots.Ack; at the receiver
// slots.ReplAck).
//
//	kind slot flags(ackGrant|ackSynced) epoch seq sent released
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
}

// Flags of an Ack.
const (
	ackGrant  uint8 = 1
	ackSynced uint8 = 2
)

func ackOf(e slots.Ack) *Ack {
	return &Ack{Slot: e.Slot, Epoch: e.Epoch, Seq: e.Seq, Sent: e.Sent, Grant: e.Grant, Synced: e.Synced, Released: e.Released}
}

func (Ack) kind() uint8 { return kindAck }
func (m Ack) size() int { return msgFixed + len(m.Released) }

func (m Ack) appendTo(b []byte) []byte {
	b = appendSlot(b, m.Slot)
	b = append(b, flag(m.Grant, ackGrant)|flag(m.Synced, ackSynced))
	b = binary.AppendUvarint(b, uint64(m.Epoch))
	b = binary.AppendUvarint(b, m.Seq)
	b = appendTime(b, m.Sent)
	return appendName(b, m.Released)
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
	return m
}

func (m Ack) event(from string) slots.Event {
	return slots.ReplAck{Slot: m.Slot, Epoch: m.Epoch, Seq: m.Seq, From: from, Sent: m.Sent, Grant: m.Grant, Synced: m.Synced, Released: m.Released}
}
