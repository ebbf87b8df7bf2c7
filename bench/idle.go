package bench

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// IdleConfig configures the idle workload: a spawned cluster with no tasks,
// left alone for Settle after every node is ready, then measured for
// Duration: each node's CPU time and RSS from /proc, its goroutines from
// /metrics (issue 17: ≤ 1 % of a core and ≤ 200 goroutines per idle node).
type IdleConfig struct {
	// Target must spawn the nodes (Spawn, Nodes); default 3 nodes.
	Target TargetConfig `json:"target"`
	// Settle is how long the run waits after every node is ready (and a
	// cluster agrees on its table) before the window starts: joining,
	// the first handovers and the dispatcher's idle timeouts are not idle.
	// Default 20 s.
	Settle time.Duration `json:"settle_ns"`
	// Duration is the measurement window. Default 60 s: CPU time has a
	// resolution of 10 ms, so 1 % of a core is 60 ticks.
	Duration time.Duration `json:"duration_ns"`
	// Progress reports the phases.
	Progress Progress `json:"-"`
}

// DefaultIdleConfig returns the defaults described on each field: a
// spawned 3-node cluster, settled 20 s, measured for 60 s.
func DefaultIdleConfig() IdleConfig {
	return IdleConfig{Target: TargetConfig{Spawn: true, Nodes: 3}, Settle: 20 * time.Second, Duration: 60 * time.Second}
}

// Validate reports every problem with c.
func (c IdleConfig) Validate() error {
	errs := []error{c.Target.validate()}
	if !c.Target.Spawn {
		errs = append(errs, errors.New("bench: idle reads each node's process from /proc from start to end, so it needs spawned nodes (--spawn)"))
	}
	if c.Settle < 0 {
		errs = append(errs, fmt.Errorf("bench: settle %s must be ≥ 0", c.Settle))
	}
	if c.Duration <= 0 {
		errs = append(errs, fmt.Errorf("bench: duration %s must be > 0", c.Duration))
	}
	return errors.Join(errs...)
}

// IdleStats is what the idle workload measured.
type IdleStats struct {
	Nodes int `json:"nodes"`
	// SettleSeconds is the wait before the window; WindowSeconds the
	// window as measured between the two /proc samples.
	SettleSeconds float64    `json:"settle_seconds"`
	WindowSeconds float64    `json:"window_seconds"`
	PerNode       []IdleNode `json:"per_node"`
	// MeanCPUShare, MeanGoroutines and MeanRSSBytes are the means over
	// the nodes (goroutines over the nodes that reported them).
	MeanCPUShare   float64 `json:"mean_cpu_share"`
	MeanGoroutines float64 `json:"mean_goroutines"`
	MeanRSSBytes   int64   `json:"mean_rss_bytes"`
	// MeanSwitchesPerSec is the mean over the nodes of their context
	// switches a second (IdleNode.SwitchesPerSec); 0 if none was read.
	MeanSwitchesPerSec float64 `json:"mean_switches_per_sec"`
}

// IdleNode is one node of an idle run.
type IdleNode struct {
	Name string `json:"name"`
	PID  int    `json:"pid"`
	// CPUSeconds is the node's CPU time (user + system) in the window;
	// CPUShare that over the window: the share of one core (0.01 = 1 %).
	CPUSeconds float64 `json:"cpu_seconds"`
	CPUShare   float64 `json:"cpu_share"`
	// Goroutines is go_goroutines from GET /metrics at the end of the
	// window; -1 when /metrics did not answer or lacked it.
	Goroutines int `json:"goroutines"`
	// RSSBytes is the resident set at the end of the window.
	RSSBytes int64 `json:"rss_bytes"`
	// SwitchesPerSec is the node's context switches a second over the
	// window, all threads (/proc/PID/task/*/status): about how often it
	// woke up, which is most of what an idle node's CPU goes to and varies
	// far less than its CPU share on a shared machine
	// (docs/BENCHMARKS.md). -1 when they could not be read.
	SwitchesPerSec float64 `json:"switches_per_sec"`
}

// metricGoroutines is the Go collector's gauge of live goroutines.
const metricGoroutines = "go_goroutines"

