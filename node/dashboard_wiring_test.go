package node

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/chime-scheduler/chime/node/clock"
	"github.com/chime-scheduler/chime/node/dashboard"
	"github.com/chime-scheduler/chime/node/forward"
	"github.com/chime-scheduler/chime/node/membership"
	"github.com/chime-scheduler/chime/ring"
	"github.com/chime-scheduler/chime/ring/gossip"
	"github.com/chime-scheduler/chime/slots"
)

// startSigningNode starts a standalone node that signs and checks calls
// between nodes with secret, as a cluster member does, without gossip: the
// merge is tested over HTTP (the test's network) with views built by hand.
func startSigningNode(t *testing.T, name string, secret []byte) *testNode {
	t.Helper()
	cfg := testConfig(t, name)
	return runNode(t, cfg, func(n *Node) {
		n.fwd = signer(t, name, secret, 10*time.Second) // before anything reads it
		n.guard = newGuard(n, n.fwd.Auth())
	})
}

// signer returns a forwarder that signs its calls with secret, as node
// name, and dials on the test's network; a cleanup closes it (and the
// network's waits forwarderIdle in a bubble).
func signer(t *testing.T, name string, secret []byte, timeout time.Duration) *forward.Client {
	tnet := netOf(t)
	f := forward.New(forward.Config{Self: name, Secret: secret, Timeout: timeout, Clock: clock.Real,
		Dial: tnet.pn.dialer(tnet.newAddr())})
	tnet.mu.Lock()
	tnet.fwd = true
	tnet.mu.Unlock()
	t.Cleanup(f.Close)
	return f
}

// serveTest serves h on the test's network and returns its address; a
// cleanup stops it.
func serveTest(t *testing.T, h http.Handler) string {
	addr := netOf(t).newAddr()
	t.Cleanup(servePipe(netOf(t).pn.listen(addr), h).close)
	return addr
}

func member(name, gossipAddr, httpAddr string, status gossip.Status) gossip.Member {
	return gossip.Member{Name: name, Addr: gossipAddr, Status: status,
		Meta: gossip.Meta{HTTPAddr: httpAddr, State: gossip.StateActive, BootID: 1, Proto: membership.ProtoVersion}}
}

