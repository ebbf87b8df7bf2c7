package storage

import (
	"bytes"
	"testing"
)

// FuzzKeyCodec checks that keys round-trip, stay inside their slot's and
// task's ranges, and that decoding arbitrary bytes never panics and accepts
// only what the encoders produce.
func FuzzKeyCodec(f *testing.F) {
	f.Add(uint16(0), "a", int64(0), uint64(0), []byte{})
	f.Add(uint16(65535), "x:y.z~_-", int64(1<<63-1), uint64(1<<64-1), []byte("s\xff\xffT"))
	f.Add(uint16(300), "01JABCDEFGHJKMNPQRSTVWXYZ0", int64(1_700_000_000_000_000_000), uint64(100), []byte("s\x01\x2cH\x00\x00"))
	f.Add(uint16(1), "id", int64(5), uint64(7), []byte("s\x00\x01Did\x00\x00\x00\x00\x00\x00\x00\x05"))
	f.Add(uint16(2), "bad id", int64(-1), uint64(1), []byte("s\x00\x02Ha\x00b\x00\x00\x00\x00\x00\x00\x00\x00\x01"))

	f.Fuzz(func(t *testing.T, slot uint16, id string, wake int64, seq uint64, raw []byte) {
		// Arbitrary bytes: no panic, and anything accepted re-encodes to itself.
		if s, id, ok := decodeTaskKey(raw); ok {
			if got := appendTaskKey(nil, s, id); !bytes.Equal(got, raw) {
				t.Errorf("decodeTaskKey(%q) = %d, %q; re-encodes to %q", raw, s, id, got)
			}
		}
		if s, w, id, ok := decodeDueKey(raw); ok {
			if got := appendDueKey(nil, s, w, id); !bytes.Equal(got, raw) {
				t.Errorf("decodeDueKey(%q) = %d, %d, %q; re-encodes to %q", raw, s, w, id, got)
			}
		}
		if s, id, q, ok := decodeHistKey(raw); ok {
			if got := appendHistKey(nil, s, id, q); !bytes.Equal(got, raw) {
				t.Errorf("decodeHistKey(%q) = %d, %q, %d; re-encodes to %q", raw, s, id, q, got)
			}
		}

		if !ValidID(id) || wake < 0 {
			return
		}
		lo, hi := appendSlotPrefix(nil, slot), appendSlotEnd(nil, slot)
		inSlot := func(k []byte) bool { return bytes.Compare(k, lo) >= 0 && bytes.Compare(k, hi) < 0 }

		tk := appendTaskKey(nil, slot, id)
		if s, gotID, ok := decodeTaskKey(tk); !ok || s != slot || gotID != id {
			t.Errorf("decodeTaskKey(task key %d/%q) = %d, %q, %v", slot, id, s, gotID, ok)
		}
		dk := appendDueKey(nil, slot, wake, id)
		if s, w, gotID, ok := decodeDueKey(dk); !ok || s != slot || w != wake || gotID != id {
			t.Errorf("decodeDueKey(due key %d/%d/%q) = %d, %d, %q, %v", slot, wake, id, s, w, gotID, ok)
		}
		hk := appendHistKey(nil, slot, id, seq)
		if s, gotID, q, ok := decodeHistKey(hk); !ok || s != slot || q != seq || gotID != id {
			t.Errorf("decodeHistKey(hist key %d/%q/%d) = %d, %q, %d, %v", slot, id, seq, s, gotID, q, ok)
		}
		for _, k := range [][]byte{tk, dk, hk} {
			if !inSlot(k) {
				t.Errorf("key %q outside its slot range [%q, %q)", k, lo, hi)
			}
		}
		if bytes.Compare(hk, appendHistPrefix(nil, slot, id)) < 0 || bytes.Compare(hk, appendHistEnd(nil, slot, id)) >= 0 {
			t.Errorf("history key %q outside its task's history range", hk)
		}
		// Sections do not decode as each other.
		if _, _, ok := decodeTaskKey(dk); ok {
			t.Errorf("decodeTaskKey accepted due key %q", dk)
		}
		if _, _, _, ok := decodeDueKey(hk); ok {
			t.Errorf("decodeDueKey accepted history key %q", hk)
		}
		if _, _, _, ok := decodeHistKey(tk); ok {
			t.Errorf("decodeHistKey accepted task key %q", tk)
		}
		// Due keys order by wake within a slot.
		if wake < 1<<63-1 {
			if next := appendDueKey(nil, slot, wake+1, ""); bytes.Compare(dk, next) >= 0 {
				t.Errorf("due key %q not before wake+1 key %q", dk, next)
			}
		}
	})
}
