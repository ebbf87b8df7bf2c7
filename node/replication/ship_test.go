package replication

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/chime-scheduler/chime/slots"
	"github.com/vmihailenco/msgpack/v5"
)

// TestShipOrder: live writes go first, then snapshots of slots this node
// no longer owns (a handover's final copy), then catch-up snapshots for the
// slot's table owner (an importer), then the other catch-ups; each class
// keeps the queue's order.
func TestShipOrder(t *testing.T) {
	holds := func(s uint16) uint64 { // slots 1 and 4: owned at epoch 5
		if s == 1 || s == 4 {
			return 5
		}
		return 0
	}
	owner := func(s uint16) string { // the table moves slot 4 to n4
		if s == 4 {
			return "n4"
		}
		return "n1"
	}
	batch := []*queued{
		{msg: Msg{Slot: 1}, to: "n2"}, // catch-up snapshot of an owned slot
		{msg: Msg{Slot: 1, Seq: 7}},   // live write
		{msg: Msg{Slot: 2}, to: "n3"}, // final copy of a slot handed over
		{msg: Msg{Slot: 1, Seq: 8}},   // live write
		{msg: Msg{Slot: 1}, to: "n4"}, // catch-up snapshot
		{msg: Msg{Slot: 3}, to: "n2"}, // a slot this node never owned
		{msg: Msg{Slot: 4}, to: "n2"}, // catch-up of a moving slot for its new follower
		{msg: Msg{Slot: 4}, to: "n4"}, // catch-up for the slot's new owner
	}
	if got, want := shipOrder(batch, holds, owner), []int{1, 3, 2, 5, 7, 0, 4, 6}; !slices.Equal(got, want) {
		t.Errorf("shipOrder = %v, want %v", got, want)
	}
	if got, want := shipOrder(batch, holds, nil), []int{1, 3, 2, 5, 0, 4, 6, 7}; !slices.Equal(got, want) {
		t.Errorf("shipOrder without the table = %v, want %v", got, want)
	}
}

// TestShipperRefreshesQueuedSnapshots: a snapshot asked for again while
// the first request still waits in the queue is not queued twice; the
// queued one carries the newest Sent, grant, owner, epoch, incarnation,
// vote term and final mark.
func TestShipperRefreshesQueuedSnapshots(t *testing.T) {
	s := NewShipper("n1", ShipperDeps{})
	t0 := time.Unix(100, 0)
	s.SendSnapshot(slots.SendSnapshot{Slot: 4, Epoch: 2, To: "n2", Sent: t0, Grant: false, Owner: false, Inc: 7, Term: 1})
	s.SendSnapshot(slots.SendSnapshot{Slot: 4, Epoch: 3, To: "n2", Sent: t0.Add(time.Second), Grant: true, Owner: true, Inc: 8, Term: 2, Final: true})
	s.SendSnapshot(slots.SendSnapshot{Slot: 4, Epoch: 3, To: "n3", Sent: t0, Grant: false, Owner: false, Inc: 7, Term: 1}) // another target: its own
	if len(s.queue) != 2 {
		t.Fatalf("queue holds %d snapshots, want 2", len(s.queue))
	}
	q := s.queue[0]
	if q.to != "n2" || !q.sent.Equal(t0.Add(time.Second)) || !q.grant || !q.owner || q.epoch != 3 || q.inc != 8 || q.term != 2 || !q.final {
		t.Errorf("queued snapshot = to %s sent %v grant %v owner %v epoch %d inc %d term %d final %v, want the second request's", q.to, q.sent,
			q.grant, q.owner, q.epoch, q.inc, q.term, q.final)
	}
}

// TestShipperFlush: Flush returns as soon as the last message is
// acknowledged, not on a poll; otherwise when max passes, ctx ends or the
// shipper closes.
func TestShipperFlush(t *testing.T) {
	start := func(to string) *Shipper {
		s := NewShipper("a", ShipperDeps{Transport: fakeTransport{OK}, Ownership: &fakeOwnership{replicas: []string{to}}, Log: quiet})
		go s.Run()
		s.Enqueue([]Msg{{Slot: 1, Epoch: 5, Seq: 3}}, nil)
		return s
	}
	t.Run("acknowledged", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := start("b")
			defer s.Close()
			t0 := time.Now()
			s.Flush(context.Background(), 5*time.Second)
			if d := time.Since(t0); d != 0 || s.Pending() != 0 {
				t.Errorf("Flush returned after %v with %d pending, want at once with none", d, s.Pending())
			}
			s.Flush(context.Background(), 5*time.Second) // idle: returns at once
		})
	})
	t.Run("max", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := start("gone") // never sent: stays queued
			defer s.Close()
			t0 := time.Now()
			s.Flush(context.Background(), 5*time.Second)
			if d := time.Since(t0); d != 5*time.Second || s.Pending() != 1 {
				t.Errorf("Flush returned after %v with %d pending, want 5s with 1", d, s.Pending())
			}
		})
	})
	t.Run("ctx", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := start("gone")
			defer s.Close()
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			t0 := time.Now()
			s.Flush(ctx, 5*time.Second)
			if d := time.Since(t0); d != time.Second {
				t.Errorf("Flush returned after %v, want 1s (ctx)", d)
			}
		})
	})
	t.Run("close", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := start("gone")
			t0 := time.Now()
			go func() {
				time.Sleep(2 * time.Second)
				s.Close()
			}()
			s.Flush(context.Background(), 5*time.Second)
			if d := time.Since(t0); d != 2*time.Second {
				t.Errorf("Flush returned after %v, want 2s (Close)", d)
			}
		})
	})
}

