package storage

import "encoding/binary"

// appendSlotMeta appends m encoded exactly as msgpack.Marshal(&m) encodes
// it (a map of the non-empty fields, by their tags, in field order; every
// uint64 in 9 bytes and the uint8 in 2, as the default encoder writes
// them, a true bool in 1), without reflection: the writer persists a slot meta at every
// state change of every slot. TestAppendSlotMetaIsMsgpack holds the two
// equal.
func appendSlotMeta(dst []byte, m *SlotMeta) []byte {
	n := 3 // e, s, r
	for _, v := range []uint64{m.OwnEpoch, m.OwnSeq, m.HandedSeq} {
		if v != 0 {
			n++
		}
	}
	for _, v := range []string{m.Grantee, m.Handed, m.HandedDropped} {
		if v != "" {
			n++
		}
	}
	if m.WasOwner {
		n++
	}
	if m.HandedBare {
		n++
	}
	if m.HandedTook != "" {
		n++
	}
	if m.FinalOf != 0 {
		n++
	}
	dst = append(dst, 0x80|byte(n)) // fixmap: at most 13 fields
	dst = appendMetaUint64(dst, "e", m.Epoch)
	dst = appendMetaUint64(dst, "s", m.Seq)
	dst = append(appendMetaStr(dst, "r"), 0xcc, m.Role)
	if m.OwnEpoch != 0 {
		dst = appendMetaUint64(dst, "me", m.OwnEpoch)
	}
	if m.OwnSeq != 0 {
		dst = appendMetaUint64(dst, "mq", m.OwnSeq)
	}
	if m.Grantee != "" {
		dst = appendMetaStr(appendMetaStr(dst, "g"), m.Grantee)
	}
	if m.Handed != "" {
		dst = appendMetaStr(appendMetaStr(dst, "h"), m.Handed)
	}
	if m.HandedSeq != 0 {
		dst = appendMetaUint64(dst, "hq", m.HandedSeq)
	}
	if m.HandedDropped != "" {
		dst = appendMetaStr(appendMetaStr(dst, "hd"), m.HandedDropped)
	}
	if m.WasOwner {
		dst = append(appendMetaStr(dst, "w"), 0xc3)
	}
	if m.HandedBare {
		dst = append(appendMetaStr(dst, "hb"), 0xc3)
	}
	if m.HandedTook != "" {
		dst = appendMetaStr(appendMetaStr(dst, "ht"), m.HandedTook)
	}
	if m.FinalOf != 0 {
		dst = appendMetaUint64(dst, "fo", m.FinalOf)
	}
	return dst
}

// appendMetaUint64 appends the key and v as msgpack's uint 64.
func appendMetaUint64(dst []byte, key string, v uint64) []byte {
	return binary.BigEndian.AppendUint64(append(appendMetaStr(dst, key), 0xcf), v)
}

// appendMetaStr appends s as msgpack's shortest str.
func appendMetaStr(dst []byte, s string) []byte {
	switch l := len(s); {
	case l < 32:
		dst = append(dst, 0xa0|byte(l))
	case l <= 0xff:
		dst = append(dst, 0xd9, byte(l))
	case l <= 0xffff:
		dst = binary.BigEndian.AppendUint16(append(dst, 0xda), uint16(l))
	default:
		dst = binary.BigEndian.AppendUint32(append(dst, 0xdb), uint32(l))
	}
	return append(dst, s...)
}
