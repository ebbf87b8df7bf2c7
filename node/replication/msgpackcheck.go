package replication

import (
	"encoding/binary"
	"errors"
)

// checkMsgpack walks one msgpack value in b without allocating and fails
// unless it is well formed, ends exactly at len(b), nests at most
// maxMsgpackDepth deep, and every array and map declares no more elements
// than the bytes left could hold (each takes at least one). It guards
// msgpack.Unmarshal of what peers send: vmihailenco/msgpack v5.4.1 sizes a
// slice of structs from the declared length before reading any element
// (its allocation limit is not applied: decode_slice.go tests the flag
// with "!= 1"), so a 9-byte body declaring 4 billion replication messages
// ran the node out of memory (FuzzReplicate's seed).
func checkMsgpack(b []byte) error {
	rest, err := skipMsgpack(b, 0)
	if err != nil {
		return err
	}
	if len(rest) != 0 {
		return errMsgpack
	}
	return nil
}

const maxMsgpackDepth = 32

var errMsgpack = errors.New("malformed msgpack")

// skipMsgpack skips one value at the start of b and returns the rest.
func skipMsgpack(b []byte, depth int) ([]byte, error) {
	if depth > maxMsgpackDepth || len(b) == 0 {
		return nil, errMsgpack
	}
	c, b := b[0], b[1:]
	// n bytes of payload follow; k elements follow (maps: 2 per entry).
	n, k := 0, 0
	be := func(size int) (int, bool) {
		if len(b) < size {
			return 0, false
		}
		var v uint64
		switch size {
		case 1:
			v = uint64(b[0])
		case 2:
			v = uint64(binary.BigEndian.Uint16(b))
		case 4:
			v = uint64(binary.BigEndian.Uint32(b))
		}
		b = b[size:]
		if v > uint64(len(b)) {
			return 0, false // more than the bytes left: a lie
		}
		return int(v), true
	}
	var ok = true
	switch {
	case c <= 0x7f, c >= 0xe0, c == 0xc0, c == 0xc2, c == 0xc3: // fixint, nil, bool
	case c >= 0x80 && c <= 0x8f: // fixmap
		k = 2 * int(c&0x0f)
	case c >= 0x90 && c <= 0x9f: // fixarray
		k = int(c & 0x0f)
	case c >= 0xa0 && c <= 0xbf: // fixstr
		n = int(c & 0x1f)
	case c == 0xc4 || c == 0xd9: // bin8, str8
		n, ok = be(1)
	case c == 0xc5 || c == 0xda: // bin16, str16
		n, ok = be(2)
	case c == 0xc6 || c == 0xdb: // bin32, str32
		n, ok = be(4)
	case c == 0xc7: // ext8
		n, ok = be(1)
		n++
	case c == 0xc8: // ext16
		n, ok = be(2)
		n++
	case c == 0xc9: // ext32
		n, ok = be(4)
		n++
	case c == 0xca: // float32
		n = 4
	case c == 0xcb: // float64
		n = 8
	case c == 0xcc || c == 0xd0: // uint8, int8
		n = 1
	case c == 0xcd || c == 0xd1: // uint16, int16
		n = 2
	case c == 0xce || c == 0xd2: // uint32, int32
		n = 4
	case c == 0xcf || c == 0xd3: // uint64, int64
		n = 8
	case c >= 0xd4 && c <= 0xd8: // fixext 1, 2, 4, 8, 16 (+ type byte)
		n = 1 + 1<<(c-0xd4)
	case c == 0xdc: // array16
		k, ok = be(2)
	case c == 0xdd: // array32
		k, ok = be(4)
	case c == 0xde: // map16
		k, ok = be(2)
		k *= 2
	case c == 0xdf: // map32
		k, ok = be(4)
		k *= 2
	default: // 0xc1, never used
		return nil, errMsgpack
	}
	if !ok || n > len(b) || k > len(b) {
		return nil, errMsgpack
	}
	b = b[n:]
	for range k {
		var err error
		if b, err = skipMsgpack(b, depth+1); err != nil {
			return nil, err
		}
	}
	return b, nil
}
