package bench

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"
)

// ChangeConfig is what the failover and join workloads share: N one-shot
// tasks with dues spread uniformly over N/Rate seconds, created through
// every node of a spawned cluster and fired into the built-in Receiver,
// while the membership changes once, At after the first due.
type ChangeConfig struct {
	// Target must spawn the cluster (Spawn, Nodes); default 3 nodes.
	Target TargetConfig `json:"target"`
	// N is the number of tasks (= fires). Default 20,000.
	N int `json:"n"`
	// Rate is the offered fire rate, fires/s. Default 1,000: 20 s of fires,
	// long enough to see the change and what comes after it.
	Rate float64 `json:"rate"`
	// Stored is how many more tasks are created before the fired ones,
	// due an hour after the last of them: they never fire during the run
	// but fill the nodes' stores, so a change moves them (a join with a
	// million tasks stored is Stored 1,000,000 with a sustainable Rate).
	// After the run a sample of them is read back. Default 0.
	Stored int `json:"stored"`
	// Batch and Concurrency shape creation. Defaults 1,000 and 4.
	Batch       int `json:"batch"`
	Concurrency int `json:"concurrency"`
	// Lead is the time from the start of creation to the first due. 0
	// means 3 s + N/10,000 s, as for fire.
	Lead time.Duration `json:"lead_ns"`
	// At is when the change happens (the kill, the new node's start),
	// after the first due. 0 means a quarter of the spread: enough fires
	// before it to compare with.
	At time.Duration `json:"at_ns"`
	// Poll is how often GET /v1/cluster is polled on every node while the
	// change spreads, so the times of the change are measured to about
	// this. Default 25 ms. Each poll costs the node an answer of ~270 KB
	// (the slot ranges), so polling stops once every node has seen it.
	Poll time.Duration `json:"poll_ns"`
	// LateAfter is how late a fire may arrive before it counts as late.
	// Default 100 ms: about twenty times the p99 lateness of a quiet node
	// here, far below the default misfire grace of 5 s.
	LateAfter time.Duration `json:"late_after_ns"`
	// Timeout is how long after the last due the run waits for missing
	// fires. Fires the change strands never come, so the run always waits
	// it out. Default 5 s.
	Timeout time.Duration `json:"timeout_ns"`
	// Settle is how long the run keeps listening after every fire arrived,
	// to catch duplicates. Default 1 s.
	Settle time.Duration `json:"settle_ns"`
	// SkipBaseline skips baseline-http (no ratios then).
	SkipBaseline bool `json:"skip_baseline"`
	// Baseline configures baseline-http.
	Baseline HTTPBaselineConfig `json:"baseline"`
	// Progress reports the phases.
	Progress Progress `json:"-"`
}

// defaultChangeConfig returns the defaults described on each field, with a
// spawned 3-node cluster.
func defaultChangeConfig() ChangeConfig {
	return ChangeConfig{Target: TargetConfig{Spawn: true, Nodes: 3}, N: 20_000, Rate: 1000, Batch: 1000, Concurrency: 4,
		Poll: 25 * time.Millisecond, LateAfter: 100 * time.Millisecond, Timeout: 5 * time.Second,
		Settle: time.Second, Baseline: DefaultHTTPBaselineConfig()}
}

func (c *ChangeConfig) setDefaults() {
	c.Target.setDefaults()
	if c.Lead == 0 {
		c.Lead = 3*time.Second + time.Duration(c.N)*time.Second/10_000
	}
	if c.At == 0 && c.Rate > 0 {
		c.At = time.Duration(float64(c.N) / c.Rate / 4 * float64(time.Second)).Round(time.Millisecond)
	}
	if c.Poll <= 0 {
		c.Poll = 25 * time.Millisecond
	}
}

