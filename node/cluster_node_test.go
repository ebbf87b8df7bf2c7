package node

import (
	"fmt"
	"log/slog"
	gonet "net"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/chime-scheduler/chime/ring/gossip"
	"github.com/chime-scheduler/chime/ring/gossip/memnet"
	"github.com/chime-scheduler/chime/slots"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// clusterNode starts a node named name that gossips on net at addr, joins
// seeds and serves its API on a real loopback listener (forwarding,
// replication and imports go over HTTP).
func clusterNode(t *testing.T, net *memnet.Network, name, addr string, seeds ...string) *testNode {
	t.Helper()
	return clusterNodeWith(t, net, name, addr, nil, seeds...)
}

// clusterNodeWith is clusterNode with the config changed by mutate (nil:
// unchanged) before the node starts.
func clusterNodeWith(t *testing.T, net *memnet.Network, name, addr string, mutate func(*Config), seeds ...string) *testNode {
	t.Helper()
	tn := startClusterNode(t, net, name, addr, mutate, seeds...)
	waitReady(t, tn)
	return tn
}

// startClusterNode is clusterNodeWith without waiting for the node to be
// ready: nodes that form a cluster together start one after the other,
// then wait.
func startClusterNode(t *testing.T, net *memnet.Network, name, addr string, mutate func(*Config), seeds ...string) *testNode {
	t.Helper()
	ln, err := gonet.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Name = name
	cfg.InMemory = true
	cfg.HTTPAddr = ln.Addr().String()
	cfg.Logger = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: testLogLevel()}))
	g := gossip.DefaultLocalConfig()
	g.Transport = net.Transport(addr)
	g.Logger = cfg.Logger
	cc := DefaultClusterConfig(g)
	cc.Join = seeds
	cc.SettleTime = 200 * time.Millisecond
	cc.Secret = faultSecret
	cfg.Cluster = &cc
	if mutate != nil {
		mutate(&cfg)
	}
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(); err != nil {
		t.Fatal(err)
	}
	// Serve only once started, as chime serve does; peers that call
	// earlier wait in the listen backlog.
	srv := httptest.NewUnstartedServer(n.Handler())
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	tn := &testNode{Node: n, srv: srv, cfg: cfg}
	t.Cleanup(func() { tn.stop(t) })
	return tn
}

// waitReady waits until tn is ready (fails after 60 s).
func waitReady(t *testing.T, tn *testNode) {
	t.Helper()
	n, name := tn.Node, tn.cfg.Name
	// Joining moves half the slots by handover; with -race on a busy
	// 2-core machine that takes seconds.
	start := time.Now()
	deadline := start.Add(60 * time.Second)
	for !n.Ready() {
		if time.Now().After(deadline) {
			t.Fatal("node not ready after 60s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("%s ready after %v", name, time.Since(start).Round(time.Millisecond))
}

// fired returns how many callbacks a node sent successfully.
func fired(t *testing.T, tn *testNode) int {
	t.Helper()
	return int(testutil.ToFloat64(tn.metrics.firesSuccess))
}

// TestJoinMovesSlotsWithTheirTasks: tasks stored on a lone node; a second
// node joins before they are due and takes about half of the slots. The
// joiner catches up on those slots as the first node's follower and takes
// each by a sealed handover; every task fires exactly once (on the first
// node if its slot had not moved yet at its due time). Then the joiner leaves: the first node (its
// follower, holding the replicas) fires what the joiner owned.
func TestJoinMovesSlotsWithTheirTasks(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two nodes for several seconds")
	}
	net := memnet.New(3)
	a := clusterNode(t, net, "a", "127.0.0.1:7001")
	rcv := newReceiver(t)
	create := func(prefix string, n int, due time.Time) {
		for i := range n {
			body := fmt.Sprintf(`{"id":"%s-%d","callback_url":%q,"due_at":%q}`, prefix, i, rcv.url("/"), due.Format(time.RFC3339Nano))
			// 503 is not an acknowledgement: retried, as clients do
			// (while slots move, or a replica is slow to answer).
			retried := false
			for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
				var ans map[string]any
				code := a.do(t, "POST", "/v1/tasks", body, &ans)
				if code == 201 || (code == 409 && retried) {
					break // 409: the earlier attempt was stored after all
				}
				retried = true
				if code != 503 || time.Now().After(deadline) {
					t.Fatalf("create %s-%d: %d %v", prefix, i, code, ans)
				}
			}
		}
	}
	const n = 200
	due := time.Now().Add(2500 * time.Millisecond)
	create("m", n, due)
	b := clusterNode(t, net, "b", "127.0.0.1:7002", "127.0.0.1:7001")
	joined := time.Now()
	va := a.view.Load()
	if len(va.Table.Members()) != 2 {
		t.Fatalf("a sees %d members after b is ready", len(va.Table.Members()))
	}
	want := map[string]int{}
	for i := range n {
		o, _ := va.Owner(slots.Of(fmt.Sprintf("m-%d", i)))
		want[o.Name]++
	}
	if want["a"] == 0 || want["b"] == 0 {
		t.Fatalf("owners %v; the test needs both", want)
	}
	rcv.waitHits(t, 15*time.Second, func(hs []hit) bool { return len(hs) >= n })
	time.Sleep(500 * time.Millisecond)
	checkOnce(t, rcv.hits(), n)
	// Until b has taken its slots over (sealed handovers), a fires them:
	// each task fires once, on whichever node held its slot at its due
	// time. Only a handover done before the due time says which.
	if fa, fb := fired(t, a), fired(t, b); joined.Before(due) && (fa != want["a"] || fb != want["b"]) {
		t.Errorf("a fired %d and b %d; their slots hold %d and %d", fa, fb, want["a"], want["b"])
	} else if fa+fb != n {
		t.Errorf("a fired %d and b %d, want %d in all", fa, fb, n)
	}

	// Tasks created through a (b's are forwarded to b and replicated back
	// to a), then b leaves before they are due: a fires all of them.
	create("l", n, time.Now().Add(3*time.Second))
	b.stop(t)
	rcv.waitHits(t, 20*time.Second, func(hs []hit) bool { return len(hs) >= 2*n })
	time.Sleep(500 * time.Millisecond)
	checkOnce(t, rcv.hits(), 2*n)
}

// checkOnce checks that the hits are n distinct tasks, each fired once and
// none before its due time.
func checkOnce(t *testing.T, hs []hit, n int) {
	t.Helper()
	seen := map[string]int{}
	for _, h := range hs {
		seen[h.TaskID]++
		if h.At.Before(h.Due) {
			t.Errorf("%s fired %v early", h.TaskID, h.Due.Sub(h.At))
		}
	}
	for id, c := range seen {
		if c != 1 {
			var how []string
			for _, h := range hs {
				if h.TaskID == id {
					how = append(how, fmt.Sprintf("%s attempt %d epoch %s at %s", h.FireID, h.Attempt,
						h.Header.Get("X-Chime-Slot-Epoch"), h.At.Format("15:04:05.000")))
				}
			}
			t.Errorf("%s fired %d times: %v", id, c, how)
		}
	}
	if len(seen) != n {
		t.Errorf("%d distinct tasks fired, want %d", len(seen), n)
	}
}

// testLogLevel is the cluster tests' log level: warn, or CHIME_TEST_LOG
// (debug, info) to debug a failure.
func testLogLevel() slog.Level {
	var l slog.Level
	if err := l.UnmarshalText([]byte(os.Getenv("CHIME_TEST_LOG"))); err != nil {
		return slog.LevelWarn
	}
	return l
}
