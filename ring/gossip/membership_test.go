package gossip_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/chime-scheduler/chime/ring/gossip"
)

func TestJoinThroughAllSeeds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 3, nil)
		c.joinAll()
		synctest.Wait() // no fake time passes: the push/pulls alone converge
		for _, nd := range c.nodes {
			ms := nd.m.Members()
			if len(ms) != 3 {
				t.Fatalf("%s sees %d members, want 3: %+v", nd.name, len(ms), ms)
			}
			for i, mb := range ms {
				want := c.nodes[i] // sorted by name
				if mb.Name != want.name || mb.Addr != want.addr || mb.Meta != want.meta || mb.Status != gossip.StatusAlive {
					t.Errorf("%s sees %+v, want %s at %s with %+v, alive", nd.name, mb, want.name, want.addr, want.meta)
				}
			}
			self, ok := nd.m.Local()
			if !ok || self.Name != nd.name || self.Addr != nd.addr {
				t.Errorf("%s.Local() = %+v, %v", nd.name, self, ok)
			}
		}
		// Every node got one join event per member, numbered from 1.
		for _, nd := range c.nodes {
			var joined []string
			for range 3 {
				ev := <-nd.m.Events()
				if ev.Kind != gossip.EventJoin || ev.Seq != uint64(len(joined)+1) {
					t.Errorf("%s event = %+v, want join with seq %d", nd.name, ev, len(joined)+1)
				}
				joined = append(joined, ev.Member.Name)
			}
			if joined[0] != nd.name {
				t.Errorf("%s: first event is for %s, want itself", nd.name, joined[0])
			}
			slices.Sort(joined)
			if !slices.Equal(joined, []string{"n1", "n2", "n3"}) {
				t.Errorf("%s: joins %v, want n1 n2 n3", nd.name, joined)
			}
		}
		if s := c.nodes[0].m.Stats(); s.Alive != 3 || s.Dead+s.Left+s.Suspect != 0 || s.EventsDropped != 0 {
			t.Errorf("Stats() = %+v, want 3 alive and nothing else", s)
		}
		c.close()
	})
}

// TestCrashDetected measures, in fake time, how long the survivors take to
// declare a crashed node dead with the local profile: ProbeInterval 500 ms,
// SuspicionMult 4, so suspicion alone lasts 2 s for 3 nodes.
func TestCrashDetected(t *testing.T) {
	for _, victim := range []int{0, 1, 2} {
		t.Run("victim=n"+string(rune('1'+victim)), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := newCluster(t, 3, nil)
				c.joinAll()
				time.Sleep(5 * time.Second) // steady state: probes running
				v := c.nodes[victim]
				crashed := time.Now()
				c.net.Crash(v.addr)
				for _, nd := range c.nodes {
					if nd == v {
						continue
					}
					ev := nextEvent(t, nd.m, time.Minute, func(ev gossip.Event) bool {
						return ev.Kind == gossip.EventLeave && ev.Member.Name == v.name
					})
					took := ev.At.Sub(crashed)
					t.Logf("%s declared %s %v after %v of fake time", nd.name, v.name, ev.Member.Status, took)
					if ev.Member.Status != gossip.StatusDead {
						t.Errorf("%s sees %s as %v, want dead", nd.name, v.name, ev.Member.Status)
					}
					// Suspicion alone is 2 s; DESIGN §3 expects about 3 s in all.
					if took < 2*time.Second || took > 5*time.Second {
						t.Errorf("detection took %v, want within [2s, 5s] for the local profile", took)
					}
				}
				c.close()
			})
		})
	}
}