// validate reports every problem with c; minNodes is the smallest cluster
// the workload works on.
func (c ChangeConfig) validate(minNodes int) error {
	errs := []error{c.Target.validate(), validateLoad(c.N, c.Concurrency, c.Batch)}
	if !c.Target.Spawn {
		errs = append(errs, errors.New("bench: this workload kills or starts nodes, so it needs a spawned cluster (--spawn)"))
	}
	if c.Target.Spawn && c.Target.nodeCount() < minNodes {
		errs = append(errs, fmt.Errorf("bench: nodes %d < %d", c.Target.nodeCount(), minNodes))
	}
	if c.Stored < 0 {
		errs = append(errs, fmt.Errorf("bench: stored %d must be ≥ 0", c.Stored))
	}
	if !(c.Rate > 0) {
		errs = append(errs, fmt.Errorf("bench: rate %v must be > 0", c.Rate))
	}
	if c.Lead < 0 || c.Timeout < 0 || c.Settle < 0 || c.LateAfter < 0 || c.At < 0 {
		errs = append(errs, errors.New("bench: lead, at, late-after, timeout and settle must be ≥ 0"))
	}
	if c.Rate > 0 && c.At > time.Duration(float64(c.N)/c.Rate*float64(time.Second)) {
		errs = append(errs, fmt.Errorf("bench: the change at first due + %s comes after the last due", c.At))
	}
	if !c.SkipBaseline {
		errs = append(errs, c.Baseline.validate())
	}
	return errors.Join(errs...)
}

// changeRun is one failover or join run in progress: the receiver and the
// ledger of fires, the cluster, and the tasks' owners when they were
// created.
type changeRun struct {
	cfg       ChangeConfig
	prefix    string
	firstDue  time.Time
	lastDue   time.Time
	createEnd time.Time
	rcv       *Receiver
	led       *fireLedger
	tg        *target
	view      clusterView // the first node's view when the tasks were created
	owners    ownerMap
	create    CreateStats
	acked     []bool // per task: the node acknowledged its create
	stored    CreateStats
	storedOK  []bool // per stored task: acknowledged

	node0  procSample
	nodeOK bool
	self0  time.Duration
}

func (r *changeRun) dueOf(i int) time.Time {
	return r.firstDue.Add(time.Duration(float64(i) * float64(time.Second) / r.cfg.Rate)).Truncate(time.Millisecond)
}

func (r *changeRun) id(i int) string { return r.prefix + strconv.Itoa(i) }

// storedPrefix names the Stored tasks: "s" after the run's prefix, which
// the receiver's fire ids (prefix + number) never match.
func (r *changeRun) storedPrefix() string { return r.prefix + "s" }

// StoredStats is what a run learned about its Stored tasks.
type StoredStats struct {
	Create CreateStats `json:"create"`
	// Moved is how many acknowledged ones are in slots the change moved.
	Moved int `json:"moved"`
	// Sampled acknowledged ones were read back after the run (GET
	// /v1/tasks/{id} through random nodes); Missing of them were not
	// found, Errors could not be read.
	Sampled int `json:"sampled"`
	Missing int `json:"missing"`
	Errors  int `json:"errors"`
}

// checkStored reads back up to sample acknowledged Stored tasks, spread
// over them, through the target's nodes; moved reports whether a task id
// moved in the change.
func (r *changeRun) checkStored(ctx context.Context, sample int, moved func(id string) bool) StoredStats {
	ss := StoredStats{Create: r.stored}
	var ok []int
	for i, a := range r.storedOK {
		if !a {
			continue
		}
		ok = append(ok, i)
		if moved(r.storedPrefix() + strconv.Itoa(i)) {
			ss.Moved++
		}
	}
	if len(ok) == 0 {
		return ss
	}
	step := max(1, len(ok)/sample)
	live := r.tg.live()
	for k := 0; k < len(ok); k += step {
		id := r.storedPrefix() + strconv.Itoa(ok[k])
		ss.Sampled++
		api := live[k%len(live)].api
		c, cancel := context.WithTimeout(ctx, 5*time.Second)
		a, err := api.do(c, http.MethodGet, "/v1/tasks/"+id, nil)
		cancel()
		switch {
		case err != nil || (a.status != http.StatusOK && a.status != http.StatusNotFound):
			ss.Errors++
		case a.status == http.StatusNotFound:
			ss.Missing++
		}
	}
	return ss
}

// owner returns the index in tg.nodes of task i's owner at creation, -1
// for a task the cluster did not acknowledge (it is left out of every
// count but Create's).
func (r *changeRun) owner(i int) int {
	if !r.acked[i] {
		return -1
	}
	return r.owners.of(r.id(i))
}

