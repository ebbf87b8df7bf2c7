package ownership

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/chime-scheduler/chime/ring/gossip"
	"github.com/chime-scheduler/chime/slots"
)

// TestBoardFires: a slot fires while the machine says so and now is
// before its bounds; past one, it is held.
func TestBoardFires(t *testing.T) {
	now := time.Unix(1000, 0)
	at := func(d time.Duration) int64 { return now.Add(d).UnixNano() }
	for _, tc := range []struct {
		name          string
		firing        bool
		horizon, near int64
		ok, held      bool
	}{
		{"not firing", false, at(time.Second), 0, false, false},
		{"no horizon yet", true, 0, 0, false, true},
		{"before the horizon", true, at(time.Second), 0, true, false},
		{"at the horizon", true, at(0), 0, false, true},
		{"before its near bound", true, at(time.Second), at(time.Millisecond), true, false},
		{"past its near bound", true, at(time.Second), at(-time.Millisecond), false, true},
		{"near bound later than the horizon", true, at(-time.Millisecond), at(time.Second), false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := NewBoard()
			v := uint64(3)<<8 | uint64(slots.RoleOwner)
			if tc.firing {
				v |= 1 << 7
			}
			b.setPub(7, v)
			b.horizon.Store(tc.horizon)
			b.near[7].Store(tc.near)
			if ok, held := b.Fires(7, now); ok != tc.ok || held != tc.held {
				t.Errorf("Fires = %v, %v; want %v, %v", ok, held, tc.ok, tc.held)
			}
		})
	}
}

// TestStuckLoopStopsAtBound: should the executor's loop get stuck, the
// data path (Board.Fires) stops firing a slot when the machine's right to
// fire it ends, though the board still says the node fires it. n1 owns its
// slots of a new two-node cluster and granted n2 a lease, which n2 never
// acks: the slots fire until that lease ends, Lease after the grant, not
// after; the next tick stops them.
func TestStuckLoopStopsAtBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGenesisExec(t, "n1")
		active := gossip.StateActive
		g.b.ViewChanged(View{}, view(time.Now(), member("n1", active, true, 0), member("n2", active, true, 0)))
		g.step()
		time.Sleep(time.Second)
		g.tick() // settled: bootstraps, grants n2
		start := time.Now()
		var mine []uint16
		for s := range uint16(slots.Count) {
			if r, _, firing := g.b.State(s); r == slots.RoleOwner && firing {
				mine = append(mine, s)
			}
		}
		if len(mine) == 0 {
			t.Fatal("n1 fires none of its slots after the bootstrap")
		}
		fires := func() (ok, held int) {
			for _, s := range mine {
				o, h := g.b.Fires(s, time.Now())
				if o {
					ok++
				}
				if h {
					held++
				}
			}
			return ok, held
		}
		// The loop is stuck from here on: no step, no tick.
		lease := g.e.cfg.Machine.Lease
		time.Sleep(lease - 10*time.Millisecond)
		if ok, held := fires(); ok != len(mine) {
			t.Fatalf("%v after the grant: %d of %d slots fire (%d held), want all", time.Since(start), ok, len(mine), held)
		}
		time.Sleep(10 * time.Millisecond)
		if ok, held := fires(); ok != 0 || held != len(mine) {
			t.Fatalf("at the end of n2's lease with the loop stuck: %d of %d slots fire, %d held; want all held", ok, len(mine), held)
		}
		for _, s := range mine {
			if _, _, firing := g.b.State(s); !firing {
				t.Fatalf("slot %d no longer published as firing: the test shows nothing", s)
			}
		}
		g.tick()
		if ok, held := fires(); ok != 0 || held != 0 {
			t.Errorf("after the next tick: %d fire, %d held; want every slot stopped", ok, held)
		}
	})
}
