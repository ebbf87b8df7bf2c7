package replication

import (
	"math"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

// repWireCases are requests and answers with every field at zero, small,
// at a format boundary and at its maximum.
func repWireCases() ([]Request, []Answer) {
	edge := []uint64{0, 1, 0x7f, 0x80, 0xff, 0x100, 0xffff, 0x10000, math.MaxUint32, math.MaxUint32 + 1, math.MaxUint64}
	reqs := []Request{
		{},
		{From: "n1", Msgs: []Msg{}},
		{From: "n1", Msgs: []Msg{{Slot: 7, Epoch: 1, Seq: 1}}},
		{From: string(make([]byte, 40)), Msgs: []Msg{{Slot: math.MaxUint16, Epoch: 3, Seq: 9, PrevEpoch: 2, PrevSeq: 8,
			Reset: true, Snap: true, Sent: 1_800_000_000_123_456_789, Grant: true, Owner: true, SnapEpoch: 4, SnapInc: 5, SnapTerm: 6, Final: true, Count: 2, Data: []byte{1, 2, 3}, Priors: []byte{1, 2, 0, 0, 0, 0, 0, 0, 0, 9}}}},
		{From: "n2", Msgs: []Msg{{Sent: -1, Count: -1}, {Sent: math.MinInt64, Count: math.MinInt32}, {Sent: math.MaxInt64, Count: math.MaxInt32}}},
	}
	for _, v := range edge {
		reqs = append(reqs, Request{From: "n3", Msgs: []Msg{{Slot: uint16(v), Epoch: v, Seq: v, PrevEpoch: v, PrevSeq: v, SnapEpoch: v, Sent: int64(v >> 1), Count: int(int32(v))}}})
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 50 {
		req := Request{From: "node-" + string(rune('a'+r.IntN(26))), Msgs: make([]Msg, r.IntN(40))}
		for i := range req.Msgs {
			m := &req.Msgs[i]
			m.Slot, m.Epoch, m.Seq = uint16(r.Uint32()), edge[r.IntN(len(edge))], r.Uint64()>>r.IntN(64)
			m.PrevEpoch, m.PrevSeq = r.Uint64()>>r.IntN(64), r.Uint64()>>r.IntN(64)
			m.Reset, m.Snap, m.Grant, m.Owner = r.IntN(2) == 0, r.IntN(2) == 0, r.IntN(2) == 0, r.IntN(2) == 0
			m.SnapInc, m.SnapTerm, m.Final = r.Uint64()>>r.IntN(64), r.Uint64()>>r.IntN(64), r.IntN(2) == 0
			m.Sent, m.SnapEpoch, m.Count = int64(r.Uint64()), r.Uint64()>>r.IntN(64), r.IntN(1000)
			if n := r.IntN(300); n > 0 {
				m.Data = make([]byte, n)
				for j := range m.Data {
					m.Data[j] = byte(r.Uint32())
				}
			}
			if n := r.IntN(100); n > 50 {
				m.Priors = make([]byte, n)
				for j := range m.Priors {
					m.Priors[j] = byte(r.Uint32())
				}
			}
		}
		reqs = append(reqs, req)
	}
	ans := []Answer{{}, {Results: []uint8{}, Epochs: []uint64{}}, {Results: []uint8{OK, Stale, Gap, Busy}, Epochs: edge[:4]}, {Results: []uint8{OK}, Epochs: edge[:1], Pressed: true}}
	big := Answer{Results: make([]uint8, 300), Epochs: make([]uint64, 300)}
	for i := range big.Epochs {
		big.Results[i], big.Epochs[i] = uint8(i%4), edge[i%len(edge)]
	}
	return reqs, append(ans, big)
}

// sameWire compares two values as msgpack does: a nil and an empty slice
// encode differently, but both mean none.
func sameWire(a, b any) bool {
	x, _ := msgpack.Marshal(a)
	y, _ := msgpack.Marshal(b)
	var u, v any
	return msgpack.Unmarshal(x, &u) == nil && msgpack.Unmarshal(y, &v) == nil && reflect.DeepEqual(norm(u), norm(v))
}

func norm(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			v[k] = norm(e)
		}
	case []any:
		if len(v) == 0 {
			return nil
		}
		for i := range v {
			v[i] = norm(v[i])
		}
	case []byte:
		if len(v) == 0 {
			return nil
		}
	}
	return v
}

