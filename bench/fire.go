package bench

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// FireConfig configures the fire workload: N one-shot tasks with dues
// spread uniformly over N/Rate seconds, starting Lead after creation
// began, all calling back into the built-in Receiver. Its ceiling is
// baseline-http against the same receiver.
type FireConfig struct {
	Target TargetConfig `json:"target"`
	// N is the number of tasks (= fires). Default 10,000.
	N int `json:"n"`
	// Rate is the offered fire rate, fires/s: dues are N/Rate seconds
	// apart in total. Default 1,000/s, a tenth of what limits.md says a
	// net/http client can post here, so the default run measures
	// lateness, not saturation. Raise it to find the node's ceiling.
	Rate float64 `json:"rate"`
	// Batch is tasks per create request. Default 1,000.
	Batch int `json:"batch"`
	// Concurrency is create requests in flight. Default 4: creation only
	// has to finish before the first due, and every core it takes is
	// stolen from the node.
	Concurrency int `json:"concurrency"`
	// Lead is the time from the start of creation to the first due. 0
	// means 3 s + N/10,000 s: creation at a pessimistic 10k tasks/s on a
	// loaded box, plus a few seconds of quiet before firing starts. When
	// creation overruns it anyway, the run warns (slack < 0).
	Lead time.Duration `json:"lead_ns"`
	// Timeout is how long after the last due the run waits for missing
	// fires before it reports them missing. Default 30 s, above the
	// retry backoff of a failed first attempt.
	Timeout time.Duration `json:"timeout_ns"`
	// Settle is how long the run keeps listening after every fire arrived,
	// to catch duplicates. Default 1 s.
	Settle time.Duration `json:"settle_ns"`
	// SkipBaseline skips baseline-http (no ratios then).
	SkipBaseline bool `json:"skip_baseline"`
	// FlowKey, when set, makes the run fire twice against the same node:
	// N tasks without a flow key, then N more whose flow_key is FlowKey
	// (ids "{FlowKey}bf-…"), under a flow whose limits never bind
	// (parallelism and rate 100,000 per ms), so the limiter runs on every
	// fire without holding one. The summary compares the two rounds.
	// All tasks of a key are in one slot: on a cluster one node fires them.
	FlowKey string `json:"flow_key,omitempty"`
	// Baseline configures baseline-http.
	Baseline HTTPBaselineConfig `json:"baseline"`
	// Progress reports the phases.
	Progress Progress `json:"-"`
}

// DefaultFireConfig returns the defaults described on each field. The
// target is left unset.
func DefaultFireConfig() FireConfig {
	return FireConfig{N: 10_000, Rate: 1000, Batch: 1000, Concurrency: 4,
		Timeout: 30 * time.Second, Settle: time.Second, Baseline: DefaultHTTPBaselineConfig()}
}

// Validate reports every problem with c.
func (c FireConfig) Validate() error {
	errs := []error{c.Target.validate(), validateLoad(c.N, c.Concurrency, c.Batch)}
	if !(c.Rate > 0) {
		errs = append(errs, fmt.Errorf("bench: rate %v must be > 0", c.Rate))
	}
	if c.FlowKey != "" && !validFlowKey(c.FlowKey) {
		errs = append(errs, fmt.Errorf("bench: flow key %q: 1-100 characters of A-Z a-z 0-9 . _ ~ : -", c.FlowKey))
	}
	if c.Lead < 0 || c.Timeout < 0 || c.Settle < 0 {
		errs = append(errs, errors.New("bench: lead, timeout and settle must be ≥ 0"))
	}
	if !c.SkipBaseline {
		errs = append(errs, c.Baseline.validate())
	}
	return errors.Join(errs...)
}

// FireStats is what the fire workload measured.
type FireStats struct {
	Tasks       int     `json:"tasks"`
	OfferedRate float64 `json:"offered_rate"`
	// Create is the creation phase that scheduled the fires.
	Create CreateStats `json:"create"`
	// FirstDue is the due time of the first task; SpreadSeconds the span
	// of all dues.
	FirstDue      time.Time `json:"first_due"`
	SpreadSeconds float64   `json:"spread_seconds"`
	// SlackSeconds is first due minus the end of creation; negative means
	// creation overlapped firing and the node's numbers include both.
	SlackSeconds float64 `json:"slack_seconds"`
	// Fired is the number of distinct fires delivered; Completion is
	// Fired / Tasks; TimedOut says the run stopped waiting.
	Fired      uint64  `json:"fired"`
	Completion float64 `json:"completion"`
	TimedOut   bool    `json:"timed_out"`
	// FireRate is fires per second between the first and last arrival;
	// PeakRate the busiest second.
	FireRate float64 `json:"fire_rate"`
	PeakRate float64 `json:"peak_rate"`
	// NodeCPUPerFire is node CPU µs per fire during the fire phase (from
	// the first due until the last fire arrived, or the timeout); 0 when
	// unknown.
	NodeCPUPerFire float64 `json:"node_cpu_us_per_fire,omitempty"`
	// ReceiverCPUPerFire is this process's CPU µs per fire in that phase:
	// essentially the receiver's cost.
	ReceiverCPUPerFire float64 `json:"receiver_cpu_us_per_fire"`
	// Receiver is everything the receiver recorded: lateness, early fires,
	// duplicates, the arrivals timeline.
	Receiver ReceiverStats `json:"receiver"`
	// Flow is the second round of a run with FlowKey: the same workload
	// with the key on every task.
	Flow *FireStats `json:"flow,omitempty"`
}

