package wheel

import (
	"encoding/binary"
	"testing"
	"time"
)

// Script encoding, shared by FuzzWheel and the quick test:
//
//	byte 0: tick = ticks[b%4]; slots = slotChoices[(b>>2)%5]
//	byte 1: levels = b%4 + 1
//	then 4 bytes per op:
//	  byte 0: kind by b%8: 0-3 add, 4 cancel, 5 advance forward, 6 advance by
//	          a signed delta (may go back), 7 advance to Next()
//	  byte 1: id = "t" + (b%24); b>>5 picks the delta's scale, 2^(6×(b>>5)) ns
//	  bytes 2-3: signed 16-bit delta in units of that scale
//
// Deltas reach about ±2^57 ns (4.5 years), enough to overflow every shape
// tested, yet far inside time.Duration's range.
var (
	tickChoices = []time.Duration{1, 3, time.Millisecond, 10 * time.Millisecond}
	slotChoices = []int{2, 4, 8, 16, 256}
)

// maxScriptOps keeps one fuzz input cheap.
const maxScriptOps = 2000

func decodeScript(data []byte) (geometry, []op) {
	var g0, g1 byte
	if len(data) > 0 {
		g0 = data[0]
	}
	if len(data) > 1 {
		g1 = data[1]
	}
	g := geometry{
		tick:   tickChoices[g0%4],
		slots:  slotChoices[(g0>>2)%5],
		levels: int(g1%4) + 1,
	}
	if len(data) < 2 {
		return g, nil
	}
	return g, decodeOps(data[2:])
}

func decodeOps(data []byte) []op {
	var ops []op
	for len(data) >= 4 && len(ops) < maxScriptOps {
		b := data[:4]
		data = data[4:]
		id := "t" + string(rune('a'+b[1]%24))
		delta := time.Duration(int16(binary.LittleEndian.Uint16(b[2:]))) << (6 * (b[1] >> 5))
		switch b[0] % 8 {
		case 0, 1, 2, 3:
			ops = append(ops, op{kind: opAdd, id: id, delta: delta})
		case 4:
			ops = append(ops, op{kind: opCancel, id: id})
		case 5:
			ops = append(ops, op{kind: opAdvance, delta: max(delta, -delta)})
		case 6:
			ops = append(ops, op{kind: opAdvance, delta: delta})
		case 7:
			ops = append(ops, op{kind: opAdvanceNext})
		}
	}
	return ops
}

// FuzzWheel decodes a random script of Add/Cancel/Advance operations and
// checks that the wheel and the naive oracle agree at every step (see
// compareScript). Run longer with: go test -run='^$' -fuzz=FuzzWheel ./wheel
func FuzzWheel(f *testing.F) {
	le := func(v int16) (byte, byte) {
		u := uint16(v)
		return byte(u), byte(u >> 8)
	}
	enc := func(g0, g1 byte, ops ...[4]byte) []byte {
		out := []byte{g0, g1}
		for _, o := range ops {
			out = append(out, o[:]...)
		}
		return out
	}
	opb := func(kind, idScale byte, delta int16) [4]byte {
		lo, hi := le(delta)
		return [4]byte{kind, idScale, lo, hi}
	}
	f.Add([]byte{})
	// Same due, ids in reverse: order by id.
	f.Add(enc(0, 0, opb(0, 1, 100), opb(0, 0, 100), opb(5, 0, 100)))
	// Production shape (10ms, 256 slots, 4 levels); dues across levels.
	f.Add(enc(3|4<<2, 3,
		opb(0, 0|2<<5, 1000), opb(0, 1|3<<5, 1000), opb(0, 2|4<<5, 1000), opb(0, 3|6<<5, 30000),
		opb(7, 0, 0), opb(7, 0, 0), opb(7, 0, 0), opb(7, 0, 0), opb(7, 0, 0), opb(7, 0, 0)))
	// Past due, cancel, replace, backwards advance.
	f.Add(enc(1|1<<2, 1,
		opb(0, 0, -50), opb(0, 1, 70), opb(0, 1, 20), opb(4, 0, 0), opb(6, 0, -10), opb(5, 0, 30), opb(7, 0, 0)))
	// Degenerate 2×1 wheel with far dues: overflow re-examination.
	f.Add(enc(0, 0,
		opb(0, 0|7<<5, 5), opb(0, 1|7<<5, 3), opb(0, 2|5<<5, -2), opb(7, 0, 0), opb(7, 0, 0), opb(5, 7<<5, 6), opb(7, 0, 0)))
	f.Fuzz(func(t *testing.T, data []byte) {
		g, ops := decodeScript(data)
		runScript(t, g, ops)
	})
}
