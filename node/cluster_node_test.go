package node

import (
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/chime-scheduler/chime/ring/gossip"
	"github.com/chime-scheduler/chime/ring/gossip/memnet"
	"github.com/chime-scheduler/chime/slots"
)

// clusterNode starts a node named name that gossips on net at addr and
// joins seeds. Its HTTPAddr is a placeholder: this test never forwards.
func clusterNode(t *testing.T, net *memnet.Network, name, addr string, seeds ...string) *testNode {
	t.Helper()
	return startNode(t, func(c *Config) {
		c.Name = name
		c.InMemory = true
		c.HTTPAddr = "127.0.0.1:1"
		g := gossip.DefaultLocalConfig()
		g.Transport = net.Transport(addr)
		g.Logger = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
		cc := DefaultClusterConfig(g)
		cc.Join = seeds
		cc.SettleTime = 200 * time.Millisecond
		c.Cluster = &cc
	})
}

// TestSlotsMovedAwayStopFiringAndComeBack: a node stops firing the slots it
// loses at once, even tasks already in its wheel, and loads and fires them
// again when it regains them. Here the new owner never had the data (data
// movement is the replication issue's), so the tasks of its slots wait
// until the first node owns them again, then fire exactly once.
func TestSlotsMovedAwayStopFiringAndComeBack(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two nodes for several seconds")
	}
	net := memnet.New(3)
	a := clusterNode(t, net, "a", "127.0.0.1:7001")
	rcv := newReceiver(t)

	const n = 200
	due := time.Now().Add(1500 * time.Millisecond)
	for i := range n {
		body := fmt.Sprintf(`{"id":"m-%d","callback_url":%q,"due_at":%q}`, i, rcv.url("/"), due.Format(time.RFC3339Nano))
		if code := a.do(t, "POST", "/v1/tasks", body, nil); code != 201 {
			t.Fatalf("create m-%d: %d", i, code)
		}
	}
	b := clusterNode(t, net, "b", "127.0.0.1:7002", "127.0.0.1:7001")
	deadline := time.Now().Add(5 * time.Second)
	for len(a.view.Load().table.Members()) != 2 {
		if time.Now().After(deadline) {
			t.Fatal("a does not see b after 5 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	kept, moved := 0, 0
	for i := range n {
		if a.view.Load().owns(slots.Of(fmt.Sprintf("m-%d", i))) {
			kept++
		} else {
			moved++
		}
	}
	if kept == 0 || moved == 0 {
		t.Fatalf("a kept %d and lost %d of the tasks' slots; the test needs both", kept, moved)
	}

	// Past the due time: only the tasks of slots a kept fired.
	rcv.waitHits(t, 10*time.Second, func(hs []hit) bool { return len(hs) >= kept })
	time.Sleep(time.Until(due.Add(time.Second)))
	for _, h := range rcv.hits() {
		if !a.view.Load().owns(slots.Of(h.TaskID)) {
			t.Errorf("a fired %s, whose slot moved to b", h.TaskID)
		}
	}
	if got := len(rcv.hits()); got != kept {
		t.Fatalf("%d fires while b owns part of the slots, want %d (a's share)", got, kept)
	}

	// b leaves: a owns everything again and fires what waited, once.
	b.stop(t)
	hs := rcv.waitHits(t, 15*time.Second, func(hs []hit) bool { return len(hs) >= n })
	time.Sleep(300 * time.Millisecond)
	seen := map[string]int{}
	for _, h := range rcv.hits() {
		seen[h.TaskID]++
		if h.At.Before(h.Due) {
			t.Errorf("%s fired %v early", h.TaskID, h.Due.Sub(h.At))
		}
	}
	for id, c := range seen {
		if c != 1 {
			t.Errorf("%s fired %d times", id, c)
		}
	}
	if len(seen) != n {
		t.Errorf("%d distinct tasks fired after b left, want %d (%d hits)", len(seen), n, len(hs))
	}
}
