package slots

import (
	"testing"
	"time"
)

// BenchmarkTick is the cost of one Tick on a node of a 3-node cluster over
// all 16384 slots, heartbeats between the ticks delivered: the ownership
// work every node pays several times a second while nothing changes.
func BenchmarkTick(b *testing.B) {
	c := bootstrapped(b, Count)
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

// BenchmarkBeatRound is the cost of one heartbeat round between the nodes
// of a 3-node cluster over all 16384 slots (each owner beats the slots it
// owns): the heartbeats, the followers applying them, the acks and the
// owners applying those, machine work only (no invariant checks, no wire).
func BenchmarkBeatRound(b *testing.B) {
	c := bootstrapped(b, Count)
	now := base
	lease := c.m["n1"].cfg.Lease
	beats := 0
	b.ResetTimer()
	for b.Loop() {
		now = now.Add(lease / 4)
		var acks []message
		for _, from := range []string{"n1", "n2", "n3"} {
			for _, e := range c.m[from].Step(Tick{Now: now}) {
				if hb, ok := e.(Heartbeat); ok {
					beats++
					ev := Replicated{Slot: hb.Slot, Epoch: hb.Epoch, Seq: hb.Seq, From: from, Sent: hb.Sent, Grant: hb.Grant, Release: hb.Release}
					for _, a := range c.m[hb.To].Step(ev) {
						if ack, ok := a.(Ack); ok {
							acks = append(acks, message{from: hb.To, to: from, ev: ReplAck{Slot: ack.Slot, Epoch: ack.Epoch, Seq: ack.Seq,
								From: hb.To, Sent: ack.Sent, Grant: ack.Grant, Synced: ack.Synced, Released: ack.Released}})
						}
					}
				}
			}
		}
		for _, a := range acks {
			c.m[a.to].Step(a.ev)
		}
	}
	b.ReportMetric(float64(beats)/float64(b.N), "beats/op")
}
