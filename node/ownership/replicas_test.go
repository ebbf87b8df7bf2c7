package ownership

import (
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/chime-scheduler/chime/ring/gossip"
	"github.com/chime-scheduler/chime/slots"
)

// TestReplicasSafeOnlyOnceTheFollowerAcked: a node that bootstraps a new
// cluster owns its slots at epoch 1 with the table follower as replica,
// and the board says a write all replicas acked is not safe until that
// follower acknowledged holding a valid replica (its snapshot): a fresh
// follower applies the first write of an empty slot before its snapshot
// is installed, and acknowledging on it lost tasks when the owner died
// (TestFailoverLosesNoAcknowledgedTask). The follower's synced ack makes
// the board say safe, and wakes the shipper.
func TestReplicasSafeOnlyOnceTheFollowerAcked(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ready := &countReady{}
		g := newGenesisExec(t, "n1")
		g.e.d.Snapshots = ready
		active := gossip.StateActive
		v := view(time.Now(), member("n1", active, true, 0), member("n2", active, true, 0))
		g.b.ViewChanged(View{}, v)
		g.step()
		time.Sleep(time.Second) // settled: it bootstraps
		g.tick()
		var s uint16
		for s = 0; int(s) < slots.Count; s++ {
			if o, _ := v.Table.Owner(s); o.Name == "n1" {
				break
			}
		}
		if r, e, _ := g.b.State(s); r != slots.RoleOwner || e != 1 {
			t.Fatalf("slot %d: %v at epoch %d, want owner at 1", s, r, e)
		}
		if reps, safe := g.b.Replicas(s); !slices.Equal(reps, []string{"n2"}) || safe {
			t.Fatalf("before the follower's ack: Replicas(%d) = %v, safe %v; want [n2], not safe", s, reps, safe)
		}
		ack := &Ack{Slot: slots.Slot(s), Epoch: 1, Sent: time.Now(), Synced: true}
		if err := g.b.Receive("n2", Batch{From: "n2", Msgs: []Msg{ack}}.Encode()); err != nil {
			t.Fatal(err)
		}
		g.step()
		if reps, safe := g.b.Replicas(s); !slices.Equal(reps, []string{"n2"}) || !safe {
			t.Errorf("after the follower's synced ack: Replicas(%d) = %v, safe %v; want [n2], safe", s, reps, safe)
		}
		if ready.n == 0 {
			t.Error("the shipper was not woken when the follower became ready")
		}
	})
}

// countReady counts FollowerReady calls.
type countReady struct {
	nopStore
	n int
}

func (c *countReady) FollowerReady() { c.n++ }
