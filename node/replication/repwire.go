package replication

import (
	"encoding/binary"
	"errors"
	"math"
)

// The replication wire (POST PathReplicate) is msgpack: Request, Msg and
// Answer as msgpack.Marshal encodes them from their struct tags (a map per
// struct keyed by the tag, omitempty fields left out, []byte as bin), so
// nodes of either codec read each other. This file encodes and decodes it
// by hand, without reflection: every write group and snapshot crosses it
// twice (the request and its answer), and msgpack's reflection cost as
// much as the rest of the shipper and the replica together. BenchmarkRep
// Wire (repwire_bench_test.go) compares it with msgpack.Marshal/Unmarshal;
// it stays only while it is at least twice as fast.
//
// The decoders read any integer format msgpack may have used, keys in any
// order, and skip keys they do not know. They run after checkMsgpack (the
// body is one well-formed value, and every declared length fits in the
// bytes left), and check again what they rely on.

var errRepWire = errors.New("replicate: malformed body")

func encodeRequest(r *Request) []byte {
	n := 16 + len(r.From)
	for i := range r.Msgs {
		n += 64 + len(r.Msgs[i].Data) + len(r.Msgs[i].Priors)
	}
	out := make([]byte, 0, n)
	out = mpMap(out, 2)
	out = mpStr(mpStr(out, "f"), r.From)
	out = mpStr(out, "m")
	if r.Msgs == nil {
		return append(out, 0xc0)
	}
	out = mpArray(out, len(r.Msgs))
	for i := range r.Msgs {
		out = appendMsg(out, &r.Msgs[i])
	}
	return out
}

func appendMsg(out []byte, m *Msg) []byte {
	k := 7 // s, e, q, pe, pq, n, d
	for _, set := range []bool{m.Reset, m.Snap, m.Sent != 0, m.Grant, m.Owner, m.SnapEpoch != 0, m.SnapInc != 0, m.SnapTerm != 0, m.Final, len(m.Priors) > 0} {
		if set {
			k++
		}
	}
	out = mpMap(out, k)
	out = mpUint(mpStr(out, "s"), uint64(m.Slot))
	out = mpUint(mpStr(out, "e"), m.Epoch)
	out = mpUint(mpStr(out, "q"), m.Seq)
	out = mpUint(mpStr(out, "pe"), m.PrevEpoch)
	out = mpUint(mpStr(out, "pq"), m.PrevSeq)
	if m.Reset {
		out = mpBool(mpStr(out, "r"), true)
	}
	if m.Snap {
		out = mpBool(mpStr(out, "x"), true)
	}
	if m.Sent != 0 {
		out = mpInt(mpStr(out, "t"), m.Sent)
	}
	if m.Grant {
		out = mpBool(mpStr(out, "g"), true)
	}
	if m.Owner {
		out = mpBool(mpStr(out, "o"), true)
	}
	if m.SnapEpoch != 0 {
		out = mpUint(mpStr(out, "xe"), m.SnapEpoch)
	}
	if m.SnapInc != 0 {
		out = mpUint(mpStr(out, "xi"), m.SnapInc)
	}
	if m.SnapTerm != 0 {
		out = mpUint(mpStr(out, "xm"), m.SnapTerm)
	}
	if m.Final {
		out = mpBool(mpStr(out, "xf"), true)
	}
	out = mpInt(mpStr(out, "n"), int64(m.Count))
	if len(m.Priors) > 0 {
		out = mpBin(mpStr(out, "p"), m.Priors)
	}
	out = mpStr(out, "d")
	return mpBin(out, m.Data)
}

func encodeAnswer(a *Answer) []byte {
	out := make([]byte, 0, 20+len(a.Results)*10)
	n := 2
	if a.Pressed {
		n++
	}
	out = mpMap(out, n)
	out = mpStr(out, "r")
	out = mpBin(out, a.Results)
	out = mpStr(out, "e")
	if a.Epochs == nil {
		out = append(out, 0xc0)
	} else {
		out = mpArray(out, len(a.Epochs))
		for _, e := range a.Epochs {
			out = mpUint(out, e)
		}
	}
	if a.Pressed {
		out = mpStr(out, "p")
		out = append(out, 0xc3)
	}
	return out
}

func decodeRequest(b []byte) (Request, error) {
	var r Request
	d := mpReader{p: b}
	for range d.mapLen() {
		switch string(d.str()) {
		case "f":
			r.From = string(d.str())
		case "m":
			n := d.arrayLen()
			if n > maxBatch {
				d.bad = true // more than a shipper sends
			}
			if n < 0 || d.bad {
				break
			}
			r.Msgs = make([]Msg, n)
			for i := range r.Msgs {
				d.msg(&r.Msgs[i])
			}
		default:
			d.skip()
		}
		if d.bad {
			break
		}
	}
	if d.bad || len(d.p) != 0 {
		return Request{}, errRepWire
	}
	return r, nil
}