// RunFire runs the fire workload. Problems stopping a spawned node after
// the measurement are reported as warnings, not errors.
func RunFire(ctx context.Context, cfg FireConfig) (res Result, err error) {
	cfg.Target.setDefaults()
	if cfg.Lead == 0 {
		cfg.Lead = 3*time.Second + time.Duration(cfg.N)*time.Second/10_000
	}
	cfg.Baseline.Progress = cfg.Progress
	res = Result{Workload: "fire", Started: time.Now(), Env: currentEnv(), Config: cfg}
	if err := cfg.Validate(); err != nil {
		return res, err
	}

	run := runID(time.Now())
	var prefix atomic.Pointer[string] // the round's task id prefix
	prefix.Store(new(string))
	var firstDue atomic.Int64 // unix ms; 0 until the dues are fixed
	dueOf := func(i int) time.Time {
		return time.UnixMilli(firstDue.Load() + int64(float64(i)*1000/cfg.Rate))
	}
	rcv, err := NewReceiver(ReceiverConfig{Expect: func(fireID string) (time.Time, bool) {
		i, ok := fireIndex(fireID, *prefix.Load(), cfg.N)
		if !ok || firstDue.Load() == 0 {
			return time.Time{}, false
		}
		return dueOf(i), true
	}})
	if err != nil {
		return res, err
	}
	if err := rcv.Start(); err != nil {
		return res, err
	}
	defer rcv.Close()

	if !cfg.SkipBaseline {
		hb, err := MeasureHTTP(ctx, rcv, cfg.Baseline)
		if err != nil {
			return res, err
		}
		res.HTTPBaseline = &hb
	}

	tg, err := openTarget(ctx, cfg.Target, cfg.Concurrency, cfg.Progress)
	if err != nil {
		return res, err
	}
	defer func() { res.Warnings = appendErr(res.Warnings, tg.close()) }()
	res.Warnings = append(res.Warnings, tg.warnings...)

	// round creates and fires N tasks with ids p<i> (and flow_key key when
	// set) and measures the fire phase.
	round := func(p, key string) (FireStats, error) {
		prefix.Store(&p)
		firstDue.Store(0)
		createStart := time.Now()
		first := createStart.Add(cfg.Lead).Truncate(time.Millisecond)
		firstDue.Store(first.UnixMilli())
		lastDue := dueOf(cfg.N - 1)
		rcv.Reset(first)
		tt := newTaskTemplate(p, rcv.URL()+"/fire", run)
		tt.flowKey = key
		plan := createPlan{n: cfg.N, batch: cfg.Batch, concurrency: cfg.Concurrency, via: tg.spread(),
			task: func(dst []byte, i int) []byte { return tt.appendDue(dst, i, dueOf(i)) }}
		cs, err := createTasks(ctx, tg.api, tg, plan, cfg.Progress.startPhase("create", int64(cfg.N)))
		if err != nil {
			return FireStats{}, err
		}
		createEnd := time.Now()

		// The fire phase runs from the first due until the last fire arrived;
		// CPU is measured over exactly that span.
		cfg.Progress.logf("first due in %s, last due in %s", time.Until(first).Round(time.Millisecond), time.Until(lastDue).Round(time.Millisecond))
		if err := sleepCtx(ctx, time.Until(first)); err != nil {
			return FireStats{}, err
		}
		node0, nodeOK := tg.sample()
		self0 := selfCPU()
		timedOut, err := waitFires(ctx, rcv, uint64(cs.Acked), lastDue.Add(cfg.Timeout), cfg.Progress.startPhase("fire", cs.Acked))
		if err != nil {
			return FireStats{}, err
		}
		node1, nodeOK1 := tg.sample()
		selfCPUUsed := selfCPU() - self0
		if !timedOut {
			if err := sleepCtx(ctx, cfg.Settle); err != nil {
				return FireStats{}, err
			}
		}
		st := rcv.Stats()

		fs := FireStats{
			Tasks:         cfg.N,
			OfferedRate:   cfg.Rate,
			Create:        cs,
			FirstDue:      first,
			SpreadSeconds: lastDue.Sub(first).Seconds(),
			SlackSeconds:  first.Sub(createEnd).Seconds(),
			Fired:         st.Delivered,
			Completion:    float64(st.Delivered) / float64(cfg.N),
			TimedOut:      timedOut,
			PeakRate:      peakRate(st.Timeline, st.Step),
			Receiver:      st,
		}
		if span := st.Last.Sub(st.First); span > 0 && st.Delivered > 1 {
			fs.FireRate = float64(st.Delivered-1) / span.Seconds()
		}
		fs.ReceiverCPUPerFire = perOp(selfCPUUsed, int64(st.Delivered))
		if nodeOK && nodeOK1 {
			fs.NodeCPUPerFire = perOp(node1.cpu-node0.cpu, int64(st.Delivered))
		}
		return fs, nil
	}
	fs, err := round("bf-"+run+"-", "")
	if err != nil {
		return res, err
	}
	if cfg.FlowKey != "" {
		limits := []byte(`{"rate":100000,"period_ms":1,"parallelism":100000}`)
		if a, err := tg.api.do(ctx, "PUT", "/v1/flows/"+cfg.FlowKey, limits); err != nil || a.status/100 != 2 {
			return res, fmt.Errorf("bench: define flow %s: %d %v", cfg.FlowKey, a.status, err)
		}
		ff, err := round("{"+cfg.FlowKey+"}bf-"+run+"-f-", cfg.FlowKey)
		if err != nil {
			return res, err
		}
		fs.Flow = &ff
	}
	res.Fire = &fs
	res.Node, res.Nodes = tg.allStats()
	res.Summary = fireRows(fs, res.HTTPBaseline, res.Node, len(tg.nodes))
	res.Warnings = append(res.Warnings, fireWarnings(fs, res.HTTPBaseline)...)
	if ff := fs.Flow; ff != nil {
		res.Summary = append(res.Summary, flowRows(fs, *ff)...)
		for _, w := range fireWarnings(*ff, res.HTTPBaseline) {
			res.Warnings = append(res.Warnings, "with flow_key: "+w)
		}
	}
	res.Charts = fireCharts(fs)
	res.Seconds = time.Since(res.Started).Seconds()
	return res, nil
}

