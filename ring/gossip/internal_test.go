package gossip

import (
	"errors"
	"log/slog"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
)

// newUnstarted returns a Membership that was never started, for driving
// the callbacks directly.
func newUnstarted(t *testing.T) *Membership {
	t.Helper()
	c := DefaultLocalConfig()
	c.Name = "self"
	m, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// mlNode builds the *memberlist.Node a callback receives.
func mlNode(t *testing.T, name string, boot uint64) *memberlist.Node {
	t.Helper()
	meta, err := EncodeMeta(Meta{HTTPAddr: name + ":80", BootID: boot, State: StateActive})
	if err != nil {
		t.Fatal(err)
	}
	return &memberlist.Node{Name: name, Addr: net.IPv4(127, 0, 0, 1), Port: 7001, Meta: meta}
}

func TestNodeMetaLimit(t *testing.T) {
	m := newUnstarted(t)
	d := &delegate{m: m}
	if got := d.NodeMeta(MetaMaxSize); got != nil {
		t.Errorf("NodeMeta before Start = %x, want nil", got)
	}
	enc, err := EncodeMeta(Meta{HTTPAddr: "127.0.0.1:7070", State: StateActive})
	if err != nil {
		t.Fatal(err)
	}
	m.local.Store(&localMeta{encoded: enc})
	tests := []struct {
		name  string
		limit int
		want  []byte
	}{
		{"fits", MetaMaxSize, enc},
		{"exact", len(enc), enc},
		{"too small", len(enc) - 1, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := d.NodeMeta(tt.limit); string(got) != string(tt.want) || len(got) > tt.limit {
				t.Errorf("NodeMeta(%d) = %x, want %x", tt.limit, got, tt.want)
			}
		})
	}
}

func TestMemberlistLine(t *testing.T) {
	tests := []struct {
		line  string
		level slog.Level
		msg   string
	}{
		{"[DEBUG] memberlist: Stream connection from=1.2.3.4:5\n", slog.LevelDebug, "Stream connection from=1.2.3.4:5"},
		{"[INFO] memberlist: Marking n3 as failed\n", slog.LevelInfo, "Marking n3 as failed"},
		{"[WARN] memberlist: Refuting a suspect message\n", slog.LevelWarn, "Refuting a suspect message"},
		{"[ERR] memberlist: Failed to send\n", slog.LevelError, "Failed to send"},
		{"[ERROR] memberlist: x", slog.LevelError, "x"},
		{"Err: Could not set the deadline", slog.LevelInfo, "Err: Could not set the deadline"},
		{"[ODD] tag kept", slog.LevelInfo, "[ODD] tag kept"},
	}
	for _, tt := range tests {
		t.Run(tt.msg, func(t *testing.T) {
			level, msg := memberlistLine(tt.line)
			if level != tt.level || msg != tt.msg {
				t.Errorf("memberlistLine(%q) = %v, %q; want %v, %q", tt.line, level, msg, tt.level, tt.msg)
			}
		})
	}
}

// TestLeaveStatus drives the callbacks and leave intents in the orders
// gossip can deliver them.
func TestLeaveStatus(t *testing.T) {
	type step struct {
		join, leave bool // EventJoin / EventLeave for "p" with boot 7
		intent      uint64
	}
	tests := []struct {
		name     string
		steps    []step
		want     Status
		wantEvts []Status // statuses of the events, in order
	}{
		{"crash", []step{{join: true}, {leave: true}}, StatusDead,
			[]Status{StatusAlive, StatusDead}},
		{"intent first", []step{{join: true}, {intent: 7}, {leave: true}}, StatusLeft,
			[]Status{StatusAlive, StatusLeft}},
		{"intent after death", []step{{join: true}, {leave: true}, {intent: 7}}, StatusLeft,
			[]Status{StatusAlive, StatusDead, StatusLeft}},
		{"intent of another run", []step{{join: true}, {intent: 6}, {leave: true}, {intent: 8}}, StatusDead,
			[]Status{StatusAlive, StatusDead}},
		{"rejoin clears intent", []step{{join: true}, {intent: 7}, {leave: true}, {join: true}, {leave: true}}, StatusDead,
			[]Status{StatusAlive, StatusLeft, StatusAlive, StatusDead}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newUnstarted(t)
			d := &delegate{m: m}
			for _, s := range tt.steps {
				switch {
				case s.join:
					d.NotifyJoin(mlNode(t, "p", 7))
				case s.leave:
					d.NotifyLeave(mlNode(t, "p", 7))
				default:
					d.NotifyMsg(encodeLeaveIntent(leaveIntent{Name: "p", BootID: s.intent}))
				}
			}
			ms := m.Members()
			if len(ms) != 1 || ms[0].Status != tt.want {
				t.Errorf("Members() = %+v, want p %v", ms, tt.want)
			}
			var got []Status
			for len(m.events) > 0 {
				ev := <-m.events
				got = append(got, ev.Member.Status)
			}
			if !slices.Equal(got, tt.wantEvts) {
				t.Errorf("event statuses = %v, want %v", got, tt.wantEvts)
			}
		})
	}
}

