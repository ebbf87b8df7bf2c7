package replication

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/chime-scheduler/chime/storage"
	"github.com/vmihailenco/msgpack/v5"
)

// FuzzReplicate: a replication request as a peer sends it, decoded and
// applied to a store in memory, as the writer does for Receive: none may
// panic, and ops that apply must commit.
func FuzzReplicate(f *testing.F) {
	st, err := storage.Open(storage.Options{InMemory: true})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { st.Close() })
	ok, _ := msgpack.Marshal(Request{From: "n1", Msgs: []Msg{{Slot: 7, Epoch: 1, Seq: 1, Count: 0}}})
	f.Add(ok)
	bad, _ := msgpack.Marshal(Request{From: "x", Msgs: []Msg{{Slot: 7, Epoch: 1 << 40, Seq: 1, Reset: true, Count: -1}}})
	f.Add(bad)
	f.Add([]byte{0x82, 0xa1, 'f', 0xa1, 'x', 0xa1, 'm', 0xdd, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, body []byte) {
		if checkMsgpack(body) != nil {
			return
		}
		req, err := decodeRequest(body)
		if err != nil {
			return
		}
		for _, m := range req.Msgs {
			b := st.NewBatch()
			if err := b.ApplySlotOps(storage.SlotOps{Slot: m.Slot, Count: m.Count, Data: m.Data}); err != nil {
				b.Close()
				continue
			}
			if err := b.Commit(false); err != nil {
				t.Fatalf("accepted ops did not commit: %v", err)
			}
		}
	})
}

// TestCheckMsgpack: well-formed values pass, whatever msgpack encodes;
// lengths beyond the bytes left, truncations, trailing bytes and deep
// nesting fail.
func TestCheckMsgpack(t *testing.T) {
	for _, v := range []any{
		nil, true, 1, -1, 1 << 40, -(1 << 40), 1.5, float32(2.5), "s", strings.Repeat("x", 70000), []byte("b"),
		map[string]any{"a": []any{1, "x", nil, map[string]int{"k": 3}}}, make([]int, 70000),
		Request{From: "n1", Msgs: []Msg{{Slot: 7, Epoch: 1, Count: 2, Data: []byte{1, 2, 3}}}},
		Answer{Results: []uint8{1, 2}, Epochs: []uint64{1, 1 << 50}},
		time.Unix(1_800_000_000, 5),
	} {
		b, err := msgpack.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if err := checkMsgpack(b); err != nil {
			t.Errorf("%T %.40v: %v", v, v, err)
		}
		for i := range len(b) {
			if checkMsgpack(b[:i]) == nil {
				t.Errorf("%T truncated to %d of %d bytes passes", v, i, len(b))
			}
		}
		if checkMsgpack(append(b, 0)) == nil {
			t.Errorf("%T with a trailing byte passes", v)
		}
	}
	for _, b := range [][]byte{
		{0x82, 0xa1, 'f', 0xa1, 'x', 0xa1, 'm', 0xdd, 0xff, 0xff, 0xff, 0xff}, // 4 billion messages
		{0xdf, 0x7f, 0xff, 0xff, 0xff},                                        // 2 billion map entries
		{0xc6, 0xff, 0xff, 0xff, 0xff, 1},                                     // a 4 GiB bin
		{0xc1},
		append(bytes.Repeat([]byte{0x91}, 40), 0xc0), // nested 40 deep
	} {
		if checkMsgpack(b) == nil {
			t.Errorf("% x passes", b)
		}
	}
}