func TestPartitionAndHeal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 3, nil)
		c.joinAll()
		n1, n2, n3 := c.nodes[0], c.nodes[1], c.nodes[2]

		c.net.Partition([]string{n3.addr})
		took := waitFor(t, "partition detected on both sides", time.Minute, func() bool {
			return hasStatus(n1.m, "n3", gossip.StatusDead) && hasStatus(n2.m, "n3", gossip.StatusDead) &&
				hasStatus(n3.m, "n1", gossip.StatusDead) && hasStatus(n3.m, "n2", gossip.StatusDead)
		})
		t.Logf("partition detected on both sides after %v of fake time", took)
		if !hasStatus(n1.m, "n2", gossip.StatusAlive) || !hasStatus(n2.m, "n1", gossip.StatusAlive) {
			t.Error("n1 and n2 lost each other on the majority side")
		}

		// Stay apart longer than GossipToTheDeadTime, after which memberlist
		// alone would never reconnect: only the reconnect loop can heal.
		time.Sleep(45 * time.Second)
		if c.allAlive() {
			t.Fatal("cluster merged while partitioned")
		}
		c.net.Heal()
		took = waitFor(t, "healed", time.Minute, c.allAlive)
		t.Logf("healed after %v of fake time (ReconnectInterval 2s)", took)
		if s := n3.m.Stats(); s.Reconnects == 0 {
			t.Errorf("n3 Stats().Reconnects = 0, want > 0")
		}
		c.close()
	})
}

func TestSetStatePropagates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 3, nil)
		c.joinAll()
		n1 := c.nodes[0]
		if err := n1.m.SetState(gossip.StateActive); err != nil {
			t.Fatalf("SetState(active) = %v", err)
		}
		if self, _ := n1.m.Local(); self.Meta.State != gossip.StateActive {
			t.Errorf("n1 sees itself %v, want active at once", self.Meta.State)
		}
		for _, nd := range c.nodes[1:] {
			ev := nextEvent(t, nd.m, 10*time.Second, func(ev gossip.Event) bool {
				return ev.Kind == gossip.EventUpdate && ev.Member.Name == "n1"
			})
			want := n1.meta
			want.State = gossip.StateActive
			if ev.Member.Meta != want || ev.Member.Status != gossip.StatusAlive {
				t.Errorf("%s got update %+v, want meta %+v, alive", nd.name, ev.Member, want)
			}
			if mb, _ := member(nd.m, "n1"); mb.Meta.State != gossip.StateActive {
				t.Errorf("%s.Members() has n1 %v, want active", nd.name, mb.Meta.State)
			}
		}
		if err := n1.m.SetState(gossip.StateUnknown); !errors.Is(err, gossip.ErrMeta) {
			t.Errorf("SetState(unknown) = %v, want ErrMeta", err)
		}
		c.close()
	})
}

// TestChangesTellTheMembersUpAtOnce: a node's state change (a drain, a
// join turning active) and its leave are pushed to every member up at the
// time, a push/pull with each over TCP, so a member whose gossip packets
// are all lost still learns them at once. Without the push it learned a
// state change only from the next periodic push/pull (30 s: a drainer's
// slots stayed in its table, and nobody took them until the drain gave
// up), and saw a node that left dead after the detection time, a voter
// still, instead of left.
func TestChangesTellTheMembersUpAtOnce(t *testing.T) {
	for _, tc := range []struct {
		name string
		act  func(t *testing.T, n1 *gossip.Membership)
		want string
		seen func(m *gossip.Membership) bool // as the other members see n1
	}{
		{"state", func(t *testing.T, n1 *gossip.Membership) {
			if err := n1.SetState(gossip.StateDraining); err != nil {
				t.Fatalf("SetState(draining): %v", err)
			}
		}, "draining", func(m *gossip.Membership) bool {
			mb, _ := member(m, "n1")
			return mb.Meta.State == gossip.StateDraining
		}},
		// Leave returns ~1 s after its broadcasts went out (LeaveWait):
		// before a failure detector could have declared n1 dead. A
		// broadcast timeout is no matter here.
		{"leave", func(_ *testing.T, n1 *gossip.Membership) { _ = n1.Leave(time.Second) },
			"left", func(m *gossip.Membership) bool { return hasStatus(m, "n1", gossip.StatusLeft) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := newCluster(t, 3, nil)
				c.joinAll()
				time.Sleep(5 * time.Second)
				c.net.SetLoss(1) // every packet lost; streams are not lossy
				tc.act(t, c.nodes[0].m)
				waitFor(t, "n2 and n3 see n1 "+tc.want, 100*time.Millisecond, func() bool {
					return tc.seen(c.nodes[1].m) && tc.seen(c.nodes[2].m)
				})
				c.net.SetLoss(0)
				c.close()
			})
		})
	}
}

