package bench

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ScaleConfig configures the scale workload: store N tasks due in an hour,
// then report the node's memory and disk, and (spawned nodes) how long a
// restart takes until /readyz.
type ScaleConfig struct {
	Target TargetConfig `json:"target"`
	// N is the number of tasks stored. Default 1,000,000; the issue asks
	// for up to 10,000,000 (≈2.6 GiB of disk by limits.md).
	N int `json:"n"`
	// Batch is tasks per create request. Default 1,000.
	Batch int `json:"batch"`
	// Concurrency is create requests in flight. Default 8: enough to
	// keep the node's writer busy without starving it of CPU.
	Concurrency int `json:"concurrency"`
	// Restart stops a spawned node with SIGTERM and starts it again on
	// the same data, timing both. Default true; ignored for URL targets.
	Restart bool `json:"restart"`
	// SkipBaseline skips baseline-pebble (no ratios then).
	SkipBaseline bool `json:"skip_baseline"`
	// BaselineN is the number of records baseline-pebble writes. Default
	// min(N, 100,000).
	BaselineN int `json:"baseline_n"`
	// Progress reports the phases.
	Progress Progress `json:"-"`
}

// DefaultScaleConfig returns the defaults described on each field. The
// target is left unset.
func DefaultScaleConfig() ScaleConfig {
	return ScaleConfig{N: 1_000_000, Batch: 1000, Concurrency: 8, Restart: true}
}

// Validate reports every problem with c.
func (c ScaleConfig) Validate() error {
	return errors.Join(c.Target.validate(), validateLoad(c.N, c.Concurrency, c.Batch), validateBaselineN(c.BaselineN))
}

// ScaleStats is what the scale workload measured.
type ScaleStats struct {
	Tasks  int         `json:"tasks"`
	Create CreateStats `json:"create"`
	// RSSBytes is the node's memory once all tasks are stored,
	// PeakRSSBytes the most it held until then (VmHWM: for a spawned node
	// the peak of the ingest; for a --pid target, of the process's life);
	// DiskBytes its data directory (0 when unknown).
	RSSBytes     int64   `json:"rss_bytes"`
	PeakRSSBytes int64   `json:"peak_rss_bytes"`
	DiskBytes    int64   `json:"disk_bytes"`
	DiskPerTask  float64 `json:"disk_bytes_per_task"`
	// StopSeconds is SIGTERM to exit; RestartSeconds exec to /readyz 200;
	// RestartCPUSeconds the node's CPU during that; RSSAfterRestart its
	// memory once ready. All 0 without a restart.
	StopSeconds       float64 `json:"stop_seconds,omitempty"`
	RestartSeconds    float64 `json:"restart_seconds,omitempty"`
	RestartCPUSeconds float64 `json:"restart_cpu_seconds,omitempty"`
	RSSAfterRestart   int64   `json:"rss_after_restart_bytes,omitempty"`
}

