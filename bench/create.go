package bench

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// Create modes.
const (
	ModeSingle = "single" // one task per POST /v1/tasks
	ModeBatch  = "batch"  // Batch tasks per POST /v1/tasks:batch
)

// CreateConfig configures the create workload: N tasks due in an hour
// (so nothing fires during the run), created by Concurrency clients, one
// per request or in batches. Its ceiling is baseline-pebble writing the
// same records with the same batch size and concurrency.
type CreateConfig struct {
	Target TargetConfig `json:"target"`
	// Mode is ModeSingle or ModeBatch. Default batch.
	Mode string `json:"mode"`
	// N is the number of tasks. Default 100,000: a few seconds batched,
	// tens of seconds single, on a 2-core box.
	N int `json:"n"`
	// Concurrency is the number of requests in flight. Default 64: enough
	// for the node's group commit to share fsyncs among single creates.
	Concurrency int `json:"concurrency"`
	// Batch is tasks per batch request (batch mode). Default 1,000; the
	// API allows up to 10,000.
	Batch int `json:"batch"`
	// Route picks the node each request goes to in a cluster: RouteAny
	// (default: round robin), or, single mode only, RouteOwner,
	// RouteForeign or RouteCompare (owner then foreign, N tasks each),
	// or through the Go SDK RouteSDK, RouteSDKFixed or RouteSDKCompare
	// (sdk then sdk-fixed, N tasks each).
	Route string `json:"route"`
	// SkipBaseline skips baseline-pebble (no ratios then).
	SkipBaseline bool `json:"skip_baseline"`
	// BaselineN is the number of records baseline-pebble writes. Default
	// min(N, 100,000).
	BaselineN int `json:"baseline_n"`
	// Progress reports the phases.
	Progress Progress `json:"-"`
}

// DefaultCreateConfig returns the defaults described on each field. The
// target is left unset.
func DefaultCreateConfig() CreateConfig {
	return CreateConfig{Mode: ModeBatch, N: 100_000, Concurrency: 64, Batch: 1000, Route: RouteAny}
}

// Validate reports every problem with c.
func (c CreateConfig) Validate() error {
	errs := []error{c.Target.validate()}
	if c.Mode != ModeSingle && c.Mode != ModeBatch {
		errs = append(errs, fmt.Errorf("bench: mode %q is not %q or %q", c.Mode, ModeSingle, ModeBatch))
	}
	errs = append(errs, validateLoad(c.N, c.Concurrency, c.Batch), validateBaselineN(c.BaselineN))
	switch {
	case !validRoute(c.Route):
		errs = append(errs, fmt.Errorf("bench: route %q is not %s", c.Route, routeNames))
	case c.Route != RouteAny && c.Mode != ModeSingle:
		errs = append(errs, fmt.Errorf("bench: route %s needs --mode single (a batch is split by owner on the node)", c.Route))
	case c.Route != RouteAny && c.Target.nodeCount() < 2:
		errs = append(errs, fmt.Errorf("bench: route %s needs a cluster of at least 2 nodes", c.Route))
	}
	return errors.Join(errs...)
}

// validateLoad checks the fields every creating workload has.
func validateLoad(n, concurrency, batch int) error {
	var errs []error
	if n < 1 {
		errs = append(errs, fmt.Errorf("bench: n %d < 1", n))
	}
	if concurrency < 1 {
		errs = append(errs, fmt.Errorf("bench: concurrency %d < 1", concurrency))
	}
	if batch < 1 || batch > 10_000 {
		errs = append(errs, fmt.Errorf("bench: batch %d not in [1, 10000]", batch))
	}
	return errors.Join(errs...)
}

func validateBaselineN(n int) error {
	if n < 0 {
		return fmt.Errorf("bench: baseline n %d < 0", n)
	}
	return nil
}

