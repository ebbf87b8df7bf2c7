package slots

import (
	"cmp"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

var (
	crashSeeds  = flag.Int("crashseeds", 60, "number of TestFollowerCrashUnderLoad seeds")
	crashStalls = flag.Bool("crashstalls", false, "run TestFollowerCrashWithFlaps's seeds of open liveness bugs too")
	crashTrace  = flag.Int("crashtrace", -1, "trace every effect of this TestFollowerCrashUnderLoad seed")
)

// TestFollowerCrashUnderLoad is issue 18's scenario, deterministic: a
// node crashes while the cluster is loaded, so every owner keeps the slots
// it followed for them and must go on firing them degraded once the crash
// is detected, with a new follower. Load is what a busy 2-core machine
// does to node: run loops stuck for 0.2-1.8 s (a long persist or snapshot
// step; below Config.DeadAfter, as memberlist keeps running), their
// messages and ticks waiting meanwhile, and 0-400 ms of network delay.
// Acks that arrive late make the majority evidence lapse, briefly and
// often.
//
// Before the fix every lapse restored each dropped dead follower as a
// suspect only its own answer could clear (and a lapse before the drop
// kept it from ever being dropped): its owner stopped firing those slots
// until the dead node came back. Now only a silence of DeadAfter or more
// counts as a lost majority (see updateEvidence), and after the load
// every slot must be fired by exactly one node: the survivors hold every
// copy. The harness checks safety (one firing node, one owner per epoch,
// no copy from nothing) after every step throughout.
func TestFollowerCrashUnderLoad(t *testing.T) {
	for seed := range *crashSeeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			t.Parallel()
			followerCrashUnderLoad(t, uint64(seed), 2*time.Second, 3500*time.Millisecond, false, false)
		})
	}
}

// TestFollowerCrashWithFlaps adds what else load does to memberlist: a
// loaded node's failure detector misses a live peer's probes and declares
// it dead, wrongly, until the peer's refutation reaches it 0.2-1.4 s later
// (below DeadAfter); the ctl messages between the two flow on meanwhile.
// Such a view loses its majority for a moment while the evidence of one
// holds. Before the fix a view that lost its majority counted as a lost
// majority at once: every dead follower an owner had dropped became a
// suspect again that only its own answer could clear, and a node's slots
// whose follower had been SIGKILLed stalled for good once any flap came
// after the crash (the process test lost 167 of 11,145 acknowledged tasks
// that way, 2,796 slots unavailable on one node).
//
// Fixed since (15 of those 19): the table owner held the dead owner's
// release to another node and waited for an offer that never came (a
// release is acted on only at its target's offer, and the target offers
// only for a slot its table gives it; handing the epoch over unasked made
// two owners of one epoch in TestSimulation, seeds 1227, 7875, 15331 and
// others). Now the table owner asks its target to offer (AskOffer; a
// target without a copy fetches one from the holder first).
//
// Still open (4 of the first 300 seeds): the seeds in flapStalls. In 145,
// 222 and 288 (246 before a follower took an epoch-1 owner's first
// heartbeat as its copy, which moved the schedules) the owner, its view flapping, moved its grant to a new
// follower that had no copy yet (so could not accept it) and died before
// that follower answered: nobody holds a grant or release, so nobody may
// act on the epoch. A follower's grant voided by a lapse of its view
// before the owner died, no other node holding one, is that class too
// (232 until the takeover's settle, Config.TakeSettle, moved the
// schedules). In 207 a follower whose view flapped collected a majority's
// consents to take its live owner's slots over and then crashed: the
// owner cannot fire beside a grant that may have been acted on, so the
// slots wait until that node comes back or is forgotten (POST
// /v1/cluster/members/{name}/forget). So does an owner whose run loop
// stalled past DeadAfter right after its follower died (256 until the
// takeover's settle): it keeps that follower as a suspect, as it cannot
// rule out a promotion during the stall. They are skipped here, named,
// until fixed; -crashstalls runs them.
func TestFollowerCrashWithFlaps(t *testing.T) {
	// Seeds beyond the default range kept as regressions: 73, 166, 296 (a
	// snapshot without Grant revoked its receiver's grant), 139, 238
	// (a flapping owner revoked its follower's grant: grantee), 202, 217
	// (it revoked instead of releasing: releaseTarget).
	seeds := []int{73, 139, 166, 202, 217, 238, 296}
	// And of a release holder's target that never offered (AskOffer):
	seeds = append(seeds, 63, 72, 108, 161, 165, 179, 189, 194, 204, 211, 240, 247, 286)
	// And of an owner whose run loop was stuck while its follower, its view
	// flapping, promoted: both fired the slot until the horizon
	// (horizon.go) bounded what a stuck loop's data path fires.
	seeds = append(seeds, 473, 659, 676)
	for seed := range *crashSeeds {
		seeds = append(seeds, seed)
	}
	for _, seed := range slices.Compact(slices.Sorted(slices.Values(seeds))) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			if flapStalls[seed] && !*crashStalls {
				t.Skipf("seed %d: an open liveness bug (see TestFollowerCrashWithFlaps)", seed)
			}
			t.Parallel()
			followerCrashUnderLoad(t, uint64(seed), 2*time.Second, 3500*time.Millisecond, false, true)
		})
	}
}

