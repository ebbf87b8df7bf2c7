package slots

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// TestOwnerCrashAtFormation kills n2 at every point of a 3-node
// cluster's first seconds, with message delays, losses and stuck run
// loops (a loaded machine), and n4 joining after: a CI run of cmd/chime
// TestSDKAgainstThreeProcesses killed n2 1 s after the bootstrap, loaded,
// and slot 21 stayed unowned for good (its follower n3 held a synced copy
// but no grant).
//
// What must hold (the harness checks safety after every step): a slot
// that a survivor owned at the kill, or whose grant or release from n2 a
// survivor held then, is fired by one node afterwards. A slot of n2's
// whose grant nobody held is not taken over: its owner may have
// acknowledged writes to a replica only it knew of, or may still fire
// (nothing bounds it without the grant's lease), so it waits until n2
// returns (the open class; -crashstalls asserts those too, DESIGN §4 "A
// dead owner's slot nobody holds a grant of"). A follower now takes the
// first heartbeat of an epoch-1 owner at seq 0 as its (empty) copy with
// the grant, without waiting for the snapshot: of these 156 runs 13 leave
// such slots (12 of them killed at once, before any heartbeat), against
// 36 before.
func TestOwnerCrashAtFormation(t *testing.T) {
	var kills []time.Duration
	for d := time.Duration(0); d <= 3*time.Second; d += 250 * time.Millisecond {
		kills = append(kills, d)
	}
	runFormations(t, kills, ownerCrashAtFormation)
}

// runFormations runs f for seeds 1–12 and each kill time, in parallel.
func runFormations(t *testing.T, kills []time.Duration, f func(*testing.T, uint64, time.Duration)) {
	for seed := uint64(1); seed <= 12; seed++ {
		for _, d := range kills {
			t.Run(fmt.Sprintf("seed=%d/kill=%v", seed, d), func(t *testing.T) {
				t.Parallel()
				f(t, seed, d)
			})
		}
	}
}

// newFormation bootstraps n1..n3 (64 slots) with node's DeadAfter, the
// vote's voters, and seed's delays (0–300 ms) and losses (0–10 %), its
// random source drawn from (seed, stream).
func newFormation(t *testing.T, seed, stream uint64) *cluster {
	c := newCluster(t, 64)
	c.deadAfter = 1500 * time.Millisecond
	c.voters = map[string]*Voters{}
	c.left, c.forgot = map[string]bool{}, map[string]bool{}
	c.rng = rand.New(rand.NewPCG(seed, stream))
	c.maxDelay = time.Duration(seed%4) * 100 * time.Millisecond
	c.dropProb = float64(seed%3) * 0.05
	for _, n := range []string{"n1", "n2", "n3"} {
		c.add(n, nil)
	}
	c.stable = 3
	c.tables(true)
	return c
}

func ownerCrashAtFormation(t *testing.T, seed uint64, kill time.Duration) {
	c := newFormation(t, seed, 7)
	if seed%2 == 0 {
		for _, n := range []string{"n1", "n2", "n3"} {
			if c.rng.IntN(2) == 0 {
				c.busy[n] = c.now.Add(time.Duration(c.rng.Int64N(int64(time.Second))))
			}
		}
	}
	c.run(kill)
	held := make([]bool, c.numSlots)
	for s := range Slot(c.numSlots) {
		for _, n := range []string{"n1", "n3"} {
			st := c.m[n].slots[s]
			if st.role == RoleOwner || st.role == RoleSealing || st.leader == "n2" && (st.grantor || st.releasedTo != "") {
				held[s] = true
			}
		}
	}
	c.crash("n2")
	c.run(c.deadAfter + 500*time.Millisecond)
	c.deaths()
	c.tables(false)
	c.run(5 * time.Second)
	joinN4(c, 0)
	c.run(25 * time.Second)
	// Fired by one node at some tick of the last 5 s: on a lossy link a
	// degraded owner (its follower n2 dead) fires only on a majority's
	// promises, here both other voters', and one's may lapse a moment
	// (seed 11: n1's pair acks lost for 2.3 s).
	fired := firedOnce(c)
	open := 0
	for s := range Slot(c.numSlots) {
		firing := c.firing(s)
		if fired[s] {
			continue
		}
		if !held[s] && !*crashStalls {
			open++
			continue
		}
		t.Errorf("slot %d (held at the kill: %v) fired by %v, want one node", s, held[s], firing)
		for _, n := range c.names {
			t.Logf("  %s: %s", n, c.m[n].Debug(s))
		}
	}
	if open > 0 {
		t.Logf("%d slots nobody held a grant of stay unowned (the open class)", open)
	}
}

