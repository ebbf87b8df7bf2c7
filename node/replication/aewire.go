package replication

import (
	"encoding/binary"
	"errors"
)

// The anti-entropy wire format (POST /internal/v1/antientropy), compact and
// without reflection: a pass sends every slot's checksum, up to 1024 items
// per request.
//
// Request: format 1, the sender's storage.ChecksumVersion, uvarint
// len(From), From, uvarint n, then n items: slot (2 bytes, big-endian),
// flags (1: HasAlt), uvarint Epoch, uvarint Seq, uvarint AltEpoch if
// HasAlt, Sum (8 bytes, big-endian), uvarint Count.
//
// Answer: format 1, uvarint n, then n times a result byte and uvarint the
// replica's epoch of the slot.

const (
	aeFormat  = 1
	aeFlagAlt = 1
	// aeMinItem is the smallest encoded item: slot, flags, three one-byte
	// varints and the sum. It bounds the item count a body can claim.
	aeMinItem = 2 + 1 + 1 + 1 + 8 + 1
)

var errBadAE = errors.New("antientropy: malformed body")

func encodeAERequest(r *aeRequest) []byte {
	out := make([]byte, 0, 8+len(r.From)+len(r.Items)*24)
	out = append(out, aeFormat, r.Version)
	out = binary.AppendUvarint(out, uint64(len(r.From)))
	out = append(out, r.From...)
	out = binary.AppendUvarint(out, uint64(len(r.Items)))
	for _, it := range r.Items {
		var f byte
		if it.HasAlt {
			f |= aeFlagAlt
		}
		out = append(out, byte(it.Slot>>8), byte(it.Slot), f)
		out = binary.AppendUvarint(out, it.Epoch)
		out = binary.AppendUvarint(out, it.Seq)
		if it.HasAlt {
			out = binary.AppendUvarint(out, it.AltEpoch)
		}
		out = binary.BigEndian.AppendUint64(out, it.Sum)
		out = binary.AppendUvarint(out, it.Count)
	}
	return out
}

// aeReader decodes; the first failure sticks in bad.
type aeReader struct {
	p   []byte
	bad bool
}

func (r *aeReader) u8() byte {
	if len(r.p) < 1 {
		r.bad = true
		return 0
	}
	b := r.p[0]
	r.p = r.p[1:]
	return b
}

func (r *aeReader) uvarint() uint64 {
	v, k := binary.Uvarint(r.p)
	if k <= 0 {
		r.bad = true
		return 0
	}
	r.p = r.p[k:]
	return v
}

func (r *aeReader) fixed(n int) []byte {
	if len(r.p) < n {
		r.bad = true
		return make([]byte, n)
	}
	b := r.p[:n]
	r.p = r.p[n:]
	return b
}

// count reads an item count, at most what the rest of the body can hold
// at min bytes an item.
func (r *aeReader) count(min int) int {
	n := r.uvarint()
	if n > uint64(len(r.p)/min) {
		r.bad = true
		return 0
	}
	return int(n)
}

func (r *aeReader) done() bool { return !r.bad && len(r.p) == 0 }

// decodeAERequest is the inverse of encodeAERequest; it fails on malformed
// input and never panics.
func decodeAERequest(p []byte) (aeRequest, error) {
	var req aeRequest
	r := &aeReader{p: p}
	if r.u8() != aeFormat {
		return req, errBadAE
	}
	req.Version = r.u8()
	from := r.uvarint()
	if from > uint64(len(r.p)) {
		return req, errBadAE
	}
	req.From = string(r.fixed(int(from)))
	n := r.count(aeMinItem)
	req.Items = make([]Item, 0, n)
	for range n {
		var it Item
		s := r.fixed(2)
		it.Slot = uint16(s[0])<<8 | uint16(s[1])
		f := r.u8()
		if f&^aeFlagAlt != 0 {
			r.bad = true
		}
		it.Epoch, it.Seq = r.uvarint(), r.uvarint()
		if f&aeFlagAlt != 0 {
			it.HasAlt, it.AltEpoch = true, r.uvarint()
		}
		it.Sum = binary.BigEndian.Uint64(r.fixed(8))
		it.Count = r.uvarint()
		if r.bad {
			return req, errBadAE
		}
		req.Items = append(req.Items, it)
	}
	if !r.done() {
		return req, errBadAE
	}
	return req, nil
}

func encodeAEAnswer(a *aeAnswer) []byte {
	out := make([]byte, 0, 2+len(a.Results)*3)
	out = append(out, aeFormat)
	out = binary.AppendUvarint(out, uint64(len(a.Results)))
	for i, res := range a.Results {
		out = append(out, res)
		out = binary.AppendUvarint(out, a.Epochs[i])
	}
	return out
}

// decodeAEAnswer is the inverse of encodeAEAnswer; a result other than
// Match, Mismatch and NotComparable is malformed.
func decodeAEAnswer(p []byte) (aeAnswer, error) {
	var a aeAnswer
	r := &aeReader{p: p}
	if r.u8() != aeFormat {
		return a, errBadAE
	}
	n := r.count(2)
	a.Results, a.Epochs = make([]uint8, 0, n), make([]uint64, 0, n)
	for range n {
		res := r.u8()
		if res < Match || res > NotComparable {
			r.bad = true
		}
		e := r.uvarint()
		if r.bad {
			return a, errBadAE
		}
		a.Results, a.Epochs = append(a.Results, res), append(a.Epochs, e)
	}
	if !r.done() {
		return a, errBadAE
	}
	return a, nil
}
