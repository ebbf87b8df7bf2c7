package storage

import (
	"reflect"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

// FuzzDecodeSlotMeta: a stored slot meta decodes without panicking, and
// what decodes encodes back to the same meta.
func FuzzDecodeSlotMeta(f *testing.F) {
	for _, m := range []SlotMeta{{}, {Epoch: 3, Seq: 9, Role: 2, OwnEpoch: 4, OwnSeq: 1, Grantee: "n2"}, {Epoch: 2, Seq: 1, Role: 1, OwnEpoch: 3, OwnSeq: 1, Handed: "n4", HandedSeq: 1}} {
		b, err := msgpack.Marshal(&m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{0x81, 0xa1, 'g', 0xdb, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := DecodeSlotMeta(b)
		if err != nil {
			return
		}
		again, err := msgpack.Marshal(&m)
		if err != nil {
			t.Fatalf("re-encode %+v: %v", m, err)
		}
		back, err := DecodeSlotMeta(again)
		if err != nil || !reflect.DeepEqual(back, m) {
			t.Fatalf("round trip of %+v: %+v, %v", m, back, err)
		}
	})
}
