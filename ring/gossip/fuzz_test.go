package gossip_test

import (
	"errors"
	"testing"

	"github.com/chime-scheduler/chime/ring/gossip"
)

// FuzzDecodeMeta: DecodeMeta never panics, fails only with ErrMeta, and
// whatever it accepts re-encodes to a Meta that decodes the same.
func FuzzDecodeMeta(f *testing.F) {
	for _, m := range []gossip.Meta{
		{HTTPAddr: "127.0.0.1:7070", BootID: 1, State: gossip.StateJoining, Proto: 1},
		{HTTPAddr: "[::1]:7071", BootID: 1<<64 - 1, State: gossip.StateDraining, Proto: 255},
	} {
		b, err := gossip.EncodeMeta(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{})
	f.Add([]byte{1})
	f.Add([]byte{2, 0x80})
	f.Add([]byte{1, 0x81, 0xa1, 'h', 0xdb, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := gossip.DecodeMeta(b)
		if err != nil {
			if !errors.Is(err, gossip.ErrMeta) {
				t.Fatalf("DecodeMeta(%x) = %v, want an ErrMeta", b, err)
			}
			return
		}
		if !m.State.Valid() {
			t.Fatalf("DecodeMeta(%x) accepted state %v", b, m.State)
		}
		enc, err := gossip.EncodeMeta(m)
		if err != nil {
			t.Fatalf("EncodeMeta(DecodeMeta(%x) = %+v) = %v", b, m, err)
		}
		if m2, err := gossip.DecodeMeta(enc); err != nil || m2 != m {
			t.Fatalf("round trip of %+v = %+v, %v", m, m2, err)
		}
	})
}