// TestRepWireMsgpack: the hand-written codec and msgpack's reflection read
// each other both ways, so nodes of either version replicate to each other.
func TestRepWireMsgpack(t *testing.T) {
	reqs, answers := repWireCases()
	for i, req := range reqs {
		var viaLib Request
		if err := msgpack.Unmarshal(encodeRequest(&req), &viaLib); err != nil || !sameWire(viaLib, req) {
			t.Errorf("request %d: msgpack reads %+v, %v; want %+v", i, viaLib, err, req)
		}
		body, err := msgpack.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		got, err := decodeRequest(body)
		if err != nil || !sameWire(got, req) {
			t.Errorf("request %d from msgpack: %+v, %v; want %+v", i, got, err, req)
		}
		if mine := encodeRequest(&req); checkMsgpack(mine) != nil {
			t.Errorf("request %d: the guard refuses the encoding % x", i, mine)
		}
	}
	for i, a := range answers {
		var viaLib Answer
		if err := msgpack.Unmarshal(encodeAnswer(&a), &viaLib); err != nil || !sameWire(viaLib, a) {
			t.Errorf("answer %d: msgpack reads %+v, %v; want %+v", i, viaLib, err, a)
		}
		body, err := msgpack.Marshal(a)
		if err != nil {
			t.Fatal(err)
		}
		got, err := decodeAnswer(body)
		if err != nil || !sameWire(got, a) {
			t.Errorf("answer %d from msgpack: %+v, %v; want %+v", i, got, err, a)
		}
	}
}

// TestRepWireHostile: truncations, trailing bytes, wrong types, values out
// of their field's range and counts beyond a batch fail, never panic.
func TestRepWireHostile(t *testing.T) {
	reqs, answers := repWireCases()
	for i, req := range reqs {
		b := encodeRequest(&req)
		step := 1 // every cut of the hand-made cases, a sample of the random ones' (race builds are slow)
		if i >= 16 {
			step = 7
		}
		for n := 0; n < len(b); n += step {
			if _, err := decodeRequest(b[:n]); err == nil {
				t.Errorf("request %d truncated to %d of %d bytes decodes", i, n, len(b))
			}
		}
		if _, err := decodeRequest(append(b, 0)); err == nil {
			t.Errorf("request %d with a trailing byte decodes", i)
		}
	}
	for i, a := range answers {
		b := encodeAnswer(&a)
		for n := range len(b) {
			if _, err := decodeAnswer(b[:n]); err == nil {
				t.Errorf("answer %d truncated to %d of %d bytes decodes", i, n, len(b))
			}
		}
	}
	msg := func(k string, v any) []byte {
		b, _ := msgpack.Marshal(map[string]any{"f": "n1", "m": []any{map[string]any{k: v}}})
		return b
	}
	tooMany := mpArray(mpStr(mpStr(mpStr(mpMap(nil, 2), "f"), "n1"), "m"), maxBatch+1)
	for range maxBatch + 1 {
		tooMany = mpMap(tooMany, 0)
	}
	for name, b := range map[string][]byte{
		"slot over 65535":      msg("s", 70000),
		"negative epoch":       msg("e", -1),
		"float seq":            msg("q", 1.5),
		"count over int32":     msg("n", int64(math.MaxInt32)+1),
		"sent over int64":      msg("t", uint64(math.MaxUint64)),
		"string for a bool":    msg("r", "yes"),
		"number for the data":  msg("d", 7),
		"array for the sender": func() []byte { b, _ := msgpack.Marshal(map[string]any{"f": []int{1}}); return b }(),
		"not a map":            {0x91, 0xc0},
		"4 billion messages":   {0x82, 0xa1, 'f', 0xa1, 'x', 0xa1, 'm', 0xdd, 0xff, 0xff, 0xff, 0xff},
		"a batch and one more": tooMany,
	} {
		if r, err := decodeRequest(b); err == nil {
			t.Errorf("%s: decodes to %+v", name, r)
		}
	}
	// Keys it does not know are skipped, values and all.
	b, _ := msgpack.Marshal(map[string]any{"zz": []any{1, map[string]any{"a": "b"}}, "f": "n1", "m": []any{map[string]any{"s": 5, "new": 1.5}}})
	if r, err := decodeRequest(b); err != nil || r.From != "n1" || len(r.Msgs) != 1 || r.Msgs[0].Slot != 5 {
		t.Errorf("unknown keys: %+v, %v", r, err)
	}
}

// FuzzRepWire: whatever decodes encodes back to the same value, and
// msgpack's reflection reads that encoding as the same value too.
func FuzzRepWire(f *testing.F) {
	reqs, answers := repWireCases()
	for _, r := range reqs[:8] {
		f.Add(encodeRequest(&r))
	}
	for _, a := range answers {
		f.Add(encodeAnswer(&a))
	}
	f.Fuzz(func(t *testing.T, p []byte) {
		if r, err := decodeRequest(p); err == nil {
			again, err := decodeRequest(encodeRequest(&r))
			if err != nil || !reflect.DeepEqual(again, r) {
				t.Fatalf("re-encode of %+v: %+v, %v", r, again, err)
			}
			var viaLib Request
			if err := msgpack.Unmarshal(encodeRequest(&r), &viaLib); err != nil || !sameWire(viaLib, r) {
				t.Fatalf("msgpack reads %+v, %v; want %+v", viaLib, err, r)
			}
		}
		if a, err := decodeAnswer(p); err == nil {
			again, err := decodeAnswer(encodeAnswer(&a))
			if err != nil || !reflect.DeepEqual(again, a) {
				t.Fatalf("re-encode of %+v: %+v, %v", a, again, err)
			}
		}
	})
}