func TestLeaveSeenAsLeft(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 3, nil)
		c.joinAll()
		n3 := c.nodes[2]
		start := time.Now()
		if err := n3.m.Leave(time.Second); err != nil {
			t.Fatalf("Leave = %v", err)
		}
		if took := time.Since(start); took < time.Second {
			t.Errorf("Leave returned after %v, want at least LeaveWait (1s)", took)
		}
		for _, nd := range c.nodes[:2] {
			ev := nextEvent(t, nd.m, 10*time.Second, func(ev gossip.Event) bool {
				return ev.Kind == gossip.EventLeave && ev.Member.Name == "n3"
			})
			if ev.Member.Status != gossip.StatusLeft {
				t.Errorf("%s sees n3 %v, want left", nd.name, ev.Member.Status)
			}
		}
		// A member that left is not reconnected: it stays left.
		time.Sleep(time.Minute)
		for _, nd := range c.nodes[:2] {
			if !hasStatus(nd.m, "n3", gossip.StatusLeft) {
				mb, _ := member(nd.m, "n3")
				t.Errorf("%s sees n3 %v a minute later, want left", nd.name, mb.Status)
			}
			if mb, _ := member(nd.m, "n3"); mb.Forgotten {
				t.Errorf("%s sees n3 forgotten, want left by itself", nd.name)
			}
		}
		// An operator may forget it all the same (its drain may have given
		// up): every member then sees it forgotten.
		if err := c.nodes[0].m.Forget("n3"); err != nil {
			t.Fatalf("Forget(n3), left: %v", err)
		}
		waitFor(t, "n1 and n2 see n3 forgotten", 10*time.Second, func() bool {
			a, _ := member(c.nodes[0].m, "n3")
			b, _ := member(c.nodes[1].m, "n3")
			return a.Forgotten && b.Forgotten && a.Status == gossip.StatusLeft && b.Status == gossip.StatusLeft
		})
		for range n3.m.Events() { // drained, then closed by Leave
		}
		if err := n3.m.Close(); err != nil {
			t.Errorf("Close after Leave = %v", err)
		}
		c.close()
	})
}

func TestJoinRejected(t *testing.T) {
	otherKey := []byte("fedcba9876543210fedcba9876543210")
	tests := []struct {
		name   string
		mutate func(c *gossip.Config)
	}{
		{"wrong key", func(c *gossip.Config) { c.SecretKey = otherKey }},
		{"no key", func(c *gossip.Config) { c.SecretKey = nil }},
		{"wrong label", func(c *gossip.Config) { c.Label = "other" }},
		{"no label", func(c *gossip.Config) { c.Label = "" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := newCluster(t, 3, func(i int, cfg *gossip.Config) {
					cfg.SecretKey = testKey
					cfg.Label = "chime"
					if i == 2 {
						tt.mutate(cfg)
					}
				})
				good, intruder := c.nodes[:2], c.nodes[2]
				if n, err := good[1].m.Join([]string{good[0].addr}); n != 1 || err != nil {
					t.Fatalf("Join between matching nodes = %d, %v; want 1, nil", n, err)
				}
				n, err := intruder.m.Join([]string{good[0].addr, good[1].addr})
				if n != 0 || err == nil {
					t.Errorf("intruder Join = %d, %v; want 0 and an error", n, err)
				}
				time.Sleep(20 * time.Second) // gossip and push/pull get their chance
				for _, nd := range good {
					if _, ok := member(nd.m, "n3"); ok {
						t.Errorf("%s knows the intruder: %+v", nd.name, nd.m.Members())
					}
				}
				if ms := intruder.m.Members(); len(ms) != 1 {
					t.Errorf("intruder sees %+v, want only itself", ms)
				}
				c.close()
			})
		})
	}
}

