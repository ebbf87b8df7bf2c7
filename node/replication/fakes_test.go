package replication

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chime-scheduler/chime/slots"
	"github.com/vmihailenco/msgpack/v5"
)

// fakeOwnership owns every slot at epoch 5 with the given replicas and
// records what it is told.
type fakeOwnership struct {
	replicas []string
	pending  atomic.Bool // Replicas says not safe (FollowerPending)
	mu       sync.Mutex
	posted   []slots.Event
	gaps     []string
	applied  []slots.SnapshotComplete
}

func (o *fakeOwnership) State(uint16) (slots.Role, uint64, bool) { return slots.RoleOwner, 5, true }
func (o *fakeOwnership) Holds(uint16) uint64                     { return 5 }
func (o *fakeOwnership) Replicas(uint16) ([]string, bool)        { return o.replicas, !o.pending.Load() }
func (o *fakeOwnership) Flagged() (under, unavail []uint16)      { return nil, nil }
func (o *fakeOwnership) Post(evs ...slots.Event) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.posted = append(o.posted, evs...)
}
func (o *fakeOwnership) GapSeen(_ uint16, _ uint64, from string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.gaps = append(o.gaps, from)
}
func (o *fakeOwnership) SnapshotApplied(ev slots.SnapshotComplete, _ uint64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.applied = append(o.applied, ev)
}

// countingTransport is fakeTransport{OK} that counts its calls.
type countingTransport struct{ n atomic.Int64 }

func (c *countingTransport) Call(ctx context.Context, to, path, ct string, body []byte) ([]byte, error) {
	c.n.Add(1)
	return fakeTransport{OK}.Call(ctx, to, path, ct, body)
}

// fakeTransport answers every replication request with result res and
// epoch 9 for each message.
type fakeTransport struct{ res uint8 }

