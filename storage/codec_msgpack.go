package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
)

// This file holds the msgpack primitives the record codec (codec.go) is
// built from: append-style encoders that always pick the shortest form, and
// a bounds-checked reader over a byte slice. Spec:
// https://github.com/msgpack/msgpack/blob/master/spec.md

// msgpack type bytes. Fixed-size ranges (fixint, fixstr, fixarray, fixmap)
// are matched by mask where they are used.
const (
	mpNil       byte = 0xc0
	mpNeverUsed byte = 0xc1
	mpFalse     byte = 0xc2
	mpTrue      byte = 0xc3
	mpBin8      byte = 0xc4
	mpBin16     byte = 0xc5
	mpBin32     byte = 0xc6
	mpExt8      byte = 0xc7
	mpExt16     byte = 0xc8
	mpExt32     byte = 0xc9
	mpFloat32   byte = 0xca
	mpFloat64   byte = 0xcb
	mpUint8     byte = 0xcc
	mpUint16    byte = 0xcd
	mpUint32    byte = 0xce
	mpUint64    byte = 0xcf
	mpInt8      byte = 0xd0
	mpInt16     byte = 0xd1
	mpInt32     byte = 0xd2
	mpInt64     byte = 0xd3
	mpFixExt1   byte = 0xd4
	mpFixExt2   byte = 0xd5
	mpFixExt4   byte = 0xd6
	mpFixExt8   byte = 0xd7
	mpFixExt16  byte = 0xd8
	mpStr8      byte = 0xd9
	mpStr16     byte = 0xda
	mpStr32     byte = 0xdb
	mpArray16   byte = 0xdc
	mpArray32   byte = 0xdd
	mpMap16     byte = 0xde
	mpMap32     byte = 0xdf

	mpFixMap   byte = 0x80 // 0x80-0x8f: map of up to 15 pairs
	mpFixArray byte = 0x90 // 0x90-0x9f: array of up to 15 elements
	mpFixStr   byte = 0xa0 // 0xa0-0xbf: string of up to 31 bytes
)

// maxSkipDepth bounds the nesting the reader follows while skipping unknown
// trailing elements, so corrupt input cannot recurse without limit.
const maxSkipDepth = 32

// len32 returns n as a msgpack length. Lengths above 4 GiB have no msgpack
// encoding; callers bound payloads far below that, so one is a misuse.
func len32(n int) uint32 {
	if uint64(n) > math.MaxUint32 {
		panic(fmt.Sprintf("storage: cannot encode a %d-byte field (msgpack lengths are 32-bit; callers bound record sizes)", n))
	}
	return uint32(n)
}

func appendNil(b []byte) []byte { return append(b, mpNil) }

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, mpTrue)
	}
	return append(b, mpFalse)
}

// appendUint appends v in the shortest unsigned form.
func appendUint(b []byte, v uint64) []byte {
	switch {
	case v <= 0x7f:
		return append(b, byte(v))
	case v <= math.MaxUint8:
		return append(b, mpUint8, byte(v))
	case v <= math.MaxUint16:
		return append(b, mpUint16, byte(v>>8), byte(v))
	case v <= math.MaxUint32:
		return binary.BigEndian.AppendUint32(append(b, mpUint32), uint32(v))
	default:
		return binary.BigEndian.AppendUint64(append(b, mpUint64), v)
	}
}

// appendInt appends v in the shortest form: unsigned forms for v >= 0 (as
// msgpack's compact ints do), signed forms below.
func appendInt(b []byte, v int64) []byte {
	switch {
	case v >= 0:
		return appendUint(b, uint64(v))
	case v >= -32:
		return append(b, byte(v)) // negative fixint 0xe0-0xff
	case v >= math.MinInt8:
		return append(b, mpInt8, byte(v))
	case v >= math.MinInt16:
		return append(b, mpInt16, byte(v>>8), byte(v))
	case v >= math.MinInt32:
		return binary.BigEndian.AppendUint32(append(b, mpInt32), uint32(v))
	default:
		return binary.BigEndian.AppendUint64(append(b, mpInt64), uint64(v))
	}
}

// appendStr appends s as a msgpack str in the shortest form.
func appendStr(b []byte, s string) []byte {
	switch n := len(s); {
	case n < 32:
		b = append(b, mpFixStr|byte(n))
	case n <= math.MaxUint8:
		b = append(b, mpStr8, byte(n))
	case n <= math.MaxUint16:
		b = append(b, mpStr16, byte(n>>8), byte(n))
	default:
		b = binary.BigEndian.AppendUint32(append(b, mpStr32), len32(n))
	}
	return append(b, s...)
}