// TestClusterSnapshotMerge: over real HTTP and signing, the serving node lists every member of its
// view with the row each serves at GET /internal/v1/member: a live member's
// fresh row, an unreachable and a hung member as stale rows with their
// gossip status and the reason, a dead member without a fetch. A member
// that stops answering keeps its last good row, marked stale.
func TestClusterSnapshotMerge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		secret := []byte("s3cret")
		a := startSigningNode(t, "a", secret)
		b := startSigningNode(t, "b", secret)

		// c: nothing listens at its address.
		unreachable := netOf(t).newAddr()
		// d: accepts, then never answers within the fetch timeout.
		release := make(chan struct{})
		hung := serveTest(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}))
		t.Cleanup(func() { close(release) })
		// e: declared dead; its address counts the calls it gets (none).
		var deadCalls atomic.Int32
		dead := serveTest(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { deadCalls.Add(1) }))

		// The start-up count may count a task created while it runs twice
		// (it is an estimate): let it finish first, on b and on a, whose
		// row must show 0 tasks, not -1 (unknown).
		for _, n := range []*testNode{a, b} {
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
				if _, ok := n.taskCount(); ok {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s: start-up task count not done after 10s", n.cfg.Name)
				}
			}
		}
		// Whether the waits above sleep at all depends on how fast the
		// nodes start in real time; in the bubble, b's uptime is 0 unless
		// the fake clock moves. Move it by a known amount.
		const upFor = 2 * time.Second
		time.Sleep(upFor)
		// Two tasks on b, due in ten minutes, for its row and the wheel.
		for _, id := range []string{"t1", "t2"} {
			if code := b.do(t, "POST", "/v1/tasks", map[string]any{"id": id, "delay_ms": 600_000, "callback_url": "http://127.0.0.1:1/"}, nil); code != http.StatusCreated {
				t.Fatalf("create %s on b = %d, want 201", id, code)
			}
		}
		deadline := time.Now().Add(10 * time.Second)
		for c, ok := b.taskCount(); !ok || c != 2; c, ok = b.taskCount() {
			if time.Now().After(deadline) {
				t.Fatalf("b counts %d tasks (known %v), want 2", c, ok)
			}
			time.Sleep(5 * time.Millisecond)
		}

		v := nodeView(membership.NewView("a", []gossip.Member{
			member("a", "10.0.0.1:7946", a.cfg.HTTPAddr, gossip.StatusAlive),
			member("b", "10.0.0.2:7946", b.cfg.HTTPAddr, gossip.StatusAlive),
			member("c", "10.0.0.3:7946", unreachable, gossip.StatusAlive),
			member("d", "10.0.0.4:7946", hung, gossip.StatusAlive),
			member("e", "10.0.0.5:7946", dead, gossip.StatusDead),
		}, time.Time{}, 1))
		// a is standalone: its dashboard shows the view built here instead.
		d := dashboard.New(dashboard.Config{Name: "a", HTTPAddr: a.cfg.HTTPAddr, Now: a.now, Hosts: a.hosts},
			fixedView{dashSource{a.Node}, &v})
		snapshot := func() *dashboard.Snapshot {
			t.Helper()
			s, err := d.Snapshot(t.Context())
			if err != nil {
				t.Fatalf("Snapshot: %v", err)
			}
			if err := s.CheckSlotTable(); err != nil {
				t.Fatalf("CheckSlotTable() = %v", err)
			}
			return s
		}
		byName := func(s *dashboard.Snapshot) map[string]dashboard.MemberSnapshot {
			out := map[string]dashboard.MemberSnapshot{}
			for _, m := range s.Members {
				out[m.Name] = m
			}
			return out
		}

		s := snapshot()
		names := make([]string, len(s.Members))
		for i, m := range s.Members {
			names[i] = m.Name
		}
		if want := []string{"a", "b", "c", "d", "e"}; !slices.Equal(names, want) {
			t.Fatalf("members %v, want %v (the view's order)", names, want)
		}
		if s.TableVersion != v.Table.Checksum() {
			t.Errorf("TableVersion = %d, want the view's checksum %d", s.TableVersion, v.Table.Checksum())
		}
		// The table: a to d own slots (alive and active), e (dead) none, and
		// every owner byte indexes the row of the owner.
		owned := make([]int, len(s.Members))
		for slot, o := range s.SlotOwners {
			if o == dashboard.NoOwner {
				t.Fatalf("slot %d has no owner", slot)
			}
			owned[o]++
			if want, _ := v.Table.Owner(uint16(slot)); s.Members[o].Name != want.Name {
				t.Fatalf("slot %d: owner byte %d is %s, want %s", slot, o, s.Members[o].Name, want.Name)
			}
		}
		for i, m := range s.Members {
			if m.SlotsOwned != owned[i] || (m.Name == "e") != (owned[i] == 0) {
				t.Errorf("%s: SlotsOwned %d, slot_owners count %d; want equal, and zero only for the dead e", m.Name, m.SlotsOwned, owned[i])
			}
		}

		rows := byName(s)
		tests := []struct {
			name, status, errPart string
			stale                 bool
			tasks                 int64
			gossipAddr            string
		}{
			{name: "a", status: "alive", tasks: 0, gossipAddr: "10.0.0.1:7946"},
			{name: "b", status: "alive", tasks: 2, gossipAddr: "10.0.0.2:7946"},
			{name: "c", status: "alive", stale: true, tasks: -1, errPart: "unreachable", gossipAddr: "10.0.0.3:7946"},
			{name: "d", status: "alive", stale: true, tasks: -1, errPart: "unreachable: timed out", gossipAddr: "10.0.0.4:7946"},
			{name: "e", status: "dead", stale: true, tasks: -1, gossipAddr: "10.0.0.5:7946"},
		}
		for _, tt := range tests {
			m := rows[tt.name]
			if m.Status != tt.status || m.Stale != tt.stale || m.TasksStored != tt.tasks || m.GossipAddr != tt.gossipAddr ||
				(tt.errPart == "") != (m.Error == "") || !strings.Contains(m.Error, tt.errPart) {
				t.Errorf("row %s = {status %q stale %v tasks %d gossip %q error %q}, want {%q %v %d %q error containing %q}",
					tt.name, m.Status, m.Stale, m.TasksStored, m.GossipAddr, m.Error, tt.status, tt.stale, tt.tasks, tt.gossipAddr, tt.errPart)
			}
			if m.State != "active" {
				t.Errorf("row %s state = %q, want active", tt.name, m.State)
			}
		}
		if rows["b"].HTTPAddr != b.cfg.HTTPAddr || rows["b"].UptimeSeconds < upFor.Seconds() || rows["b"].Goroutines == 0 {
			t.Errorf("b's row %+v lacks its own stats", rows["b"])
		}
		if got := deadCalls.Load(); got != 0 {
			t.Errorf("the dead member was called %d times, want 0", got)
		}
		if sum := slices.Max(s.Wheel.Counts); sum != 2 {
			t.Errorf("merged wheel %v, want b's two tasks in one bucket", s.Wheel.Counts)
		}

		// b stops answering: its row stays, with the last stats, stale.
		b.pipe.close()
		s = snapshot()
		m := byName(s)["b"]
		if !m.Stale || m.TasksStored != 2 || m.StatsAgeSeconds <= 0 || m.Error == "" || m.Status != "alive" {
			t.Errorf("b after it stopped answering = {stale %v tasks %d age %v error %q status %q}, want stale, 2 tasks, an age, an error, alive",
				m.Stale, m.TasksStored, m.StatsAgeSeconds, m.Error, m.Status)
		}

		// A view without b forgets its cached row.
		v = nodeView(membership.NewView("a", []gossip.Member{member("a", "10.0.0.1:7946", a.cfg.HTTPAddr, gossip.StatusAlive)}, time.Time{}, 2))
		s = snapshot()
		if len(s.Members) != 1 || s.Members[0].Name != "a" || s.Members[0].Stale {
			t.Errorf("one-member view: members %+v, want a alone, fresh", s.Members)
		}
	})
}