// TestLeaveIntentGossipedOnce: the first copy of an intent is queued for
// gossip, repeats are not, and a newer run's intent replaces the older.
func TestLeaveIntentGossipedOnce(t *testing.T) {
	m := newUnstarted(t)
	d := &delegate{m: m}
	for range 3 {
		d.NotifyMsg(encodeLeaveIntent(leaveIntent{Name: "p", BootID: 1}))
	}
	if n := m.bcast.NumQueued(); n != 1 {
		t.Errorf("queued %d broadcasts after 3 copies, want 1", n)
	}
	d.NotifyMsg(encodeLeaveIntent(leaveIntent{Name: "p", BootID: 2}))
	if n := m.bcast.NumQueued(); n != 1 {
		t.Errorf("queued %d broadcasts after a newer intent, want 1 (replaced)", n)
	}
	d.NotifyMsg(encodeLeaveIntent(leaveIntent{Name: "self", BootID: 1}))
	d.NotifyMsg([]byte{99})
	if n := m.bcast.NumQueued(); n != 1 {
		t.Errorf("queued %d broadcasts after own and junk messages, want 1", n)
	}
	got := d.GetBroadcasts(0, 1400)
	li, err := decodeMessage(got[0])
	if len(got) != 1 || err != nil || li != (leaveIntent{Name: "p", BootID: 2}) {
		t.Errorf("GetBroadcasts = %x (%+v, %v), want the intent for p boot 2", got, li, err)
	}
}

// TestLeaveIntentForUnseenMember: an intent for a member this node never
// saw (memberlist does not hand a joiner the members already dead) adds it
// as left, with an event, so the slots that still name it as a suspect can
// forget it; a later run of that name joins as usual.
func TestLeaveIntentForUnseenMember(t *testing.T) {
	m := newUnstarted(t)
	d := &delegate{m: m}
	d.NotifyMsg(encodeLeaveIntent(leaveIntent{Name: "gone", BootID: 7}))
	select {
	case ev := <-m.Events():
		if ev.Kind != EventLeave || ev.Member.Name != "gone" || ev.Member.Status != StatusLeft || ev.Member.Meta.BootID != 7 {
			t.Errorf("event = %+v, want gone left (boot 7)", ev)
		}
	default:
		t.Fatal("no event for an intent of an unseen member")
	}
	if ms := m.Members(); len(ms) != 1 || ms[0].Name != "gone" || ms[0].Status != StatusLeft {
		t.Errorf("Members = %+v, want gone left", ms)
	}
	if _, _, ok := m.nextReconnect(time.Now()); ok {
		t.Error("a left member is reconnected to")
	}
	d.NotifyJoin(mlNode(t, "gone", 8)) // a new run
	var ms []Member
	for _, x := range m.Members() {
		if x.Name == "gone" {
			ms = append(ms, x)
		}
	}
	if len(ms) != 1 || ms[0].Status != StatusAlive || ms[0].Meta.BootID != 8 {
		t.Errorf("after a new run joined: %+v, want gone alive (boot 8)", ms)
	}
}

