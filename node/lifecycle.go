package node

// How a node stops: the drain that hands its slots over, then the
// components in order (shutdown); Close and the storage failure path call it.

import (
	"context"
	"time"

	"github.com/chime-scheduler/chime/node/dispatch"
)

// shutdown is Close (stopGraceful); stopCrash skips the drain and stops
// gossip without leaving, so the others see the node die as after a crash
// (tests' crash helper, with a cancelled ctx so running callbacks are cut);
// stopFailed skips the drain and leaves.
func (n *Node) shutdown(ctx context.Context, mode stopMode) error {
	n.closeOnce.Do(func() {
		if !n.running.Swap(false) {
			return
		}
		n.loop.close() // no new fires
		for _, j := range n.disp.Close(ctx) {
			// Never started: it stays in flight in the store (the next
			// owner or start repeats it with the same fire id), but the
			// writer must not wait for it (a seal for a handover does).
			n.writer.send(&doneOp{writeOp: writeOp{kind: opDone}, res: dispatch.Result{Job: j, Err: dispatch.Shutdown}})
		}
		if n.cluster != nil {
			if n.ae != nil {
				n.ae.Close()
			}
			switch mode {
			case stopGraceful, stopFailed:
				if mode == stopGraceful {
					n.drain(ctx)
				}
				// The machine stops before the node leaves: once the
				// others see it left, it acts on no grant any more (they
				// forget it as a suspect at once, see slots.MemberDead).
				n.exec.Close()
				n.cluster.Close()
			default:
				n.cluster.Kill()
				n.exec.Close()
			}
		}
		close(n.writer.stop)
		<-n.writer.done
		if n.ship != nil {
			n.ship.Close()
		}
		close(n.stopBG)
		n.bg.Wait()
		n.closeErr = n.store.Close()
		if n.fwd != nil {
			n.fwd.Close()
		}
		n.log.Info("node stopped")
	})
	return n.closeErr
}

// drain hands this node's slots over before it leaves: the results of the
// callbacks that finished are applied and acknowledged by the followers
// (so the new owners do not repeat those fires), then the node announces
// it is draining, the other nodes drop it from their tables and take each
// of its slots over by a sealed handover (it keeps serving the internal
// endpoints meanwhile), and only then does it leave.
func (n *Node) drain(ctx context.Context) {
	start := n.cfg.Clock.Now()
	if err := n.writer.barrier(); err != nil {
		n.log.Warn("drain: writer", "err", err)
	}
	// Once the others drop this node from their tables, its slots' new
	// owners take them by handover (this node seals each: no fire in
	// flight, then hands over its final (epoch, seq)).
	if !n.cluster.Drain(ctx, 10*time.Second, func() bool { return n.ctl.Counts().Owned == 0 }, n.ctl.Changed) {
		rctx, cancel := context.WithTimeout(context.Background(), time.Second)
		if r, ok := n.ctl.OwnedReport(rctx); ok {
			n.log.Warn("drain: slots not handed over in time", "left", r)
		}
		cancel()
	}
	n.ship.Flush(ctx, 5*time.Second)
	n.log.Info("drained: the other nodes own this node's slots", "took", n.cfg.Clock.Since(start).Round(time.Millisecond))
}
