package membership

import (
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/chime-scheduler/chime/node/clock"
	"github.com/chime-scheduler/chime/ring"
	"github.com/chime-scheduler/chime/ring/gossip"
	"github.com/chime-scheduler/chime/ring/gossip/memnet"
	"github.com/chime-scheduler/chime/slots"
)

// These tests run several clusters (a node's membership: join, views,
// readiness) in one process on memnet, a lossy in-memory memberlist
// transport, inside a synctest bubble: fake time, so failure detection
// that takes seconds runs in milliseconds and the same way every time.

// gossipSettle is the fake time a bubble sleeps after the last close, so
// memberlist's goroutines finish inside it.
const gossipSettle = 30 * time.Second

type tmember struct {
	name, addr string
	c          *Cluster
	mu         sync.Mutex
	installs   int // views installed
	bad        string
}

type tnet struct {
	t       *testing.T
	net     *memnet.Network
	members []*tmember
}

func newTnet(t *testing.T, loss float64) *tnet {
	n := &tnet{t: t, net: memnet.New(7)}
	n.net.SetLoss(loss)
	return n
}

func gossipAddr(i int) string { return fmt.Sprintf("127.0.0.1:%d", 7001+i) }

// start starts member i (n<i+1>) joining through seeds.
func (n *tnet) start(i int, seeds []string) *tmember {
	n.t.Helper()
	m := &tmember{name: fmt.Sprintf("n%d", i+1), addr: gossipAddr(i)}
	g := gossip.DefaultLocalConfig()
	g.Transport = n.net.Transport(m.addr)
	// The timings of node.DefaultClusterConfig.
	cfg := Config{Name: m.name, HTTPAddr: fmt.Sprintf("127.0.0.1:%d", 8001+i), Gossip: g, Join: seeds,
		JoinRetry: time.Second, SettleTime: time.Second, LeaveTimeout: 2 * time.Second, BootstrapWait: 3 * time.Second}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	c, err := New(cfg, clock.Real, log, func(old, v *View) {
		m.mu.Lock()
		defer m.mu.Unlock()
		m.installs++
		if v.Seq <= old.Seq {
			m.bad = fmt.Sprintf("view %d installed after view %d", v.Seq, old.Seq)
		}
	})
	if err != nil {
		n.t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		n.t.Fatal(err)
	}
	m.c = c
	for len(n.members) <= i {
		n.members = append(n.members, nil)
	}
	n.members[i] = m
	return m
}

func allAddrs(k int) []string {
	var out []string
	for i := range k {
		out = append(out, gossipAddr(i))
	}
	return out
}

// checkAgree checks that the given members computed the same table over
// exactly want (names) and that their owned sets partition the slots.
func checkAgree(t *testing.T, ms []*tmember, want ...string) ring.Table {
	t.Helper()
	var first *View
	var union OwnedSet
	total := 0
	for _, m := range ms {
		v := m.c.View()
		var names []string
		for _, rm := range v.Table.Members() {
			names = append(names, rm.Name)
		}
		if fmt.Sprint(names) != fmt.Sprint(want) {
			t.Errorf("%s: table members %v, want %v", m.name, names, want)
		}
		if first == nil {
			first = v
		} else if v.Table.Checksum() != first.Table.Checksum() {
			t.Errorf("%s: checksum %016x, %s has %016x", m.name, v.Table.Checksum(), ms[0].name, first.Table.Checksum())
		}
		for i, w := range v.Owned {
			if union[i]&w != 0 {
				t.Errorf("%s owns a slot another member owns too", m.name)
				break
			}
			union[i] |= w
		}
		total += v.Owned.Count()
		m.mu.Lock()
		if m.bad != "" {
			t.Errorf("%s: %s", m.name, m.bad)
		}
		m.mu.Unlock()
	}
	if total != slots.Count {
		t.Errorf("members own %d slots together, want %d", total, slots.Count)
	}
	return first.Table
}

