package storage

import (
	"bytes"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

// TestAppendSlotMetaIsMsgpack: the hand-written encoding of a slot meta is
// byte for byte what msgpack.Marshal writes, for empty, boundary and
// random values, and decodes back to the meta.
func TestAppendSlotMetaIsMsgpack(t *testing.T) {
	if n := reflect.TypeFor[SlotMeta]().NumField(); n != 13 {
		t.Fatalf("SlotMeta has %d fields, appendSlotMeta encodes 13: teach it the new ones (and this test)", n)
	}
	r := rand.New(rand.NewPCG(1, 2))
	u64s := []uint64{0, 1, 127, 128, 255, 256, 65535, 65536, math.MaxUint32, math.MaxUint32 + 1, math.MaxUint64}
	strs := []string{"", "n", "n2", strings.Repeat("a", 31), strings.Repeat("b", 32), strings.Repeat("c", 255),
		strings.Repeat("d", 256), strings.Repeat("e", 65535), strings.Repeat("f", 65536), "n1,n2,n3"}
	u := func() uint64 {
		if r.IntN(2) == 0 {
			return u64s[r.IntN(len(u64s))]
		}
		return r.Uint64() >> r.IntN(64)
	}
	s := func() string { return strs[r.IntN(len(strs))] }
	metas := []SlotMeta{{}, {Epoch: 2, Seq: 1, Role: 1, OwnEpoch: 3, OwnSeq: 1, Handed: "n4", HandedSeq: 1},
		{Epoch: math.MaxUint64, Seq: math.MaxUint64, Role: 255, OwnEpoch: math.MaxUint64, OwnSeq: math.MaxUint64,
			Grantee: "g", Handed: "h", HandedSeq: math.MaxUint64, HandedDropped: "x,y", WasOwner: true, HandedBare: true,
			HandedTook: "t", FinalOf: math.MaxUint64},
		{Role: 1, OwnEpoch: 2, WasOwner: true}}
	for range 5000 {
		metas = append(metas, SlotMeta{Epoch: u(), Seq: u(), Role: uint8(r.IntN(256)), OwnEpoch: u(), OwnSeq: u(),
			Grantee: s(), Handed: s(), HandedSeq: u(), HandedDropped: s(), WasOwner: r.IntN(2) == 0, HandedBare: r.IntN(2) == 0,
			HandedTook: s(), FinalOf: u()})
	}
	for _, m := range metas {
		want, err := msgpack.Marshal(&m)
		if err != nil {
			t.Fatal(err)
		}
		got := appendSlotMeta([]byte("prefix"), &m)
		if !bytes.Equal(got[6:], want) || string(got[:6]) != "prefix" {
			t.Fatalf("%+v: encoded %x, msgpack %x", m, got, want)
		}
		var back SlotMeta
		if err := msgpack.Unmarshal(got[6:], &back); err != nil || back != m {
			t.Fatalf("%+v: decoded %+v, %v", m, back, err)
		}
	}
}

func BenchmarkPutSlotMeta(b *testing.B) {
	m := SlotMeta{Epoch: 4, Seq: 17, Role: 2, OwnEpoch: 4, OwnSeq: 17, Grantee: "n2"}
	b.Run("msgpack", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := msgpack.Marshal(&m); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("append", func(b *testing.B) {
		b.ReportAllocs()
		var buf [96]byte
		for b.Loop() {
			_ = appendSlotMeta(buf[:0], &m)
		}
	})
}
