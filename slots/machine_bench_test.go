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
// of a 3-node cluster over all 16384 slots: every node's Tick, its per-slot
// heartbeats (only the slots that are not quiet send one, see lease.go)
// and PairHeartbeats, the receivers applying them, the acks and the owners
// applying those; machine work only (no invariant checks, no wire). The
// first rounds grant and settle; the loop measures a settled cluster.
func BenchmarkBeatRound(b *testing.B) {
	c := bootstrapped(b, Count)
	now := base
	lease := c.m["n1"].cfg.Lease
	beats, pairs := 0, 0
	round := func() {
		now = now.Add(lease / 4)
		var acks []message
		for _, from := range []string{"n1", "n2", "n3"} {
			for _, e := range c.m[from].Step(Tick{Now: now}) {
				var ev Event
				var to string
				switch e := e.(type) {
				case Heartbeat:
					beats++
					to, ev = e.To, Replicated{Slot: e.Slot, Epoch: e.Epoch, Seq: e.Seq, From: from, Sent: e.Sent, Grant: e.Grant, Release: e.Release, Inc: e.Inc}
				case PairHeartbeat:
					pairs++
					to, ev = e.To, PairReplicated{From: from, Sent: e.Sent, Inc: e.Inc}
				default:
					continue
				}
				for _, a := range c.m[to].Step(ev) {
					switch a := a.(type) {
					case Ack:
						acks = append(acks, message{from: to, to: from, ev: ReplAck{Slot: a.Slot, Epoch: a.Epoch, Seq: a.Seq,
							From: to, Sent: a.Sent, Grant: a.Grant, Synced: a.Synced, Released: a.Released, Inc: a.Inc, Gen: a.Gen}})
					case PairAck:
						acks = append(acks, message{from: to, to: from, ev: PairReplAck{From: to, Sent: a.Sent, Inc: a.Inc, Gen: a.Gen}})
					}
				}
			}
		}
		for _, a := range acks {
			c.m[a.to].Step(a.ev)
		}
	}
	for range 8 {
		round()
	}
	beats, pairs = 0, 0
	b.ResetTimer()
	for b.Loop() {
		round()
	}
	b.ReportMetric(float64(beats)/float64(b.N), "beats/op")
	b.ReportMetric(float64(pairs)/float64(b.N), "pairs/op")
}