// TestEventOverflowSignalsResync fills a 1-event buffer: the joins that do
// not fit are dropped, counted, logged once, and Resync tells the consumer
// to rebuild from Snapshot; a consumer that does so ends with the right
// view.
func TestEventOverflowSignalsResync(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		c := newCluster(t, 3, func(i int, cfg *gossip.Config) {
			if i == 0 {
				cfg.EventBuffer = 1
				cfg.Logger = slog.New(rec)
			}
		})
		c.joinAll()
		synctest.Wait()
		n1 := c.nodes[0].m
		s := n1.Stats()
		if s.EventsDropped != 2 {
			t.Errorf("EventsDropped = %d, want 2 (own join fills the buffer)", s.EventsDropped)
		}
		if got := rec.count(slog.LevelWarn, "events dropped"); got != 1 {
			t.Errorf("%d drop warnings, want 1 (rate limited)", got)
		}

		// A consumer: apply events, rebuild on resync, skip stale events.
		view := map[string]gossip.Status{}
		var applied uint64
		for done := false; !done; {
			select {
			case ev := <-n1.Events():
				if ev.Seq <= applied {
					continue // already in the snapshot
				}
				view[ev.Member.Name], applied = ev.Member.Status, ev.Seq
			case <-n1.Resync():
				members, seq := n1.Snapshot()
				clear(view)
				for _, mb := range members {
					view[mb.Name] = mb.Status
				}
				applied = seq
			default:
				done = true
			}
		}
		want := map[string]gossip.Status{"n1": gossip.StatusAlive, "n2": gossip.StatusAlive, "n3": gossip.StatusAlive}
		if len(view) != len(want) {
			t.Errorf("consumer view = %v, want %v", view, want)
		}
		for k, v := range want {
			if view[k] != v {
				t.Errorf("consumer view = %v, want %v", view, want)
				break
			}
		}
		select {
		case <-n1.Resync():
			t.Error("Resync still signalled after it was received")
		default:
		}
		c.close()
	})
}

func TestLifecycle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 0, nil)
		cfg := gossip.DefaultLocalConfig()
		cfg.Name = "n1"
		cfg.Transport = c.net.Transport("127.0.0.1:7001")
		m, err := gossip.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := m.Join([]string{"127.0.0.1:7002"}); !errors.Is(err, gossip.ErrNotStarted) {
			t.Errorf("Join before Start = %v, want ErrNotStarted", err)
		}
		if err := m.SetState(gossip.StateActive); !errors.Is(err, gossip.ErrNotStarted) {
			t.Errorf("SetState before Start = %v, want ErrNotStarted", err)
		}
		if _, ok := m.Local(); ok {
			t.Error("Local() before Start: ok = true")
		}
		if err := m.Start(gossip.Meta{HTTPAddr: strings.Repeat("x", 600), State: gossip.StateJoining}); !errors.Is(err, gossip.ErrMeta) {
			t.Errorf("Start(600-byte meta) = %v, want ErrMeta", err)
		}
		meta := gossip.Meta{HTTPAddr: "127.0.0.1:8001", State: gossip.StateJoining}
		if err := m.Start(meta); err != nil {
			t.Fatalf("Start after a failed Start = %v", err)
		}
		if err := m.Start(meta); !errors.Is(err, gossip.ErrStarted) {
			t.Errorf("second Start = %v, want ErrStarted", err)
		}
		if n, err := m.Join([]string{"", " 127.0.0.1:7001 "}); n != 0 || err != nil {
			t.Errorf("Join(only self) = %d, %v; want 0, nil", n, err)
		}
		if n, err := m.Join([]string{"127.0.0.1:7009"}); n != 0 || err == nil {
			t.Errorf("Join(nobody) = %d, %v; want 0 and an error", n, err)
		}
		if err := m.SetState(gossip.StateDraining); err != nil {
			t.Errorf("SetState alone = %v, want nil (nobody to wait for)", err)
		}
		for i := range 2 {
			if err := m.Close(); err != nil {
				t.Errorf("Close #%d = %v", i+1, err)
			}
		}
		if err := m.Leave(time.Second); err != nil {
			t.Errorf("Leave after Close = %v, want nil", err)
		}
		for range m.Events() { // closed: the loop ends
		}
		if _, err := m.Join([]string{"127.0.0.1:7002"}); !errors.Is(err, gossip.ErrClosed) {
			t.Errorf("Join after Close = %v, want ErrClosed", err)
		}
		if err := m.SetState(gossip.StateActive); !errors.Is(err, gossip.ErrClosed) {
			t.Errorf("SetState after Close = %v, want ErrClosed", err)
		}
		if err := m.Start(meta); !errors.Is(err, gossip.ErrClosed) {
			t.Errorf("Start after Close = %v, want ErrClosed", err)
		}

		// Closing a Membership that never started closes Events too.
		cfg.Name, cfg.Transport = "n2", c.net.Transport("127.0.0.1:7002")
		m2, err := gossip.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := m2.Close(); err != nil {
			t.Errorf("Close before Start = %v", err)
		}
		if _, ok := <-m2.Events(); ok {
			t.Error("Events open after Close")
		}
		time.Sleep(settle)
	})
}

