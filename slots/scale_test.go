package slots

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/chime-scheduler/chime/ring"
)

// TestScale runs the ownership machine at cluster scale, in fake time, on
// the in-test network (cluster, lean mode: the per-node O(NumSlots) checks
// every 2 s of fake time instead of after every Step), with tables
// from ring.Assign (loads bounded to ±5 %):
//
//  1. -scalenodes fresh nodes bootstrap a cluster over -scaleslots slots;
//  2. -scalejoins nodes join, one at a time, each once the cluster settled;
//  3. for -scalechurn of fake time, one membership change every 3 s
//     (±0.5 s): a node joins; drains, and leaves once it owns nothing;
//     crashes; or the crashed node restarts with its data. At most one
//     node is down or draining at a time when one crashes or drains: two
//     at once may take a slot's owner and its only replica, and the slot
//     is then rightly unavailable (TestSimulation covers that);
//  4. the crashed nodes restart, the churn stops, the cluster settles.
//
// Membership spreads with a delay per node: a join or a drain reaches each
// node within 0.1–1 s (gossip), a crash within 1.5–3 s (failure
// detection). Messages take 0–50 ms; none is lost.
//
// Checked: everything cluster checks on every effect (no slot fired by
// two nodes at once, no epoch of a slot taken by two nodes, epochs never
// decrease, no replica claimed that was never received) and, every 2 s
// of fake time, each machine's own invariants; 2 s after every join,
// that every running node holds the same table (the Assign of the current
// members) and that it bounds every member's owned count to ±5 % of
// slots/members (⌊⌋/⌈⌉ where that admits too few integers); after every
// join of steps 2 and 4, and at the end, that every slot is fired by
// exactly its table owner within 30 s (nothing stalls). It logs the
// times to settle and the simulation's own cost per simulated second
// (CPU seconds, peak RSS). CI runs 100 nodes over 2048 slots; `make sim`
// 1,000 nodes over 16384 (docs/BENCHMARKS.md).
var (
	scaleNodes = flag.Int("scalenodes", 100, "TestScale: nodes that bootstrap the cluster")
	scaleSlots = flag.Int("scaleslots", 2048, "TestScale: slots (Config.NumSlots)")
	scaleJoins = flag.Int("scalejoins", 2, "TestScale: joins measured one at a time")
	scaleChurn = flag.Duration("scalechurn", 45*time.Second, "TestScale: fake time of continuous churn (0: none)")
)