// TestShipperWaitsForThePendingFollower: a write its follower applied is
// not acknowledged while no replica could take the slot over (Replicas
// not safe: the follower's snapshot or the grant not acknowledged yet):
// after the owner's death the write would wait on that follower's disk.
// It is acknowledged as soon as the board says safe (FollowerReady), not
// re-sent; and it fails if that takes longer than the write's deadline.
func TestShipperWaitsForThePendingFollower(t *testing.T) {
	t.Run("ready", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			own := &fakeOwnership{replicas: []string{"b"}}
			own.pending.Store(true)
			calls := &countingTransport{}
			s := NewShipper("a", ShipperDeps{Transport: calls, Ownership: own, Log: quiet})
			go s.Run()
			defer s.Close()
			w := NewWait(1, time.Now().Add(time.Minute))
			s.Enqueue([]Msg{{Slot: 1, Epoch: 5, Seq: 3}}, w)
			time.Sleep(3 * time.Second)
			select {
			case <-w.Done():
				t.Fatal("a write only a pending follower holds was acknowledged")
			default:
			}
			if n := calls.n.Load(); n != 1 {
				t.Errorf("the write was sent %d times, want once (the follower acked it)", n)
			}
			t0 := time.Now()
			own.pending.Store(false)
			s.FollowerReady()
			<-w.Done()
			if d := time.Since(t0); d != 0 {
				t.Errorf("acknowledged %v after the follower was ready, want at once", d)
			}
			if len(w.Failed()) != 0 {
				t.Errorf("failed: %v", w.Failed())
			}
		})
	})
	t.Run("deadline", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			own := &fakeOwnership{replicas: []string{"b"}}
			own.pending.Store(true)
			s := NewShipper("a", ShipperDeps{Transport: fakeTransport{OK}, Ownership: own, Log: quiet})
			go s.Run()
			defer s.Close()
			w := NewWait(1, time.Now().Add(2*time.Second))
			s.Enqueue([]Msg{{Slot: 1, Epoch: 5, Seq: 3}}, w)
			<-w.Done()
			if _, bad := w.Failed()[1]; !bad {
				t.Errorf("the write settled without a failure while its follower was pending")
			}
			if s.Pending() != 1 {
				t.Errorf("%d messages pending, want the write kept until the follower is ready", s.Pending())
			}
		})
	})
}

// snapTransport answers a replica's owner snapshots Busy while busy is set
// (its store is pressed: applyAdmitted) and everything else OK, and records
// each call's messages.
type snapTransport struct {
	mu      sync.Mutex
	busy    bool
	pressed bool // every answer says the store is pressed
	calls   [][]Msg
}

func (f *snapTransport) Call(_ context.Context, _, _, _ string, body []byte) ([]byte, error) {
	var req Request
	if err := msgpack.Unmarshal(body, &req); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, req.Msgs)
	ans := Answer{Results: make([]uint8, len(req.Msgs)), Epochs: make([]uint64, len(req.Msgs)), Pressed: f.pressed}
	for i, m := range req.Msgs {
		if m.Reset && m.Owner && f.busy {
			ans.Results[i] = Busy
		}
	}
	return msgpack.Marshal(ans)
}

func (f *snapTransport) last() (live, snaps int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, m := range f.calls[len(f.calls)-1] {
		if m.Reset {
			snaps++
		} else {
			live++
		}
	}
	return live, snaps
}

// readCounter is fakeCopies counting the snapshots it read.
type readCounter struct {
	fakeCopies
	reads int
}

func (c *readCounter) Snapshots(ss []uint16, max int) []SnapResult {
	c.reads += len(ss)
	return c.fakeCopies.Snapshots(ss, max)
}

