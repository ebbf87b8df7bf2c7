package slots

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// TestVoteDeadFollowerStallsNothing is issue 17 item 3 in the machine: a
// follower dies, and its owners' slots keep firing throughout, before and
// after the survivors notice (a failure detection delay of 3 s), because
// the third node's promises back them once the dead follower's lease runs
// out (Config.Vote). Without the vote every slot the dead node followed
// stops at the end of its lease until the owner drops it as dead (which the
// test checks too, so that it can fail). Afterwards every slot is fired by
// exactly one node: the dead node's own slots failed over.
func TestVoteDeadFollowerStallsNothing(t *testing.T) {
	for _, vote := range []bool{true, false} {
		t.Run(fmt.Sprintf("vote=%v", vote), func(t *testing.T) {
			const numSlots = 32
			c := settledThree(t, numSlots, vote)
			owner := map[Slot]string{}
			followed := 0 // slots of n1 and n2 that n3 followed
			for s := range Slot(numSlots) {
				f := c.firing(s)
				if len(f) != 1 {
					t.Fatalf("settled: slot %d fired by %v", s, f)
				}
				owner[s] = f[0]
				if f[0] != "n3" && c.m[f[0]].slots[s].follower == "n3" {
					followed++
				}
			}
			if followed == 0 {
				t.Fatal("n3 follows none of the survivors' slots: nothing to check")
			}
			c.crash("n3")
			stalled := map[Slot]bool{}
			check := func() {
				for s, o := range owner {
					if o != "n3" && !slices.Equal(c.firing(s), []string{o}) {
						stalled[s] = true
					}
				}
			}
			// Nobody notices for 3 s (memberlist's detection time), then
			// every survivor does.
			for range 30 {
				c.tick(c.now.Add(100 * time.Millisecond))
				c.deliver(100)
				check()
			}
			c.deaths()
			c.tables(false)
			for range 100 {
				c.tick(c.now.Add(100 * time.Millisecond))
				c.deliver(100)
				check()
			}
			switch {
			case vote && len(stalled) > 0:
				t.Errorf("with the vote, %d of the survivors' slots stopped firing after their follower died: %v", len(stalled), stalled)
			case !vote && len(stalled) == 0:
				t.Errorf("without the vote no slot of the %d the dead node followed stopped: the test checks nothing", followed)
			}
			for s := range Slot(numSlots) {
				if f := c.firing(s); len(f) != 1 {
					t.Errorf("after the failover: slot %d fired by %v", s, f)
				}
			}
		})
	}
}

// TestVoteTakeoverSettle: a crashed owner's slots are taken over once the
// survivors' view has been unchanged for Config.TakeSettle with the vote,
// and only after the full Settle without it; never sooner.
func TestVoteTakeoverSettle(t *testing.T) {
	for _, vote := range []bool{true, false} {
		t.Run(fmt.Sprintf("vote=%v", vote), func(t *testing.T) {
			const numSlots = 32
			c := settledThree(t, numSlots, vote)
			var victims []Slot
			for s := range Slot(numSlots) {
				if f := c.firing(s); slices.Equal(f, []string{"n3"}) {
					victims = append(victims, s)
				}
			}
			if len(victims) == 0 {
				t.Fatal("n3 fires no slot: nothing to check")
			}
			cfg := c.config("n1")
			if cfg.TakeSettle <= 0 || cfg.TakeSettle >= cfg.Settle {
				t.Fatalf("TakeSettle %v, Settle %v: the test needs 0 < TakeSettle < Settle", cfg.TakeSettle, cfg.Settle)
			}
			settle := cfg.Settle
			if vote {
				settle = cfg.TakeSettle
			}
			// The grants run out (Lease+Margin) before anyone notices.
			c.crash("n3")
			for range 30 {
				c.tick(c.now.Add(100 * time.Millisecond))
				c.deliver(100)
			}
			detected := c.now
			c.deaths()
			c.tables(false)
			taken := map[Slot]time.Duration{}
			for range 30 {
				c.tick(c.now.Add(100 * time.Millisecond))
				c.deliver(100)
				for _, s := range victims {
					if _, ok := taken[s]; !ok && len(c.firing(s)) > 0 {
						taken[s] = c.now.Sub(detected)
					}
				}
			}
			for _, s := range victims {
				at, ok := taken[s]
				switch {
				case !ok:
					t.Errorf("slot %d: not taken over within 3 s of the detection", s)
				case at < settle:
					t.Errorf("slot %d: taken over %v after the detection, before the settle (%v)", s, at, settle)
				case at > settle+400*time.Millisecond:
					t.Errorf("slot %d: taken over %v after the detection, more than 400 ms past the settle (%v)", s, at, settle)
				}
			}
		})
	}
}

// settledThree returns a cluster of n1, n2 and n3 over numSlots slots,
// with or without the vote, run for 5 s after its bootstrap table.
func settledThree(t *testing.T, numSlots int, vote bool) *cluster {
	t.Helper()
	c := newCluster(t, numSlots)
	c.vote = vote
	for i := 1; i <= 3; i++ {
		c.add(fmt.Sprintf("n%d", i), nil)
	}
	c.stable = 3
	c.tables(true)
	c.run(5 * time.Second)
	return c
}
