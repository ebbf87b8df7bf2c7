package slots

import (
	"fmt"
	"testing"
	"time"
)

// These tests put a second event between an owner's crash and its
// follower's takeover: the follower holds the dead owner's grant and
// waits out the lease (and the vote) before it promotes, or before it
// hands the slot to the table owner.
//
// Found in a 3-process CI run (cmd/chime TestSDKAgainstThreeProcesses,
// once): n2 was SIGKILLed, n3 (its follower) declared it dead, then n4
// joined and the new table gave two of n2's slots to n4 with n3 following;
// those slots stayed unowned for the remaining 55 s. n3 held a synced copy
// but no grant any more (grantor=false, grantInc≠0, its leader n2 dead),
// n4 had imported n3's copy and found nobody who could hand the epoch
// over. What voided n3's grant there is not known (the logs did not say);
// a join alone does not (TestJoinBeforeTakeover), nor does a stuck run
// loop (TestBusyBeforeTakeover), a process stall of DeadAfter or more
// does (TestPauseBeforeTakeover; restore.go restores such a grant now).

// TestJoinBeforeTakeover: a node joins at every point of the takeover.
func TestJoinBeforeTakeover(t *testing.T) {
	for d := time.Duration(0); d <= 5*time.Second; d += 500 * time.Millisecond {
		t.Run(fmt.Sprintf("join=%v", d), func(t *testing.T) {
			t.Parallel()
			beforeTakeover(t, d, func(c *cluster) { joinN4(c, 0) })
		})
	}
	for _, b := range []time.Duration{time.Second, 4 * time.Second} {
		t.Run(fmt.Sprintf("join=1s/joinerBusy=%v", b), func(t *testing.T) {
			t.Parallel()
			beforeTakeover(t, time.Second, func(c *cluster) { joinN4(c, b) })
		})
	}
}

// TestBusyBeforeTakeover: the grant holder's run loop is stuck (its
// process runs on: memberlist answers probes) for up to 4 s at every
// point of the takeover. That voids no grant (Tick.Stalled).
func TestBusyBeforeTakeover(t *testing.T) {
	for d := time.Duration(0); d <= 3*time.Second; d += 500 * time.Millisecond {
		for _, b := range []time.Duration{time.Second, 4 * time.Second} {
			t.Run(fmt.Sprintf("after=%v/busy=%v", d, b), func(t *testing.T) {
				t.Parallel()
				beforeTakeover(t, d, func(c *cluster) {
					c.busy["n3"] = c.now.Add(b)
					c.run(b)
				})
			})
		}
	}
}

// TestPauseBeforeTakeover: the grant holder's process stalls for longer
// than DeadAfter before it took the slots over (a GC or VM stall; on a
// loaded machine a starved process), with or without a join after. The
// stall voids its grant (Tick: the others may have declared it dead, and
// a live owner, its view of the owner a flap, forgotten the grant), and
// nobody else holds one (n1, hearing from nobody that long, voids its
// grants too). Before restore.go the dead owner's slots stayed unavailable
// until the owner came back (chime cluster forget did not release them
// either): 20 of 64, all n2 owned, in each subtest up to 500 ms (later
// ones promoted before the stall). Now a majority's word
// that it heard nothing from the owner since the lapse could let it act
// restores the grant.
func TestPauseBeforeTakeover(t *testing.T) {
	for _, join := range []bool{false, true} {
		for d := time.Duration(0); d <= 1500*time.Millisecond; d += 250 * time.Millisecond {
			t.Run(fmt.Sprintf("join=%v/pause=%v", join, d), func(t *testing.T) {
				t.Parallel()
				beforeTakeover(t, d, func(c *cluster) {
					c.paused["n3"] = c.now.Add(2 * time.Second)
					c.run(2100 * time.Millisecond)
					c.deaths()
					c.tables(false) // node re-reads its view after a stall
					if join {
						joinN4(c, 0)
					}
				})
			})
		}
	}
}

