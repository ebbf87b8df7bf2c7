package ownership

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/chime-scheduler/chime/slots"
)

// The wire format of the machines' messages (POST /internal/v1/ctl), one
// batch per request body:
//
//	batch   = version(1 byte, wireVersion) name(sender) uvarint(count) msg*
//	msg     = kind(1 byte) fields of that kind (msg_*.go, one file a family)
//	name    = uvarint(length ≤ maxName) bytes
//	slot    = 2 bytes, big-endian, below slots.Count
//	epoch   = uvarint ≤ MaxEpoch
//	time    = varint of Unix nanoseconds
//	flags   = 1 byte; each kind names its own bits, one meaning each
//
// Decoding validates everything before use: the version, every count and
// length against the bytes left, slots, epochs, names, kinds and flag bits
// (an unknown bit is an error), and that nothing trails. The codec is
// hand-written: tens of thousands of messages go out per second, and
// reflection-based msgpack costs several times as much (BenchmarkCodec).
//
// Version 2 replaced version 1, one generic message of seven fields for
// every kind. Version 3 added the incarnation to heartbeats,
// the incarnation and pair generation to acks, and the pair messages
// (PairBeat, PairAck). Version 4 added the dropped nodes a handover
// carries (Handover.Dropped). Version 5 added AskOffer, version 6
// GenesisAsk and GenesisTable, version 7 the exclusive vote
// (slots, vote.go): the vote term in Beat and Ack, the promise and its
// floors in PairAck, and Consent; version 8 a given consent's quiet time
// (slots, restore.go); version 9 the census flags of an Offer (slots,
// census.go); version 10 (this one) NoReplica's flags, whose one bit says
// it answers a census. No two versions interoperate.

// wireVersion is the first byte of every batch.
const wireVersion = 10

// MaxEpoch is the largest epoch a message may carry: the published state
// packs an epoch in 56 bits (Board).
const MaxEpoch = 1<<56 - 1

// maxName bounds a node name on the wire.
const maxName = 1024

// minMsgSize is the smallest encoded message (a PairBeat: kind, one byte
// of time, one of incarnation); it bounds the count a batch may declare.
const minMsgSize = 3

// msgFixed bounds a message's encoding without its name: kind, slot,
// flags and four varints (a kind with more adds its own).
const msgFixed = 4 + 4*binary.MaxVarintLen64

// Kinds of message, the first byte of each.
const (
	kindBeat uint8 = 1 + iota
	kindAck
	kindSnapshotRequest
	kindNoReplica
	kindOffer
	kindHandover
	kindAnnounce
	kindReject
	kindPairBeat
	kindPairAck
	kindAskOffer
	kindGenesisAsk
	kindGenesisTable
	kindConsent
)

// Msg is one machine message (msg_*.go).
type Msg interface {
	kind() uint8
	// appendTo appends the message's fields (not its kind).
	appendTo(b []byte) []byte
	// size bounds the message's encoding, kind included.
	size() int
	// event is the machine event the message becomes at the receiver.
	event(from string) any
}

// decodeMsg reads the fields of a message of kind k.
func decodeMsg(k uint8, r *decoder) Msg {
	switch k {
	case kindBeat:
		return decodeBeat(r)
	case kindAck:
		return decodeAck(r)
	case kindSnapshotRequest:
		return decodeSnapshotRequest(r)
	case kindNoReplica:
		return decodeNoReplica(r)
	case kindOffer:
		return decodeOffer(r)
	case kindHandover:
		return decodeHandover(r)
	case kindAnnounce:
		return decodeAnnounce(r)
	case kindReject:
		return decodeReject(r)
	case kindPairBeat:
		return decodePairBeat(r)
	case kindPairAck:
		return decodePairAck(r)
	case kindAskOffer:
		return decodeAskOffer(r)
	case kindGenesisAsk:
		return decodeGenesisAsk(r)
	case kindGenesisTable:
		return decodeGenesisTable(r)
	case kindConsent:
		return decodeConsent(r)
	}
	r.fail("unknown message kind %d", k)
	return nil
}

// Batch is what one node sends another in one request. Decoded messages
// are pointers (*Beat…), taken from a few chunks per batch.
type Batch struct {
	From string
	Msgs []Msg
}

// Encode encodes b.
func (b Batch) Encode() []byte {
	size := 1 + 2*binary.MaxVarintLen64 + len(b.From)
	for _, m := range b.Msgs {
		size += m.size()
	}
	out := make([]byte, 0, size)
	out = append(out, wireVersion)
	out = appendName(out, b.From)
	out = binary.AppendUvarint(out, uint64(len(b.Msgs)))
	for _, m := range b.Msgs {
		out = append(out, m.kind())
		out = m.appendTo(out)
	}
	return out
}

// encodeChunks encodes msgs from sender as batches of at most limit bytes
// each (the receiver's body limit), in order; an empty msgs is one empty
// batch (a ping).
func encodeChunks(from string, msgs []Msg, limit int) [][]byte {
	fixed := 1 + 2*binary.MaxVarintLen64 + len(from) // version, sender, count
	var out [][]byte
	start, size := 0, fixed
	for i, m := range msgs {
		ms := m.size()
		if i > start && size+ms > limit {
			out = append(out, Batch{From: from, Msgs: msgs[start:i]}.Encode())
			start, size = i, fixed
		}
		size += ms
	}
	return append(out, Batch{From: from, Msgs: msgs[start:]}.Encode())
}