// startChange sets a run up: the receiver, baseline-http, the cluster
// (spare more nodes' ports reserved), the owners, and the tasks. It returns
// at the first due with CPU sampled. Call close when done, also on error.
func startChange(ctx context.Context, cfg ChangeConfig, spare int, res *Result) (*changeRun, error) {
	r := &changeRun{cfg: cfg, prefix: "bx-" + runID(time.Now()) + "-"}
	r.led = newFireLedger(r.prefix, cfg.N)
	var firstDue atomic.Int64 // unix ms; 0 until the dues are fixed
	rcv, err := NewReceiver(ReceiverConfig{
		Expect: func(fireID string) (time.Time, bool) {
			i, ok := fireIndex(fireID, r.prefix, cfg.N)
			if !ok || firstDue.Load() == 0 {
				return time.Time{}, false
			}
			return r.dueOf(i), true
		},
		Observe: r.led.observe,
	})
	if err != nil {
		return r, err
	}
	if err := rcv.Start(); err != nil {
		return r, err
	}
	r.rcv = rcv
	if !cfg.SkipBaseline {
		hb, err := MeasureHTTP(ctx, rcv, cfg.Baseline)
		if err != nil {
			return r, err
		}
		res.HTTPBaseline = &hb
	}
	if r.tg, err = openTargetOpts(ctx, cfg.Target, targetOpts{conns: cfg.Concurrency, prog: cfg.Progress, cluster: true, spare: spare}); err != nil {
		return r, err
	}
	res.Warnings = append(res.Warnings, r.tg.warnings...)
	if r.view, err = fetchCluster(ctx, r.tg.api); err != nil {
		return r, err
	}
	if r.owners, err = r.view.owners(r.tg.nodes); err != nil {
		return r, err
	}

	if cfg.Stored > 0 {
		st := newTaskTemplate(r.storedPrefix(), rcv.URL()+"/fire", r.prefix)
		later := time.Now().Add(cfg.Lead + time.Duration(float64(cfg.N)/cfg.Rate*float64(time.Second)) + time.Hour).Truncate(time.Millisecond)
		r.storedOK = make([]bool, cfg.Stored)
		plan := createPlan{n: cfg.Stored, batch: cfg.Batch, concurrency: cfg.Concurrency, via: r.tg.spread(),
			task: func(dst []byte, i int) []byte {
				return st.appendDue(dst, i, later.Add(time.Duration(i)*time.Millisecond))
			},
			result: func(i int, ok bool) { r.storedOK[i] = ok }}
		if r.stored, err = createTasks(ctx, r.tg.api, r.tg, plan, cfg.Progress.startPhase("store", int64(cfg.Stored))); err != nil {
			return r, err
		}
	}
	createStart := time.Now()
	r.firstDue = createStart.Add(cfg.Lead).Truncate(time.Millisecond)
	firstDue.Store(r.firstDue.UnixMilli())
	r.lastDue = r.dueOf(cfg.N - 1)
	rcv.Reset(r.firstDue)
	tt := newTaskTemplate(r.prefix, rcv.URL()+"/fire", r.prefix)
	r.acked = make([]bool, cfg.N)
	plan := createPlan{n: cfg.N, batch: cfg.Batch, concurrency: cfg.Concurrency, via: r.tg.spread(),
		task:   func(dst []byte, i int) []byte { return tt.appendDue(dst, i, r.dueOf(i)) },
		result: func(i int, ok bool) { r.acked[i] = ok }}
	if r.create, err = createTasks(ctx, r.tg.api, r.tg, plan, cfg.Progress.startPhase("create", int64(cfg.N))); err != nil {
		return r, err
	}
	r.createEnd = time.Now()
	cfg.Progress.logf("first due in %s, change at first due + %s, last due in %s", time.Until(r.firstDue).Round(time.Millisecond),
		cfg.At, time.Until(r.lastDue).Round(time.Millisecond))
	if err := sleepCtx(ctx, time.Until(r.firstDue)); err != nil {
		return r, err
	}
	r.node0, r.nodeOK = r.tg.sample()
	r.self0 = selfCPU()
	return r, nil
}