func (d *mpReader) msg(m *Msg) {
	for range d.mapLen() {
		switch string(d.str()) {
		case "s":
			v := d.uint()
			if v > math.MaxUint16 {
				d.bad = true
			}
			m.Slot = uint16(v)
		case "e":
			m.Epoch = d.uint()
		case "q":
			m.Seq = d.uint()
		case "pe":
			m.PrevEpoch = d.uint()
		case "pq":
			m.PrevSeq = d.uint()
		case "r":
			m.Reset = d.bool()
		case "x":
			m.Snap = d.bool()
		case "t":
			m.Sent = d.int()
		case "g":
			m.Grant = d.bool()
		case "o":
			m.Owner = d.bool()
		case "xe":
			m.SnapEpoch = d.uint()
		case "xi":
			m.SnapInc = d.uint()
		case "xm":
			m.SnapTerm = d.uint()
		case "xf":
			m.Final = d.bool()
		case "n":
			v := d.int()
			if v < math.MinInt32 || v > math.MaxInt32 {
				d.bad = true
			}
			m.Count = int(v)
		case "d":
			m.Data = d.bin()
		case "p":
			m.Priors = d.bin()
		default:
			d.skip()
		}
		if d.bad {
			return
		}
	}
}

func decodeAnswer(b []byte) (Answer, error) {
	var a Answer
	d := mpReader{p: b}
	for range d.mapLen() {
		switch string(d.str()) {
		case "r":
			a.Results = d.bin()
		case "e":
			n := d.arrayLen()
			if n > maxBatch {
				d.bad = true // more than a request holds
			}
			if n < 0 || d.bad {
				break
			}
			a.Epochs = make([]uint64, n)
			for i := range a.Epochs {
				a.Epochs[i] = d.uint()
			}
		case "p":
			a.Pressed = d.bool()
		default:
			d.skip()
		}
		if d.bad {
			break
		}
	}
	if d.bad || len(d.p) != 0 {
		return Answer{}, errRepWire
	}
	return a, nil
}

// Encoding: the shortest form of each value, as msgpack's Encoder writes.

func mpMap(out []byte, n int) []byte {
	if n < 16 {
		return append(out, 0x80|byte(n))
	}
	if n <= math.MaxUint16 {
		return binary.BigEndian.AppendUint16(append(out, 0xde), uint16(n))
	}
	return binary.BigEndian.AppendUint32(append(out, 0xdf), uint32(n))
}

func mpArray(out []byte, n int) []byte {
	if n < 16 {
		return append(out, 0x90|byte(n))
	}
	if n <= math.MaxUint16 {
		return binary.BigEndian.AppendUint16(append(out, 0xdc), uint16(n))
	}
	return binary.BigEndian.AppendUint32(append(out, 0xdd), uint32(n))
}

func mpStr(out []byte, s string) []byte {
	switch n := len(s); {
	case n < 32:
		out = append(out, 0xa0|byte(n))
	case n <= math.MaxUint8:
		out = append(out, 0xd9, byte(n))
	case n <= math.MaxUint16:
		out = binary.BigEndian.AppendUint16(append(out, 0xda), uint16(n))
	default:
		out = binary.BigEndian.AppendUint32(append(out, 0xdb), uint32(n))
	}
	return append(out, s...)
}

// mpBin writes b as bin, nil as nil (as msgpack encodes a nil []byte).
func mpBin(out, b []byte) []byte {
	if b == nil {
		return append(out, 0xc0)
	}
	switch n := len(b); {
	case n <= math.MaxUint8:
		out = append(out, 0xc4, byte(n))
	case n <= math.MaxUint16:
		out = binary.BigEndian.AppendUint16(append(out, 0xc5), uint16(n))
	default:
		out = binary.BigEndian.AppendUint32(append(out, 0xc6), uint32(n))
	}
	return append(out, b...)
}

func mpUint(out []byte, v uint64) []byte {
	switch {
	case v <= 0x7f:
		return append(out, byte(v))
	case v <= math.MaxUint8:
		return append(out, 0xcc, byte(v))
	case v <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(out, 0xcd), uint16(v))
	case v <= math.MaxUint32:
		return binary.BigEndian.AppendUint32(append(out, 0xce), uint32(v))
	}
	return binary.BigEndian.AppendUint64(append(out, 0xcf), v)
}

func mpInt(out []byte, v int64) []byte {
	switch {
	case v >= 0:
		return mpUint(out, uint64(v))
	case v >= -32:
		return append(out, byte(v))
	case v >= math.MinInt8:
		return append(out, 0xd0, byte(v))
	case v >= math.MinInt16:
		return binary.BigEndian.AppendUint16(append(out, 0xd1), uint16(v))
	case v >= math.MinInt32:
		return binary.BigEndian.AppendUint32(append(out, 0xd2), uint32(v))
	}
	return binary.BigEndian.AppendUint64(append(out, 0xd3), uint64(v))
}

