package storage

import (
	"encoding/hex"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

// TestDecodeSlotMeta: metas written before a field existed decode with it
// empty (the bytes are what PutSlotMeta wrote before Handed was added),
// new metas round-trip, and a node name over 1 KiB is refused.
func TestDecodeSlotMeta(t *testing.T) {
	long := strings.Repeat("n", maxMetaName+1)
	for _, tc := range []struct {
		name string
		hex  string   // the stored value; "" to encode want
		want SlotMeta // as decoded
		bad  bool
	}{
		{name: "before handed: follower",
			hex:  "85a165cf0000000000000002a173cf0000000000000001a172cc01a26d65cf0000000000000003a26d71cf0000000000000001",
			want: SlotMeta{Epoch: 2, Seq: 1, Role: 1, OwnEpoch: 3, OwnSeq: 1}},
		{name: "before handed: owner with grantee",
			hex:  "86a165cf0000000000000004a173cf0000000000000011a172cc02a26d65cf0000000000000004a26d71cf0000000000000011a167a26e32",
			want: SlotMeta{Epoch: 4, Seq: 17, Role: 2, OwnEpoch: 4, OwnSeq: 17, Grantee: "n2"}},
		{name: "handed", want: SlotMeta{Epoch: 2, Seq: 1, Role: 1, OwnEpoch: 3, OwnSeq: 1, Handed: "n4", HandedSeq: 1}},
		{name: "empty", want: SlotMeta{}},
		{name: "names at the bound", want: SlotMeta{Grantee: long[1:], Handed: long[1:], HandedTook: long[1:]}},
		{name: "took", want: SlotMeta{Epoch: 1, Seq: 3, OwnEpoch: 2, HandedTook: "n3"}},
		{name: "final copy", want: SlotMeta{Epoch: 1, Seq: 3, Role: 1, OwnEpoch: 2, FinalOf: 1}},
		{name: "taker over the bound", want: SlotMeta{OwnEpoch: 2, HandedTook: long}, bad: true},
		{name: "grantee over the bound", want: SlotMeta{Grantee: long}, bad: true},
		{name: "handed over the bound", want: SlotMeta{Role: 1, OwnEpoch: 3, Handed: long}, bad: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b []byte
			var err error
			if tc.hex != "" {
				b, err = hex.DecodeString(tc.hex)
			} else {
				b, err = msgpack.Marshal(&tc.want)
			}
			if err != nil {
				t.Fatal(err)
			}
			got, err := DecodeSlotMeta(b)
			switch {
			case tc.bad && err == nil:
				t.Errorf("decoded %d bytes to a meta, want an error", len(b))
			case tc.bad:
			case err != nil:
				t.Errorf("decode: %v", err)
			case got != tc.want:
				t.Errorf("decoded %+v, want %+v", got, tc.want)
			}
		})
	}
}