// RunCreate runs the create workload. Problems stopping a spawned node
// after the measurement are reported as warnings, not errors.
func RunCreate(ctx context.Context, cfg CreateConfig) (res Result, err error) {
	cfg.Target.setDefaults()
	if cfg.BaselineN == 0 {
		cfg.BaselineN = min(cfg.N, 100_000)
	}
	res = Result{Workload: "create", Started: time.Now(), Env: currentEnv(), Config: cfg}
	if err := cfg.Validate(); err != nil {
		return res, err
	}
	single := cfg.Mode == ModeSingle
	batch := cfg.Batch
	if single {
		batch = 1
	}
	if !cfg.SkipBaseline {
		pb, err := MeasurePebble(ctx, PebbleBaselineConfig{Tasks: cfg.BaselineN, Batch: batch,
			Concurrency: cfg.Concurrency, Progress: cfg.Progress})
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
	res.Warnings = append(res.Warnings, tg.warnings...)

	routes := phasesOf(cfg.Route)
	var om ownerMap
	if cfg.Route == RouteOwner || cfg.Route == RouteForeign || cfg.Route == RouteCompare {
		v, err := fetchCluster(ctx, tg.api)
		if err != nil {
			return res, err
		}
		if om, err = v.owners(tg.nodes); err != nil {
			return res, err
		}
	}
	run := runID(time.Now())
	clustered := len(tg.nodes) > 1
	for _, route := range routes {
		prefix := "bc-" + run + "-"
		if len(routes) > 1 {
			prefix += idTag(route) + "-" // fresh ids for each route
		}
		tt := newTaskTemplate(prefix, "http://127.0.0.1:9/bench-never", run)
		plan := createPlan{n: cfg.N, batch: batch, concurrency: cfg.Concurrency, single: single,
			task: func(dst []byte, i int) []byte { return tt.appendDelay(dst, i, time.Hour.Milliseconds()) }}
		if viaSDK(route) {
			sc, err := newSDKCreator(tg, route, cfg.Concurrency)
			if err != nil {
				return res, err
			}
			defer sc.close()
			plan.send = sc.send(tt, time.Hour, nil)
		} else if plan.via, err = routeVia(route, tg.nodes, om, func(i int) string { return prefix + strconv.Itoa(i) }); err != nil {
			return res, err
		}
		fwd0, fwdOK := forwardedTotal(ctx, tg.nodes)
		name := "create " + cfg.Mode
		if clustered {
			name += " via " + route
		}
		cs, err := createTasks(ctx, tg.api, tg, plan, cfg.Progress.startPhase(name, int64(cfg.N)))
		if err != nil {
			return res, err
		}
		if clustered {
			cs.Route = route
			if fwd1, ok := forwardedTotal(ctx, tg.nodes); ok && fwdOK {
				d := fwd1 - fwd0
				cs.Forwarded = &d
			}
		}
		res.Routes = append(res.Routes, cs)
	}
	res.Create = &res.Routes[0]
	if len(res.Routes) == 1 {
		res.Routes = nil
	}
	res.Node, res.Nodes = tg.allStats()
	label := fmt.Sprintf("create %s (c=%d, batch=%d)", cfg.Mode, cfg.Concurrency, batch)
	if clustered {
		label = fmt.Sprintf("create %s via %s (%d nodes, c=%d, batch=%d)", cfg.Mode, res.Create.Route, len(tg.nodes), cfg.Concurrency, batch)
	}
	res.Summary = createRows(*res.Create, res.PebbleBaseline, label, clustered)
	res.Warnings = append(res.Warnings, createWarnings(*res.Create)...)
	if len(res.Routes) == 2 {
		res.Summary = append(res.Summary, compareRows(res.Routes[0], res.Routes[1], len(tg.nodes))...)
		res.Warnings = append(res.Warnings, createWarnings(res.Routes[1])...)
	}
	res.Seconds = time.Since(res.Started).Seconds()
	return res, nil
}

// createRows is the summary of a creation phase next to its ceiling.
// In a cluster the CPU is the sum over the nodes, and the requests the
// nodes forwarded to each other are counted.
func createRows(cs CreateStats, pb *PebbleBaselineResult, label string, clustered bool) []Row {
	var ceil, ceilCPU float64
	name := ""
	if pb != nil {
		ceil, ceilCPU = pb.PerSecond, pb.CPUPerTask
		name = fmt.Sprintf("baseline-pebble batch=%d c=%d", pb.Batch, pb.Concurrency)
	}
	rows := []Row{
		row(label+" tasks/s", cs.TasksPerSecond, "tasks/s", ceil, name),
		row("create request latency p50", float64(cs.Latency.P50)/1e3, "ms", 0, ""),
		row("create request latency p99", float64(cs.Latency.P99)/1e3, "ms", 0, ""),
	}
	cpu := "node CPU per task"
	if clustered {
		cpu = "cluster CPU per task (all nodes)"
	}
	if cs.NodeCPUPerTask > 0 {
		rows = append(rows, row(cpu, cs.NodeCPUPerTask, "µs", ceilCPU, name))
	}
	if cs.Forwarded != nil {
		rows = append(rows, row("requests forwarded between nodes", float64(*cs.Forwarded), "", 0, ""))
	}
	return rows
}

// compareRows sets the second phase of a comparison next to the first:
// foreign next to owner (--route compare), sdk-fixed next to sdk (--route
// sdk-compare). The first phase's figures are the ceiling, so the ratio is
// the cost of forwarding: every request once for foreign, those the seed
// does not own for sdk-fixed.
func compareRows(first, second CreateStats, nodes int) []Row {
	ceil := first.Route + ", same run"
	if first.Route == RouteOwner {
		ceil = "direct to the owner, same run"
	}
	r := second.Route
	ms := func(us int64) float64 { return float64(us) / 1e3 }
	rows := []Row{
		row(fmt.Sprintf("create %s via %s (%d nodes, c=%d) tasks/s", second.Mode, r, nodes, second.Concurrency), second.TasksPerSecond, "tasks/s", first.TasksPerSecond, ceil),
		row(r+": request latency p50", ms(second.Latency.P50), "ms", ms(first.Latency.P50), ceil),
		row(r+": request latency p99", ms(second.Latency.P99), "ms", ms(first.Latency.P99), ceil),
	}
	if second.NodeCPUPerTask > 0 {
		rows = append(rows,
			row(r+": cluster CPU per task (all nodes)", second.NodeCPUPerTask, "µs", first.NodeCPUPerTask, ceil),
			row("forwarding overhead: cluster CPU per task", second.NodeCPUPerTask-first.NodeCPUPerTask, "µs", 0, ""))
	}
	rows = append(rows, row("forwarding overhead: latency p50", ms(second.Latency.P50-first.Latency.P50), "ms", 0, ""))
	if second.Forwarded != nil {
		rows = append(rows, row(r+": requests forwarded between nodes", float64(*second.Forwarded), "", 0, ""))
	}
	return rows
}

// createWarnings flags a creation phase whose numbers are not clean.
func createWarnings(cs CreateStats) []string {
	var w []string
	if cs.Rejected > 0 {
		w = append(w, fmt.Sprintf("%d of %d tasks rejected; first error: %s", cs.Rejected, cs.Tasks, cs.FirstError))
	}
	if cs.Retries > 0 {
		w = append(w, fmt.Sprintf("%d requests were answered 429/503 and retried (%d tasks of batches retried on their own)", cs.Retries, cs.TaskRetries))
	}
	if cs.ExistedOnRetry > 0 {
		w = append(w, fmt.Sprintf("%d tasks answered 503 were found stored when retried (409); counted as acknowledged", cs.ExistedOnRetry))
	}
	return w
}

// appendErr appends err's text to warnings when err is not nil.
func appendErr(warnings []string, err error) []string {
	if err != nil {
		return append(warnings, err.Error())
	}
	return warnings
}