func mpBool(out []byte, v bool) []byte {
	if v {
		return append(out, 0xc3)
	}
	return append(out, 0xc2)
}

// mpReader decodes msgpack values from p; the first failure sticks in bad
// (every read then returns a zero value).
type mpReader struct {
	p   []byte
	bad bool
}

func (d *mpReader) take(n int) []byte {
	if d.bad || n < 0 || len(d.p) < n {
		d.bad = true
		return nil
	}
	b := d.p[:n:n]
	d.p = d.p[n:]
	return b
}

func (d *mpReader) u8() byte {
	if b := d.take(1); b != nil {
		return b[0]
	}
	return 0
}

func (d *mpReader) be(n int) uint64 {
	b := d.take(n)
	var v uint64
	for _, c := range b {
		v = v<<8 | uint64(c)
	}
	return v
}

// length reads the length of a str, bin, array or map whose header byte
// c is not a fix form: size is the width of the length that follows.
func (d *mpReader) length(size int) int {
	v := d.be(size)
	if v > uint64(len(d.p)) {
		d.bad = true // each element or byte takes at least one byte
		return 0
	}
	return int(v)
}

func (d *mpReader) mapLen() int {
	switch c := d.u8(); {
	case d.bad:
	case c&0xf0 == 0x80:
		return int(c & 0x0f)
	case c == 0xde:
		return d.length(2)
	case c == 0xdf:
		return d.length(4)
	default:
		d.bad = true
	}
	return 0
}

// arrayLen returns -1 for nil.
func (d *mpReader) arrayLen() int {
	switch c := d.u8(); {
	case d.bad:
	case c == 0xc0:
		return -1
	case c&0xf0 == 0x90:
		return int(c & 0x0f)
	case c == 0xdc:
		return d.length(2)
	case c == 0xdd:
		return d.length(4)
	default:
		d.bad = true
	}
	return 0
}

// str reads a str (or bin, as msgpack's decoder allows) and returns its
// bytes, aliasing p.
func (d *mpReader) str() []byte {
	switch c := d.u8(); {
	case d.bad:
	case c&0xe0 == 0xa0:
		return d.take(int(c & 0x1f))
	case c == 0xd9 || c == 0xc4:
		return d.take(d.length(1))
	case c == 0xda || c == 0xc5:
		return d.take(d.length(2))
	case c == 0xdb || c == 0xc6:
		return d.take(d.length(4))
	default:
		d.bad = true
	}
	return nil
}

// bin reads a bin or str as a []byte of its own (nil for nil).
func (d *mpReader) bin() []byte {
	if !d.bad && len(d.p) > 0 && d.p[0] == 0xc0 {
		d.p = d.p[1:]
		return nil
	}
	b := d.str()
	if d.bad {
		return nil
	}
	return append([]byte{}, b...)
}

func (d *mpReader) bool() bool {
	switch d.u8() {
	case 0xc3:
		return true
	case 0xc2, 0xc0:
		return false
	}
	d.bad = true
	return false
}

// uint reads a non-negative integer of any msgpack form (nil is 0).
func (d *mpReader) uint() uint64 {
	v, neg := d.integer()
	if neg {
		d.bad = true
		return 0
	}
	return v
}

// int reads an integer of any msgpack form that fits an int64.
func (d *mpReader) int() int64 {
	v, neg := d.integer()
	if !neg && v > math.MaxInt64 {
		d.bad = true
		return 0
	}
	return int64(v)
}

// integer returns the value's bits and whether it is negative.
func (d *mpReader) integer() (uint64, bool) {
	c := d.u8()
	switch {
	case d.bad:
		return 0, false
	case c <= 0x7f:
		return uint64(c), false
	case c >= 0xe0:
		return uint64(int64(int8(c))), true
	case c == 0xc0:
		return 0, false
	case c == 0xcc:
		return d.be(1), false
	case c == 0xcd:
		return d.be(2), false
	case c == 0xce:
		return d.be(4), false
	case c == 0xcf:
		return d.be(8), false
	case c == 0xd0:
		v := int64(int8(d.be(1)))
		return uint64(v), v < 0
	case c == 0xd1:
		v := int64(int16(d.be(2)))
		return uint64(v), v < 0
	case c == 0xd2:
		v := int64(int32(d.be(4)))
		return uint64(v), v < 0
	case c == 0xd3:
		v := int64(d.be(8))
		return uint64(v), v < 0
	}
	d.bad = true
	return 0, false
}

// skip skips one value of any kind.
func (d *mpReader) skip() {
	if d.bad {
		return
	}
	rest, err := skipMsgpack(d.p, 1)
	if err != nil {
		d.bad = true
		return
	}
	d.p = rest
}
