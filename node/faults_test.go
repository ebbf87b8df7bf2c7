package node

import (
	"net/http"
	"os"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/chime-scheduler/chime/ring"
	"github.com/chime-scheduler/chime/slots"
)

// Cluster fault tests: full nodes in one process on in-memory networks,
// inside a synctest bubble (faultcluster_test.go), checked from the
// callback receiver's point of view (faultcheck_test.go). Each creates
// tasks through random nodes, due while the fault plays out, and ends with
// the checker.

// faultsSettle bounds how long after the last due time a test waits for
// failover, retries and handovers before it checks: several failure
// detections (~3-5 s each with the local gossip profile). A test that sees
// every acknowledged task fired goes on after faultsQuiet instead.
const faultsSettle = 12 * time.Second

// faultsQuiet is how long a test still listens once every acknowledged
// task fired: for late repeats, fires of a deposed owner, deleted tasks
// coming back.
const faultsQuiet = 2 * time.Second

// knownBug skips a test that fails because of a bug in the ownership code,
// described by why (what happens, which slots, epochs, nodes), unless
// CHIME_FAULTS_KNOWN is set: the test and its assertions stay as they
// are, for whoever fixes the bug.
func knownBug(t *testing.T, why string) {
	t.Helper()
	if os.Getenv("CHIME_FAULTS_KNOWN") == "" {
		t.Skip("known: " + why + " (CHIME_FAULTS_KNOWN=1 runs it)")
	}
}

// sleepUntil sleeps (fake time) until t.
func sleepUntil(t time.Time) { time.Sleep(time.Until(t)) }

// ownedBy and followedBy pick ids by the role of a node in their slot.
func ownedBy(name string) func(o, f string) bool { return func(o, _ string) bool { return o == name } }
func followedBy(name string) func(o, f string) bool {
	return func(_, f string) bool { return f == name }
}

// A fourth node joins three: it takes about a quarter of the slots over
// from their owners by sealed handovers while tasks of every slot fall
// due, densely in the slots that move while they move, so that callbacks
// are in flight at the seals: the old owner must wait for them, and the
// joiner must not fire them again.
func TestFaultJoin(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c := newFaultCluster(t, 3, 11)
		tb := c.table(0)
		after := ring.Assign(append(tb.Members(), ring.Member{Name: "n4", HTTPAddr: c.newNode(3).http}), slots.Count)
		first := time.Now().Add(1500 * time.Millisecond)
		c.create(ids("join", 60, tb, nil), first, 50*time.Millisecond) // over 3 s
		// The slots n4 will own, due every 10 ms for 2 s from before it
		// starts: the handovers (a few hundred ms of fake time after the
		// start) find callbacks in flight.
		c.create(ids("move", 200, after, ownedBy("n4")), time.Now().Add(100*time.Millisecond), 10*time.Millisecond)
		j := c.add()
		c.start(j, c.seeds(4))
		c.create(ids("during", 30, tb, nil), time.Now().Add(500*time.Millisecond), 100*time.Millisecond)
		c.waitReady(0, 1, 2, 3)
		c.settle(first.Add(3*time.Second + faultsSettle))
		report(t, c.check(checkOpts{}))
		c.close()
	})
}

// The owner of some slots leaves gracefully: it drains (stops firing,
// replicates its last results, announces draining) and its slots go to
// their followers, while their tasks fall due.
func TestFaultLeave(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c := newFaultCluster(t, 3, 12)
		first := time.Now().Add(time.Second)
		c.create(ids("leave", 40, c.table(0), ownedBy("n2")), first, 75*time.Millisecond) // over 3 s
		c.create(ids("any", 20, c.table(0), nil), first, 150*time.Millisecond)
		sleepUntil(first.Add(time.Second)) // n2 fires
		done := make(chan struct{})
		go func() {
			defer close(done)
			c.create(ids("during", 20, c.table(0), nil), time.Now().Add(time.Second), 100*time.Millisecond)
		}()
		c.stop(1)
		<-done
		c.settle(first.Add(3*time.Second + faultsSettle))
		report(t, c.check(checkOpts{}))
		c.close()
	})
}

// A node dies without a word while it fires. Its slots' followers take
// them over once gossip declares it dead and its lease ran out, and fire
// what it owned, late but at least once; only what it fired just before
// the crash may repeat.
func TestFaultCrashOwner(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c := newFaultCluster(t, 3, 13)
		first := time.Now().Add(time.Second)
		c.create(ids("owned", 40, c.table(0), ownedBy("n2")), first, 150*time.Millisecond) // over 6 s
		c.create(ids("any", 20, c.table(0), nil), first, 300*time.Millisecond)
		sleepUntil(first.Add(1500 * time.Millisecond))
		c.crash(1)
		c.create(ids("after", 20, c.table(0), nil), time.Now().Add(time.Second), 100*time.Millisecond)
		c.settle(first.Add(6*time.Second + faultsSettle))
		report(t, c.check(checkOpts{}))
		c.close()
	})
}

