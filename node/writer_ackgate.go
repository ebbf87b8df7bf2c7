package node

import "time"

// The ack gate: a task is not fired before the API write that made it due
// is acknowledged. The writer commits a group without waiting for the
// disk and tells the loop of its wake times at once (in commit order:
// writer.go), so a task created due now reached the wheel, and its fire
// the dispatcher, while its create still waited for the fsync and the
// followers: a crash then lost a task whose callback had been sent, and
// whose create had failed. Now every group's API writes of tasks waking
// within ackGateHorizon are noted (put); a fire of one of them waits,
// re-filed every ackGateRetry, until its group is acknowledged
// (syncGroup.done, set by finish: fsynced, and on the followers in a
// cluster). Fires, results and replicated writes are not API writes and
// are never held.

const (
	// ackGateHorizon: API writes of tasks waking later than this are not
	// noted; their groups are acknowledged long before (an API write waits
	// at most replTimeout for its followers).
	ackGateHorizon = 6 * replTimeout
	// ackGateRetry is how long a held fire waits before it looks again:
	// one tick of the wheel.
	ackGateRetry = 10 * time.Millisecond
)

// ackGate is the writer goroutine's record of the tasks whose latest API
// write is not acknowledged yet. Writer goroutine only; a group's done
// flag is set by the syncer.
type ackGate struct {
	api   bool                  // apply is applying an API op (put notes its writes)
	by    map[string]*syncGroup // task id -> the group of its latest noted write
	queue []*syncGroup          // groups with noted writes, in commit order
}

// add notes g's writes (g.unacked), committed.
func (a *ackGate) add(g *syncGroup) {
	if a.by == nil {
		a.by = make(map[string]*syncGroup)
	}
	for _, id := range g.unacked {
		a.by[id] = g
	}
	a.queue = append(a.queue, g)
}

// prune forgets the acknowledged groups at the head of the queue. A group
// acknowledged out of order waits for the ones before it to be forgotten;
// acked consults its done flag meanwhile.
func (a *ackGate) prune() {
	for len(a.queue) > 0 && a.queue[0].done.Load() {
		g := a.queue[0]
		for _, id := range g.unacked {
			if a.by[id] == g {
				delete(a.by, id)
			}
		}
		a.queue[0] = nil
		a.queue = a.queue[1:]
	}
	if len(a.queue) == 0 {
		a.queue = nil
	}
}

// acked reports whether task id may fire: no write of it waits for its
// acknowledgment.
func (a *ackGate) acked(id string) bool {
	g, ok := a.by[id]
	return !ok || g.done.Load()
}
