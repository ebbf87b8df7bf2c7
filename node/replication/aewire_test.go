package replication

import (
	"reflect"
	"testing"
)

func TestAEWire(t *testing.T) {
	reqs := []aeRequest{
		{From: "n1", Version: 1, Items: []Item{}},
		{From: "a-node", Version: 7, Items: []Item{
			{Slot: 16383, Epoch: 1 << 40, Seq: 3, Sum: 0xfedcba9876543210, Count: 1 << 33},
			{Slot: 0, Epoch: 2, Seq: 0, HasAlt: true, AltEpoch: 1},
		}},
	}
	for _, r := range reqs {
		enc := encodeAERequest(&r)
		got, err := decodeAERequest(enc)
		if err != nil || !reflect.DeepEqual(got, r) {
			t.Errorf("decodeAERequest(encodeAERequest(%+v)) = %+v, %v", r, got, err)
		}
		for i := range enc {
			if _, err := decodeAERequest(enc[:i]); err == nil {
				t.Errorf("request truncated at %d of %d: no error", i, len(enc))
			}
		}
		if _, err := decodeAERequest(append(enc, 0)); err == nil {
			t.Errorf("request with a trailing byte: no error")
		}
	}
	ans := aeAnswer{Results: []uint8{Match, Mismatch, NotComparable}, Epochs: []uint64{1, 1 << 50, 0}}
	enc := encodeAEAnswer(&ans)
	if got, err := decodeAEAnswer(enc); err != nil || !reflect.DeepEqual(got, ans) {
		t.Errorf("decodeAEAnswer(encodeAEAnswer(%+v)) = %+v, %v", ans, got, err)
	}
	for i := range enc {
		if _, err := decodeAEAnswer(enc[:i]); err == nil {
			t.Errorf("answer truncated at %d of %d: no error", i, len(enc))
		}
	}
	for _, bad := range [][]byte{nil, {2, 0}, {1, 1, 0, 0}, {1, 1, 4, 0}, {1, 200, 1}} {
		if _, err := decodeAEAnswer(bad); err == nil {
			t.Errorf("decodeAEAnswer(%v): no error", bad)
		}
	}
	// An unknown flag bit is malformed.
	bad := encodeAERequest(&aeRequest{From: "x", Items: []Item{{Slot: 1}}})
	bad[2+1+1+1+2] = 2
	if _, err := decodeAERequest(bad); err == nil {
		t.Errorf("decodeAERequest with flag 2: no error")
	}
}

func FuzzDecodeAE(f *testing.F) {
	f.Add(encodeAERequest(&aeRequest{From: "n1", Version: 1, Items: []Item{{Slot: 3, Epoch: 2, Seq: 9, HasAlt: true, AltEpoch: 1, Sum: 77, Count: 4}}}))
	f.Add(encodeAEAnswer(&aeAnswer{Results: []uint8{Match, Mismatch}, Epochs: []uint64{3, 4}}))
	f.Fuzz(func(t *testing.T, p []byte) {
		if r, err := decodeAERequest(p); err == nil {
			if again, err := decodeAERequest(encodeAERequest(&r)); err != nil || !reflect.DeepEqual(again, r) {
				t.Fatalf("re-encode of %+v: %+v, %v", r, again, err)
			}
		}
		if a, err := decodeAEAnswer(p); err == nil {
			if again, err := decodeAEAnswer(encodeAEAnswer(&a)); err != nil || !reflect.DeepEqual(again, a) {
				t.Fatalf("re-encode of %+v: %+v, %v", a, again, err)
			}
		}
	})
}