func TestScale(t *testing.T) {
	if raceOn {
		// One goroutine steps every machine: the race detector has nothing
		// to find, and it costs 9× (100 nodes over 512 slots, 31 s of fake
		// time: 23.5 CPU-s against 2.5). make test-race runs it without.
		t.Skip("single-goroutine simulation: run without -race (make test-race does)")
	}
	n, numSlots := *scaleNodes, *scaleSlots
	rng := rand.New(rand.NewPCG(1, 0x5ca1e))
	c := newCluster(t, numSlots)
	c.balanced, c.lean, c.leanEvery = true, true, 20
	c.rng, c.maxDelay = rng, 50*time.Millisecond
	c.probeEvery = 5 // signs of life every 500 ms: Settle/2, as node sends them at least
	c.voters = map[string]*Voters{}
	c.left = map[string]bool{}
	cpu0, _ := usage(t)
	simStart := c.now

	const dt = 100 * time.Millisecond
	viewDue := map[string]time.Time{}
	// spread schedules every running node's view refresh within [lo, hi).
	spread := func(lo, hi time.Duration) {
		for _, name := range c.names {
			due := c.now.Add(lo + time.Duration(rng.Int64N(int64(hi-lo))))
			if d, ok := viewDue[name]; c.running(name) && (!ok || due.Before(d)) {
				viewDue[name] = due
			}
		}
	}
	advance := func() {
		c.tick(c.now.Add(dt))
		for _, name := range c.names {
			if d, ok := viewDue[name]; ok && !d.After(c.now) && c.running(name) {
				delete(viewDue, name)
				c.refresh(name)
			}
		}
		c.deliver(50)
	}
	// want is the table of the current members: running, not draining.
	want := func() ring.Table {
		var ms []ring.Member
		for _, name := range c.names {
			if c.running(name) && !c.draining[name] {
				ms = append(ms, ring.Member{Name: name})
			}
		}
		return ring.Assign(ms, numSlots)
	}
	// settled reports whether every slot is fired by exactly its owner in
	// the table of the current members.
	// (No other node fires it: cluster fails the test at once if two do.)
	settled := func(tab ring.Table) bool {
		for s := range numSlots {
			o, _ := tab.Owner(uint16(s))
			if !c.running(o.Name) || !c.m[o.Name].Firing(Slot(s)) {
				return false
			}
		}
		return true
	}
	var settleTimes []time.Duration
	settle := func(what string) {
		t.Helper()
		tab, from := want(), c.now
		for !settled(tab) {
			if c.now.Sub(from) > 30*time.Second {
				var stuck []string
				for s := range numSlots {
					o, _ := tab.Owner(uint16(s))
					if f := c.firing(Slot(s)); len(f) != 1 || f[0] != o.Name {
						stuck = append(stuck, fmt.Sprintf("slot %d fired by %v, table owner %s: %s", s, f, o.Name, c.m[o.Name].Debug(Slot(s))))
						for _, n := range c.names {
							// And whoever may act on the slot's epoch.
							if si := &c.m[n].slots[s]; n != o.Name && c.running(n) &&
								(si.role == RoleOwner || si.role == RoleSealing || si.grantor || si.releasedTo != "") {
								stuck = append(stuck, fmt.Sprintf("  %s: %s", n, c.m[n].Debug(Slot(s))))
							}
						}
						if len(stuck) == 5 {
							break
						}
					}
				}
				t.Fatalf("%s: not settled 30 s later; e.g.\n%v", what, stuck)
			}
			advance()
		}
		settleTimes = append(settleTimes, c.now.Sub(from))
		t.Logf("%s: settled in %v of fake time", what, c.now.Sub(from))
	}
	// agree checks that every running node holds tab, within the bounds.
	agree := func(what string) {
		t.Helper()
		tab := want()
		checkTableBounds(t, tab)
		for _, name := range c.names {
			if c.running(name) && (!c.m[name].hasTable || c.m[name].table.Checksum() != tab.Checksum()) {
				t.Fatalf("%s: %s holds another table 2 s later", what, name)
			}
		}
	}
	next := 0
	join := func() string {
		next++
		name := fmt.Sprintf("n%04d", next)
		c.add(name, nil)
		c.stable++
		c.refresh(name) // it sees the cluster at once
		spread(100*time.Millisecond, time.Second)
		return name
	}

	// 1. Bootstrap.
	for range n {
		next++
		c.add(fmt.Sprintf("n%04d", next), nil)
	}
	c.stable = n
	c.tables(true)
	settle(fmt.Sprintf("bootstrap of %d nodes", n))
	for range 50 {
		advance() // every follower catches up
	}

	// 2. Joins, one at a time.
	for range *scaleJoins {
		name := join()
		for range 20 {
			advance()
		}
		agree("join " + name)
		settle("join " + name)
	}

	// 3. Churn.
	var crashed, draining []string
	var log []string
	note := func(e string) { log = append(log, fmt.Sprintf("%v %s", c.now.Sub(base), e)) }
	defer func() {
		if t.Failed() {
			t.Logf("churn:\n%v", log)
		}
	}()
	drainedAt := map[string]time.Time{}
	end := c.now.Add(*scaleChurn)
	nextEvent := c.now.Add(3 * time.Second)
	joinedAt := map[string]time.Time{}
	for c.now.Before(end) {
		advance()
		for name, at := range joinedAt {
			if c.now.Sub(at) >= 2*time.Second {
				delete(joinedAt, name)
				agree("churn: join " + name)
			}
		}
		// A drained node leaves once it owns nothing.
		for _, name := range slices.Clone(draining) {
			if owns(c, name) {
				if c.now.Sub(drainedAt[name]) > 30*time.Second {
					t.Fatalf("%s still owns slots 30 s after its drain began", name)
				}
				continue
			}
			draining = slices.DeleteFunc(draining, func(o string) bool { return o == name })
			c.crash(name)
			c.left[name] = true
			note("left " + name)
			spread(100*time.Millisecond, time.Second)
		}
		if c.now.Before(nextEvent) {
			continue
		}
		nextEvent = c.now.Add(2500*time.Millisecond + time.Duration(rng.Int64N(int64(time.Second))))
		var live []string
		for _, name := range c.names {
			if c.running(name) && !c.draining[name] {
				live = append(live, name)
			}
		}
		switch k := rng.IntN(4); {
		case k == 0 || len(live) < n-n/10:
			name := join()
			joinedAt[name] = c.now
			note("join " + name)
		case k == 1 && len(live) > n-n/10 && len(crashed) == 0:
			name := live[rng.IntN(len(live))]
			c.draining[name] = true
			note("drain " + name)
			draining = append(draining, name)
			drainedAt[name] = c.now
			spread(100*time.Millisecond, time.Second)
		case k == 2 && len(crashed) == 0 && len(draining) == 0 && len(live) > n-n/10:
			name := live[rng.IntN(len(live))]
			c.crash(name)
			note("crash " + name)
			crashed = append(crashed, name)
			spread(1500*time.Millisecond, 3*time.Second)
		case k == 3 && len(crashed) > 0:
			name := crashed[0]
			crashed = crashed[1:]
			c.restart(name)
			note("restart " + name)
			c.refresh(name)
			spread(100*time.Millisecond, time.Second)
		}
	}

	// 4. The crashed nodes come back; the drained ones leave.
	for _, name := range crashed {
		c.restart(name)
		c.refresh(name)
	}
	spread(100*time.Millisecond, time.Second)
	for len(draining) > 0 {
		advance()
		for _, name := range slices.Clone(draining) {
			if !owns(c, name) {
				draining = slices.DeleteFunc(draining, func(o string) bool { return o == name })
				c.crash(name)
				c.left[name] = true
				spread(100*time.Millisecond, time.Second)
			}
		}
	}
	for range 30 {
		advance()
	}
	agree("after the churn")
	settle("after the churn")
	c.checkAll()

	cpu1, rss := usage(t)
	sim := c.now.Sub(simStart).Seconds()
	live := 0
	for _, name := range c.names {
		if c.running(name) {
			live++
		}
	}
	t.Logf("%d nodes (%d at the end, %d ever), %d slots: %.0f s of fake time in %.1f CPU-s: %.3f CPU-s per simulated second; peak RSS %d MiB",
		n, live, len(c.names), numSlots, sim, cpu1-cpu0, (cpu1-cpu0)/sim, rss>>20)
	slices.Sort(settleTimes)
	t.Logf("settle times: %v", settleTimes)
}