// TestNewCopiesConfig zeroes the caller's key after New: the Membership
// must still use the key it was given.
func TestNewCopiesConfig(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		key := slices.Clone(testKey)
		c := newCluster(t, 2, func(i int, cfg *gossip.Config) {
			if i == 0 {
				cfg.SecretKey = key
			} else {
				cfg.SecretKey = testKey
			}
		})
		clear(key)
		if n, err := c.nodes[1].m.Join([]string{c.nodes[0].addr}); n != 1 || err != nil {
			t.Errorf("Join = %d, %v; want 1, nil", n, err)
		}
		c.close()
	})
}

// recorder is a slog.Handler that keeps the records.
type recorder struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (r *recorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	r.recs = append(r.recs, rec.Clone())
	r.mu.Unlock()
	return nil
}
func (r *recorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *recorder) WithGroup(string) slog.Handler      { return r }

// count returns how many records at level contain msg.
func (r *recorder) count(level slog.Level, msg string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, rec := range r.recs {
		if rec.Level == level && strings.Contains(rec.Message, msg) {
			n++
		}
	}
	return n
}

// TestLossyNetworkConverges runs a minute at 10 % packet loss (streams are
// not lossy), changes a state meanwhile, and checks that the cluster agrees
// once the loss stops: false suspicions are refuted and false deaths
// reconnected.
func TestLossyNetworkConverges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 3, nil)
		c.joinAll()
		c.net.SetLoss(0.1)
		time.Sleep(30 * time.Second)
		if err := c.nodes[0].m.SetState(gossip.StateActive); err != nil {
			t.Logf("SetState under loss: %v", err) // a timeout is allowed; gossip retries
		}
		time.Sleep(30 * time.Second)
		c.net.SetLoss(0)
		took := waitFor(t, "agreement after loss", time.Minute, func() bool {
			if !c.allAlive() {
				return false
			}
			for _, nd := range c.nodes {
				if mb, _ := member(nd.m, "n1"); mb.Meta.State != gossip.StateActive {
					return false
				}
			}
			return true
		})
		t.Logf("agreed %v after the loss stopped; network %+v", took, c.net.Stats())
		c.close()
	})
}