// A node that follows some slots dies while their owners fire them: the
// owners keep firing (once the dead follower's grant is ruled out) and
// replicate to the next member instead.
func TestFaultCrashFollower(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c := newFaultCluster(t, 3, 14)
		first := time.Now().Add(time.Second)
		c.create(ids("followed", 40, c.table(0), followedBy("n2")), first, 150*time.Millisecond)
		sleepUntil(first.Add(1500 * time.Millisecond))
		c.crash(1)
		c.create(ids("after", 20, c.table(0), followedBy("n2")), time.Now().Add(time.Second), 100*time.Millisecond)
		c.settle(first.Add(6*time.Second + faultsSettle))
		report(t, c.check(checkOpts{}))
		c.close()
	})
}

// A node joins three and one side of the handover dies while the slots
// move: the joiner itself once it took the first slots over, or an old
// owner, as soon as it sees the joiner in its table or once the joiner
// took the first slots over.
func TestFaultCrashDuringHandover(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		victim int  // 3: the joiner n4; 0: n1, an old owner
		early  bool // as soon as n1 sees n4 in its table, before any slot moved
		known  string
	}{
		{name: "joiner-mid-move", victim: 3},
		{name: "old-owner-early", victim: 0, early: true},
		// Before releases (see slots/lease.go) this one lost 11 of 60
		// tasks: the old follower, out of the table's position, dropped its
		// copy and with it the grant, and n1 died before it granted n4.
		{name: "old-owner-mid-move", victim: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.known != "" {
				knownBug(t, tc.known)
			}
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				c := newFaultCluster(t, 3, 15)
				// Due over 4 s: the nodes fire when the victim dies.
				first := time.Now().Add(300 * time.Millisecond)
				c.create(ids("hand", 60, c.table(0), nil), first, 70*time.Millisecond)
				sleepUntil(first.Add(200 * time.Millisecond))
				j := c.add()
				c.start(j, c.seeds(4))
				// The handovers start when the old owners see the joiner
				// in their table: it catches up as their follower, offers,
				// and they seal and hand over, slot by slot. The victim
				// dies once n4 took the first slots over, while it still
				// imports the others.
				start := time.Now()
				for {
					// Polled every 2 ms: test the condition without counting
					// every slot's role (c.owns stops at the first owned slot).
					if (tc.early && len(c.table(tc.victim).Members()) == 4) || (!tc.early && c.owns(j)) {
						r := c.roles(j)
						t.Logf("%v: n4 owns %d slots, imports %d; crash %s", fakeClock{}, r[slots.RoleOwner], r[slots.RoleImporting], c.nodes[tc.victim].name)
						break
					}
					if time.Since(start) > 10*time.Second {
						t.Fatalf("n4 owns no slot 10 s after it started: %v", c.roles(j))
					}
					time.Sleep(2 * time.Millisecond)
				}
				c.crash(tc.victim)
				c.settle(first.Add(4*time.Second + faultsSettle))
				report(t, c.check(checkOpts{}))
				c.close()
			})
		})
	}
}