func TestNextReconnect(t *testing.T) {
	m := newUnstarted(t)
	d := &delegate{m: m}
	for _, name := range []string{"a", "b", "c", "d"} {
		d.NotifyJoin(mlNode(t, name, 1))
	}
	start := time.Now()
	for _, name := range []string{"c", "a", "d"} { // b stays alive
		d.NotifyLeave(mlNode(t, name, 1))
	}
	d.NotifyMsg(encodeLeaveIntent(leaveIntent{Name: "d", BootID: 1})) // d left: not retried
	var got []string
	for range 5 {
		name, addr, ok := m.nextReconnect(start)
		if !ok || addr != "127.0.0.1:7001" {
			t.Fatalf("nextReconnect = %q, %q, %v", name, addr, ok)
		}
		got = append(got, name)
	}
	if want := []string{"a", "c", "a", "c", "a"}; !slices.Equal(got, want) {
		t.Errorf("reconnect order = %v, want %v", got, want)
	}
	if name, _, ok := m.nextReconnect(start.Add(m.cfg.ReconnectTimeout + time.Second)); ok {
		t.Errorf("nextReconnect after ReconnectTimeout = %q, want none", name)
	}
}

func TestDecodeMessage(t *testing.T) {
	good := encodeLeaveIntent(leaveIntent{Name: "n1", BootID: 42})
	if li, err := decodeMessage(good); err != nil || li != (leaveIntent{Name: "n1", BootID: 42}) {
		t.Errorf("decodeMessage(encode) = %+v, %v", li, err)
	}
	tests := []struct {
		name string
		in   []byte
	}{
		{"empty", nil},
		{"unknown type", append([]byte{2}, good[1:]...)},
		{"truncated", good[:len(good)-1]},
		{"trailing", append(slices.Clone(good), 0)},
		{"no name", encodeLeaveIntent(leaveIntent{BootID: 1})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := decodeMessage(tt.in); !errors.Is(err, errMessage) {
				t.Errorf("decodeMessage(%x) = %v, want errMessage", tt.in, err)
			}
		})
	}
}

// FuzzDecodeMessage: gossip messages never panic the decoder and fail only
// with errMessage.
func FuzzDecodeMessage(f *testing.F) {
	f.Add(encodeLeaveIntent(leaveIntent{Name: "n1", BootID: 42}))
	f.Add([]byte{})
	f.Add([]byte{msgLeaveIntent, 0xdb, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		li, err := decodeMessage(b)
		if err != nil {
			if !errors.Is(err, errMessage) {
				t.Fatalf("decodeMessage(%x) = %v", b, err)
			}
			return
		}
		if got, err := decodeMessage(encodeLeaveIntent(li)); err != nil || got != li {
			t.Fatalf("round trip of %+v = %+v, %v", li, got, err)
		}
	})
}