// checkMovedOnlyFrom checks that between tables before and after only the
// slots gone's owned moved, each to its previous follower.
func checkMovedOnlyFrom(t *testing.T, before, after ring.Table, gone string) {
	t.Helper()
	moved := 0
	for s := range slots.Count {
		b, _ := before.Owner(uint16(s))
		a, _ := after.Owner(uint16(s))
		if b.Name == a.Name {
			continue
		}
		moved++
		f, _ := before.Follower(uint16(s))
		if b.Name != gone || a.Name != f.Name {
			t.Fatalf("slot %d moved %s -> %s (follower was %s); only %s's slots may move, to their follower", s, b.Name, a.Name, f.Name, gone)
		}
	}
	if moved == 0 {
		t.Errorf("no slot moved away from %s", gone)
	}
}

func TestClusterJoinInAnyOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newTnet(t, 0.05)
		// n3 starts first and joins through two seeds that do not exist
		// yet: it must keep retrying until they come up.
		var ms []*tmember
		for _, i := range []int{2, 1, 0} {
			ms = append(ms, n.start(i, allAddrs(3)))
			time.Sleep(700 * time.Millisecond)
		}
		time.Sleep(3 * time.Second)
		checkAgree(t, ms, "n1", "n2", "n3")
		for _, m := range ms {
			if !m.c.Ready() {
				t.Errorf("%s not ready 3 s after the last join", m.name)
			}
		}
		for _, m := range ms {
			m.c.Close()
		}
		time.Sleep(gossipSettle)
	})
}

func TestClusterNotReadyUntilSettled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newTnet(t, 0)
		a := n.start(0, nil)
		time.Sleep(2 * time.Second)
		if !a.c.Ready() {
			t.Fatal("a lone node with no seeds is not ready after 2 s")
		}
		b := n.start(1, allAddrs(2))
		time.Sleep(200 * time.Millisecond)
		if a.c.Ready() {
			t.Error("n1 ready 200 ms after n2 joined; want not ready until the view settled for 1 s")
		}
		time.Sleep(1500 * time.Millisecond)
		if !a.c.Ready() || !b.c.Ready() {
			t.Errorf("ready after settling: n1 %v, n2 %v; want both", a.c.Ready(), b.c.Ready())
		}
		checkAgree(t, []*tmember{a, b}, "n1", "n2")
		a.c.Close()
		b.c.Close()
		time.Sleep(gossipSettle)
	})
}

// TestClusterSettledThroughGenesis: a member taking its first slots
// (SetGenesis: Fresh and Genesis change in its meta) changes the view but
// does not unsettle it, so the other members of a forming cluster neither
// wait another SettleTime to bootstrap nor turn unready; a member that
// joins does unsettle it.
func TestClusterSettledThroughGenesis(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newTnet(t, 0)
		a := n.start(0, allAddrs(2))
		b := n.start(1, allAddrs(2))
		time.Sleep(2 * time.Second)
		if !a.c.Ready() || !b.c.Ready() {
			t.Fatalf("not ready 2 s after the start: n1 %v, n2 %v", a.c.Ready(), b.c.Ready())
		}
		before := a.c.View()
		b.c.SetGenesis(before.Table.Checksum())
		time.Sleep(500 * time.Millisecond)
		after := a.c.View()
		var seen bool
		for _, m := range after.Members {
			seen = seen || (m.Name == "n2" && !m.Meta.Fresh && m.Meta.Genesis == before.Table.Checksum())
		}
		if !seen || after.Seq == before.Seq {
			t.Fatalf("n1 did not get n2's genesis within 500 ms (views %d, %d)", before.Seq, after.Seq)
		}
		if !after.Changed.Equal(before.Changed) || !a.c.Ready() {
			t.Errorf("n2's genesis unsettled n1's view: changed %v -> %v, ready %v", before.Changed, after.Changed, a.c.Ready())
		}
		c := n.start(2, allAddrs(3))
		time.Sleep(500 * time.Millisecond)
		if a.c.Ready() || a.c.View().Changed.Equal(before.Changed) {
			t.Errorf("a join left n1's view settled (ready %v)", a.c.Ready())
		}
		for _, m := range []*tmember{a, b, c} {
			m.c.Close()
		}
		time.Sleep(gossipSettle)
	})
}

