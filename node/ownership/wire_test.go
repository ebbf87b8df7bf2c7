package ownership

import (
	"encoding/binary"
	"reflect"
	"testing"
	"time"

	"github.com/chime-scheduler/chime/ring/gossip"
	"github.com/chime-scheduler/chime/slots"
)

// at is a decoded time (time.Unix), comparable with reflect.DeepEqual.
func at(ns int64) time.Time { return time.Unix(0, ns) }

// everyKind is one message of each kind, every field and flag set.
func everyKind() []Msg {
	return []Msg{
		&Beat{Slot: 16383, Epoch: MaxEpoch, Seq: 1 << 40, Sent: at(-5), Grant: true, Release: "n3", Inc: 1<<64 - 1, Term: 1<<64 - 1},
		&Ack{Slot: 2, Epoch: 7, Seq: 9, Sent: at(1764580000000000000), Grant: true, Synced: true, Released: "n2", Inc: 1 << 63, Gen: 12, Term: 3},
		&SnapshotRequest{Slot: 3, Epoch: 0},
		&NoReplica{Slot: 4, Epoch: 5, Census: true},
		&Offer{Slot: 1, Epoch: 1, Seq: 3, WasOwner: true, Grantee: "n3"},
		&Offer{Slot: 2, Epoch: 4, Seq: 9, Census: true, Copy: true},
		&Handover{Slot: 5, Epoch: 6, Seq: 7, Grant: true, Dropped: []string{"n4", "n5"}},
		&Announce{Slot: 300, Epoch: 2, Replicated: true},
		&Reject{Slot: 301, Epoch: 3},
		&PairBeat{Sent: at(-1764580000000000000), Inc: 1<<64 - 1},
		&PairAck{Sent: at(1764580000000000001), Inc: 77, Gen: 1 << 40, Promise: true, Floors: []slots.Floor{{Taker: "n2", Term: 2}, {Taker: "n4", Term: 1 << 40}}},
		&AskOffer{Slot: 9, Epoch: 11},
		&Consent{Ask: true, Owner: "n1", Inc: 1<<64 - 1, Term: 5},
		&Consent{Owner: "n3", Inc: 1, Term: 1},
		&Consent{Owner: "n3", Inc: 1, Term: 1, Quiet: 4 * time.Second},
		&GenesisAsk{Sum: 1<<64 - 1},
		&GenesisTable{Sum: 0x0102030405060708, Names: []string{"n1", "n2", "node-3"}},
	}
}