// flapStalls are TestFollowerCrashWithFlaps's seeds below 300 that stall
// a slot for good: an open bug.
var flapStalls = map[int]bool{145: true, 207: true, 222: true, 288: true}

func followerCrashUnderLoad(t *testing.T, seed uint64, deadAfter, maxBusy time.Duration, busyIsPause, flaps bool) {
	rng := rand.New(rand.NewPCG(seed, 0x18))
	c := newCluster(t, 64)
	c.deadAfter, c.busyIsPause = deadAfter, busyIsPause
	c.trace = *crashTrace == int(seed)
	c.probeEvery = 3
	nodes := 3 + int(seed%3)
	for i := 1; i <= nodes; i++ {
		c.add(fmt.Sprintf("n%d", i), nil)
	}
	c.stable = nodes
	c.tables(true)
	c.run(3 * time.Second)

	// Load for 12 s; the crash comes 1-4 s into it, and every survivor
	// detects it (memberlist) DeadAfter to DeadAfter+0.9 s later.
	c.rng, c.maxDelay = rng, 400*time.Millisecond
	victim := c.names[rng.IntN(len(c.names))]
	crashAt := c.now.Add(time.Second + time.Duration(rng.Int64N(int64(3*time.Second))))
	detect := map[string]time.Time{}
	// step delivers the detections due (to nodes not stuck) and runs one
	// 100 ms tick.
	step := func() {
		for _, n := range sortedKeys(detect, strings.Compare) { // in a fixed order: a seed replays
			if _, busy := c.busy[n]; !busy && !c.now.Before(detect[n]) {
				delete(detect, n)
				c.refresh(n)
			}
		}
		for _, k := range sortedKeys(c.flap, func(a, b [2]string) int {
			return cmp.Or(strings.Compare(a[0], b[0]), strings.Compare(a[1], b[1]))
		}) {
			if _, busy := c.busy[k[0]]; !busy && !c.now.Before(c.flap[k]) {
				delete(c.flap, k) // the refutation arrived
				c.refresh(k[0])
			}
		}
		c.tick(c.now.Add(100 * time.Millisecond))
		c.deliver(20)
	}
	end := c.now.Add(12 * time.Second)
	for c.now.Before(end) {
		for _, n := range c.names {
			if _, busy := c.busy[n]; !busy && c.alive[n] && rng.IntN(15) == 0 {
				c.busy[n] = c.now.Add(200*time.Millisecond + time.Duration(rng.Int64N(int64(maxBusy-200*time.Millisecond))))
			}
		}
		for _, a := range c.names {
			if _, busy := c.busy[a]; flaps && !busy && c.alive[a] && rng.IntN(20) == 0 {
				b := c.names[rng.IntN(len(c.names))]
				if k := [2]string{a, b}; a != b && c.alive[b] && c.flap[k].IsZero() {
					c.flap[k] = c.now.Add(200*time.Millisecond + time.Duration(rng.Int64N(int64(1200*time.Millisecond))))
					c.refresh(a)
				}
			}
		}
		if c.alive[victim] && !c.now.Before(crashAt) {
			c.crash(victim)
			delete(c.busy, victim)
			for _, n := range c.names {
				if n != victim {
					detect[n] = c.now.Add(deadAfter + time.Duration(rng.Int64N(int64(900*time.Millisecond))))
				}
			}
		}
		step()
	}
	// The load ends (the last stuck loops resume within maxBusy), detection
	// catches up; then every slot must fire on a survivor.
	c.maxDelay = 0
	for c.now.Before(end.Add(maxBusy)) || len(detect) > 0 || len(c.flap) > 0 {
		step()
	}
	c.run(8 * time.Second)
	var bad []string
	for s := range c.numSlots {
		if f := c.firing(Slot(s)); len(f) != 1 {
			owner, holds := c.lastOwner(Slot(s))
			bad = append(bad, fmt.Sprintf("slot %d fired by %v (last owner %s, holds it: %v)\n", s, f, owner, holds))
			for _, n := range c.names {
				if c.alive[n] {
					bad = append(bad, fmt.Sprintf("  %s: %s\n", n, c.m[n].Debug(Slot(s))))
				}
			}
		}
	}
	if len(bad) > 0 {
		t.Fatalf("seed %d, %d nodes, %s crashed at %v: slots not fired by exactly one node after the load:\n%s",
			seed, nodes, victim, crashAt.Sub(base), strings.Join(bad, ""))
	}
}

// sortedKeys returns m's keys in order.
func sortedKeys[K comparable, V any](m map[K]V, cmp func(a, b K) int) []K {
	ks := make([]K, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.SortFunc(ks, cmp)
	return ks
}
