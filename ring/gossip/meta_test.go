package gossip_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/chime-scheduler/chime/ring/gossip"
)

func TestMetaRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		meta gossip.Meta
	}{
		{"joining", gossip.Meta{HTTPAddr: "127.0.0.1:7070", BootID: 1, State: gossip.StateJoining, Proto: 1}},
		{"active", gossip.Meta{HTTPAddr: "[::1]:7070", BootID: 1<<64 - 1, State: gossip.StateActive, Proto: 255}},
		{"draining, empty addr", gossip.Meta{State: gossip.StateDraining}},
		{"largest addr", gossip.Meta{HTTPAddr: strings.Repeat("a", 466), BootID: 1<<64 - 1, State: gossip.StateActive, Proto: 255, Fresh: true, Genesis: 1<<64 - 1, TLS: true, Empty: true}},
		{"empty start", gossip.Meta{HTTPAddr: "127.0.0.1:7070", BootID: 9, State: gossip.StateActive, Proto: 1, Empty: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := gossip.EncodeMeta(tt.meta)
			if err != nil {
				t.Fatalf("EncodeMeta(%+v) = %v", tt.meta, err)
			}
			if len(b) > gossip.MetaMaxSize {
				t.Errorf("EncodeMeta = %d bytes, want <= %d", len(b), gossip.MetaMaxSize)
			}
			got, err := gossip.DecodeMeta(b)
			if err != nil || got != tt.meta {
				t.Errorf("DecodeMeta(EncodeMeta(%+v)) = %+v, %v", tt.meta, got, err)
			}
		})
	}
}

func TestEncodeMetaRejects(t *testing.T) {
	tests := []struct {
		name string
		meta gossip.Meta
	}{
		{"unknown state", gossip.Meta{HTTPAddr: "a:1"}},
		{"state out of range", gossip.Meta{State: 9}},
		{"too large", gossip.Meta{HTTPAddr: strings.Repeat("a", 487), BootID: 1<<64 - 1, State: gossip.StateActive, Proto: 255}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := gossip.EncodeMeta(tt.meta); !errors.Is(err, gossip.ErrMeta) {
				t.Errorf("EncodeMeta(%+v) = %v, want ErrMeta", tt.meta, err)
			}
		})
	}
}

func TestDecodeMetaRejects(t *testing.T) {
	good, err := gossip.EncodeMeta(gossip.Meta{HTTPAddr: "127.0.0.1:7070", BootID: 7, State: gossip.StateActive, Proto: 1})
	if err != nil {
		t.Fatal(err)
	}
	badState := bytes.Clone(good)
	badState[bytes.Index(badState, []byte{0xa1, 's'})+2] = 9 // "s": 2 -> 9
	tests := []struct {
		name string
		in   []byte
	}{
		{"nil", nil},
		{"version only", []byte{1}},
		{"unknown version", append([]byte{2}, good[1:]...)},
		{"version zero", append([]byte{0}, good[1:]...)},
		{"truncated", good[:len(good)-3]},
		{"trailing bytes", append(bytes.Clone(good), 0xc0)},
		{"not a map", []byte{1, 0x92, 0x01, 0x02}},
		{"wrong field type", []byte{1, 0x81, 0xa1, 'b', 0xa1, 'x'}},
		{"state unknown", []byte{1, 0x80}},
		{"state out of range", badState},
		{"huge declared string", []byte{1, 0x81, 0xa1, 'h', 0xdb, 0xff, 0xff, 0xff, 0xff}},
		{"too long", append([]byte{1}, make([]byte, 600)...)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if m, err := gossip.DecodeMeta(tt.in); !errors.Is(err, gossip.ErrMeta) {
				t.Errorf("DecodeMeta(%x) = %+v, %v; want ErrMeta", tt.in, m, err)
			}
		})
	}
}

func TestStrings(t *testing.T) {
	tests := []struct {
		got, want string
	}{
		{gossip.StateUnknown.String(), "unknown(0)"},
		{gossip.StateJoining.String(), "joining"},
		{gossip.StateActive.String(), "active"},
		{gossip.StateDraining.String(), "draining"},
		{gossip.State(7).String(), "unknown(7)"},
		{gossip.StatusAlive.String(), "alive"},
		{gossip.StatusSuspect.String(), "suspect"},
		{gossip.StatusDead.String(), "dead"},
		{gossip.StatusLeft.String(), "left"},
		{gossip.Status(0).String(), "status(0)"},
		{gossip.EventJoin.String(), "join"},
		{gossip.EventUpdate.String(), "update"},
		{gossip.EventLeave.String(), "leave"},
		{gossip.EventKind(0).String(), "kind(0)"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if tt.got != tt.want {
				t.Errorf("String() = %q, want %q", tt.got, tt.want)
			}
		})
	}
}
