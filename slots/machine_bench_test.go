package slots

import (
	"testing"
	"time"
)

// BenchmarkTick is the cost of one Tick on a node of a 3-node cluster over
// all 16384 slots, heartbeats between the ticks delivered: the ownership
// work every node pays several times a second while nothing changes.
func BenchmarkTick(b *testing.B) {
	c := newCluster(b, Count)
	for _, n := range []string{"n1", "n2", "n3"} {
		c.add(n, nil)
	}
	c.stable = 3
	c.tables(true)
	c.deliver(100)
	step := 100 * time.Millisecond
	now := base
	for range 40 {
		now = now.Add(step)
		c.tick(now)
		c.deliver(10)
	}
	m := c.m["n1"]
	b.ResetTimer()
	for b.Loop() {
		now = now.Add(time.Millisecond)
		m.Step(Tick{Now: now})
	}
}

// BenchmarkBeatRound is the cost of one heartbeat round of every slot of a
// 3-node cluster: the heartbeats, the followers applying them, the acks
// and the owners applying those, over 16384 slots (every node's share).
func BenchmarkBeatRound(b *testing.B) {
	c := newCluster(b, Count)
	for _, n := range []string{"n1", "n2", "n3"} {
		c.add(n, nil)
	}
	c.stable = 3
	c.tables(true)
	c.deliver(100)
	now := base
	b.ResetTimer()
	for b.Loop() {
		now = now.Add(c.m["n1"].cfg.Lease / 4)
		c.tick(now)
		c.deliver(10)
	}
}
