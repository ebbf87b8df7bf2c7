package main

import (
	"context"
	"log/slog"
	"runtime"
	"time"

	"github.com/chime-scheduler/chime/ring/gossip"
)

// This file is serve's --idle-procs-after: a node that stays idle runs its
// goroutines on one processor (runtime.GOMAXPROCS(1)), and on every CPU
// again as soon as it is busy.
//
// An idle cluster node wakes ~10 times a second (its ownership ticks, its
// peers' pings, memberlist's rounds, all on one beat), and each wake-up
// readies a few goroutines. With two Ps the runtime wakes a second thread
// for each of them, which spins looking for work and parks again: futex
// calls, context switches, and sysmon polling while any P runs. Side by
// side on a 2-CPU machine, an idle 3-node cluster's nodes used 1.84 % of a
// core each with GOMAXPROCS=2 and 1.61 % with GOMAXPROCS=1 (issue 17 item
// 1, docs/BENCHMARKS.md). One P is plenty for an idle node; a busy one
// needs them all, so the governor measures the process's CPU once a
// second and switches.

const (
	// procsSampleEvery is the governor's period: on the whole seconds,
	// when the storage's compaction sampler wakes the process anyway.
	procsSampleEvery = time.Second
	// procsBusy is the share of one core in one sample above which the
	// node runs on every CPU at once: far below what one P can do, so a
	// load that would need the second one is seen a second early.
	procsBusy = 0.20
	// procsIdle is the share of one core under which a sample is quiet:
	// five times an idle cluster node's.
	procsIdle = 0.05
	// defaultIdleProcsAfter is how long a node must stay quiet before it
	// drops to one P.
	defaultIdleProcsAfter = 10 * time.Second
)

// procsGovernor decides the P count from the CPU samples: max once a
// sample is busy, 1 after quiet samples in a row.
type procsGovernor struct {
	max, cur int
	quiet    int // samples needed in a row to drop to one P
	run      int // quiet samples in a row so far
}

// next returns the P count after a sample in which the process used share
// of one core.
func (g *procsGovernor) next(share float64) int {
	switch {
	case share >= procsBusy:
		g.run, g.cur = 0, g.max
	case share < procsIdle:
		if g.run++; g.run >= g.quiet {
			g.cur = 1
		}
	default:
		g.run = 0
	}
	return g.cur
}

// governProcs runs the governor until ctx ends, then restores the P count
// it found. It does nothing when after is 0, when the process has one P,
// or when the GOMAXPROCS variable is set (an explicit choice), or where
// the process's CPU time cannot be read.
func governProcs(ctx context.Context, after time.Duration, env func(string) string, log *slog.Logger) {
	all := runtime.GOMAXPROCS(0)
	start, ok := processCPU()
	if after <= 0 || all <= 1 || env("GOMAXPROCS") != "" || !ok {
		return
	}
	g := procsGovernor{max: all, cur: all, quiet: max(1, int((after+procsSampleEvery-1)/procsSampleEvery))}
	defer func() {
		if runtime.GOMAXPROCS(0) != all {
			runtime.GOMAXPROCS(all)
		}
	}()
	last, lastCPU := time.Now(), start
	t := time.NewTimer(gossip.UntilBeat(last, procsSampleEvery))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := time.Now()
		t.Reset(gossip.UntilBeat(now, procsSampleEvery))
		cpu, _ := processCPU()
		share := 0.0
		if wall := now.Sub(last); wall > 0 {
			share = float64(cpu-lastCPU) / float64(wall)
		}
		last, lastCPU = now, cpu
		if n := g.next(share); n != runtime.GOMAXPROCS(0) {
			runtime.GOMAXPROCS(n)
			log.Debug("processors", "gomaxprocs", n, "cpu_share", share)
		}
	}
}