// appendBin appends p as a msgpack bin in the shortest form; nil p is nil, an
// empty non-nil p an empty bin.
func appendBin(b []byte, p []byte) []byte {
	if p == nil {
		return append(b, mpNil)
	}
	switch n := len(p); {
	case n <= math.MaxUint8:
		b = append(b, mpBin8, byte(n))
	case n <= math.MaxUint16:
		b = append(b, mpBin16, byte(n>>8), byte(n))
	default:
		b = binary.BigEndian.AppendUint32(append(b, mpBin32), len32(n))
	}
	return append(b, p...)
}

func appendArrayHeader(b []byte, n int) []byte {
	switch {
	case n < 16:
		return append(b, mpFixArray|byte(n))
	case n <= math.MaxUint16:
		return append(b, mpArray16, byte(n>>8), byte(n))
	default:
		return binary.BigEndian.AppendUint32(append(b, mpArray32), len32(n))
	}
}

func appendMapHeader(b []byte, n int) []byte {
	switch {
	case n < 16:
		return append(b, mpFixMap|byte(n))
	case n <= math.MaxUint16:
		return append(b, mpMap16, byte(n>>8), byte(n))
	default:
		return binary.BigEndian.AppendUint32(append(b, mpMap32), len32(n))
	}
}

// appendInts appends v as an array of ints; nil v is nil.
func appendInts(b []byte, v []int64) []byte {
	if v == nil {
		return append(b, mpNil)
	}
	b = appendArrayHeader(b, len(v))
	for _, x := range v {
		b = appendInt(b, x)
	}
	return b
}

// strPair is one map entry, sorted by key before encoding.
type strPair struct{ k, v string }

// appendStrMap appends m with its keys in ascending byte order, so equal
// maps encode to equal bytes whatever the iteration order; nil m is nil, an
// empty non-nil m an empty map. Maps of up to 16 entries (API labels are
// capped at 16) sort on the stack.
func appendStrMap(b []byte, m map[string]string) []byte {
	if m == nil {
		return append(b, mpNil)
	}
	b = appendMapHeader(b, len(m))
	var stack [16]strPair
	pairs := stack[:0]
	for k, v := range m {
		pairs = append(pairs, strPair{k, v})
	}
	slices.SortFunc(pairs, func(x, y strPair) int { return strings.Compare(x.k, y.k) })
	for _, p := range pairs {
		b = appendStr(appendStr(b, p.k), p.v)
	}
	return b
}

// errTruncated reports input that ends inside a value.
var errTruncated = errors.New("unexpected end of input")

// reader decodes msgpack values from b. The first error sticks: later reads
// return zero values, so decoders check r.err once at the end. Every
// length is checked against the bytes left before anything is allocated, so
// corrupt input cannot make it allocate more than a small multiple of its
// size, and no input panics.
type reader struct {
	b   []byte // input not yet read
	n   int    // length of the whole input, for error offsets
	err error

	// arena holds the bytes of the short strings decoded so far; str
	// returns substrings of it, so a record's strings cost one allocation
	// per chunk instead of one each. Strings are immutable, so when a
	// chunk is full the next one starts fresh and the old one lives on as
	// long as its strings do.
	arena strings.Builder
}

// Arena sizing: a chunk of arenaChunk bytes holds the short strings of a
// typical task (callback URL, a few headers and labels) in one allocation;
// longer strings get their own, so one retained string never pins more
// than arenaChunk bytes of others.
const (
	arenaChunk     = 128
	arenaMaxString = 64
)

func newReader(b []byte) reader { return reader{b: b, n: len(b)} }

// fail records err (if it is the first) at the current offset and stops
// further reads.
func (r *reader) fail(err error) {
	if r.err == nil {
		r.err = fmt.Errorf("at byte %d: %w", r.n-len(r.b), err)
	}
	r.b = nil
}

// failType records an unexpected type byte c, just read by next.
func (r *reader) failType(c byte, want string) {
	if c == mpNeverUsed && len(r.b) == 0 {
		r.fail(errTruncated) // next's end-of-input marker, or a final 0xc1
		return
	}
	if r.err == nil {
		r.err = fmt.Errorf("at byte %d: msgpack type 0x%02x where %s expected", r.n-len(r.b)-1, c, want)
	}
	r.b = nil
}