// beforeTakeover runs a 3-node cluster (DeadAfter 1.5 s, voters, the
// vote), kills n2, lets the survivors declare it dead, waits after, runs
// event, and then checks 30 s later that every slot fires on one node.
func beforeTakeover(t *testing.T, after time.Duration, event func(c *cluster)) {
	c := crashedN2(t, 64, 1500*time.Millisecond)
	c.run(after)
	event(c)
	c.run(30 * time.Second)
	for s := range Slot(c.numSlots) {
		if firing := c.firing(s); len(firing) != 1 {
			t.Errorf("slot %d fired by %v, want one node", s, firing)
			for _, n := range c.names {
				t.Logf("  %s: %s", n, c.m[n].Debug(s))
			}
		}
	}
}

// joinN4 adds n4, which learns in its first push-pull that n2 is dead;
// its run loop is stuck for busy after it started.
func joinN4(c *cluster, busy time.Duration) {
	c.add("n4", nil)
	c.unreach[[2]string{"n4", "n2"}] = c.now.Add(-c.deadAfter)
	if busy > 0 {
		c.busy["n4"] = c.now.Add(busy)
	}
	c.tick(c.now.Add(100 * time.Millisecond))
	c.deaths()
	c.tables(false)
	c.deliver(100)
}

// TestVoidedGrantNeedsQuietWitnesses: as TestPauseBeforeTakeover, but a
// message of the dead owner, delayed in the network, reaches n1 after the
// stall began. n1 then cannot say that it heard nothing from the owner
// since the lapse could let it act (restore.go), n3 with it is no
// majority, and n3 must not restore its grant: the slots it followed for
// n2 wait, unavailable (until n2 returns, then fire on one node).
func TestVoidedGrantNeedsQuietWitnesses(t *testing.T) {
	var stalled []Slot
	beforeTakeover(t, 250*time.Millisecond, func(c *cluster) {
		for s := range Slot(c.numSlots) {
			if si := &c.m["n3"].slots[s]; si.grantor && si.leader == "n2" {
				stalled = append(stalled, s)
			}
		}
		c.paused["n3"] = c.now.Add(2 * time.Second)
		c.run(300 * time.Millisecond)
		c.step("n1", PairReplicated{From: "n2", Sent: c.now.Add(-time.Second), Inc: c.m["n3"].slots[stalled[0]].grantInc})
		c.run(1800 * time.Millisecond)
		c.deaths()
		c.tables(false)
		c.run(30 * time.Second)
		for _, s := range stalled {
			unavail := c.m["n1"].Unavailable(s) || c.m["n3"].Unavailable(s)
			if si := &c.m["n3"].slots[s]; si.grantor || !unavail || len(c.firing(s)) != 0 {
				t.Errorf("slot %d: n3 restored its grant on a witness that heard n2 late, or it fires: %s", s, c.m["n3"].Debug(s))
			}
		}
		c.restart("n2")
		c.tables(false)
	})
	if len(stalled) == 0 {
		t.Fatal("n3 held no grant of n2: nothing checked")
	}
}

// crashedN2 runs a 3-node cluster with voters, the vote and deadAfter for
// 3 s, crashes n2, and tells the survivors once they detected it
// (deadAfter+0.5 s later).
func crashedN2(t *testing.T, numSlots int, deadAfter time.Duration) *cluster {
	t.Helper()
	c := newCluster(t, numSlots)
	c.deadAfter = deadAfter
	c.voters = map[string]*Voters{}
	for _, n := range []string{"n1", "n2", "n3"} {
		c.add(n, nil)
	}
	c.stable = 3
	c.tables(true)
	c.run(3 * time.Second)
	c.crash("n2")
	c.run(c.deadAfter + 500*time.Millisecond) // detected by then
	c.deaths()
	c.tables(false)
	return c
}