// TestIntentState: push/pull carries the intents of the members this node
// counts as leaving or left, for the run it knows; the other side handles
// each as a gossiped intent.
func TestIntentState(t *testing.T) {
	m := newUnstarted(t)
	d := &delegate{m: m}
	if b := d.LocalState(false); b != nil {
		t.Errorf("LocalState without intents = %x, want nil", b)
	}
	d.NotifyJoin(mlNode(t, "alive", 1))
	d.NotifyJoin(mlNode(t, "leaving", 2))
	d.NotifyJoin(mlNode(t, "dead", 3))
	d.NotifyJoin(mlNode(t, "back", 4))
	d.NotifyMsg(encodeLeaveIntent(leaveIntent{Name: "leaving", BootID: 2}))
	d.NotifyLeave(mlNode(t, "dead", 3))
	d.NotifyMsg(encodeLeaveIntent(leaveIntent{Name: "dead", BootID: 3})) // forgotten: dead -> left
	d.NotifyMsg(encodeLeaveIntent(leaveIntent{Name: "gone", BootID: 5})) // never seen: added as left
	d.NotifyMsg(encodeLeaveIntent(leaveIntent{Name: "back", BootID: 4}))
	d.NotifyLeave(mlNode(t, "back", 4))
	d.NotifyJoin(mlNode(t, "back", 6)) // a new run: the old intent is stale
	lis, err := decodeIntentState(d.LocalState(false))
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(lis, func(a, b leaveIntent) int { return strings.Compare(a.Name, b.Name) })
	want := []leaveIntent{{Name: "dead", BootID: 3}, {Name: "gone", BootID: 5}, {Name: "leaving", BootID: 2}}
	if !slices.Equal(lis, want) {
		t.Errorf("LocalState intents = %+v, want %+v", lis, want)
	}

	other := newUnstarted(t)
	od := &delegate{m: other}
	od.NotifyJoin(mlNode(t, "dead", 3))
	od.NotifyLeave(mlNode(t, "dead", 3))
	od.NotifyJoin(mlNode(t, "leaving", 2))
	od.MergeRemoteState(d.LocalState(true), true)
	status := map[string]Status{}
	for _, mb := range other.Members() {
		status[mb.Name] = mb.Status
	}
	if status["dead"] != StatusLeft || status["gone"] != StatusLeft || status["leaving"] != StatusAlive {
		t.Errorf("after the merge: %v, want dead and gone left, leaving alive", status)
	}
	od.NotifyLeave(mlNode(t, "leaving", 2))
	if mb, _ := memberNamed(other, "leaving"); mb.Status != StatusLeft {
		t.Errorf("leaving died after the merge: %v, want left", mb.Status)
	}
	od.MergeRemoteState([]byte{msgIntentState, 0x91}, false) // junk: ignored
	od.MergeRemoteState(nil, false)
}

func memberNamed(m *Membership, name string) (Member, bool) {
	for _, mb := range m.Members() {
		if mb.Name == name {
			return mb, true
		}
	}
	return Member{}, false
}

func TestDecodeIntentState(t *testing.T) {
	good := encodeIntentState([]leaveIntent{{Name: "n1", BootID: 42}, {Name: "n2", BootID: 7}})
	if lis, err := decodeIntentState(good); err != nil || !slices.Equal(lis, []leaveIntent{{Name: "n1", BootID: 42}, {Name: "n2", BootID: 7}}) {
		t.Errorf("decodeIntentState(encode) = %+v, %v", lis, err)
	}
	huge := []byte{msgIntentState, 0xdd, 0xff, 0xff, 0xff, 0xff} // array32 of 2^32-1
	tests := []struct {
		name string
		in   []byte
	}{
		{"empty", nil},
		{"a gossip message", encodeLeaveIntent(leaveIntent{Name: "n1", BootID: 1})},
		{"not an array", []byte{msgIntentState, 0xa1, 'x'}},
		{"count beyond the bytes", huge},
		{"count beyond the bound", encodeIntentState(make([]leaveIntent, maxStateIntents+1))},
		{"truncated", good[:len(good)-1]},
		{"trailing", append(slices.Clone(good), 0)},
		{"no name", encodeIntentState([]leaveIntent{{Name: "", BootID: 1}})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := decodeIntentState(tt.in); !errors.Is(err, errMessage) {
				t.Errorf("decodeIntentState(%x) = %v, want errMessage", tt.in, err)
			}
		})
	}
}

// FuzzDecodeIntentState: push/pull state never panics the decoder, fails
// only with errMessage, and what it accepts round-trips.
func FuzzDecodeIntentState(f *testing.F) {
	f.Add(encodeIntentState([]leaveIntent{{Name: "n1", BootID: 42}, {Name: "n2", BootID: 7}}))
	f.Add([]byte{msgIntentState, 0xdd, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		lis, err := decodeIntentState(b)
		if err != nil {
			if !errors.Is(err, errMessage) {
				t.Fatalf("decodeIntentState(%x) = %v", b, err)
			}
			return
		}
		if got, err := decodeIntentState(encodeIntentState(lis)); err != nil || !slices.Equal(got, lis) {
			t.Fatalf("round trip of %+v = %+v, %v", lis, got, err)
		}
	})
}
