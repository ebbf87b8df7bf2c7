package gossip_test

import (
	"testing"

	"github.com/chime-scheduler/chime/ring/gossip"
)

var benchMeta = gossip.Meta{HTTPAddr: "127.0.0.1:7070", BootID: 1<<63 + 12345, State: gossip.StateActive, Proto: 1}

// BenchmarkMeta measures the codec run once per join/update callback.
func BenchmarkMeta(b *testing.B) {
	enc, err := gossip.EncodeMeta(benchMeta)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("op=encode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := gossip.EncodeMeta(benchMeta); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("op=decode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := gossip.DecodeMeta(enc); err != nil {
				b.Fatal(err)
			}
		}
	})
}