// flowRows compare the round with a flow key on every task (ff) with the
// round without (fs): fire rate and node CPU per fire, and the overhead.
func flowRows(fs, ff FireStats) []Row {
	rows := []Row{
		row(fmt.Sprintf("fire rate with flow_key (offered %s/s)", fmtNum(ff.OfferedRate)), ff.FireRate, "fires/s", fs.FireRate, "without flow_key"),
		row("completion with flow_key", 100*ff.Completion, "%", 0, ""),
		row("lateness p99 with flow_key", float64(ff.Receiver.Lateness.P99)/1e3, "ms", float64(fs.Receiver.Lateness.P99)/1e3, "without flow_key"),
		row("early requests with flow_key", float64(ff.Receiver.Early), "", 0, ""),
	}
	if fs.NodeCPUPerFire > 0 && ff.NodeCPUPerFire > 0 {
		rows = append(rows,
			row("node CPU per fire with flow_key", ff.NodeCPUPerFire, "µs", fs.NodeCPUPerFire, "without flow_key"),
			row("flow_key CPU overhead per fire", 100*(ff.NodeCPUPerFire/fs.NodeCPUPerFire-1), "%", 0, ""))
	}
	return rows
}

// validFlowKey reports whether k can be a flow key whose generated ids fit
// (storage.ValidFlowKey, at most 100 characters).
func validFlowKey(k string) bool {
	if len(k) == 0 || len(k) > 100 {
		return false
	}
	for _, c := range []byte(k) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("._~:-", c) >= 0) {
			return false
		}
	}
	return true
}

// fireIndex parses the task index out of a fire id "<prefix><i>:<seq>".
func fireIndex(fireID, prefix string, n int) (int, bool) {
	rest, ok := strings.CutPrefix(fireID, prefix)
	if !ok {
		return 0, false
	}
	num, _, ok := strings.Cut(rest, ":")
	if !ok {
		return 0, false
	}
	i, err := strconv.Atoi(num)
	if err != nil || i < 0 || i >= n {
		return 0, false
	}
	return i, true
}