// RunIdle runs the idle workload.
func RunIdle(ctx context.Context, cfg IdleConfig) (res Result, err error) {
	cfg.Target.setDefaults()
	res = Result{Workload: "idle", Started: time.Now(), Env: currentEnv(), Config: cfg}
	if err := cfg.Validate(); err != nil {
		return res, err
	}
	tg, err := openTarget(ctx, cfg.Target, 1, cfg.Progress)
	if err != nil {
		return res, err
	}
	res.Warnings = append(res.Warnings, tg.warnings...)
	defer func() {
		if cerr := tg.close(); cerr != nil {
			res.Warnings = append(res.Warnings, fmt.Sprintf("stopping the nodes: %v", cerr))
		}
	}()

	cfg.Progress.logf("%d nodes ready; settling %s", len(tg.nodes), cfg.Settle)
	if err := sleepCtx(ctx, cfg.Settle); err != nil {
		return res, err
	}
	start := time.Now()
	switches := make([]int64, len(tg.nodes)) // at the start; -1: not read
	for k, m := range tg.nodes {
		s, ok := m.sample()
		if !ok {
			return res, fmt.Errorf("bench: cannot read %s (pid %d) from /proc", m.label(), m.pid)
		}
		m.startCPU = s.cpu // the per-node table then shows the window's CPU
		if n, ok := ctxSwitches(m.pid); ok {
			switches[k] = n
		} else {
			switches[k] = -1
		}
	}
	cfg.Progress.logf("measuring %d idle nodes for %s", len(tg.nodes), cfg.Duration)
	if err := sleepCtx(ctx, cfg.Duration); err != nil {
		return res, err
	}
	for _, m := range tg.nodes {
		if !tg.launch.alive(m.index) {
			return res, fmt.Errorf("bench: %s (pid %d) exited during the window\n%s", m.label(), m.pid, tg.launch.logTail(m.index))
		}
	}
	ends := make([]int64, len(tg.nodes))
	for k, m := range tg.nodes {
		if n, ok := ctxSwitches(m.pid); ok && switches[k] >= 0 {
			ends[k] = n
		} else {
			ends[k] = -1
		}
	}
	res.Node, res.Nodes = tg.allStats() // the end sample
	window := time.Since(start)
	per := res.Nodes
	if per == nil {
		per = []NodeStats{*res.Node}
	}

	is := IdleStats{Nodes: len(tg.nodes), SettleSeconds: cfg.Settle.Seconds(), WindowSeconds: window.Seconds()}
	var gSum, gN int
	for k, m := range tg.nodes {
		n := IdleNode{Name: m.label(), PID: m.pid, CPUSeconds: per[k].CPUSeconds, RSSBytes: per[k].RSSBytes, Goroutines: -1, SwitchesPerSec: -1}
		n.CPUShare = n.CPUSeconds / window.Seconds()
		if ends[k] >= 0 {
			n.SwitchesPerSec = float64(ends[k]-switches[k]) / window.Seconds()
			is.MeanSwitchesPerSec += n.SwitchesPerSec / float64(len(tg.nodes))
		}
		if g, ok := metricSum(ctx, m.api, metricGoroutines); ok && g > 0 {
			n.Goroutines = int(g)
			gSum, gN = gSum+n.Goroutines, gN+1
		} else {
			res.Warnings = append(res.Warnings, fmt.Sprintf("%s: no %s in GET /metrics", n.Name, metricGoroutines))
		}
		is.MeanCPUShare += n.CPUShare / float64(len(tg.nodes))
		is.MeanRSSBytes += n.RSSBytes
		is.PerNode = append(is.PerNode, n)
	}
	if err := ctx.Err(); err != nil {
		return res, err
	}
	is.MeanRSSBytes /= int64(len(tg.nodes))
	if gN > 0 {
		is.MeanGoroutines = float64(gSum) / float64(gN)
	}
	res.Idle = &is
	res.Summary = idleRows(is, cfg)
	res.Seconds = time.Since(res.Started).Seconds()
	return res, nil
}

// Issue 17's targets for an idle node.
const (
	idleCPUTarget        = 0.01
	idleGoroutinesTarget = 200
)

// idleRows is the summary of an idle run.
func idleRows(is IdleStats, cfg IdleConfig) []Row {
	mib := func(v int64) float64 { return float64(v) / (1 << 20) }
	rows := []Row{{Metric: "window", Text: fmt.Sprintf("%s after %s of settling, %d nodes, no tasks", cfg.Duration, cfg.Settle, is.Nodes)}}
	for _, n := range is.PerNode {
		g := row(n.Name+": goroutines (GET /metrics at the end)", float64(n.Goroutines), "", 0, "")
		if n.Goroutines < 0 {
			g.Text = "n/a"
		}
		sw := row(n.Name+": context switches a second (all threads)", n.SwitchesPerSec, "/s", 0, "")
		if n.SwitchesPerSec < 0 {
			sw.Text = "n/a"
		}
		rows = append(rows,
			row(fmt.Sprintf("%s (pid %d): CPU, share of one core", n.Name, n.PID), n.CPUShare*100, "%", 0, ""),
			g, sw,
			row(n.Name+": RSS", mib(n.RSSBytes), "MiB", 0, ""))
	}
	return append(rows,
		row(fmt.Sprintf("mean per node: CPU, share of one core (issue 17: ≤ %g %%)", idleCPUTarget*100), is.MeanCPUShare*100, "%", 0, ""),
		row(fmt.Sprintf("mean per node: goroutines (issue 17: ≤ %d)", idleGoroutinesTarget), is.MeanGoroutines, "", 0, ""),
		row("mean per node: context switches a second", is.MeanSwitchesPerSec, "/s", 0, ""),
		row("mean per node: RSS", mib(is.MeanRSSBytes), "MiB", 0, ""))
}