// errMalformed is every decoding error.
var errMalformed = errors.New("ctl: malformed batch")

// DecodeBatch is the inverse of Encode; it fails on malformed input.
func DecodeBatch(p []byte) (Batch, error) {
	var b Batch
	if len(p) == 0 || p[0] != wireVersion {
		return b, fmt.Errorf("%w: not version %d", errMalformed, wireVersion)
	}
	r := &decoder{reader: reader{p: p[1:]}}
	b.From = r.name()
	n := r.uvarint()
	if r.err == nil && n > uint64(len(r.p)/minMsgSize) {
		r.fail("%d messages in %d bytes", n, len(r.p))
	}
	if r.err != nil {
		return Batch{}, r.err
	}
	b.Msgs = make([]Msg, 0, n)
	for i := range n {
		r.left = int(n - i)
		m := decodeMsg(r.byte(), r)
		if r.err != nil {
			return Batch{}, r.err
		}
		b.Msgs = append(b.Msgs, m)
	}
	if len(r.p) != 0 {
		return Batch{}, fmt.Errorf("%w: %d bytes after the last message", errMalformed, len(r.p))
	}
	return b, nil
}

// decoder reads a batch's messages into arenas, one per kind.
type decoder struct {
	reader
	left       int // messages left to decode, this one included
	beats      arena[Beat]
	acks       arena[Ack]
	snapReqs   arena[SnapshotRequest]
	noReplicas arena[NoReplica]
	offers     arena[Offer]
	handovers  arena[Handover]
	announces  arena[Announce]
	rejects    arena[Reject]
	pairBeats  arena[PairBeat]
	pairAcks   arena[PairAck]
	askOffers  arena[AskOffer]
	consents   arena[Consent]
}

// arena hands out zeroed values from chunks of up to 256, so that a batch
// of thousands of messages costs a few allocations, not one each.
type arena[T any] struct{ free []T }

// next returns a new value; left bounds how many more may be asked for.
func (a *arena[T]) next(left int) *T {
	if len(a.free) == 0 {
		a.free = make([]T, min(max(left, 1), 256))
	}
	v := &a.free[0]
	a.free = a.free[1:]
	return v
}

// reader decodes fields; after the first error every read returns zero
// and err holds that error.
type reader struct {
	p   []byte
	err error
}

func (r *reader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: "+format, append([]any{errMalformed}, args...)...)
	}
	r.p = nil
}

func (r *reader) byte() uint8 {
	if len(r.p) < 1 {
		r.fail("truncated")
		return 0
	}
	v := r.p[0]
	r.p = r.p[1:]
	return v
}

func (r *reader) uvarint() uint64 {
	v, k := binary.Uvarint(r.p)
	if k <= 0 {
		r.fail("bad uvarint")
		return 0
	}
	r.p = r.p[k:]
	return v
}

func (r *reader) uint64() uint64 {
	if len(r.p) < 8 {
		r.fail("truncated")
		return 0
	}
	v := binary.BigEndian.Uint64(r.p)
	r.p = r.p[8:]
	return v
}

func (r *reader) time() time.Time {
	v, k := binary.Varint(r.p)
	if k <= 0 {
		r.fail("bad varint")
		return time.Time{}
	}
	r.p = r.p[k:]
	return time.Unix(0, v)
}

func (r *reader) slot() slots.Slot {
	if len(r.p) < 2 {
		r.fail("truncated slot")
		return 0
	}
	s := uint16(r.p[0])<<8 | uint16(r.p[1])
	r.p = r.p[2:]
	if int(s) >= slots.Count {
		r.fail("slot %d is not below %d", s, slots.Count)
		return 0
	}
	return slots.Slot(s)
}

func (r *reader) epoch() slots.Epoch {
	e := r.uvarint()
	if e > MaxEpoch {
		r.fail("epoch %d is over %d", e, uint64(MaxEpoch))
		return 0
	}
	return slots.Epoch(e)
}

func (r *reader) name() string {
	n := r.uvarint()
	if r.err != nil {
		return ""
	}
	if n > maxName || n > uint64(len(r.p)) {
		r.fail("name of %d bytes", n)
		return ""
	}
	v := string(r.p[:n])
	r.p = r.p[n:]
	return v
}

// flags reads a flags byte; bits outside known are an error.
func (r *reader) flags(known uint8) uint8 {
	f := r.byte()
	if f&^known != 0 {
		r.fail("unknown flags %#x", f&^known)
		return 0
	}
	return f
}

// slotEpoch reads the body of the messages that carry only a slot and an
// epoch (appendSlotEpoch).
func (r *reader) slotEpoch() (slots.Slot, slots.Epoch) {
	s := r.slot()
	return s, r.epoch()
}

func appendSlotEpoch(b []byte, s slots.Slot, e slots.Epoch) []byte {
	return binary.AppendUvarint(appendSlot(b, s), uint64(e))
}

func appendSlot(b []byte, s slots.Slot) []byte { return append(b, byte(s>>8), byte(s)) }

func appendName(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendTime(b []byte, t time.Time) []byte { return binary.AppendVarint(b, t.UnixNano()) }

func flag(on bool, f uint8) uint8 {
	if on {
		return f
	}
	return 0
}
