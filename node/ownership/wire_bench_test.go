package ownership

import (
	"bytes"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/chime-scheduler/chime/slots"
)

// mpBatch is the hot-path batch (heartbeats and acks) as msgpack would
// carry it: Msg is an interface, which msgpack cannot decode, so it holds
// one slice per kind. It is measured with field names (msgpack) and with
// structs as arrays (msgpack-array), reflection's most compact form.
type mpBatch struct {
	From  string
	Beats []Beat
	Acks  []Ack
}

// hotBatch is what one node sends a peer in one step of a steady cluster:
// n heartbeats and n acks.
func hotBatch(n int) Batch {
	b := Batch{From: "node-1"}
	sent := time.Unix(0, 1764580000123456789)
	for s := range n {
		b.Msgs = append(b.Msgs, &Beat{Slot: slots.Slot(s), Epoch: 12, Seq: 123456, Sent: sent, Grant: true})
		b.Msgs = append(b.Msgs, &Ack{Slot: slots.Slot(s + n), Epoch: 9, Seq: 654321, Sent: sent, Grant: true, Synced: true})
	}
	return b
}

// BenchmarkCodec encodes and decodes a batch of 500 heartbeats and 500
// acks: the hand-written codec against msgpack (go test -bench Codec
// -benchmem ./node/ownership).
func BenchmarkCodec(b *testing.B) {
	const n = 500
	hot := hotBatch(n)
	mp := mpBatch{From: hot.From}
	for _, m := range hot.Msgs {
		switch m := m.(type) {
		case *Beat:
			mp.Beats = append(mp.Beats, *m)
		case *Ack:
			mp.Acks = append(mp.Acks, *m)
		}
	}
	b.Run("hand", func(b *testing.B) {
		for b.Loop() {
			p := hot.Encode()
			if _, err := DecodeBatch(p); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(p)))
		}
	})
	for _, arrays := range []bool{false, true} {
		name := "msgpack"
		if arrays {
			name = "msgpack-array"
		}
		b.Run(name, func(b *testing.B) {
			var buf bytes.Buffer
			enc := msgpack.NewEncoder(&buf)
			enc.UseArrayEncodedStructs(arrays)
			for b.Loop() {
				buf.Reset()
				if err := enc.Encode(&mp); err != nil {
					b.Fatal(err)
				}
				var out mpBatch
				if err := msgpack.Unmarshal(buf.Bytes(), &out); err != nil {
					b.Fatal(err)
				}
				b.SetBytes(int64(buf.Len()))
			}
		})
	}
}
