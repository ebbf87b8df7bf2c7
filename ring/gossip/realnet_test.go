package gossip_test

import (
	"testing"
	"time"

	"github.com/chime-scheduler/chime/ring/gossip"
)

// TestRealNetwork runs two members on the real UDP/TCP transport on
// 127.0.0.1 with OS-assigned ports, encrypted and labelled: join, see each
// other, leave. Real time: the waits are upper bounds, not measurements.
func TestRealNetwork(t *testing.T) {
	if testing.Short() {
		t.Skip("binds sockets")
	}
	// Runs last (cleanups run in reverse): a probe memberlist started just
	// before Shutdown waits out its deadline (a probe interval) on its own
	// timers, which goleak (TestMain) would report as a leak under load.
	t.Cleanup(func() { time.Sleep(2 * gossip.DefaultLocalConfig().ProbeInterval) })
	start := func(name string) *gossip.Membership {
		t.Helper()
		cfg := gossip.DefaultLocalConfig()
		cfg.Name = name
		cfg.BindAddr, cfg.BindPort = "127.0.0.1", 0
		cfg.SecretKey, cfg.Label = testKey, "chime-test"
		cfg.LeaveWait = 100 * time.Millisecond
		cfg.Logger = testLogger(t, name)
		m, err := gossip.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Start(gossip.Meta{HTTPAddr: "127.0.0.1:7070", BootID: 1, State: gossip.StateActive, Proto: 1}); err != nil {
			t.Fatalf("Start(%s): %v", name, err)
		}
		t.Cleanup(func() { _ = m.Close() })
		return m
	}
	a, b := start("a"), start("b")
	self, ok := a.Local()
	if !ok || self.Addr == "127.0.0.1:0" {
		t.Fatalf("a.Local() = %+v, %v; want the bound port", self, ok)
	}
	if n, err := b.Join([]string{self.Addr}); n != 1 || err != nil {
		t.Fatalf("b.Join(%s) = %d, %v; want 1, nil", self.Addr, n, err)
	}
	waitReal(t, "a sees b alive", func() bool { return hasStatus(a, "b", gossip.StatusAlive) })
	waitReal(t, "b sees a alive", func() bool { return hasStatus(b, "a", gossip.StatusAlive) })
	if err := b.Leave(time.Second); err != nil {
		t.Errorf("b.Leave = %v", err)
	}
	waitReal(t, "a sees b left", func() bool { return hasStatus(a, "b", gossip.StatusLeft) })
}

// waitReal polls cond in real time, failing after a generous 10 s.
func waitReal(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