// TestShipperWaitsOutAPressedReplica: a snapshot the replica answered Busy
// (its store close to a write stall) stays queued, unread, and is not sent
// to that replica again for snapBusyWait, while live writes and a
// follower's copy to it go on; then it is read again (at the slot's
// position then) and delivered.
func TestShipperWaitsOutAPressedReplica(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := &snapTransport{busy: true}
		cp := &readCounter{}
		s := NewShipper("a", ShipperDeps{Transport: tr, Ownership: &fakeOwnership{replicas: []string{"b"}}, Copies: cp, Log: quiet})
		s.SendSnapshot(slots.SendSnapshot{Slot: 4, Epoch: 5, To: "b", Sent: time.Now(), Grant: true, Owner: true, Inc: 1, Term: 1})
		s.Enqueue([]Msg{{Slot: 1, Epoch: 5, Seq: 3}}, nil)
		if !s.round() {
			t.Fatal("the first round left nothing")
		}
		if live, snaps := tr.last(); live != 1 || snaps != 1 {
			t.Fatalf("first call: %d live, %d snapshots; want 1, 1", live, snaps)
		}
		if len(s.queue) != 1 || !unreadSnapshot(s.queue[0]) {
			t.Fatalf("after Busy the queue holds %d, want the snapshot unread", len(s.queue))
		}
		s.Enqueue([]Msg{{Slot: 2, Epoch: 5, Seq: 1}}, nil)
		// A follower's copy (a handover's final copy) does not wait.
		s.SendSnapshot(slots.SendSnapshot{Slot: 6, Epoch: 5, To: "b", Sent: time.Now(), Grant: false, Owner: false, Inc: 1, Term: 1})
		if !s.round() {
			t.Fatal("the snapshot was not kept")
		}
		if live, snaps := tr.last(); live != 1 || snaps != 1 || cp.reads != 2 {
			t.Errorf("within snapBusyWait: %d live, %d snapshots sent, %d read; want 1, 1 (the follower's), 2", live, snaps, cp.reads)
		}
		time.Sleep(snapBusyWait)
		tr.mu.Lock()
		tr.busy = false
		tr.mu.Unlock()
		if s.round() {
			t.Errorf("%d messages left after the replica took the snapshot", len(s.queue))
		}
		if live, snaps := tr.last(); live != 0 || snaps != 1 || cp.reads != 3 {
			t.Errorf("after snapBusyWait: %d live, %d snapshots sent, %d read; want 0, 1, 3", live, snaps, cp.reads)
		}
	})
}

// hookTransport is snapTransport that runs during, a hook, inside each
// call before it answers.
type hookTransport struct {
	snapTransport
	during func()
}

func (f *hookTransport) Call(ctx context.Context, to, path, ct string, body []byte) ([]byte, error) {
	if f.during != nil {
		f.during()
	}
	return f.snapTransport.Call(ctx, to, path, ct, body)
}

// TestShipperSendsASlotsWritesAfterItsSnapshot: a replica with a snapshot
// of a slot queued gets the slot's live writes only in a round after the
// snapshot was applied (the snapshot holds them; sent before it they would
// gap and ask for another); other slots' writes go at once.
func TestShipperSendsASlotsWritesAfterItsSnapshot(t *testing.T) {
	tr := &snapTransport{}
	s := NewShipper("a", ShipperDeps{Transport: tr, Ownership: &fakeOwnership{replicas: []string{"b"}}, Copies: fakeCopies{}, Log: quiet})
	s.SendSnapshot(slots.SendSnapshot{Slot: 4, Epoch: 5, To: "b", Sent: time.Now(), Grant: true, Owner: true, Inc: 1, Term: 1})
	s.Enqueue([]Msg{{Slot: 4, Epoch: 5, Seq: 3}, {Slot: 1, Epoch: 5, Seq: 3}}, nil)
	if !s.round() {
		t.Fatal("the first round left nothing: slot 4's write went with its snapshot")
	}
	if live, snaps := tr.last(); live != 1 || snaps != 1 || tr.calls[0][0].Slot == 4 && !tr.calls[0][0].Reset {
		t.Fatalf("first call: %d live, %d snapshots (%v); want slot 1's write and slot 4's snapshot", live, snaps, tr.calls[0])
	}
	if s.round() {
		t.Errorf("%d messages left after the second round", len(s.queue))
	}
	if live, snaps := tr.last(); live != 1 || snaps != 0 || tr.calls[1][0].Slot != 4 {
		t.Errorf("second call: %d live, %d snapshots (%v); want slot 4's write", live, snaps, tr.calls[1])
	}
}