// TestForgetAfterOwnerCrashAtFormation kills n2 in a new cluster's first
// second, as TestOwnerCrashAtFormation does, then has an operator forget
// it (chime cluster forget): the slots of n2's nobody held a grant of,
// which wait for n2 otherwise, are taken by their table owners after a
// census of the live members (census.go), and every slot fires on one
// node. Then n2 comes back with its data anyway (forgotten in error): told
// so (slots.Disowned, odd seeds) it claims nothing; not told, it reclaims
// the epochs it gave no grant of, which the census jumped over. Either
// way no slot is fired by two nodes (the harness checks after every step)
// and every slot fires on one node again.
func TestForgetAfterOwnerCrashAtFormation(t *testing.T) {
	kills := []time.Duration{0, 100 * time.Millisecond, 250 * time.Millisecond, time.Second}
	runFormations(t, kills, forgetAfterOwnerCrash)
}

// crashN2AtFormation starts a formation of 11 slots, kills n2 kill into
// it, and runs until the survivors' tables drop it and 5 s more. It
// returns the cluster and how many slots were then not fired by one node.
func crashN2AtFormation(t *testing.T, seed uint64, kill time.Duration) (*cluster, int) {
	c := newFormation(t, seed, 11)
	c.run(kill)
	c.crash("n2")
	c.run(c.deadAfter + 500*time.Millisecond)
	c.deaths()
	c.tables(false)
	c.run(5 * time.Second)
	before := 0
	for s := range Slot(c.numSlots) {
		if len(c.firing(s)) != 1 {
			before++
		}
	}
	return c, before
}

func forgetAfterOwnerCrash(t *testing.T, seed uint64, kill time.Duration) {
	c, before := crashN2AtFormation(t, seed, kill)
	c.left["n2"], c.forgot["n2"] = true, true
	c.deaths()
	c.tables(false)
	c.run(10 * time.Second)
	mustFireOnce(t, c, "after the forget")
	census := 0
	for s := range Slot(c.numSlots) {
		for _, n := range []string{"n1", "n3"} {
			if c.m[n].State(s).Role == RoleOwner && c.m[n].State(s).Epoch > censusJump {
				census++
			}
		}
	}
	t.Logf("unfired before the forget: %d of %d slots; taken by a census: %d", before, c.numSlots, census)
	if kill == 0 && before == 0 {
		t.Errorf("no slot waited for n2 before the forget: the test does not reach the census")
	}
	delete(c.left, "n2")
	delete(c.forgot, "n2")
	c.restart("n2")
	if seed%2 == 1 {
		// As node does once its join tells it (gossip RunForgotten); the
		// even seeds model a node that joined through no member that knew.
		c.step("n2", Disowned{})
	}
	c.tables(false)
	c.run(20 * time.Second)
	mustFireOnce(t, c, "after n2 returned")
}

// TestWipedOwnerAtFormation kills n2 in a new cluster's first second, as
// TestOwnerCrashAtFormation does, then brings it back with an empty data
// dir under its old name (a replaced disk), not forgotten. Told that its
// name had an earlier run (slots.Disowned, as node's join tells it), it
// owns by the table the slots that run owned, holds no copy of them, and
// no member holds one or a grant to hand over: its census takes them as
// a forgotten owner's (census.go) instead of reporting them unavailable
// for good, and every slot fires on one node (wipe sim seeds 596, 38023).
func TestWipedOwnerAtFormation(t *testing.T) {
	kills := []time.Duration{0, 100 * time.Millisecond, 250 * time.Millisecond, time.Second}
	runFormations(t, kills, wipedOwnerAtFormation)
}

func wipedOwnerAtFormation(t *testing.T, seed uint64, kill time.Duration) {
	c, before := crashN2AtFormation(t, seed, kill)
	c.wipe("n2") // restarts it, empty
	c.step("n2", Disowned{})
	c.tables(false)
	c.run(20 * time.Second)
	mustFireOnce(t, c, "after n2 came back empty")
	census := 0
	for s := range Slot(c.numSlots) {
		if st := c.m["n2"].State(s); st.Role == RoleOwner && st.Epoch > censusJump {
			census++
		}
	}
	t.Logf("unfired before n2 came back: %d of %d slots; taken by its census: %d", before, c.numSlots, census)
	if kill == 0 && before == 0 {
		t.Errorf("no slot waited for n2: the test does not reach the census")
	}
}

// mustFireOnce asserts that every slot is fired by exactly one node at
// some tick of the next 5 s (a degraded owner on a lossy link may lapse
// a moment, see ownerCrashAtFormation).
func mustFireOnce(t *testing.T, c *cluster, when string) {
	t.Helper()
	fired := firedOnce(c)
	for s := range Slot(c.numSlots) {
		if fired[s] {
			continue
		}
		t.Errorf("%s: slot %d fired by %v, want one node", when, s, c.firing(s))
		for _, n := range c.names {
			if c.running(n) {
				t.Logf("  %s: %s", n, c.m[n].Debug(s))
			}
		}
	}
}

// firedOnce runs c for 5 s and reports, per slot, whether exactly one
// node fired it at some tick of it.
func firedOnce(c *cluster) []bool {
	fired := make([]bool, c.numSlots)
	for range 50 {
		c.run(100 * time.Millisecond)
		for s := range Slot(c.numSlots) {
			if len(c.firing(s)) == 1 {
				fired[s] = true
			}
		}
	}
	return fired
}
