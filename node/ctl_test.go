package node

import (
	"reflect"
	"testing"

	"github.com/chime-scheduler/chime/ring/gossip"
)

func TestCtlEncoding(t *testing.T) {
	cases := []ctlBatch{
		{From: "n1"},
		{From: "a-node", Msgs: []ctlMsg{{K: kBeat, Slot: 16383, E: 7, Q: 1 << 40, T: -5, F: fGrant | fSynced}}},
		{From: "n2", Msgs: []ctlMsg{{K: kOffer, Slot: 1, E: 1, N: "n3"}, {K: kAck}, {K: kAnnounce, Slot: 300, T: 1764580000000000000, F: fOwner | fRepl}}},
	}
	for _, b := range cases {
		got, err := decodeCtl(encodeCtl(b))
		if err != nil {
			t.Fatalf("decode %+v: %v", b, err)
		}
		if len(b.Msgs) == 0 {
			b.Msgs = []ctlMsg{}
		}
		if !reflect.DeepEqual(got, b) {
			t.Errorf("round trip: got %+v, want %+v", got, b)
		}
	}
	enc := encodeCtl(cases[2])
	for i := range enc {
		if _, err := decodeCtl(enc[:i]); err == nil {
			t.Errorf("truncated at %d of %d: no error", i, len(enc))
		}
	}
	for _, bad := range [][]byte{nil, {2}, {1, 200}, append(append([]byte{}, enc...), 0)} {
		if _, err := decodeCtl(bad); err == nil {
			t.Errorf("decodeCtl(%v): no error", bad)
		}
	}
}

// TestCtlChunks: a batch over the receiver's body limit goes in several,
// each within it, the messages in order and none lost; 16384 slots' worth
// of heartbeats (a whole table at once) fit in two 1 MiB bodies.
func TestCtlChunks(t *testing.T) {
	var msgs []ctlMsg
	for s := range 16384 {
		msgs = append(msgs, ctlMsg{K: kBeat, Slot: uint16(s), E: 1 << 40, Q: 1 << 50, T: 1764580000000000000, F: fGrant, N: "node-with-a-long-name"})
	}
	for _, limit := range []int{maxCtlBody, 4096, 200} {
		chunks := encodeCtlChunks("n1", msgs, limit)
		var got []ctlMsg
		for i, c := range chunks {
			if len(c) > limit {
				t.Errorf("limit %d: chunk %d has %d bytes", limit, i, len(c))
			}
			b, err := decodeCtl(c)
			if err != nil || b.From != "n1" || len(b.Msgs) == 0 {
				t.Fatalf("limit %d: chunk %d: %+v, %v", limit, i, b, err)
			}
			got = append(got, b.Msgs...)
		}
		if !reflect.DeepEqual(got, msgs) {
			t.Errorf("limit %d: %d messages back of %d", limit, len(got), len(msgs))
		}
		if limit == maxCtlBody && len(chunks) > 2 {
			t.Errorf("a table's heartbeats took %d bodies of 1 MiB", len(chunks))
		}
	}
	if chunks := encodeCtlChunks("n1", nil, maxCtlBody); len(chunks) != 1 {
		t.Errorf("a ping is %d bodies", len(chunks))
	}
}

func FuzzDecodeCtl(f *testing.F) {
	f.Add(encodeCtl(ctlBatch{From: "n1", Msgs: []ctlMsg{{K: kBeat, Slot: 3, E: 2, Q: 9, T: 77, N: "x"}}}))
	f.Fuzz(func(t *testing.T, p []byte) {
		b, err := decodeCtl(p)
		if err != nil {
			return
		}
		if again, err := decodeCtl(encodeCtl(b)); err != nil || !reflect.DeepEqual(again, b) {
			t.Fatalf("re-encode of %+v: %+v, %v", b, again, err)
		}
	})
}

// TestMemberChangeList: how membership changes reach the ownership
// machine. A member that left counts as gone (its slots fail over once its
// leases ran out, if its drain did not hand them over), as does one that
// vanished from the membership while up.
func TestMemberChangeList(t *testing.T) {
	m := func(name string, st gossip.Status, boot uint64) gossip.Member {
		return gossip.Member{Name: name, Status: st, Meta: gossip.Meta{BootID: boot}}
	}
	alive, suspect, dead, left := gossip.StatusAlive, gossip.StatusSuspect, gossip.StatusDead, gossip.StatusLeft
	cases := []struct {
		name     string
		old, cur []gossip.Member
		want     []namedChange
	}{
		{"nothing", []gossip.Member{m("a", alive, 1)}, []gossip.Member{m("a", alive, 1)}, nil},
		{"join", nil, []gossip.Member{m("a", alive, 1)}, []namedChange{{"join", "a"}}},
		{"known but dead", nil, []gossip.Member{m("a", dead, 1)}, nil},
		{"suspect is up", []gossip.Member{m("a", alive, 1)}, []gossip.Member{m("a", suspect, 1)}, nil},
		{"dead", []gossip.Member{m("a", alive, 1)}, []gossip.Member{m("a", dead, 1)}, []namedChange{{"dead", "a"}}},
		{"suspect then dead", []gossip.Member{m("a", suspect, 1)}, []gossip.Member{m("a", dead, 1)}, []namedChange{{"dead", "a"}}},
		{"left", []gossip.Member{m("a", alive, 1)}, []gossip.Member{m("a", left, 1)}, []namedChange{{"left", "a"}}},
		{"dead, then forgotten", []gossip.Member{m("a", dead, 1)}, []gossip.Member{m("a", left, 1)}, []namedChange{{"left", "a"}}},
		{"left then dead", []gossip.Member{m("a", left, 1)}, []gossip.Member{m("a", dead, 1)}, nil},
		{"back", []gossip.Member{m("a", dead, 1)}, []gossip.Member{m("a", alive, 1)}, []namedChange{{"join", "a"}}},
		{"restart", []gossip.Member{m("a", dead, 1)}, []gossip.Member{m("a", alive, 2)}, []namedChange{{"restart", "a"}}},
		{"vanished", []gossip.Member{m("a", alive, 1), m("b", alive, 1)}, []gossip.Member{m("b", alive, 1)}, []namedChange{{"dead", "a"}}},
		{"vanished when gone", []gossip.Member{m("a", left, 1)}, nil, nil},
		{"in name order", []gossip.Member{m("c", alive, 1), m("b", alive, 1)},
			[]gossip.Member{m("c", left, 1), m("a", alive, 1)}, []namedChange{{"join", "a"}, {"dead", "b"}, {"left", "c"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := memberChangeList(tc.old, tc.cur); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}