// changeAt returns when the change is due, and an error when creation
// overran the whole run (nothing would be left to measure); a change that
// comes late because creation overran it is a warning in res.
func (r *changeRun) changeAt(res *Result) (time.Time, error) {
	at := r.firstDue.Add(r.cfg.At)
	if late := r.createEnd.Sub(at); late > 0 {
		if r.createEnd.After(r.lastDue) {
			return at, fmt.Errorf("bench: creating the tasks took until %s after the last due (%d requests retried); nothing left to measure",
				r.createEnd.Sub(r.lastDue).Round(time.Millisecond), r.create.Retries)
		}
		res.Warnings = append(res.Warnings, fmt.Sprintf("creation ended %s after the change was due, so the change came that late; raise --lead", late.Round(time.Millisecond)))
	}
	return at, nil
}

// changeFires is what a change run measured over all its fires.
type changeFires struct {
	timedOut   bool
	cpuPerFire float64 // cluster CPU µs per fire from the first due to the end of the wait
	rcvPerFire float64
	stats      ReceiverStats
}

// finish waits until every fire arrived or the timeout after the last due
// passed, listens Settle more for duplicates, and samples CPU.
func (r *changeRun) finish(ctx context.Context) (changeFires, error) {
	var cf changeFires
	var err error
	cf.timedOut, err = waitFires(ctx, r.rcv, uint64(r.create.Acked), r.lastDue.Add(r.cfg.Timeout), r.cfg.Progress.startPhase("fire", r.create.Acked))
	if err != nil {
		return cf, err
	}
	node1, ok := r.tg.sample()
	selfUsed := selfCPU() - r.self0
	if err := sleepCtx(ctx, r.cfg.Settle); err != nil {
		return cf, err
	}
	cf.stats = r.rcv.Stats()
	cf.rcvPerFire = perOp(selfUsed, int64(cf.stats.Delivered))
	if ok && r.nodeOK {
		cf.cpuPerFire = perOp(node1.cpu-r.node0.cpu, int64(cf.stats.Delivered))
	}
	return cf, nil
}

// close stops the cluster and the receiver; the cluster's stop problems
// become warnings.
func (r *changeRun) close(res *Result) {
	if r.tg != nil {
		res.Warnings = appendErr(res.Warnings, r.tg.close())
	}
	if r.rcv != nil {
		_ = r.rcv.Close()
	}
}

// windowsAround splits the tasks selected by in into three due windows
// around a change: before it ([first due, at)), during it ([at, done)),
// and after it ([done, last due]).
func (r *changeRun) windowsAround(at, done time.Time, in func(int) bool) (before, during, after WindowStats) {
	w := func(from, to time.Time) WindowStats {
		return r.led.window(from, to, at, r.dueOf, in, r.cfg.LateAfter)
	}
	end := r.lastDue.Add(time.Millisecond)
	if done.After(end) {
		done = end
	}
	return w(r.firstDue, at), w(at, done), w(done, end)
}

// windowRows renders the before/during/after windows of one set of tasks.
func windowRows(who string, lateAfter time.Duration, before, during, after WindowStats) []Row {
	ms := func(us int64) float64 { return float64(us) / 1e3 }
	var rows []Row
	for _, w := range []struct {
		name string
		ws   WindowStats
	}{{"before", before}, {"during", during}, {"after", after}} {
		span := fmt.Sprintf("%s, due %+.1f…%+.1f s, %s tasks", w.name, w.ws.From, w.ws.To, fmtNum(float64(w.ws.Tasks)))
		rows = append(rows,
			row(fmt.Sprintf("%s lateness p50 (%s)", who, span), ms(w.ws.Lateness.P50), "ms", 0, ""),
			row(fmt.Sprintf("%s lateness p99 (%s)", who, w.name), ms(w.ws.Lateness.P99), "ms", 0, ""),
			row(fmt.Sprintf("%s lateness max (%s)", who, w.name), ms(w.ws.Lateness.Max), "ms", 0, ""),
			row(fmt.Sprintf("%s late fires > %s (%s)", who, lateAfter, w.name), float64(w.ws.Late), "", 0, ""),
			row(fmt.Sprintf("%s missed (%s)", who, w.name), float64(w.ws.Missed), "", 0, ""))
	}
	return rows
}

// sinceText renders the time from a to b in seconds, or "never" when b is
// zero.
func sinceText(a, b time.Time, never string) (float64, string) {
	if b.IsZero() {
		return -1, never
	}
	return b.Sub(a).Seconds(), ""
}