// next reads one type byte. At the end of the input it returns mpNeverUsed,
// which every caller's type switch hands to failType as truncation; this
// keeps next small enough to inline.
func (r *reader) next() byte {
	if len(r.b) == 0 {
		return mpNeverUsed
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

// take reads n raw bytes; the result aliases the input.
func (r *reader) take(n uint64) []byte {
	if n > uint64(len(r.b)) {
		r.fail(errTruncated)
		return nil
	}
	p := r.b[:n:n]
	r.b = r.b[n:]
	return p
}

// be reads a size-byte big-endian unsigned integer (size 1, 2, 4 or 8).
func (r *reader) be(size int) uint64 {
	if len(r.b) < size {
		r.fail(errTruncated)
		return 0
	}
	var v uint64
	switch size {
	case 1:
		v = uint64(r.b[0])
	case 2:
		v = uint64(binary.BigEndian.Uint16(r.b))
	case 4:
		v = uint64(binary.BigEndian.Uint32(r.b))
	default:
		v = binary.BigEndian.Uint64(r.b)
	}
	r.b = r.b[size:]
	return v
}

// integer reads any msgpack integer, or nil as 0. neg reports a negative
// value, whose two's complement is v.
func (r *reader) integer() (v uint64, neg bool) {
	c := r.next()
	switch {
	case c <= 0x7f:
		return uint64(c), false
	case c >= 0xe0:
		return uint64(int64(int8(c))), true
	}
	var s int64
	switch c {
	case mpNil:
		return 0, false
	case mpUint8:
		return r.be(1), false
	case mpUint16:
		return r.be(2), false
	case mpUint32:
		return r.be(4), false
	case mpUint64:
		return r.be(8), false
	case mpInt8:
		s = int64(int8(r.be(1)))
	case mpInt16:
		s = int64(int16(r.be(2)))
	case mpInt32:
		s = int64(int32(r.be(4)))
	case mpInt64:
		s = int64(r.be(8))
	default:
		r.failType(c, "integer")
		return 0, false
	}
	return uint64(s), s < 0
}

// int64 reads an integer that fits an int64.
func (r *reader) int64() int64 {
	v, neg := r.integer()
	if !neg && v > math.MaxInt64 {
		r.fail(fmt.Errorf("integer %d overflows int64", v))
		return 0
	}
	return int64(v)
}

// int reads an integer that fits an int.
func (r *reader) int() int {
	v := r.int64()
	if int64(int(v)) != v {
		r.fail(fmt.Errorf("integer %d overflows int", v))
		return 0
	}
	return int(v)
}

// uint reads a non-negative integer of at most limit.
func (r *reader) uint(limit uint64) uint64 {
	v, neg := r.integer()
	switch {
	case neg:
		r.fail(fmt.Errorf("integer %d out of range [0, %d]", int64(v), limit))
		return 0
	case v > limit:
		r.fail(fmt.Errorf("integer %d out of range [0, %d]", v, limit))
		return 0
	}
	return v
}

// bool reads a bool, or nil as false.
func (r *reader) bool() bool {
	switch c := r.next(); {
	case c == mpTrue:
		return true
	case c == mpFalse, c == mpNil:
		return false
	default:
		r.failType(c, "bool")
		return false
	}
}

// raw reads a str or bin and returns its bytes, aliasing the input; nil
// reads as (nil, true).
func (r *reader) raw() (p []byte, isNil bool) {
	c := r.next()
	var n uint64
	switch {
	case c&0xe0 == mpFixStr:
		n = uint64(c & 0x1f)
	case c == mpStr8, c == mpBin8:
		n = r.be(1)
	case c == mpStr16, c == mpBin16:
		n = r.be(2)
	case c == mpStr32, c == mpBin32:
		n = r.be(4)
	case c == mpNil:
		return nil, true
	default:
		r.failType(c, "str or bin")
		return nil, false
	}
	return r.take(n), false
}

// str reads a str or bin (nil reads as ""). Short strings are carved out of
// a shared chunk (see reader.arena); a string kept after the record is
// dropped pins at most its chunk, never the input.
func (r *reader) str() string {
	p, _ := r.raw()
	switch {
	case len(p) == 0:
		return ""
	case len(p) > arenaMaxString:
		return string(p)
	}
	if r.arena.Cap()-r.arena.Len() < len(p) {
		r.arena.Reset()
		r.arena.Grow(arenaChunk)
	}
	start := r.arena.Len()
	r.arena.Write(p)
	return r.arena.String()[start:]
}

// ownStr reads a str or bin into a string of its own, for a value likely to
// outlive the rest of the record (the task id: map keys, the timing wheel).
func (r *reader) ownStr() string {
	p, _ := r.raw()
	return string(p)
}

// bytes reads a bin or str into a new slice; nil reads as nil, an empty
// value as an empty non-nil slice.
func (r *reader) bytes() []byte {
	p, isNil := r.raw()
	if isNil || r.err != nil {
		return nil
	}
	out := make([]byte, len(p))
	copy(out, p)
	return out
}

// arrayLen reads an array header, or nil as (0, true). n never exceeds the
// bytes left, since every element takes at least one.
func (r *reader) arrayLen() (n int, isNil bool) {
	c := r.next()
	var v uint64
	switch {
	case c&0xf0 == mpFixArray:
		v = uint64(c & 0x0f)
	case c == mpArray16:
		v = r.be(2)
	case c == mpArray32:
		v = r.be(4)
	case c == mpNil:
		return 0, true
	default:
		r.failType(c, "array")
		return 0, false
	}
	if v > uint64(len(r.b)) {
		r.fail(fmt.Errorf("array of %d elements in %d bytes", v, len(r.b)))
		return 0, false
	}
	return int(v), false
}

// mapLen reads a map header, or nil as (0, true). n never exceeds half the
// bytes left, since every pair takes at least two.
func (r *reader) mapLen() (n int, isNil bool) {
	c := r.next()
	var v uint64
	switch {
	case c&0xf0 == mpFixMap:
		v = uint64(c & 0x0f)
	case c == mpMap16:
		v = r.be(2)
	case c == mpMap32:
		v = r.be(4)
	case c == mpNil:
		return 0, true
	default:
		r.failType(c, "map")
		return 0, false
	}
	if v > uint64(len(r.b)/2) {
		r.fail(fmt.Errorf("map of %d pairs in %d bytes", v, len(r.b)))
		return 0, false
	}
	return int(v), false
}

// maxMapHint caps the size hint of a decoded map: real maps are small (the
// API allows 16 labels), and a corrupt length should not pre-size a big one.
const maxMapHint = 32

// ints reads an array of integers; nil reads as nil.
func (r *reader) ints() []int64 {
	n, isNil := r.arrayLen()
	if isNil || r.err != nil {
		return nil
	}
	v := make([]int64, n)
	for i := range v {
		v[i] = r.int64()
	}
	return v
}

// strMap reads a map of strings; nil reads as nil. A repeated key keeps its
// last value.
func (r *reader) strMap() map[string]string {
	n, isNil := r.mapLen()
	if isNil || r.err != nil {
		return nil
	}
	m := make(map[string]string, min(n, maxMapHint))
	for range n {
		k := r.str()
		v := r.str()
		if r.err != nil {
			return nil
		}
		m[k] = v
	}
	return m
}

// skip reads and discards n values of any type (fields a newer writer
// appended).
func (r *reader) skip(n int, depth int) {
	if depth > maxSkipDepth {
		r.fail(errors.New("values nested too deep"))
		return
	}
	for ; n > 0 && r.err == nil; n-- {
		r.skipOne(depth)
	}
}

func (r *reader) skipOne(depth int) {
	c := r.next()
	switch {
	case c <= 0x7f, c >= 0xe0:
		return
	case c&0xf0 == mpFixMap:
		r.skipN(uint64(c&0x0f), 2, depth)
		return
	case c&0xf0 == mpFixArray:
		r.skipN(uint64(c&0x0f), 1, depth)
		return
	case c&0xe0 == mpFixStr:
		r.take(uint64(c & 0x1f))
		return
	}
	switch c {
	case mpNil, mpFalse, mpTrue:
	case mpUint8, mpInt8:
		r.take(1)
	case mpUint16, mpInt16:
		r.take(2)
	case mpUint32, mpInt32, mpFloat32:
		r.take(4)
	case mpUint64, mpInt64, mpFloat64:
		r.take(8)
	case mpStr8, mpBin8:
		r.take(r.be(1))
	case mpStr16, mpBin16:
		r.take(r.be(2))
	case mpStr32, mpBin32:
		r.take(r.be(4))
	case mpFixExt1:
		r.take(1 + 1)
	case mpFixExt2:
		r.take(1 + 2)
	case mpFixExt4:
		r.take(1 + 4)
	case mpFixExt8:
		r.take(1 + 8)
	case mpFixExt16:
		r.take(1 + 16)
	case mpExt8:
		r.take(1 + r.be(1))
	case mpExt16:
		r.take(1 + r.be(2))
	case mpExt32:
		r.take(1 + r.be(4))
	case mpArray16:
		r.skipN(r.be(2), 1, depth)
	case mpArray32:
		r.skipN(r.be(4), 1, depth)
	case mpMap16:
		r.skipN(r.be(2), 2, depth)
	case mpMap32:
		r.skipN(r.be(4), 2, depth)
	default: // mpNeverUsed: corrupt, or the end of the input
		r.failType(c, "msgpack value")
	}
}

// skipN skips the n elements (per values each) of a container whose header
// was just read, after checking they can fit in the bytes left.
func (r *reader) skipN(n uint64, per int, depth int) {
	if n > uint64(len(r.b)/per) {
		r.fail(fmt.Errorf("container of %d elements in %d bytes", n, len(r.b)))
		return
	}
	r.skip(int(n)*per, depth+1)
}
