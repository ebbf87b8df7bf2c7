package slots

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

var (
	crashSeeds = flag.Int("crashseeds", 60, "number of TestFollowerCrashUnderLoad seeds")
	crashTrace = flag.Int("crashtrace", -1, "trace every effect of this TestFollowerCrashUnderLoad seed")
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
			followerCrashUnderLoad(t, uint64(seed), 2*time.Second, 3500*time.Millisecond, false)
		})
	}
}

func followerCrashUnderLoad(t *testing.T, seed uint64, deadAfter, maxBusy time.Duration, busyIsPause bool) {
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
		for n, at := range detect {
			if _, busy := c.busy[n]; !busy && !c.now.Before(at) {
				delete(detect, n)
				c.refresh(n)
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
	for c.now.Before(end.Add(maxBusy)) || len(detect) > 0 {
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