func (f fakeTransport) Call(_ context.Context, to, path, _ string, body []byte) ([]byte, error) {
	if to == "gone" {
		return nil, ErrUnknownMember
	}
	var req Request
	if path != PathReplicate || msgpack.Unmarshal(body, &req) != nil {
		return nil, errors.New("bad call")
	}
	ans := Answer{Results: make([]uint8, len(req.Msgs)), Epochs: make([]uint64, len(req.Msgs))}
	for i := range ans.Results {
		ans.Results[i], ans.Epochs[i] = f.res, 9
	}
	return msgpack.Marshal(ans)
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// TestShipperSettles: a group's wait settles by what its replica answers:
// OK reports the seq applied to the machine, Stale tells it of the newer
// epoch and fails the write, Gap asks for a snapshot.
func TestShipperSettles(t *testing.T) {
	for _, tt := range []struct {
		name   string
		res    uint8
		failed bool
	}{{"ok", OK, false}, {"stale", Stale, true}} {
		t.Run(tt.name, func(t *testing.T) {
			own := &fakeOwnership{replicas: []string{"b"}}
			s := NewShipper("a", ShipperDeps{Transport: fakeTransport{tt.res}, Ownership: own, Log: quiet})
			go s.Run()
			defer s.Close()
			w := NewWait(1, time.Now().Add(time.Minute))
			s.Enqueue([]Msg{{Slot: 1, Epoch: 5, Seq: 3}}, w)
			select {
			case <-w.Done():
			case <-time.After(10 * time.Second):
				t.Fatal("the wait did not settle")
			}
			if _, bad := w.Failed()[1]; bad != tt.failed {
				t.Errorf("failed = %v, want %v", w.Failed(), tt.failed)
			}
			own.mu.Lock()
			defer own.mu.Unlock()
			var want slots.Event = slots.Applied{Slot: 1, Seq: 3}
			if tt.res == Stale {
				want = slots.EpochSeen{Slot: 1, Epoch: 9, From: "b"}
			}
			if len(own.posted) != 1 || own.posted[0] != want {
				t.Errorf("posted %v, want %v", own.posted, want)
			}
		})
	}
	t.Run("gap", func(t *testing.T) {
		own := &fakeOwnership{replicas: []string{"b"}}
		s := NewShipper("a", ShipperDeps{Transport: fakeTransport{Gap}, Ownership: own, Log: quiet})
		s.Enqueue([]Msg{{Slot: 1, Epoch: 5, Seq: 3}}, nil)
		if !s.round() {
			t.Error("a gapped message is not kept for a retry")
		}
		if len(own.gaps) != 1 || own.gaps[0] != "b" {
			t.Errorf("gaps reported: %v, want b's", own.gaps)
		}
	})
	t.Run("unknown member", func(t *testing.T) {
		own := &fakeOwnership{replicas: []string{"gone"}}
		s := NewShipper("a", ShipperDeps{Transport: fakeTransport{OK}, Ownership: own, Log: quiet})
		s.Enqueue([]Msg{{Slot: 1, Epoch: 5, Seq: 3}}, nil)
		if !s.round() || s.Pending() != 1 {
			t.Errorf("a message for a node not in the view is not kept (%d pending)", s.Pending())
		}
		if len(s.backoff) != 0 {
			t.Errorf("a node not in the view is backed off: %v", s.backoff)
		}
	})
}

// fakeCopies applies everything.
type fakeCopies struct{}

func (fakeCopies) AdmitSnapshots(<-chan struct{}) bool { return true }
func (fakeCopies) Pressed() bool                       { return false }

func (fakeCopies) Snapshots(ss []uint16, _ int) []SnapResult {
	out := make([]SnapResult, len(ss))
	for i, slot := range ss {
		out[i].Msg = Msg{Slot: slot, Reset: true}
	}
	return out
}
func (fakeCopies) Apply(_ <-chan struct{}, _ string, msgs []Msg) (Applied, error) {
	n := len(msgs)
	a := Applied{Results: make([]uint8, n), Epochs: make([]uint64, n), Gens: make([]uint64, n), Held: make([]uint64, n)}
	for i, m := range msgs {
		a.Held[i] = m.Seq
	}
	return a, nil
}

// TestReceive: the replica's side refuses a malformed body and a body
// that names another sender than the signature, and reports the snapshots
// it applied to its machine.
func TestReceive(t *testing.T) {
	own := &fakeOwnership{}
	var bad *BadRequest
	if _, err := Receive(context.Background(), fakeCopies{}, own, "n1", []byte{0x82, 0xa1, 'f', 0xa1, 'x', 0xa1, 'm', 0xdd, 0xff, 0xff, 0xff, 0xff}); !errors.As(err, &bad) || bad.Field != "body" {
		t.Errorf("a body claiming 4 billion messages: %v", err)
	}
	body, _ := msgpack.Marshal(Request{From: "n2", Msgs: []Msg{{Slot: 1, Epoch: 5, Seq: 7, Reset: true, Snap: true, SnapEpoch: 6}}})
	if _, err := Receive(context.Background(), fakeCopies{}, own, "n1", body); !errors.As(err, &bad) || bad.Field != "from" {
		t.Errorf("a body from n2 signed by n1: %v", err)
	}
	out, err := Receive(context.Background(), fakeCopies{}, own, "n2", body)
	if err != nil {
		t.Fatal(err)
	}
	var ans Answer
	if err := msgpack.Unmarshal(out, &ans); err != nil || len(ans.Results) != 1 || ans.Results[0] != OK {
		t.Errorf("answer %+v, %v", ans, err)
	}
	if len(own.applied) != 1 || own.applied[0].Epoch != 6 || own.applied[0].Seq != 7 || own.applied[0].From != "n2" {
		t.Errorf("snapshots reported: %+v", own.applied)
	}
}

// pressedCopies is fakeCopies whose store never has room for snapshots;
// it records what it applied.
type pressedCopies struct {
	fakeCopies
	applied []Msg
}

func (*pressedCopies) AdmitSnapshots(<-chan struct{}) bool { return false }
func (*pressedCopies) Pressed() bool                       { return true }
func (c *pressedCopies) Apply(done <-chan struct{}, from string, msgs []Msg) (Applied, error) {
	c.applied = append(c.applied, msgs...)
	a, err := c.fakeCopies.Apply(done, from, msgs)
	for i := range msgs {
		a.Epochs[i] = uint64(msgs[i].Slot) * 10
	}
	return a, err
}

// TestReceiveDefersSnapshotsWhenPressed: when the store had no room for
// them in time, the owners' snapshots of a request are answered Busy,
// unapplied and not reported to the machine, and its live writes and
// followers' copies apply, each answer in its message's place; a request
// of owner snapshots only applies nothing.
func TestReceiveDefersSnapshotsWhenPressed(t *testing.T) {
	own := &fakeOwnership{}
	c := &pressedCopies{}
	body, _ := msgpack.Marshal(Request{From: "n2", Msgs: []Msg{
		{Slot: 1, Epoch: 5, Seq: 7},
		{Slot: 2, Epoch: 5, Seq: 3, Reset: true, Snap: true, SnapEpoch: 5, Owner: true},
		{Slot: 3, Epoch: 5, Seq: 9},
		// A follower's copy (a handover's final copy, or a restarted
		// owner's of the epoch before: Final) does not wait.
		{Slot: 4, Epoch: 5, Seq: 2, Reset: true, Snap: true, SnapEpoch: 6, Final: true},
	}})
	out, err := Receive(context.Background(), c, own, "n2", body)
	if err != nil {
		t.Fatal(err)
	}
	var ans Answer
	if err := msgpack.Unmarshal(out, &ans); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ans.Results, []uint8{OK, Busy, OK, OK}) || !slices.Equal(ans.Epochs, []uint64{10, 0, 30, 40}) || !ans.Pressed {
		t.Errorf("answer %+v, want OK, Busy, OK, OK with epochs 10, 0, 30, 40, pressed", ans)
	}
	if len(c.applied) != 3 || c.applied[0].Slot != 1 || c.applied[1].Slot != 3 || c.applied[2].Slot != 4 {
		t.Errorf("applied %+v, want the live writes of slots 1 and 3 and the follower's copy of 4", c.applied)
	}
	if len(own.applied) != 1 || own.applied[0].Slot != 4 || own.applied[0].Epoch != 6 || !own.applied[0].Final {
		t.Errorf("snapshots reported to the machine: %+v, want slot 4's, at epoch 6, final", own.applied)
	}
	c.applied = nil
	body, _ = msgpack.Marshal(Request{From: "n2", Msgs: []Msg{{Slot: 2, Epoch: 5, Seq: 3, Reset: true, Snap: true, SnapEpoch: 5, Owner: true}}})
	if out, err = Receive(context.Background(), c, own, "n2", body); err != nil {
		t.Fatal(err)
	}
	if err := msgpack.Unmarshal(out, &ans); err != nil || !slices.Equal(ans.Results, []uint8{Busy}) || len(c.applied) != 0 {
		t.Errorf("snapshots only: answer %+v (%v), applied %d", ans, err, len(c.applied))
	}
}

// TestAnswerSumsRefusesSlots: a slot beyond slots.Count is refused before
// the writer sees it.
func TestAnswerSumsRefusesSlots(t *testing.T) {
	body := encodeAERequest(&aeRequest{From: "n1", Items: []Item{{Slot: slots.Count}}})
	var bad *BadRequest
	if _, err := AnswerSums(context.Background(), nil, body); !errors.As(err, &bad) || bad.Field != "slot" {
		t.Errorf("slot %d: %v", slots.Count, err)
	}
	if _, err := AnswerSums(context.Background(), nil, []byte{9}); !errors.As(err, &bad) || bad.Field != "body" {
		t.Errorf("a malformed body: %v", err)
	}
}