// fixedView is a node's dashboard source that shows the view *v.
type fixedView struct {
	dashSource
	v **view
}

func (s fixedView) View() *dashboard.View { return (*s.v).dash }

// TestInternalMemberAuth: the endpoint answers only signed calls, with the
// node's own row (decodable as a MemberSnapshot) and its wheel.
func TestInternalMemberAuth(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		secret := []byte("s3cret")
		b := startSigningNode(t, "b", secret)
		if code := b.do(t, "GET", "/internal/v1/member", nil, nil); code != http.StatusUnauthorized {
			t.Errorf("unsigned GET /internal/v1/member = %d, want 401", code)
		}
		other := signer(t, "x", []byte("other"), time.Second)
		c, err := other.Do(t.Context(), ring.Member{Name: "b", HTTPAddr: b.cfg.HTTPAddr}, "GET", "/internal/v1/member", nil, http.Header{}, 0)
		if err != nil || c.Status != http.StatusUnauthorized {
			t.Errorf("GET signed with another secret = %d, %v; want 401", c.Status, err)
		}
		c, err = signer(t, "a", secret, time.Second).Do(t.Context(), ring.Member{Name: "b", HTTPAddr: b.cfg.HTTPAddr}, "GET", "/internal/v1/member", nil, http.Header{}, 0)
		if err != nil || c.Status != http.StatusOK {
			t.Fatalf("signed GET = %d, %v; want 200", c.Status, err)
		}
		var row dashboard.MemberSnapshot
		var extra struct {
			Wheel *dashboard.WheelHeatmap `json:"wheel"`
		}
		if err := json.Unmarshal(c.Body, &row); err != nil || json.Unmarshal(c.Body, &extra) != nil {
			t.Fatalf("decode %s: %v", c.Body, err)
		}
		if row.Name != "b" || row.Status != "alive" || row.SlotsOwned != slots.Count || extra.Wheel == nil || len(extra.Wheel.Counts) != 60 {
			t.Errorf("answer %s: want b's row (alive, every slot) and its wheel", c.Body)
		}
	})
}

// TestStandaloneSnapshot: a node without a cluster is still one member that
// owns every slot, alive, fresh, table version 1.
func TestStandaloneSnapshot(t *testing.T) {
	n := startNode(t, nil)
	s, err := n.dash.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Members) != 1 || s.TableVersion != dashboard.SingleTableVersion || s.CheckSlotTable() != nil {
		t.Fatalf("snapshot members %+v, version %d; want one member, version 1, a valid table", s.Members, s.TableVersion)
	}
	m := s.Members[0]
	if m.Name != "test-node" || m.State != "active" || m.Status != "alive" || m.Stale || m.SlotsOwned != slots.Count {
		t.Errorf("member = %+v, want test-node active, alive, fresh, owning every slot", m)
	}
}