// waitFires polls rcv until want fires were delivered or deadline passes.
// It reports whether it gave up at the deadline.
func waitFires(ctx context.Context, rcv *Receiver, want uint64, deadline time.Time, ph *phase) (bool, error) {
	defer ph.End()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		got := rcv.Delivered()
		ph.Set(int64(got))
		if got >= want {
			return false, nil
		}
		if time.Now().After(deadline) {
			return true, nil
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-tick.C:
		}
	}
}

// sleepCtx waits for d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// peakRate returns the largest number of arrivals in any one-second window
// of the timeline (aligned to its buckets).
func peakRate(timeline []uint64, step time.Duration) float64 {
	per := max(int(time.Second/step), 1)
	var best, sum uint64
	for i, c := range timeline {
		sum += c
		if i >= per {
			sum -= timeline[i-per]
		}
		best = max(best, sum)
	}
	return float64(best) * float64(time.Second) / float64(time.Duration(per)*step)
}

// fireRows is the summary of a fire run next to its ceilings. For a
// cluster of nodes > 1, CPU and RSS are summed over the nodes.
func fireRows(fs FireStats, hb *HTTPBaselineResult, node *NodeStats, nodes int) []Row {
	var rate, cpu float64
	var oneWay Summary
	name := ""
	if hb != nil {
		// The baseline's CPU covers client and receiver (one process), so
		// the CPU ratio understates the node's overhead somewhat.
		rate, oneWay, cpu, name = hb.PerSecond, hb.OneWay, hb.CPUPerRequest, "baseline-http"
	}
	ms := func(us int64) float64 { return float64(us) / 1e3 }
	rows := []Row{
		row(fmt.Sprintf("fire rate (offered %s/s)", fmtNum(fs.OfferedRate)), fs.FireRate, "fires/s", rate, name),
		row("completion", 100*fs.Completion, "%", 0, ""),
		row("lateness p50", ms(fs.Receiver.Lateness.P50), "ms", ms(oneWay.P50), name+" one-way"),
		row("lateness p90", ms(fs.Receiver.Lateness.P90), "ms", ms(oneWay.P90), name+" one-way"),
		row("lateness p99", ms(fs.Receiver.Lateness.P99), "ms", ms(oneWay.P99), name+" one-way"),
		row("lateness max", ms(fs.Receiver.MaxLateness), "ms", ms(oneWay.Max), name+" one-way"),
		row("earliest fire (min lateness; < 0 = early)", ms(fs.Receiver.MinLateness), "ms", 0, ""),
		row("early requests", float64(fs.Receiver.Early), "", 0, ""),
		row("duplicate deliveries", float64(fs.Receiver.Duplicates), "", 0, ""),
	}
	return append(rows, resourceRows(fs.NodeCPUPerFire, "fire", cpu, node, nodes)...)
}

// resourceRows are the CPU per operation and RSS rows of a run, labelled
// for a single node or a cluster (summed over its nodes).
func resourceRows(cpuPerOp float64, op string, ceilCPU float64, node *NodeStats, nodes int) []Row {
	who := "node"
	if nodes > 1 {
		who = fmt.Sprintf("cluster (%d nodes, summed)", nodes)
	}
	var rows []Row
	if cpuPerOp > 0 {
		rows = append(rows, row(who+" CPU per "+op, cpuPerOp, "µs", ceilCPU, "baseline-http client+receiver CPU per POST"))
	}
	if node != nil && node.RSSBytes > 0 {
		rows = append(rows, row(who+" RSS", float64(node.RSSBytes)/(1<<20), "MiB", 0, ""))
	}
	return rows
}

// fireWarnings flags a fire run whose numbers are not clean.
func fireWarnings(fs FireStats, hb *HTTPBaselineResult) []string {
	w := createWarnings(fs.Create)
	if fs.SlackSeconds < 0 {
		w = append(w, fmt.Sprintf("creation ended %.1f s after the first due: early fires are late by creation time and node CPU includes creation; raise --lead", -fs.SlackSeconds))
	}
	if fs.TimedOut {
		w = append(w, fmt.Sprintf("gave up waiting: %d of %d fires arrived", fs.Fired, fs.Tasks))
	}
	if fs.Receiver.Early > 0 {
		w = append(w, fmt.Sprintf("%d requests arrived before their due time (never-early guarantee broken)", fs.Receiver.Early))
	}
	if fs.Receiver.DueMismatch > 0 {
		w = append(w, fmt.Sprintf("%d requests carried an X-Chime-Due-At other than the scheduled due", fs.Receiver.DueMismatch))
	}
	if hb != nil && fs.PeakRate > 0.8*hb.PerSecond {
		w = append(w, fmt.Sprintf("peak fire rate %s/s is above 80%% of the receiver's measured capacity %s/s: the receiver may be the bottleneck",
			fmtNum(fs.PeakRate), fmtNum(hb.PerSecond)))
	}
	return w
}
