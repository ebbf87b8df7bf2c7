package node

import (
	"reflect"
	"testing"
)

func TestCtlEncoding(t *testing.T) {
	cases := []ctlBatch{
		{From: "n1"},
		{From: "a-node", Msgs: []ctlMsg{{K: kBeat, Slot: 16383, E: 7, Q: 1 << 40, T: -5, F: fGrant | fSynced}}},
		{From: "n2", Msgs: []ctlMsg{{K: kOffer, Slot: 1, E: 1, N: "n3"}, {K: kAck}, {K: kAnnounce, Slot: 300, T: 1764580000000000000, F: fOwner | fRepl}}},
	}
	for _, b := range cases {
		got, err := decodeCtl(encodeCtl(b))
		if err != nil {
			t.Fatalf("decode %+v: %v", b, err)
		}
		if len(b.Msgs) == 0 {
			b.Msgs = []ctlMsg{}
		}
		if !reflect.DeepEqual(got, b) {
			t.Errorf("round trip: got %+v, want %+v", got, b)
		}
	}
	enc := encodeCtl(cases[2])
	for i := range enc {
		if _, err := decodeCtl(enc[:i]); err == nil {
			t.Errorf("truncated at %d of %d: no error", i, len(enc))
		}
	}
	for _, bad := range [][]byte{nil, {2}, {1, 200}, append(append([]byte{}, enc...), 0)} {
		if _, err := decodeCtl(bad); err == nil {
			t.Errorf("decodeCtl(%v): no error", bad)
		}
	}
}

func FuzzDecodeCtl(f *testing.F) {
	f.Add(encodeCtl(ctlBatch{From: "n1", Msgs: []ctlMsg{{K: kBeat, Slot: 3, E: 2, Q: 9, T: 77, N: "x"}}}))
	f.Fuzz(func(t *testing.T, p []byte) {
		b, err := decodeCtl(p)
		if err != nil {
			return
		}
		if again, err := decodeCtl(encodeCtl(b)); err != nil || !reflect.DeepEqual(again, b) {
			t.Fatalf("re-encode of %+v: %+v, %v", b, again, err)
		}
	})
}
