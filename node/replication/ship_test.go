package replication

import (
	"slices"
	"testing"
	"time"
)

// TestShipOrder: live writes go first, then snapshots of slots this node
// no longer owns (a handover's final copy), then catch-up snapshots; each
// class keeps the queue's order.
func TestShipOrder(t *testing.T) {
	holds := func(s uint16) uint64 { // slot 1: owned at epoch 5
		if s == 1 {
			return 5
		}
		return 0
	}
	batch := []*queued{
		{msg: Msg{Slot: 1}, to: "n2"}, // catch-up snapshot of an owned slot
		{msg: Msg{Slot: 1, Seq: 7}},   // live write
		{msg: Msg{Slot: 2}, to: "n3"}, // final copy of a slot handed over
		{msg: Msg{Slot: 1, Seq: 8}},   // live write
		{msg: Msg{Slot: 1}, to: "n4"}, // catch-up snapshot
		{msg: Msg{Slot: 3}, to: "n2"}, // a slot this node never owned
	}
	if got, want := shipOrder(batch, holds), []int{1, 3, 2, 5, 0, 4}; !slices.Equal(got, want) {
		t.Errorf("shipOrder = %v, want %v", got, want)
	}
}

// TestShipperRefreshesQueuedSnapshots: a snapshot asked for again while
// the first request still waits in the queue is not queued twice; the
// queued one carries the newest Sent, grant, owner and epoch.
func TestShipperRefreshesQueuedSnapshots(t *testing.T) {
	s := NewShipper("n1", ShipperDeps{})
	t0 := time.Unix(100, 0)
	s.SendSnapshot(4, 2, "n2", t0, false, false)
	s.SendSnapshot(4, 3, "n2", t0.Add(time.Second), true, true)
	s.SendSnapshot(4, 3, "n3", t0, false, false) // another target: its own
	if len(s.queue) != 2 {
		t.Fatalf("queue holds %d snapshots, want 2", len(s.queue))
	}
	q := s.queue[0]
	if q.to != "n2" || !q.sent.Equal(t0.Add(time.Second)) || !q.grant || !q.owner || q.epoch != 3 {
		t.Errorf("queued snapshot = to %s sent %v grant %v owner %v epoch %d, want the second request's", q.to, q.sent, q.grant, q.owner, q.epoch)
	}
}