// owns reports whether name still owns or seals a slot.
func owns(c *cluster, name string) bool {
	m := c.m[name]
	for s := range c.numSlots {
		if r := m.State(Slot(s)).Role; r == RoleOwner || r == RoleSealing {
			return true
		}
	}
	return false
}

// checkTableBounds fails unless every member of tab owns within ±5 % of
// slots/members, widened to ⌊⌋ and ⌈⌉ (ring.DefaultTolerance), computed
// here in integers.
func checkTableBounds(t *testing.T, tab ring.Table) {
	t.Helper()
	n, s := len(tab.Members()), tab.NumSlots()
	lo := min((19*s+20*n-1)/(20*n), s/n)
	hi := max(21*s/(20*n), (s+n-1)/n)
	for name, c := range tab.Counts() {
		if c.Owned < lo || c.Owned > hi {
			t.Fatalf("%s owns %d of %d slots, outside [%d, %d] for %d members", name, c.Owned, s, lo, hi, n)
		}
	}
}

// usage returns the process's CPU seconds (user + system) and peak RSS in
// bytes so far.
func usage(t *testing.T) (cpu float64, maxRSS int64) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	sec := func(tv syscall.Timeval) float64 { return float64(tv.Sec) + float64(tv.Usec)/1e6 }
	return sec(ru.Utime) + sec(ru.Stime), ru.Maxrss << 10 // Maxrss is in KiB on Linux
}