// Five nodes split 3|2 while tasks of every slot fall due, densely in the
// slots the minority (n4, n5) owns, and heal once both minority nodes saw
// they lost the majority, and 2 s more. The minority must stop firing:
//   - a slot whose follower (its lease grantee) is in the majority within
//     Lease of the cut: no ack renews the lease after it;
//   - every slot from the moment its own view shows it has lost the
//     majority.
//
// The majority promotes the followers it holds and fires those slots; the
// slots held only by the minority wait for the heal (their owner may fire
// them until it sees it lost the majority: nobody else can). Writes go on
// through every node meanwhile. After the heal nothing is lost, no slot
// was fired by two owners at once, and only fires the minority sent may
// repeat.
func TestFaultPartition(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c := newFaultCluster(t, 5, 16)
		w := c.watchQuorum()
		tb := c.table(0)
		first := time.Now().Add(time.Second)
		c.create(ids("part", 60, tb, nil), first, 250*time.Millisecond) // over 15 s
		inMinority := func(n string) bool { return n == "n4" || n == "n5" }
		// Minority owner, majority follower: the majority promotes.
		c.create(ids("mmaj", 40, tb, func(o, f string) bool { return inMinority(o) && !inMinority(f) }), first, 350*time.Millisecond)
		// Minority owner and follower: only the minority holds them.
		c.create(ids("mmin", 40, tb, func(o, f string) bool { return inMinority(o) && inMinority(f) }), first, 350*time.Millisecond)
		sleepUntil(first.Add(time.Second))
		cut := time.Now()
		c.partition([]int{0, 1, 2}, []int{3, 4})
		t.Logf("%v: partitioned n1 n2 n3 | n4 n5", fakeClock{})
		written := make(chan struct{})
		go func() {
			defer close(written)
			time.Sleep(5 * time.Second)
			c.create(ids("cut", 30, tb, nil), time.Now().Add(time.Second), 200*time.Millisecond)
		}()
		for {
			_, lost4 := w.lostAt("n4")
			_, lost5 := w.lostAt("n5")
			if lost4 && lost5 {
				break
			}
			if time.Since(cut) > 30*time.Second {
				t.Errorf("%v: n4 (%v) or n5 (%v) still sees a majority 30 s after the cut", fakeClock{}, !lost4, !lost5)
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		time.Sleep(2 * time.Second)
		c.heal()
		healed := time.Now()
		t.Logf("%v: healed", fakeClock{})
		<-written
		c.settle(first.Add(15*time.Second + faultsSettle))
		w.close()

		// The lease: an owner fires only within Lease of sending a
		// heartbeat its grantee acked, and nothing crosses the cut.
		leased := map[string]map[uint16]bool{"n4": {}, "n5": {}}
		for s := range uint16(slots.Count) {
			o, _ := tb.Owner(s)
			f, _ := tb.Follower(s)
			if inMinority(o.Name) && !inMinority(f.Name) {
				leased[o.Name][s] = true
			}
		}
		lease := slots.DefaultLocalConfig("").Lease
		var quiet []quietRange
		for _, name := range []string{"n4", "n5"} {
			quiet = append(quiet, quietRange{name, cut.Add(lease + leaseSlack), healed, leased[name],
				"its lease grantee is across the cut"})
			if at, ok := w.lostAt(name); ok {
				t.Logf("%s lost its majority at %s: it must fire nothing from then to the heal, and nothing of the %d slots it leased across the cut from %s",
					name, sinceEpoch(at), len(leased[name]), sinceEpoch(cut.Add(lease+leaseSlack)))
				// From leaseSlack after the watcher saw the view lose it: the
				// ownership machine stops the slots on its next step, and a
				// fire its gate let through at that very instant still
				// arrives (a CI run: n4 fired mmin-310 at the fake instant
				// the watcher saw the loss).
				quiet = append(quiet, quietRange{name, at.Add(leaseSlack), healed, nil, "it has lost the majority"})
			}
		}
		report(t, c.check(checkOpts{quiet: quiet}))
		c.close()
	})
}

// leaseSlack is how long after its lease ran out a fire the owner started
// just before may still arrive: the fire gate is checked when the writer
// starts the fire, and the callback leaves from the dispatcher a moment
// later (no fake time passes on the way to the receiver).
const leaseSlack = 50 * time.Millisecond

