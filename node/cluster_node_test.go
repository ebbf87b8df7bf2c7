package node

import (
	"log/slog"
	gonet "net"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/chime-scheduler/chime/ring/gossip"
	"github.com/chime-scheduler/chime/ring/gossip/memnet"
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

// testLogLevel is the cluster tests' log level: warn, or CHIME_TEST_LOG
// (debug, info) to debug a failure.
func testLogLevel() slog.Level {
	var l slog.Level
	if err := l.UnmarshalText([]byte(os.Getenv("CHIME_TEST_LOG"))); err != nil {
		return slog.LevelWarn
	}
	return l
}