// RunScale runs the scale workload. Problems stopping a spawned node after
// the measurement are reported as warnings, not errors.
func RunScale(ctx context.Context, cfg ScaleConfig) (res Result, err error) {
	cfg.Target.setDefaults()
	if cfg.BaselineN == 0 {
		cfg.BaselineN = min(cfg.N, 100_000)
	}
	res = Result{Workload: "scale", Started: time.Now(), Env: currentEnv(), Config: cfg}
	if err := cfg.Validate(); err != nil {
		return res, err
	}
	if !cfg.SkipBaseline {
		pb, err := MeasurePebble(ctx, PebbleBaselineConfig{Tasks: cfg.BaselineN, Batch: cfg.Batch,
			Concurrency: 1, Progress: cfg.Progress})
		if err != nil {
			return res, err
		}
		res.PebbleBaseline = &pb
	}
	tg, err := openTarget(ctx, cfg.Target, cfg.Concurrency, cfg.Progress)
	if err != nil {
		return res, err
	}
	defer func() { res.Warnings = appendErr(res.Warnings, tg.close()) }()

	run := runID(time.Now())
	tt := newTaskTemplate("bs-"+run+"-", "http://127.0.0.1:9/bench-never", run)
	plan := createPlan{n: cfg.N, batch: cfg.Batch, concurrency: cfg.Concurrency, via: tg.spread(),
		task: func(dst []byte, i int) []byte { return tt.appendDelay(dst, i, time.Hour.Milliseconds()) }}
	cs, err := createTasks(ctx, tg.api, tg, plan, cfg.Progress.startPhase("store", int64(cfg.N)))
	if err != nil {
		return res, err
	}
	ss := ScaleStats{Tasks: cfg.N, Create: cs}
	loaded := tg.stats()
	ss.RSSBytes, ss.PeakRSSBytes, ss.DiskBytes = loaded.RSSBytes, loaded.PeakRSSBytes, loaded.DiskBytes
	ss.DiskPerTask = float64(ss.DiskBytes) / float64(max(cs.Acked, 1))

	if cfg.Restart && cfg.Target.Spawn && len(tg.nodes) == 1 {
		cfg.Progress.logf("restarting the node on %d stored tasks", cs.Acked)
		var cpuBefore time.Duration
		if s, ok := tg.sample(); ok {
			cpuBefore = s.cpu
		}
		stop, ready, err := tg.restart(ctx)
		if err != nil {
			return res, err
		}
		ss.StopSeconds, ss.RestartSeconds = stop.Seconds(), ready.Seconds()
		if s, ok := tg.sample(); ok {
			ss.RestartCPUSeconds = (s.cpu - cpuBefore).Seconds()
			ss.RSSAfterRestart = s.rss
		}
		cfg.Progress.logf("stop took %s, restart to ready %s", stop.Round(time.Millisecond), ready.Round(time.Millisecond))
	}
	res.Scale = &ss
	res.Node, res.Nodes = tg.allStats()
	res.Summary = scaleRows(ss, res.PebbleBaseline)
	res.Warnings = append(res.Warnings, createWarnings(cs)...)
	res.Seconds = time.Since(res.Started).Seconds()
	return res, nil
}

// scaleRows is the summary of a scale run.
func scaleRows(ss ScaleStats, pb *PebbleBaselineResult) []Row {
	var rate, disk float64
	name := ""
	if pb != nil {
		rate, disk, name = pb.PerSecond, pb.BytesPerTask, fmt.Sprintf("baseline-pebble batch=%d", pb.Batch)
	}
	mib := func(b int64) float64 { return float64(b) / (1 << 20) }
	rows := []Row{
		row(fmt.Sprintf("store %s tasks: tasks/s", fmtNum(float64(ss.Tasks))), ss.Create.TasksPerSecond, "tasks/s", rate, name),
		row("store time", ss.Create.Seconds, "s", 0, ""),
	}
	if ss.RSSBytes > 0 {
		rows = append(rows,
			row("node RSS loaded", mib(ss.RSSBytes), "MiB", 0, ""),
			row("node peak RSS storing (VmHWM)", mib(ss.PeakRSSBytes), "MiB", 0, ""),
			row("node RSS per task", float64(ss.RSSBytes)/float64(max(ss.Create.Acked, 1)), "B", 0, ""))
	}
	if ss.DiskBytes > 0 {
		rows = append(rows,
			row("data dir size", mib(ss.DiskBytes), "MiB", 0, ""),
			row("disk per task", ss.DiskPerTask, "B", disk, name))
	}
	if ss.RestartSeconds > 0 {
		rows = append(rows,
			row("stop (SIGTERM → exit)", ss.StopSeconds, "s", 0, ""),
			row("restart → /readyz", ss.RestartSeconds, "s", 0, ""),
			row("node RSS after restart", mib(ss.RSSAfterRestart), "MiB", 0, ""))
	}
	return rows
}