// A node stops; meanwhile the others delete and replace tasks whose slots
// it held and create new ones; then it comes back with its old data, in
// which some of the deleted and replaced tasks are overdue (they fell due
// while it was away) and others are due soon. Nothing deleted comes back,
// no replaced version fires, no completed fire repeats. The node stops
// gracefully, or is killed (its disk as the kill left it).
func TestFaultRestartStale(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"stop", "crash"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				c := newFaultCluster(t, 3, 17)
				tb := c.table(0)
				held := func(o, f string) bool { return o == "n3" || f == "n3" }
				start := time.Now()
				// Fired and completed before n3 goes.
				c.create(ids("early", 30, tb, held), start.Add(500*time.Millisecond), 50*time.Millisecond)
				// Due while n3 is away (it goes at 2.5 s; the others take
				// it out of their tables within ~4.5 s after a crash, and
				// a stop takes up to its drain cap of 10 s: it waits for
				// running callbacks, then hands every slot over), and
				// after it is back.
				down := start.Add(16 * time.Second)
				away := ids("down", 40, tb, held)
				c.create(away, down, 25*time.Millisecond) // over 1 s
				late := down.Add(3 * time.Second)
				keep := ids("late", 60, tb, held)
				c.create(keep, late, 50*time.Millisecond) // over 3 s
				sleepUntil(start.Add(2500 * time.Millisecond))
				if how == "stop" {
					c.stop(2)
				} else {
					c.crash(2)
				}
				t.Logf("%v: n3 is gone (%s)", fakeClock{}, how)
				c.waitReady(0, 1)
				deleted := append(slices.Clone(away[:15]), keep[:20]...)
				for _, id := range deleted {
					c.remove(id)
				}
				c.replace(away[15:30], late.Add(2*time.Second), 25*time.Millisecond)
				c.replace(keep[20:40], late.Add(2*time.Second), 50*time.Millisecond)
				c.create(ids("new", 20, tb, held), late, 50*time.Millisecond)
				sleepUntil(down.Add(1500 * time.Millisecond))
				// The point of the test: n3's copy holds deleted tasks and
				// old versions that fell due while it was away.
				overdue := 0
				c.mu.Lock()
				for j, id := range away[:30] {
					due := down.Add(time.Duration(j) * 25 * time.Millisecond)
					if at, ok := c.gone[id]; ok && at.Before(due) {
						overdue++
					} else if at, ok := c.replaced[id]; ok && at.Before(due) {
						overdue++
					}
				}
				c.mu.Unlock()
				t.Logf("%v: %d deleted or replaced tasks are overdue in n3's old copy", fakeClock{}, overdue)
				if overdue == 0 {
					t.Errorf("no deleted or replaced task fell due while n3 was away: the writes came too late")
				}
				c.restart(2)
				t.Logf("%v: n3 is back; tasks it holds fell due from %s, more are due from %s", fakeClock{}, sinceEpoch(down), sinceEpoch(late))
				c.settle(late.Add(3*time.Second + faultsSettle))
				for _, id := range deleted {
					// A client retries what the lossy links answer 503.
					if code, _ := c.send(c.pick(), http.MethodGet, "/v1/tasks/"+id, nil, http.StatusNotFound); code != http.StatusNotFound {
						t.Errorf("GET deleted %s after the restart: %d", id, code)
					}
				}
				report(t, c.check(checkOpts{}))
				// Every node persisted the voters it counts its majority
				// among (the three of them again once n3 is back), so a
				// restart starts from them, not from its first view.
				for i, fn := range c.nodes {
					if v, err := fn.n.store.Voters(); err != nil || !slices.Equal(v, []string{"n1", "n2", "n3"}) {
						t.Errorf("n%d's persisted voters %v, %v; want [n1 n2 n3]", i+1, v, err)
					}
				}
				c.close()
			})
		})
	}
}

// Two of three nodes are lost for good. The survivor stops firing (one of
// its three voters), and a node that joins it does not make a majority:
// from where it stands, the two could be alive on the far side of a
// partition. An operator forgets them (POST
// /v1/cluster/members/{name}/forget): they count as left, the survivor and
// the joiner are a majority again, and the survivor fires its own slots
// (those whose copies died with both lost nodes stay unavailable).
func TestFaultForgetLostNodes(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c := newFaultCluster(t, 3, 19)
		first := time.Now().Add(20 * time.Second)
		c.create(ids("mine", 30, c.table(0), ownedBy("n1")), first, 50*time.Millisecond)
		c.crash(1)
		c.crash(2)
		j := c.add()
		c.start(j, c.seeds(1))
		sleepUntil(time.Now().Add(10 * time.Second))
		if f := c.nodes[0].n.ctl.Counts().Firing; f != 0 {
			t.Errorf("%v: n1 fires %d slots with two of its three voters lost and a joiner, want none", fakeClock{}, f)
		}
		forget := func(name string, want int) {
			t.Helper()
			if code, _ := c.send(0, http.MethodPost, "/v1/cluster/members/"+name+"/forget", nil, want); code != want {
				t.Errorf("forget %s: %d, want %d", name, code, want)
			}
		}
		forget("n4", http.StatusConflict) // alive
		forget("nobody", http.StatusNotFound)
		// An operator forgets a member once the survivor shows it dead
		// (a live one is refused, as n4 was). On the lossy transport the
		// two crashes are not always both detected within the 10 s above
		// (CI: n3 still alive at t+11.6s, seed 19): what the test is about
		// comes after.
		for _, name := range []string{"n2", "n3"} {
			for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
				if m, ok := c.nodes[0].n.view.Load().member(name); ok && !m.Up() {
					break
				}
			}
		}
		forget("n2", http.StatusOK)
		forget("n3", http.StatusOK)
		c.settle(first.Add(1500*time.Millisecond + faultsSettle))
		if f := c.nodes[0].n.ctl.Counts().Firing; f == 0 {
			t.Errorf("%v: n1 fires nothing after the lost nodes were forgotten", fakeClock{})
		}
		report(t, c.check(checkOpts{}))
		c.close()
	})
}
