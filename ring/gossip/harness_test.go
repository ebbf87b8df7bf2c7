package gossip_test

import (
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chime-scheduler/chime/ring/gossip"
	"github.com/chime-scheduler/chime/ring/gossip/memnet"
)

// settle is the fake time every synctest test sleeps after its last Close,
// so that memberlist's goroutines (handlers waiting on stream deadlines,
// suspicion timers) finish inside the bubble (STYLE R33).
const settle = 30 * time.Second

// testKey is a valid 32-byte gossip key.
var testKey = []byte("0123456789abcdef0123456789abcdef")

// tlog is an io.Writer into t.Log that goes silent once the test is over,
// so a straggling memberlist goroutine cannot log after completion.
type tlog struct {
	mu   sync.Mutex
	t    *testing.T
	done bool
}

func (w *tlog) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

// testLogger routes a node's logs (Info and above) to t.Log.
func testLogger(t *testing.T, name string) *slog.Logger {
	t.Helper()
	w := &tlog{t: t}
	t.Cleanup(func() {
		w.mu.Lock()
		w.done = true
		w.mu.Unlock()
	})
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelInfo})).With("node", name)
}

// node is one member of a test cluster.
type node struct {
	name string
	addr string
	meta gossip.Meta
	m    *gossip.Membership
}

// cluster is n nodes on one memnet network, started but not joined. Use it
// inside synctest.Test.
type cluster struct {
	t     *testing.T
	net   *memnet.Network
	nodes []*node
}

// newCluster starts n nodes named n1..nN on 127.0.0.1:7001.. with the local
// profile; mutate (may be nil) adjusts node i's config.
func newCluster(t *testing.T, n int, mutate func(i int, c *gossip.Config)) *cluster {
	t.Helper()
	c := &cluster{t: t, net: memnet.New(1)}
	for i := range n {
		c.nodes = append(c.nodes, c.start(i, mutate))
	}
	return c
}

func (c *cluster) start(i int, mutate func(i int, c *gossip.Config)) *node {
	c.t.Helper()
	nd := &node{
		name: fmt.Sprintf("n%d", i+1),
		addr: fmt.Sprintf("127.0.0.1:%d", 7001+i),
		meta: gossip.Meta{HTTPAddr: fmt.Sprintf("127.0.0.1:%d", 8001+i), BootID: uint64(100 + i), State: gossip.StateJoining, Proto: 1},
	}
	cfg := gossip.DefaultLocalConfig()
	cfg.Name = nd.name
	cfg.Transport = c.net.Transport(nd.addr)
	cfg.Logger = testLogger(c.t, nd.name)
	if mutate != nil {
		mutate(i, &cfg)
	}
	m, err := gossip.New(cfg)
	if err != nil {
		c.t.Fatalf("New(%s): %v", nd.name, err)
	}
	if err := m.Start(nd.meta); err != nil {
		c.t.Fatalf("Start(%s): %v", nd.name, err)
	}
	nd.m = m
	return nd
}

// addrs returns every node's gossip address.
func (c *cluster) addrs() []string {
	var out []string
	for _, nd := range c.nodes {
		out = append(out, nd.addr)
	}
	return out
}

// joinAll has every node join through every address (its own is skipped).
func (c *cluster) joinAll() {
	c.t.Helper()
	for i, nd := range c.nodes {
		n, err := nd.m.Join(c.addrs())
		if err != nil {
			c.t.Fatalf("%s.Join: %v", nd.name, err)
		}
		if want := len(c.nodes) - 1; n != want {
			c.t.Errorf("node %d: Join(all) = %d, want %d", i, n, want)
		}
	}
}

// close closes every node and sleeps settle of fake time.
func (c *cluster) close() {
	c.t.Helper()
	for _, nd := range c.nodes {
		if err := nd.m.Close(); err != nil {
			c.t.Errorf("%s.Close: %v", nd.name, err)
		}
	}
	time.Sleep(settle)
}

// member returns name as m sees it.
func member(m *gossip.Membership, name string) (gossip.Member, bool) {
	for _, mb := range m.Members() {
		if mb.Name == name {
			return mb, true
		}
	}
	return gossip.Member{}, false
}

// hasStatus reports whether m sees name with status s.
func hasStatus(m *gossip.Membership, name string, s gossip.Status) bool {
	mb, ok := member(m, name)
	return ok && mb.Status == s
}

// allAlive reports whether every node sees exactly all nodes alive.
func (c *cluster) allAlive() bool {
	for _, nd := range c.nodes {
		ms := nd.m.Members()
		if len(ms) != len(c.nodes) {
			return false
		}
		for _, mb := range ms {
			if mb.Status != gossip.StatusAlive {
				return false
			}
		}
	}
	return true
}

// waitFor polls cond every 10 ms of fake time until it holds, failing the
// test after limit. It returns the fake time waited.
func waitFor(t *testing.T, what string, limit time.Duration, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > limit {
			t.Fatalf("%s: not reached within %v of fake time", what, limit)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return time.Since(start)
}

// nextEvent reads m's events until one matches, failing after limit of
// fake time.
func nextEvent(t *testing.T, m *gossip.Membership, limit time.Duration, match func(gossip.Event) bool) gossip.Event {
	t.Helper()
	timeout := time.After(limit)
	for {
		select {
		case ev, ok := <-m.Events():
			if !ok {
				t.Fatal("Events closed while waiting")
			}
			if match(ev) {
				return ev
			}
		case <-timeout:
			t.Fatalf("no matching event within %v of fake time", limit)
		}
	}
}