// TestShipperSkipsSnapshotsACopyAnswered: a snapshot asked for while a
// copy of the slot was on its way to the same node, at the same epoch, is
// not read nor sent once that copy is applied (the machines ask again
// every Lease until their copy arrives); one asked for after it was
// applied, or at another epoch, is.
func TestShipperSkipsSnapshotsACopyAnswered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := &hookTransport{}
		cp := &readCounter{}
		s := NewShipper("a", ShipperDeps{Transport: tr, Ownership: &fakeOwnership{replicas: []string{"b"}}, Copies: cp, Log: quiet})
		ask := func(slot uint16, epoch uint64) func() {
			return func() {
				time.Sleep(time.Millisecond)
				s.SendSnapshot(slots.SendSnapshot{Slot: slots.Slot(slot), Epoch: slots.Epoch(epoch), To: "b", Sent: time.Now(), Grant: true, Owner: true, Inc: 1, Term: 1})
				time.Sleep(time.Millisecond)
			}
		}
		s.SendSnapshot(slots.SendSnapshot{Slot: 4, Epoch: 5, To: "b", Sent: time.Now(), Grant: true, Owner: true, Inc: 1, Term: 1})
		s.SendSnapshot(slots.SendSnapshot{Slot: 6, Epoch: 5, To: "b", Sent: time.Now(), Grant: true, Owner: true, Inc: 1, Term: 1})
		first := true
		tr.during = func() { // asked again while the first copies travel
			if first {
				first = false
				ask(4, 5)()
				ask(6, 7)()
			}
		}
		s.round()
		if len(s.queue) != 2 {
			t.Fatalf("%d queued after the first round, want the 2 requests made during it", len(s.queue))
		}
		if cp.reads != 2 {
			t.Fatalf("first round read %d snapshots, want 2", cp.reads)
		}
		if s.round() {
			t.Errorf("%d messages left after the second round", len(s.queue))
		}
		if cp.reads != 3 || len(tr.calls) != 2 || len(tr.calls[1]) != 1 || tr.calls[1][0].Slot != 6 {
			t.Errorf("second round: %d read in all, calls %v; want only slot 6's copy at its new epoch", cp.reads, tr.calls)
		}
		time.Sleep(time.Millisecond)
		ask(4, 5)() // after slot 4's copy was applied: sent
		if s.round() {
			t.Errorf("%d messages left after the third round", len(s.queue))
		}
		if cp.reads != 4 || len(tr.calls) != 3 || tr.calls[2][0].Slot != 4 {
			t.Errorf("third round: %d read in all, calls %v; want slot 4's copy again", cp.reads, tr.calls)
		}
	})
}

// TestShipperHoldsSnapshotsForAPressedReplica: after an answer that says
// the replica's store is pressed, an owner's snapshot to it is neither read
// nor sent for snapBusyWait (it would wait there and come back Busy), while
// live writes and a follower's copy (a final copy) go; once an answer says
// there is room, and snapBusyWait passed, it goes.
func TestShipperHoldsSnapshotsForAPressedReplica(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := &snapTransport{pressed: true}
		cp := &readCounter{}
		s := NewShipper("a", ShipperDeps{Transport: tr, Ownership: &fakeOwnership{replicas: []string{"b"}}, Copies: cp, Log: quiet})
		s.Enqueue([]Msg{{Slot: 1, Epoch: 5, Seq: 3}}, nil)
		if s.round() {
			t.Fatal("the live write was kept")
		}
		s.SendSnapshot(slots.SendSnapshot{Slot: 4, Epoch: 5, To: "b", Sent: time.Now(), Grant: true, Owner: true, Inc: 1, Term: 1})   // an owner's copy: held
		s.SendSnapshot(slots.SendSnapshot{Slot: 6, Epoch: 5, To: "b", Sent: time.Now(), Grant: false, Owner: false, Inc: 1, Term: 1}) // a follower's: goes
		s.Enqueue([]Msg{{Slot: 2, Epoch: 5, Seq: 1}}, nil)
		if !s.round() {
			t.Fatal("the owner's snapshot was not kept")
		}
		if live, snaps := tr.last(); live != 1 || snaps != 1 || cp.reads != 1 || tr.calls[1][1].Slot != 6 {
			t.Fatalf("while pressed: %d live, %d snapshots sent (%v), %d read; want slot 2's write, slot 6's copy, 1 read", live, snaps, tr.calls[1], cp.reads)
		}
		tr.mu.Lock()
		tr.pressed = false
		tr.mu.Unlock()
		time.Sleep(snapBusyWait)
		if s.round() {
			t.Errorf("%d messages left once the replica had room", len(s.queue))
		}
		if live, snaps := tr.last(); live != 0 || snaps != 1 || cp.reads != 2 {
			t.Errorf("after snapBusyWait: %d live, %d snapshots sent, %d read; want 0, 1, 2", live, snaps, cp.reads)
		}
	})
}