// TestForgetDeadMember: an operator forgets a crashed member through one
// node; every member then sees it left, not dead. A member that is up is
// refused.
func TestForgetDeadMember(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 4, nil)
		c.joinAll()
		time.Sleep(5 * time.Second)
		n1, n4 := c.nodes[0], c.nodes[3]
		if err := n1.m.Forget("n2"); !errors.Is(err, gossip.ErrNotDead) {
			t.Errorf("Forget(n2), alive: %v, want ErrNotDead", err)
		}
		if err := n1.m.Forget("nobody"); err == nil {
			t.Error("Forget(nobody) succeeded")
		}
		c.net.Crash(n4.addr)
		nextEvent(t, n1.m, time.Minute, func(ev gossip.Event) bool {
			return ev.Kind == gossip.EventLeave && ev.Member.Name == "n4" && ev.Member.Status == gossip.StatusDead
		})
		if err := n1.m.Forget("n4"); err != nil {
			t.Fatalf("Forget(n4), dead: %v", err)
		}
		for _, nd := range c.nodes[:3] {
			deadline := time.Now().Add(10 * time.Second)
			for mb, _ := member(nd.m, "n4"); mb.Status != gossip.StatusLeft || !mb.Forgotten; mb, _ = member(nd.m, "n4") {
				if time.Now().After(deadline) {
					t.Fatalf("%s sees n4 %v (forgotten %v) 10 s after it was forgotten, want left and forgotten", nd.name, mb.Status, mb.Forgotten)
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
		if err := n1.m.Forget("n4"); err != nil {
			t.Errorf("Forget(n4) again: %v, want nil", err)
		}
		c.close()
	})
}

// TestForgetReachesAMemberThatMissedTheGossip: a member cut off while an
// operator forgot a dead node misses every gossiped copy of the intent;
// push/pull (delegate.LocalState) still tells it within an interval.
// Without that it counted the forgotten node as a voter for good.
func TestForgetReachesAMemberThatMissedTheGossip(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := clusterWithN4Dead(t)
		n1, n3 := c.nodes[0], c.nodes[2]
		c.net.Partition([]string{n3.addr})
		if err := n1.m.Forget("n4"); err != nil {
			t.Fatalf("Forget(n4): %v", err)
		}
		// Long enough for every gossiped copy to go out, too short for
		// n3 to be declared dead (a probe and 1.5 s of suspicion).
		time.Sleep(time.Second)
		c.net.Heal()
		if hasStatus(n3.m, "n4", gossip.StatusLeft) {
			t.Fatal("n3 saw n4 left through a partition: the test's premise broke")
		}
		took := waitFor(t, "n3 sees n4 left", 2*gossip.DefaultLocalConfig().PushPullInterval+10*time.Second, func() bool {
			return hasStatus(n3.m, "n4", gossip.StatusLeft)
		})
		if mb, _ := member(n3.m, "n4"); !mb.Forgotten {
			t.Error("n3 sees n4 left but not forgotten: push/pull lost the forget")
		}
		t.Logf("n3 saw n4 left %v after the heal (push/pull every %v)", took, gossip.DefaultLocalConfig().PushPullInterval)
		c.close()
	})
}

// TestForgetTellsTheMembersUpAtOnce: Forget pushes the intent to every
// member up at the time (a push/pull with each, over TCP), so a member
// whose gossip packets are all lost still learns it at once, not a
// PushPullInterval later.
func TestForgetTellsTheMembersUpAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := clusterWithN4Dead(t)
		n1 := c.nodes[0]
		c.net.SetLoss(1) // every packet lost; streams are not lossy
		if err := n1.m.Forget("n4"); err != nil {
			t.Fatalf("Forget(n4): %v", err)
		}
		// The other side merges after it answered: a moment, not an
		// interval (a periodic push/pull comes every 30 s).
		waitFor(t, "n2 and n3 see n4 left", 100*time.Millisecond, func() bool {
			return hasStatus(c.nodes[1].m, "n4", gossip.StatusLeft) && hasStatus(c.nodes[2].m, "n4", gossip.StatusLeft)
		})
		c.net.SetLoss(0)
		c.close()
	})
}