func TestClusterLeaveAndCrash(t *testing.T) {
	for _, how := range []string{"leave", "crash"} {
		t.Run(how, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				n := newTnet(t, 0.05)
				var ms []*tmember
				for i := range 4 {
					ms = append(ms, n.start(i, allAddrs(4)))
				}
				time.Sleep(3 * time.Second)
				before := checkAgree(t, ms, "n1", "n2", "n3", "n4")
				gone := ms[2]
				start := time.Now()
				if how == "leave" {
					gone.c.Close()
				} else {
					n.net.Crash(gone.addr)
				}
				rest := []*tmember{ms[0], ms[1], ms[3]}
				for {
					done := true
					for _, m := range rest {
						if len(m.c.View().Table.Members()) != 3 {
							done = false
						}
					}
					if done {
						break
					}
					if time.Since(start) > time.Minute {
						t.Fatalf("n3's %s not reflected in every view after a minute", how)
					}
					time.Sleep(50 * time.Millisecond)
				}
				t.Logf("%s of n3 reflected in every view after %v of fake time", how, time.Since(start))
				if how == "crash" && time.Since(start) > 6*time.Second {
					t.Errorf("crash took %v to reach every view; the local profile detects in about 3 s", time.Since(start))
				}
				after := checkAgree(t, rest, "n1", "n2", "n4")
				checkMovedOnlyFrom(t, before, after, "n3")
				want := gossip.StatusLeft
				if how == "crash" {
					want = gossip.StatusDead
				}
				for _, m := range ms[0].c.View().Members {
					if m.Name == "n3" && m.Status != want {
						t.Errorf("n1 sees n3 as %v, want %v", m.Status, want)
					}
				}
				for _, m := range rest {
					m.c.Close()
				}
				if how == "crash" {
					gone.c.Close()
				}
				time.Sleep(gossipSettle)
			})
		})
	}
}

// A member cut off from the others sees them dead and would own every
// slot; without a majority it must not fire any (the majority side owns
// them). Leaving members do not count against the majority.
func TestClusterMinorityLosesQuorum(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newTnet(t, 0)
		var ms []*tmember
		for i := range 3 {
			ms = append(ms, n.start(i, allAddrs(3)))
		}
		time.Sleep(3 * time.Second)
		for _, m := range ms {
			if !m.c.View().Quorum {
				t.Fatalf("%s has no quorum in a healthy cluster", m.name)
			}
		}
		n.net.Partition([]string{ms[2].addr}, []string{ms[0].addr, ms[1].addr})
		// Alone, n3 gets no confirmation of its suspicions, so memberlist
		// waits out the longest suspicion timeout (SuspicionMaxTimeoutMult
		// × 1.5 s with the local profile) before it declares each dead.
		cut := time.Now()
		for ms[2].c.View().Owned.Count() != slots.Count && time.Since(cut) < 30*time.Second {
			time.Sleep(100 * time.Millisecond)
		}
		t.Logf("n3 saw the other two dead %v after the cut", time.Since(cut))
		time.Sleep(time.Second)
		lone := ms[2].c.View()
		if lone.Quorum {
			t.Errorf("n3, alone, believes it has a majority (members %v)", lone.Members)
		}
		if lone.Owned.Count() != slots.Count || lone.Fires(0) {
			t.Errorf("n3 owns %d slots and fires slot 0: %v; want it to own all (its view) yet fire none", lone.Owned.Count(), lone.Fires(0))
		}
		for _, m := range ms[:2] {
			if v := m.c.View(); !v.Quorum || len(v.Table.Members()) != 2 {
				t.Errorf("%s: quorum %v with %d members; want a majority of 2", m.name, v.Quorum, len(v.Table.Members()))
			}
		}
		n.net.Heal()
		time.Sleep(10 * time.Second)
		checkAgree(t, ms, "n1", "n2", "n3")
		// A graceful leave shrinks the cluster: the two left have a majority.
		ms[2].c.Close()
		ms[1].c.Close()
		time.Sleep(3 * time.Second)
		if v := ms[0].c.View(); !v.Quorum {
			t.Errorf("n1 lost its majority after the others left gracefully (members %v)", v.Members)
		}
		ms[0].c.Close()
		time.Sleep(gossipSettle)
	})
}
