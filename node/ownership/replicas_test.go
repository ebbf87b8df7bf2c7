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
// follower acknowledged holding a valid replica (its snapshot) and the
// grant: a follower without either cannot take the slot over when the
// owner dies, and acknowledging on it left acknowledged tasks unfired
// until the owner came back (TestFailoverLosesNoAcknowledgedTask). The
// follower's ack of both makes the board say safe, and wakes the shipper.
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
		sent := time.Now()
		ack := func(grant bool) {
			t.Helper()
			a := &Ack{Slot: slots.Slot(s), Epoch: 1, Sent: sent, Synced: true, Grant: grant}
			if err := g.b.Receive("n2", Batch{From: "n2", Msgs: []Msg{a}}.Encode()); err != nil {
				t.Fatal(err)
			}
			g.step()
		}
		// Synced, but it did not take the grant (its own view had no
		// majority yet, say): if n1 died now, n2 could not promote.
		ack(false)
		if reps, safe := g.b.Replicas(s); !slices.Equal(reps, []string{"n2"}) || safe || ready.n != 0 {
			t.Fatalf("after a synced ack without the grant: Replicas(%d) = %v, safe %v (woken %d); want [n2], not safe", s, reps, safe, ready.n)
		}
		// The owner's heartbeats offer n2 the grant; n2 takes it.
		var beat *Beat
		for range 20 {
			time.Sleep(250 * time.Millisecond)
			g.tick()
			g.mu.Lock()
			for _, m := range g.sent["n2"] {
				if b, ok := m.(*Beat); ok && b.Slot == slots.Slot(s) && b.Grant {
					beat = b
				}
			}
			g.mu.Unlock()
			if beat != nil {
				break
			}
		}
		if beat == nil {
			t.Fatalf("n1 offered n2 no grant of slot %d", s)
		}
		if _, safe := g.b.Replicas(s); safe {
			t.Fatalf("safe once the grant is offered, before n2 acked it")
		}
		sent = beat.Sent
		ack(true)
		if reps, safe := g.b.Replicas(s); !slices.Equal(reps, []string{"n2"}) || !safe {
			t.Errorf("after the follower acked its replica and the grant: Replicas(%d) = %v, safe %v; want [n2], safe", s, reps, safe)
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