// clusterWithN4Dead starts n1..n4, crashes n4 and waits until the others
// see it dead.
func clusterWithN4Dead(t *testing.T) *cluster {
	t.Helper()
	c := newCluster(t, 4, nil)
	c.joinAll()
	time.Sleep(5 * time.Second)
	c.net.Crash(c.nodes[3].addr)
	waitFor(t, "n4 dead everywhere", time.Minute, func() bool {
		for _, nd := range c.nodes[:3] {
			if !hasStatus(nd.m, "n4", gossip.StatusDead) {
				return false
			}
		}
		return true
	})
	return c
}

// TestRunForgottenAfterRestart: a node an operator forgot comes back (a
// new run, same name and address): the push/pull of its join carries the
// forget intent of its earlier run, so it learns that run was forgotten
// (RunForgotten) and must not act on what its data says it held. A node
// that restarts without having been forgotten learns nothing of the kind.
func TestRunForgottenAfterRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := clusterWithN4Dead(t)
		if err := c.nodes[0].m.Forget("n4"); err != nil {
			t.Fatalf("Forget(n4): %v", err)
		}
		// rejoin starts node i again as a new run and joins the others.
		rejoin := func(i int, boot uint64) *gossip.Membership {
			t.Helper()
			_ = c.nodes[i].m.Close() // its transport crashed: errors do not matter
			nd := &node{name: c.nodes[i].name, addr: c.nodes[i].addr, meta: c.nodes[i].meta}
			nd.meta.BootID = boot
			cfg := gossip.DefaultLocalConfig()
			cfg.Name = nd.name
			cfg.Transport = c.net.Transport(nd.addr)
			cfg.Logger = testLogger(t, nd.name)
			m, err := gossip.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if err := m.Start(nd.meta); err != nil {
				t.Fatal(err)
			}
			nd.m = m
			c.nodes[i] = nd
			var others []string
			for j, o := range c.nodes {
				if j != i {
					others = append(others, o.addr)
				}
			}
			if _, err := m.Join(others); err != nil {
				t.Fatalf("%s rejoins: %v", nd.name, err)
			}
			return m
		}
		if m := rejoin(3, 777); !m.RunForgotten() {
			t.Error("n4, forgotten, came back and did not learn it")
		}
		waitFor(t, "n1 sees n4 alive again", 10*time.Second, func() bool {
			return hasStatus(c.nodes[0].m, "n4", gossip.StatusAlive)
		})
		if mb, _ := member(c.nodes[0].m, "n4"); mb.Forgotten {
			t.Error("n1 sees the new run of n4 forgotten")
		}
		c.net.Crash(c.nodes[2].addr)
		waitFor(t, "n1 sees n3 dead", time.Minute, func() bool { return hasStatus(c.nodes[0].m, "n3", gossip.StatusDead) })
		first := c.nodes[2].meta.BootID
		if c.nodes[0].m.EarlierRun("n3", first) {
			t.Error("n1 reports an earlier run of n3 before n3 restarted")
		}
		if !c.nodes[0].m.EarlierRun("n3", 778) {
			t.Error("n1 does not report n3's run it knows to a new run of n3 not seen yet")
		}
		if m := rejoin(2, 778); m.RunForgotten() {
			t.Error("n3, never forgotten, came back believing it was")
		}
		// EarlierRun (a node starting with an empty data dir asks its
		// peers): n1 saw n3's first run replaced by the new one.
		waitFor(t, "n1 sees n3's new run", 10*time.Second, func() bool {
			mb, ok := member(c.nodes[0].m, "n3")
			return ok && mb.Meta.BootID == 778 && mb.Status == gossip.StatusAlive
		})
		if !c.nodes[0].m.EarlierRun("n3", 778) {
			t.Error("n1 does not report n3's first run to its new one")
		}
		if c.nodes[0].m.EarlierRun("n9", 1) {
			t.Error("n1 reports an earlier run of a name it never saw")
		}
		c.close()
	})
}
