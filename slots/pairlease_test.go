package slots

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestPairLeaseIdle: in a settled cluster the lease of every slot is
// renewed by one PairHeartbeat per node pair; the per-slot heartbeats stop
// (but for the refresh every pairRefresh leases), and no slot stops firing.
// A follower that gives its grants up on its own (a lapse) changes its
// generation: its owners heartbeat those slots again, which grants again.
func TestPairLeaseIdle(t *testing.T) {
	const slots = 64
	c := newCluster(t, slots)
	for i := 1; i <= 3; i++ {
		c.add(fmt.Sprintf("n%d", i), nil)
	}
	c.stable = 3
	c.tables(true)
	c.run(5 * time.Second)
	for s := range Slot(slots) {
		if f := c.firing(s); len(f) != 1 {
			t.Fatalf("settled: slot %d fired by %v", s, f)
		}
	}

	// count runs d and counts the effects of each kind, and the slots that
	// stopped firing at some point.
	count := func(d time.Duration) (beats, pairs int, stops map[Slot]bool) {
		var out strings.Builder
		c.out = &out
		c.run(d)
		c.out = nil
		stops = map[Slot]bool{}
		for _, l := range strings.Split(out.String(), "\n") {
			switch {
			case strings.Contains(l, ": Heartbeat "):
				beats++
			case strings.Contains(l, ": PairHeartbeat "):
				pairs++
			case strings.Contains(l, ": StopFiring "):
				var n string
				var s Slot
				fmt.Sscanf(l, "%s StopFiring s=%d", &n, &s)
				stops[s] = true
			}
		}
		return beats, pairs, stops
	}
	lease := c.m["n1"].cfg.Lease
	period := pairRefresh * lease
	beats, pairs, stops := count(period)
	// Per-slot: 4 rounds per lease for each of 64 slots would be
	// 64*4*pairRefresh; quiet slots send one refresh round per period.
	if max := 2 * slots; beats > max {
		t.Errorf("idle for %v: %d per-slot heartbeats, want at most %d (one refresh round)", period, beats, max)
	}
	if want := 3 * 2 * 4 * pairRefresh; pairs < want-6 || pairs > want+6 {
		t.Errorf("idle for %v: %d pair heartbeats, want about %d (one per ordered pair every Lease/4)", period, pairs, want)
	}
	if len(stops) > 0 {
		t.Errorf("idle: slots stopped firing: %v", stops)
	}

	// n2 gives every grant up on its own, as on a lapse of its majority
	// evidence: its generation moves, and its owners must grant it again
	// (it could not promote if they died otherwise).
	c.m["n2"].lostMajority()
	c.run(2 * time.Second)
	m2 := c.m["n2"]
	for s := range Slot(slots) {
		si := &m2.slots[s]
		if si.role == RoleFollower && si.synced && si.leader != "n2" && !si.grantor {
			t.Errorf("after giving its grants up n2 follows slot %d of %s without its grant: %s", s, si.leader, m2.Debug(s))
		}
	}
	for s := range Slot(slots) {
		if f := c.firing(s); len(f) != 1 {
			t.Fatalf("after the lapse: slot %d fired by %v", s, f)
		}
	}
}