func TestCtlEncoding(t *testing.T) {
	cases := []Batch{
		{From: "n1", Msgs: []Msg{}},
		{From: "a-node", Msgs: []Msg{&Beat{Slot: 7, Epoch: 1, Sent: at(0)}}},
		{From: "p", Msgs: []Msg{&PairBeat{Sent: at(0)}, &PairAck{Sent: at(0)}, &Ack{Sent: at(0)}}},
		{From: "h", Msgs: []Msg{&Handover{Slot: 1, Epoch: 2, Seq: 3}, &Handover{Slot: 4, Dropped: []string{"x"}}, &Handover{Slot: 5}}},
		{From: "n2", Msgs: everyKind()},
	}
	for _, b := range cases {
		got, err := DecodeBatch(b.Encode())
		if err != nil || !reflect.DeepEqual(got, b) {
			t.Errorf("round trip of %+v: %+v, %v", b, got, err)
		}
	}
	for _, m := range everyKind() {
		if n := len(m.appendTo([]byte{m.kind()})); n > m.size() {
			t.Errorf("%T: %d bytes, size %d", m, n, m.size())
		}
	}
	enc := cases[4].Encode()
	for i := range enc {
		if _, err := DecodeBatch(enc[:i]); err == nil {
			t.Errorf("truncated at %d: no error", i)
		}
	}
	bad := map[string][]byte{
		"empty":                   {},
		"version 1":               {1, 0, 0},
		"trailing":                append(Batch{From: "a"}.Encode(), 0),
		"slot 16384":              Batch{From: "a", Msgs: []Msg{&Reject{Slot: 16384}}}.Encode(),
		"epoch too large":         Batch{From: "a", Msgs: []Msg{&Reject{Epoch: MaxEpoch + 1}}}.Encode(),
		"unknown kind":            {wireVersion, 1, 'a', 1, 99, 0, 0, 0},
		"unknown flag":            {wireVersion, 1, 'a', 1, kindAnnounce, 0, 1, 2, 1},
		"unknown offer flag":      {wireVersion, 1, 'a', 1, kindOffer, 0, 1, 8, 1, 1, 0},
		"unknown no-replica flag": {wireVersion, 1, 'a', 1, kindNoReplica, 0, 1, 2, 1},
		"count too large":         {wireVersion, 1, 'a', 2, kindReject, 0, 1, 1},
		"version 2":               {2, 1, 'a', 1, kindReject, 0, 1, 1},
		"version 4":               {4, 1, 'a', 1, kindReject, 0, 1, 1},
		"ask offer slot":          {wireVersion, 1, 'a', 1, kindAskOffer, 0x40, 0, 1},
		// The smallest message: one more than fits.
		"pair count too large": {wireVersion, 1, 'a', 2, kindPairBeat, 0, 0},
		"pair beat truncated":  {wireVersion, 1, 'a', 1, kindPairBeat, 0x80, 0x01},
		"pair beat bad inc":    {wireVersion, 1, 'a', 1, kindPairBeat, 0, 0x80},
		"pair beat trailing":   append(Batch{From: "a", Msgs: []Msg{&PairBeat{Sent: at(1), Inc: 2}}}.Encode(), 0),
		"pair ack truncated":   {wireVersion, 1, 'a', 1, kindPairAck, 0, 0},
		"pair ack bad gen":     {wireVersion, 1, 'a', 1, kindPairAck, 0, 0, 0x80},
		"pair ack trailing":    append(Batch{From: "a", Msgs: []Msg{&PairAck{Sent: at(1), Inc: 2, Gen: 3}}}.Encode(), 7),
		"pair ack bad time":    {wireVersion, 1, 'a', 1, kindPairAck, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0},
		"name too long":        binary.AppendUvarint([]byte{wireVersion}, maxName+1),
		// kind slot flags epoch seq count names
		"handover drops none":      {wireVersion, 1, 'a', 1, kindHandover, 0, 5, handoverDropped, 1, 1, 0},
		"handover drops too many":  binary.AppendUvarint([]byte{wireVersion, 1, 'a', 1, kindHandover, 0, 5, handoverDropped, 1, 1}, maxDropped+1),
		"handover drops truncated": {wireVersion, 1, 'a', 1, kindHandover, 0, 5, handoverDropped, 1, 1, 2, 1, 'x'},
		"handover drops empty":     {wireVersion, 1, 'a', 1, kindHandover, 0, 5, handoverDropped, 1, 1, 1, 0},
		"handover drops a comma":   {wireVersion, 1, 'a', 1, kindHandover, 0, 5, handoverDropped, 1, 1, 1, 3, 'x', ',', 'y'},
		"handover unknown flag":    {wireVersion, 1, 'a', 1, kindHandover, 0, 5, 4, 1, 1},
		// kind sum(8) count names
		"genesis ask truncated":      {wireVersion, 1, 'a', 1, kindGenesisAsk, 1, 2, 3, 4, 5, 6, 7},
		"genesis table of none":      {wireVersion, 1, 'a', 1, kindGenesisTable, 0, 0, 0, 0, 0, 0, 0, 1, 0},
		"genesis table too many":     binary.AppendUvarint([]byte{wireVersion, 1, 'a', 1, kindGenesisTable, 0, 0, 0, 0, 0, 0, 0, 1}, maxGenesisMembers+1),
		"genesis table count large":  {wireVersion, 1, 'a', 1, kindGenesisTable, 0, 0, 0, 0, 0, 0, 0, 1, 2, 1, 'x'},
		"genesis table empty name":   {wireVersion, 1, 'a', 1, kindGenesisTable, 0, 0, 0, 0, 0, 0, 0, 1, 1, 0, 0},
		"genesis table out of order": {wireVersion, 1, 'a', 1, kindGenesisTable, 0, 0, 0, 0, 0, 0, 0, 1, 2, 1, 'y', 1, 'x'},
		"genesis table repeats":      {wireVersion, 1, 'a', 1, kindGenesisTable, 0, 0, 0, 0, 0, 0, 0, 1, 2, 1, 'x', 1, 'x'},
		"genesis table newline":      {wireVersion, 1, 'a', 1, kindGenesisTable, 0, 0, 0, 0, 0, 0, 0, 1, 1, 2, 'x', '\n'},
		"version 5":                  {5, 1, 'a', 1, kindReject, 0, 1, 1},
		"version 6":                  {6, 1, 'a', 1, kindReject, 0, 1, 1},
		// kind sent inc gen flags count (taker term)*
		"pair ack unknown flag":    {wireVersion, 1, 'a', 1, kindPairAck, 0, 0, 0, 2, 0},
		"pair ack floors too many": binary.AppendUvarint([]byte{wireVersion, 1, 'a', 1, kindPairAck, 0, 0, 0, 1}, maxFloors+1),
		"pair ack floors count":    {wireVersion, 1, 'a', 1, kindPairAck, 0, 0, 0, 1, 2, 1, 'x', 1},
		"pair ack floor no taker":  {wireVersion, 1, 'a', 1, kindPairAck, 0, 0, 0, 1, 1, 0, 1},
		// kind flags owner inc term
		"consent unknown flag": {wireVersion, 1, 'a', 1, kindConsent, 2, 1, 'x', 1, 1, 0},
		"consent no owner":     {wireVersion, 1, 'a', 1, kindConsent, 1, 0, 1, 1, 0},
		"consent inc 0":        {wireVersion, 1, 'a', 1, kindConsent, 1, 1, 'x', 0, 1, 0},
		"consent term 0":       {wireVersion, 1, 'a', 1, kindConsent, 0, 1, 'x', 1, 0, 0},
		"consent owner tab":    {wireVersion, 1, 'a', 1, kindConsent, 0, 2, 'x', '\t', 1, 1, 0},
		"consent no quiet":     {wireVersion, 1, 'a', 1, kindConsent, 0, 1, 'x', 1, 1},
		"consent ask quiet":    {wireVersion, 1, 'a', 1, kindConsent, 1, 1, 'x', 1, 1, 5},
		"consent quiet range":  {wireVersion, 1, 'a', 1, kindConsent, 0, 1, 'x', 1, 1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},
	}
	for name, p := range bad {
		if _, err := DecodeBatch(p); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// TestCtlEvents: each message becomes the machine event it stands for,
// from its sender.
func TestCtlEvents(t *testing.T) {
	want := []any{
		slots.Replicated{Slot: 16383, Epoch: MaxEpoch, Seq: 1 << 40, From: "x", Sent: at(-5), Grant: true, Release: "n3", Inc: 1<<64 - 1, Term: 1<<64 - 1},
		slots.ReplAck{Slot: 2, Epoch: 7, Seq: 9, From: "x", Sent: at(1764580000000000000), Grant: true, Synced: true, Released: "n2", Inc: 1 << 63, Gen: 12, Term: 3},
		slots.SnapshotRequest{Slot: 3, Epoch: 0, From: "x"},
		slots.NoReplica{Slot: 4, Epoch: 5, From: "x", Census: true},
		slots.HandoverOffer{Slot: 1, Epoch: 1, Seq: 3, From: "x", WasOwner: true, Grantee: "n3"},
		slots.HandoverOffer{Slot: 2, Epoch: 4, Seq: 9, From: "x", Census: true, Copy: true},
		slots.HandoverDone{Slot: 5, Epoch: 6, Seq: 7, From: "x", Grant: true, Dropped: []string{"n4", "n5"}},
		slots.EpochSeen{Slot: 300, Epoch: 2, From: "x", Owner: true, Replicated: true},
		slots.EpochSeen{Slot: 301, Epoch: 3, From: "x"},
		slots.PairReplicated{From: "x", Sent: at(-1764580000000000000), Inc: 1<<64 - 1},
		slots.PairReplAck{From: "x", Sent: at(1764580000000000001), Inc: 77, Gen: 1 << 40, Promise: true, Floors: []slots.Floor{{Taker: "n2", Term: 2}, {Taker: "n4", Term: 1 << 40}}},
		slots.OfferAsked{Slot: 9, Epoch: 11, From: "x"},
		slots.ConsentAsked{From: "x", Owner: "n1", Inc: 1<<64 - 1, Term: 5},
		slots.ConsentGiven{From: "x", Owner: "n3", Inc: 1, Term: 1},
		slots.ConsentGiven{From: "x", Owner: "n3", Inc: 1, Term: 1, Quiet: 4 * time.Second},
		genesisAsked{from: "x", sum: 1<<64 - 1},
		genesisTold{from: "x", sum: 0x0102030405060708, names: []string{"n1", "n2", "node-3"}},
	}
	for i, m := range everyKind() {
		if got := m.event("x"); !reflect.DeepEqual(got, want[i]) {
			t.Errorf("%T: %+v, want %+v", m, got, want[i])
		}
	}
	b := NewBoard()
	if err := b.Receive("y", Batch{From: "x", Msgs: everyKind()}.Encode()); err == nil {
		t.Error("a batch from x signed by y was taken")
	}
	if err := b.Receive("x", Batch{From: "x", Msgs: everyKind()}.Encode()); err != nil {
		t.Fatal(err)
	}
	q := b.take()
	if len(q) != len(want)+1 || q[0] != (slots.MemberAlive{Name: "x"}) {
		t.Fatalf("posted %v", q)
	}
}

func TestCtlChunks(t *testing.T) {
	var msgs []Msg
	for s := range 20000 {
		msgs = append(msgs, &Beat{Slot: slots.Slot(s % slots.Count), Epoch: 1 << 40, Seq: 1 << 50, Sent: at(1764580000000000000), Grant: true, Release: "node-with-a-long-name"})
	}
	for _, limit := range []int{1 << 20, 4096, 200} {
		chunks := encodeChunks("n1", msgs, limit)
		var got []Msg
		for _, c := range chunks {
			if len(c) > limit {
				t.Fatalf("limit %d: a chunk of %d bytes", limit, len(c))
			}
			b, err := DecodeBatch(c)
			if err != nil || b.From != "n1" {
				t.Fatalf("limit %d: %v", limit, err)
			}
			got = append(got, b.Msgs...)
		}
		if !reflect.DeepEqual(got, msgs) {
			t.Fatalf("limit %d: the messages changed in %d chunks", limit, len(chunks))
		}
		if limit == 1<<20 && len(chunks) > 2 {
			t.Errorf("%d chunks under 1 MiB", len(chunks))
		}
	}
	if chunks := encodeChunks("n1", nil, 1<<20); len(chunks) != 1 {
		t.Errorf("a ping is %d bodies", len(chunks))
	}
}

func FuzzDecodeCtl(f *testing.F) {
	f.Add(Batch{From: "n1", Msgs: []Msg{&Beat{Slot: 3, Epoch: 2, Seq: 9, Sent: at(77), Release: "x"}}}.Encode())
	f.Add(Batch{From: "n2", Msgs: everyKind()}.Encode())
	f.Add(Batch{From: "n3", Msgs: []Msg{&PairBeat{Sent: at(5), Inc: 6}, &PairAck{Sent: at(5), Inc: 6, Gen: 7}}}.Encode())
	f.Fuzz(func(t *testing.T, p []byte) {
		b, err := DecodeBatch(p)
		if err != nil {
			return
		}
		for _, m := range b.Msgs {
			var ev slots.Event
			switch e := m.event(b.From).(type) {
			case genesisAsked, genesisTold: // for the executor
				continue
			case slots.PairReplicated, slots.PairReplAck, slots.ConsentAsked, slots.ConsentGiven: // no slot
				if _, ok := eventSlot(e.(slots.Event)); ok {
					t.Fatalf("%+v: a slot", m)
				}
				continue
			case slots.Event:
				ev = e
			default:
				t.Fatalf("%+v: event %T", m, e)
			}
			if s, ok := eventSlot(ev); !ok || int(s) >= slots.Count {
				t.Fatalf("%+v: slot %d", m, s)
			}
		}
		if again, err := DecodeBatch(b.Encode()); err != nil || !reflect.DeepEqual(again, b) {
			t.Fatalf("re-encode of %+v: %+v, %v", b, again, err)
		}
	})
}

// TestMemberChanges: how membership changes reach the ownership machine.
// A member that left counts as gone (its slots fail over once its leases
// ran out, if its drain did not hand them over), as does one that
// vanished from the membership while up.
func TestMemberChanges(t *testing.T) {
	m := func(name string, st gossip.Status, boot uint64) gossip.Member {
		return gossip.Member{Name: name, Status: st, Meta: gossip.Meta{BootID: boot}}
	}
	alive, suspect, dead, left := gossip.StatusAlive, gossip.StatusSuspect, gossip.StatusDead, gossip.StatusLeft
	forgot := func(name string, boot uint64) gossip.Member {
		return gossip.Member{Name: name, Status: left, Meta: gossip.Meta{BootID: boot}, Forgotten: true}
	}
	empty := func(g gossip.Member) gossip.Member { g.Meta.Empty = true; return g }
	cases := []struct {
		name     string
		old, cur []gossip.Member
		want     []memberChange
	}{
		{"nothing", []gossip.Member{m("a", alive, 1)}, []gossip.Member{m("a", alive, 1)}, nil},
		{"join", nil, []gossip.Member{m("a", alive, 1)}, []memberChange{{kind: "join", name: "a"}}},
		{"known but dead", nil, []gossip.Member{m("a", dead, 1)}, nil},
		{"known but left", nil, []gossip.Member{m("a", left, 1)}, []memberChange{{kind: "left", name: "a"}}},
		{"suspect is up", []gossip.Member{m("a", alive, 1)}, []gossip.Member{m("a", suspect, 1)}, nil},
		{"dead", []gossip.Member{m("a", alive, 1)}, []gossip.Member{m("a", dead, 1)}, []memberChange{{kind: "dead", name: "a"}}},
		{"suspect then dead", []gossip.Member{m("a", suspect, 1)}, []gossip.Member{m("a", dead, 1)}, []memberChange{{kind: "dead", name: "a"}}},
		{"left", []gossip.Member{m("a", alive, 1)}, []gossip.Member{m("a", left, 1)}, []memberChange{{kind: "left", name: "a"}}},
		{"dead, then forgotten", []gossip.Member{m("a", dead, 1)}, []gossip.Member{forgot("a", 1)}, []memberChange{{kind: "forgot", name: "a"}}},
		{"known but forgotten", nil, []gossip.Member{forgot("a", 1)}, []memberChange{{kind: "forgot", name: "a"}}},
		{"left, then forgotten", []gossip.Member{m("a", left, 1)}, []gossip.Member{forgot("a", 1)}, []memberChange{{kind: "forgot", name: "a"}}},
		{"forgotten again", []gossip.Member{forgot("a", 1)}, []gossip.Member{forgot("a", 1)}, nil},
		{"dead, then a leave intent", []gossip.Member{m("a", dead, 1)}, []gossip.Member{m("a", left, 1)}, []memberChange{{kind: "left", name: "a"}}},
		{"left then dead", []gossip.Member{m("a", left, 1)}, []gossip.Member{m("a", dead, 1)}, nil},
		{"back", []gossip.Member{m("a", dead, 1)}, []gossip.Member{m("a", alive, 1)}, []memberChange{{kind: "join", name: "a"}}},
		{"restart", []gossip.Member{m("a", dead, 1)}, []gossip.Member{m("a", alive, 2)}, []memberChange{{kind: "restart", name: "a"}}},
		{"restart with an empty data dir", []gossip.Member{m("a", dead, 1)}, []gossip.Member{empty(m("a", alive, 2))}, []memberChange{{kind: "restart", name: "a", empty: true}}},
		{"vanished", []gossip.Member{m("a", alive, 1), m("b", alive, 1)}, []gossip.Member{m("b", alive, 1)}, []memberChange{{kind: "dead", name: "a"}}},
		{"vanished when gone", []gossip.Member{m("a", left, 1)}, nil, nil},
		{"in name order", []gossip.Member{m("c", alive, 1), m("b", alive, 1)},
			[]gossip.Member{m("c", left, 1), m("a", alive, 1)}, []memberChange{{kind: "join", name: "a"}, {kind: "dead", name: "b"}, {kind: "left", name: "c"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := memberChanges(tc.old, tc.cur); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}
