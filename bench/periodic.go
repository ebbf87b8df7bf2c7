package bench

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Cron forms of the periodic workload's cron tasks.
const (
	// CronFormEvery schedules cron tasks as "@every <period>" with a
	// start_at, so their occurrences are start_at + k·period and can be
	// staggered to the millisecond like every_ms tasks.
	CronFormEvery = "every"
	// CronFormFields schedules cron tasks as a 6-field expression
	// "<o>/<S> * * * * *" (seconds first): every S seconds at second o of
	// the cycle. Staggering can only spread them over whole seconds.
	CronFormFields = "fields"
)

// PeriodicConfig configures the periodic workload: N periodic tasks, most
// of them every_ms and optionally a fraction cron, created with start_at so
// that their first fires fall just after creation, fired into the built-in
// Receiver for Duration. Every fire's X-Chime-Due-At is checked against the
// task's grid start_at + k·period. Its ceiling is baseline-http against the
// same receiver, as for fire.
type PeriodicConfig struct {
	Target TargetConfig `json:"target"`
	// N is the number of periodic tasks. Default 500.
	N int `json:"n"`
	// EveryMs is the period of the every_ms tasks, in milliseconds (the
	// API's minimum is 100). Default 1,000: with N = 500 the node fires
	// 500/s, half the fire workload's default rate, kept up for a minute.
	EveryMs int64 `json:"every_ms"`
	// CronFraction is the fraction of the N tasks scheduled with cron
	// instead of every_ms, in [0, 1]. Default 0: cron is opt-in.
	CronFraction float64 `json:"cron_fraction"`
	// CronForm is CronFormEvery or CronFormFields. Default every.
	CronForm string `json:"cron_form"`
	// CronPeriod is the cron tasks' period: whole seconds (the cron
	// library's resolution), and for CronFormFields a divisor of 60 s
	// below a minute, so that the occurrences form a uniform grid.
	// Default 2 s.
	CronPeriod time.Duration `json:"cron_period_ns"`
	// Stagger spreads the tasks' start_at uniformly over their period so
	// fires arrive at a steady rate. Off, every task of a kind starts at
	// the same instant and the node sees a burst of N fires per period.
	// Default true.
	Stagger bool `json:"stagger"`
	// Duration is the measurement window: occurrences due within
	// Duration after the first start_at are expected. Default 60 s.
	Duration time.Duration `json:"duration_ns"`
	// Lead is the time from the start of creation to the first start_at.
	// 0 means 3 s + N/10,000 s, as for fire.
	Lead time.Duration `json:"lead_ns"`
	// Drain is how long after the window the run waits for fires due
	// inside it; those still missing then count as missed. Default 5 s,
	// the node's default misfire grace.
	Drain time.Duration `json:"drain_ns"`
	// Batch is tasks per create request. Default 1,000.
	Batch int `json:"batch"`
	// Concurrency is create (and delete) requests in flight. Default 4.
	Concurrency int `json:"concurrency"`
	// KeepTasks leaves the tasks on a URL target. By default they are
	// deleted at the end (DELETE /v1/tasks/{id}), since they would fire
	// into a receiver that is gone. A spawned node is discarded whole and
	// never needs it.
	KeepTasks bool `json:"keep_tasks"`
	// SkipBaseline skips baseline-http (no ratios then).
	SkipBaseline bool `json:"skip_baseline"`
	// Baseline configures baseline-http.
	Baseline HTTPBaselineConfig `json:"baseline"`
	// Progress reports the phases.
	Progress Progress `json:"-"`
}

// DefaultPeriodicConfig returns the defaults described on each field. The
// target is left unset.
func DefaultPeriodicConfig() PeriodicConfig {
	return PeriodicConfig{N: 500, EveryMs: 1000, CronForm: CronFormEvery, CronPeriod: 2 * time.Second,
		Stagger: true, Duration: time.Minute, Drain: 5 * time.Second, Batch: 1000, Concurrency: 4,
		Baseline: DefaultHTTPBaselineConfig()}
}

// Validate reports every problem with c.
func (c PeriodicConfig) Validate() error {
	errs := []error{c.Target.validate(), validateLoad(c.N, c.Concurrency, c.Batch)}
	if c.EveryMs < 100 {
		errs = append(errs, fmt.Errorf("bench: every %d ms is below the API's minimum of 100", c.EveryMs))
	}
	if !(c.CronFraction >= 0 && c.CronFraction <= 1) {
		errs = append(errs, fmt.Errorf("bench: cron fraction %v not in [0, 1]", c.CronFraction))
	}
	switch c.CronForm {
	case CronFormEvery:
		if c.CronPeriod < time.Second || c.CronPeriod%time.Second != 0 {
			errs = append(errs, fmt.Errorf("bench: cron period %v must be whole seconds", c.CronPeriod))
		}
	case CronFormFields:
		if c.CronPeriod < time.Second || c.CronPeriod >= time.Minute || time.Minute%c.CronPeriod != 0 || c.CronPeriod%time.Second != 0 {
			errs = append(errs, fmt.Errorf("bench: cron period %v must be whole seconds dividing a minute for form %q", c.CronPeriod, CronFormFields))
		}
	default:
		errs = append(errs, fmt.Errorf("bench: cron form %q is not %q or %q", c.CronForm, CronFormEvery, CronFormFields))
	}
	if c.Duration <= 0 {
		errs = append(errs, fmt.Errorf("bench: duration %v must be > 0", c.Duration))
	}
	if c.Lead < 0 || c.Drain < 0 {
		errs = append(errs, errors.New("bench: lead and drain must be ≥ 0"))
	}
	if !c.SkipBaseline {
		errs = append(errs, c.Baseline.validate())
	}
	return errors.Join(errs...)
}

// cronTasks returns how many of the N tasks are cron tasks.
func (c PeriodicConfig) cronTasks() int {
	return min(int(c.CronFraction*float64(c.N)+0.5), c.N)
}

// PeriodicStats is what the periodic workload measured.
type PeriodicStats struct {
	Tasks      int `json:"tasks"`
	EveryTasks int `json:"every_tasks"`
	CronTasks  int `json:"cron_tasks"`
	// Cron is the expression of the first cron task ("" without any).
	Cron    string `json:"cron,omitempty"`
	Stagger bool   `json:"stagger"`
	// OfferedRate is the fires/s the schedules ask for.
	OfferedRate float64 `json:"offered_rate"`
	// Create is the creation phase.
	Create CreateStats `json:"create"`
	// WindowStart is the first start_at; occurrences due in
	// [WindowStart, WindowStart + WindowSeconds) are expected.
	WindowStart   time.Time `json:"window_start"`
	WindowSeconds float64   `json:"window_seconds"`
	// SlackSeconds is the first start_at minus the end of creation;
	// negative means creation overlapped firing.
	SlackSeconds float64 `json:"slack_seconds"`
	// FireRate is the requests that arrived inside the window divided by
	// its length; PeakRate the busiest second.
	FireRate float64 `json:"fire_rate"`
	PeakRate float64 `json:"peak_rate"`
	// NodeCPUPerFire is node CPU µs per request over the window (0 when
	// unknown); ReceiverCPUPerFire this process's.
	NodeCPUPerFire     float64 `json:"node_cpu_us_per_fire,omitempty"`
	ReceiverCPUPerFire float64 `json:"receiver_cpu_us_per_fire"`
	// Drift is the grid accounting: off-grid dues, missed occurrences,
	// repeats.
	Drift DriftStats `json:"drift"`
	// Deleted and DeleteFailed count the DELETE /v1/tasks/{id} at the end
	// (URL targets without KeepTasks); DeleteSeconds is how long it took.
	Deleted          int64   `json:"deleted,omitempty"`
	DeleteFailed     int64   `json:"delete_failed,omitempty"`
	DeleteSeconds    float64 `json:"delete_seconds,omitempty"`
	DeleteFirstError string  `json:"delete_first_error,omitempty"`
	// Receiver is everything the receiver recorded: lateness against
	// X-Chime-Due-At, early fires, duplicates by fire id, the timeline.
	Receiver ReceiverStats `json:"receiver"`
}

// DriftStats is the accounting of periodic fires against each task's grid
// start + k·period.
type DriftStats struct {
	// Expected is the number of occurrences due inside the window, over
	// all tasks; Received how many of them arrived (each counted once).
	Expected uint64 `json:"expected"`
	Received uint64 `json:"received"`
	// Missed is Expected - Received: occurrences in the window that never
	// arrived (gaps in k, including at the end). Holes is the part of it
	// followed by a later received occurrence of the same task: skipped,
	// not merely slow. TasksWithGaps counts tasks missing any.
	Missed        uint64 `json:"missed"`
	Holes         uint64 `json:"holes"`
	TasksWithGaps int    `json:"tasks_with_gaps"`
	// OffGrid counts requests whose due is not on their task's grid;
	// MaxDriftNs is the largest |due - nearest grid point| in ns. Both
	// must be 0: periodic schedules advance from the logical due time.
	OffGrid    uint64 `json:"off_grid"`
	MaxDriftNs int64  `json:"max_drift_ns"`
	// Repeats counts requests for an occurrence that had already arrived
	// (under the same fire id or another).
	Repeats uint64 `json:"repeats"`
	// Later counts on-grid requests due after the window (the tasks keep
	// firing until deleted); they are not in Expected.
	Later uint64 `json:"later"`
	// Unknown counts requests with this run's id prefix whose task index
	// or due did not parse.
	Unknown uint64 `json:"unknown"`
	// FirstMissed and FirstOffGrid describe an example of each, for
	// diagnosis.
	FirstMissed  string `json:"first_missed,omitempty"`
	FirstOffGrid string `json:"first_off_grid,omitempty"`
}

// RunPeriodic runs the periodic workload. Problems stopping a spawned node
// or deleting the tasks afterwards are reported as warnings, not errors.
func RunPeriodic(ctx context.Context, cfg PeriodicConfig) (res Result, err error) {
	cfg.Target.setDefaults()
	if cfg.Lead == 0 {
		cfg.Lead = 3*time.Second + time.Duration(cfg.N)*time.Second/10_000
	}
	cfg.Baseline.Progress = cfg.Progress
	res = Result{Workload: "periodic", Started: time.Now(), Env: currentEnv(), Config: cfg}
	if err := cfg.Validate(); err != nil {
		return res, err
	}

	run := runID(time.Now())
	prefix := "bp-" + run + "-"
	tap := &periodicTap{prefix: prefix, n: cfg.N}
	rcv, err := NewReceiver(ReceiverConfig{})
	if err != nil {
		return res, err
	}
	// The tap sees every request before the receiver's own recording;
	// requests without this run's prefix (baseline-http) pass through.
	inner := rcv.srv.Handler
	rcv.srv.Handler = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		tap.observe(req.Header.Get(headerFireID), req.Header.Get(headerDueAt))
		inner.ServeHTTP(w, req)
	})
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

	createStart := time.Now()
	base := createStart.Add(cfg.Lead).Truncate(time.Millisecond)
	plan := planPeriodic(cfg, base)
	end := base.Add(cfg.Duration)
	tap.start(plan.grid, end.UnixNano())
	rcv.Reset(base)
	tt := newTaskTemplate(prefix, rcv.URL()+"/periodic", run)
	cp := createPlan{n: cfg.N, batch: cfg.Batch, concurrency: cfg.Concurrency, via: tg.spread(),
		task: func(dst []byte, i int) []byte { return plan.appendTask(tt, dst, i) }}
	cs, err := createTasks(ctx, tg.api, tg, cp, cfg.Progress.startPhase("create", int64(cfg.N)))
	if err != nil {
		return res, err
	}
	createEnd := time.Now()

	cfg.Progress.logf("first start_at in %s; measuring %s of fires, offered %s/s",
		time.Until(base).Round(time.Millisecond), cfg.Duration, fmtNum(plan.offered))
	if err := sleepCtx(ctx, time.Until(base)); err != nil {
		return res, err
	}
	node0, nodeOK := tg.sample()
	self0 := selfCPU()
	if err := waitWindow(ctx, end, cfg.Progress.startPhase("fire window (s)", int64(cfg.Duration/time.Second))); err != nil {
		return res, err
	}
	node1, nodeOK1 := tg.sample()
	selfUsed := selfCPU() - self0
	inWindow := rcv.Stats().Requests

	// Fires due inside the window may still be on their way.
	got0, want := tap.progress()
	ph := cfg.Progress.startPhase("drain: occurrences still missing", int64(want-got0))
	err = waitUntil(ctx, end.Add(cfg.Drain), func() bool {
		got, want := tap.progress()
		ph.Set(int64(got - got0))
		return got >= want
	})
	ph.End()
	if err != nil {
		return res, err
	}
	st := rcv.Stats()
	res.Node, res.Nodes = tg.allStats()

	ps := PeriodicStats{
		Tasks:         cfg.N,
		EveryTasks:    cfg.N - cfg.cronTasks(),
		CronTasks:     cfg.cronTasks(),
		Cron:          plan.firstCron(),
		Stagger:       cfg.Stagger,
		OfferedRate:   plan.offered,
		Create:        cs,
		WindowStart:   base,
		WindowSeconds: cfg.Duration.Seconds(),
		SlackSeconds:  base.Sub(createEnd).Seconds(),
		FireRate:      float64(inWindow) / cfg.Duration.Seconds(),
		PeakRate:      peakRate(st.Timeline, st.Step),
		Drift:         tap.stats(),
		Receiver:      st,
	}
	ps.ReceiverCPUPerFire = perOp(selfUsed, int64(inWindow))
	if nodeOK && nodeOK1 {
		ps.NodeCPUPerFire = perOp(node1.cpu-node0.cpu, int64(inWindow))
	}

	if !cfg.Target.Spawn && !cfg.KeepTasks {
		ds := deleteTasks(ctx, tg.api, prefix, cfg.N, cfg.Concurrency, cfg.Progress.startPhase("delete", int64(cfg.N)))
		ps.Deleted, ps.DeleteFailed, ps.DeleteSeconds, ps.DeleteFirstError = ds.deleted, ds.failed, ds.took.Seconds(), ds.firstErr
	}

	res.Periodic = &ps
	res.Summary = periodicRows(ps, res.HTTPBaseline, res.Node, len(tg.nodes))
	res.Warnings = append(res.Warnings, periodicWarnings(ps, res.HTTPBaseline)...)
	res.Charts = periodicCharts(ps, cfg.Duration)
	res.Seconds = time.Since(res.Started).Seconds()
	return res, nil
}

// waitWindow waits until end, reporting whole seconds elapsed.
func waitWindow(ctx context.Context, end time.Time, ph *phase) error {
	defer ph.End()
	start := time.Now()
	return waitUntil(ctx, end, func() bool {
		ph.Set(int64(time.Since(start) / time.Second))
		return false
	})
}

// waitUntil polls done every 50 ms until it returns true or deadline
// passes; it fails only when ctx ends.
func waitUntil(ctx context.Context, deadline time.Time, done func() bool) error {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if done() || !time.Now().Before(deadline) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// gridTask is one task's expected schedule: occurrences at
// start + k·period for k ≥ 0, in Unix nanoseconds.
type gridTask struct {
	start, period int64
}

// expectedBefore returns the number of occurrences due before end.
func (g gridTask) expectedBefore(end int64) int64 {
	if end <= g.start {
		return 0
	}
	return (end - g.start + g.period - 1) / g.period
}

// place returns the occurrence k nearest to due and due's distance from it
// (0 when due is on the grid). A due before start is placed at k = 0.
func (g gridTask) place(due int64) (k, off int64) {
	if due <= g.start {
		return 0, due - g.start
	}
	k = (due - g.start + g.period/2) / g.period
	return k, due - (g.start + k*g.period)
}

// periodicPlan is the schedule of every task of one run: the every_ms
// tasks first (indexes [0, nEvery)), then the cron tasks.
type periodicPlan struct {
	everyMs int64
	nEvery  int
	grid    []gridTask
	cron    []string // expression of cron task i - nEvery
	offered float64  // fires/s the schedules ask for
}

// planPeriodic lays out the tasks of cfg with the first start_at at base
// (whole milliseconds). Staggered, the every_ms tasks' starts are spread
// over [base, base + every) in whole milliseconds, the @every cron tasks'
// over [base, base + period), and the 6-field cron tasks over the seconds
// of their period; unstaggered, each kind starts at one instant.
func planPeriodic(cfg PeriodicConfig, base time.Time) periodicPlan {
	nCron := cfg.cronTasks()
	p := periodicPlan{everyMs: cfg.EveryMs, nEvery: cfg.N - nCron, grid: make([]gridTask, cfg.N), cron: make([]string, nCron)}
	b := base.UnixNano()
	every := cfg.EveryMs * int64(time.Millisecond)
	for j := range p.nEvery {
		var off int64
		if cfg.Stagger {
			off = int64(j) * cfg.EveryMs / int64(p.nEvery) * int64(time.Millisecond)
		}
		p.grid[j] = gridTask{start: b + off, period: every}
	}
	period := int64(cfg.CronPeriod)
	secs := period / int64(time.Second)
	firstSec := (b + int64(time.Second) - 1) / int64(time.Second) // base rounded up to a whole second
	for j := range nCron {
		var g gridTask
		switch cfg.CronForm {
		case CronFormFields:
			var o int64
			if cfg.Stagger {
				o = int64(j) % secs
			}
			// The first second at or after base whose second-of-minute
			// is o modulo secs; secs divides 60, so Unix seconds agree.
			s := firstSec + ((o-firstSec%secs)%secs+secs)%secs
			g = gridTask{start: s * int64(time.Second), period: period}
			p.cron[j] = strconv.FormatInt(o, 10) + "/" + strconv.FormatInt(secs, 10) + " * * * * *"
		default:
			var off int64
			if cfg.Stagger {
				off = int64(j) * (period / int64(time.Millisecond)) / int64(nCron) * int64(time.Millisecond)
			}
			g = gridTask{start: b + off, period: period}
			p.cron[j] = "@every " + cfg.CronPeriod.String()
		}
		p.grid[p.nEvery+j] = g
	}
	p.offered = float64(p.nEvery) * 1000 / float64(cfg.EveryMs)
	if nCron > 0 {
		p.offered += float64(nCron) / cfg.CronPeriod.Seconds()
	}
	return p
}

// appendTask appends the JSON of task i: the template's head, then its
// schedule and start_at.
func (p periodicPlan) appendTask(tt taskTemplate, dst []byte, i int) []byte {
	dst = tt.appendHead(dst, i)
	if i < p.nEvery {
		dst = append(dst, `,"every_ms":`...)
		dst = strconv.AppendInt(dst, p.everyMs, 10)
	} else {
		dst = append(dst, `,"cron":"`...)
		dst = append(dst, p.cron[i-p.nEvery]...)
		dst = append(dst, '"')
	}
	dst = append(dst, `,"start_at":"`...)
	dst = time.Unix(0, p.grid[i].start).UTC().AppendFormat(dst, time.RFC3339Nano)
	return append(dst, `"}`...)
}

// firstCron returns the expression of the first cron task, or "".
func (p periodicPlan) firstCron() string {
	if len(p.cron) == 0 {
		return ""
	}
	return p.cron[0]
}

// driftLedger accounts periodic fires against each task's grid: which
// occurrences inside the window arrived, which dues were off the grid, and
// which occurrences arrived more than once. It is not safe for concurrent
// use (periodicTap serializes it). Memory is one bit per expected
// occurrence.
type driftLedger struct {
	grid     []gridTask
	want     []int64    // occurrences due before end, per task
	seen     [][]uint64 // bitset of received k < want, per task
	prefix   string     // for the examples' task ids
	expected uint64
	st       DriftStats
}

func newDriftLedger(grid []gridTask, end int64, prefix string) *driftLedger {
	l := &driftLedger{grid: grid, want: make([]int64, len(grid)), seen: make([][]uint64, len(grid)), prefix: prefix}
	for i, g := range grid {
		w := g.expectedBefore(end)
		l.want[i] = w
		l.seen[i] = make([]uint64, (w+63)/64)
		l.expected += uint64(w)
	}
	return l
}

// record accounts one request of task i with the given due (Unix ns).
func (l *driftLedger) record(i int, due int64) {
	if i < 0 || i >= len(l.grid) {
		l.st.Unknown++
		return
	}
	k, off := l.grid[i].place(due)
	if off != 0 {
		l.st.OffGrid++
		d := max(off, -off)
		if d > l.st.MaxDriftNs {
			l.st.MaxDriftNs = d
		}
		if l.st.FirstOffGrid == "" {
			l.st.FirstOffGrid = fmt.Sprintf("%s%d due %s is %s off its grid (k=%d)", l.prefix, i,
				time.Unix(0, due).UTC().Format(time.RFC3339Nano), time.Duration(off), k)
		}
		return
	}
	if k >= l.want[i] {
		l.st.Later++
		return
	}
	w, bit := k/64, uint64(1)<<(k%64)
	if l.seen[i][w]&bit != 0 {
		l.st.Repeats++
		return
	}
	l.seen[i][w] |= bit
	l.st.Received++
}

// stats returns the accounting so far. It is O(expected occurrences / 64).
func (l *driftLedger) stats() DriftStats {
	st := l.st
	st.Expected = l.expected
	st.Missed = l.expected - st.Received
	for i, bits := range l.seen {
		last := int64(-1) // highest received k
		for k := l.want[i] - 1; k >= 0; k-- {
			if bits[k/64]&(1<<(k%64)) != 0 {
				last = k
				break
			}
		}
		missing := false
		for k := range l.want[i] {
			if bits[k/64]&(1<<(k%64)) != 0 {
				continue
			}
			missing = true
			if k < last {
				st.Holes++
			}
			if st.FirstMissed == "" {
				st.FirstMissed = fmt.Sprintf("%s%d k=%d due %s", l.prefix, i, k,
					time.Unix(0, l.grid[i].start+k*l.grid[i].period).UTC().Format(time.RFC3339Nano))
			}
		}
		if missing {
			st.TasksWithGaps++
		}
	}
	return st
}

// periodicTap feeds the requests of one run into a driftLedger. Its
// methods are safe for concurrent use; observe is called from the
// receiver's handlers.
type periodicTap struct {
	prefix string
	n      int
	mu     struct {
		sync.Mutex
		ledger *driftLedger // nil until start
	}
}

// start installs the ledger for the run's grid and window end.
func (t *periodicTap) start(grid []gridTask, end int64) {
	l := newDriftLedger(grid, end, t.prefix)
	t.mu.Lock()
	t.mu.ledger = l
	t.mu.Unlock()
}

// observe accounts one request by its fire id and X-Chime-Due-At header.
// Requests of other runs (and baseline-http's) are ignored.
func (t *periodicTap) observe(fireID, dueAt string) {
	if len(fireID) < len(t.prefix) || fireID[:len(t.prefix)] != t.prefix {
		return
	}
	i, ok := fireIndex(fireID, t.prefix, t.n)
	due, err := time.Parse(time.RFC3339Nano, dueAt)
	if !ok || err != nil {
		i = -1
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.mu.ledger != nil {
		t.mu.ledger.record(i, due.UnixNano())
	}
}

// progress returns the occurrences received and expected so far.
func (t *periodicTap) progress() (got, want uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.mu.ledger == nil {
		return 0, 0
	}
	return t.mu.ledger.st.Received, t.mu.ledger.expected
}

// stats returns the ledger's accounting.
func (t *periodicTap) stats() DriftStats {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.mu.ledger == nil {
		return DriftStats{}
	}
	return t.mu.ledger.stats()
}

// deleteSummary is what deleting a run's tasks did.
type deleteSummary struct {
	deleted, failed int64
	took            time.Duration
	firstErr        string
}

// deleteTasks sends DELETE /v1/tasks/<prefix><i> for i in [0, n) with
// conc requests in flight. 204 and 404 both count as deleted (the task is
// gone either way); anything else, or a transport error, as failed.
func deleteTasks(ctx context.Context, api *apiClient, prefix string, n, conc int, ph *phase) deleteSummary {
	defer ph.End()
	var (
		next, deleted, failed atomic.Int64
		once                  sync.Once
		firstErr              string
		wg                    sync.WaitGroup
	)
	noteErr := func(msg string) { once.Do(func() { firstErr = msg }) }
	start := time.Now()
	for range conc {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(n) || ctx.Err() != nil {
					return
				}
				a, err := api.do(ctx, http.MethodDelete, "/v1/tasks/"+prefix+strconv.FormatInt(i, 10), nil)
				switch {
				case err != nil:
					failed.Add(1)
					noteErr(err.Error())
				case a.status == http.StatusNoContent || a.status == http.StatusNotFound || a.status == http.StatusOK:
					deleted.Add(1)
				default:
					failed.Add(1)
					noteErr(answerText(a))
				}
				ph.Add(1)
			}
		})
	}
	wg.Wait()
	return deleteSummary{deleted: deleted.Load(), failed: failed.Load(), took: time.Since(start), firstErr: firstErr}
}

// periodicRows is the summary of a periodic run next to its ceilings.
func periodicRows(ps PeriodicStats, hb *HTTPBaselineResult, node *NodeStats, nodes int) []Row {
	var rate, cpu float64
	var oneWay Summary
	name := ""
	if hb != nil {
		rate, oneWay, cpu, name = hb.PerSecond, hb.OneWay, hb.CPUPerRequest, "baseline-http"
	}
	ms := func(us int64) float64 { return float64(us) / 1e3 }
	d := ps.Drift
	kind := "staggered"
	if !ps.Stagger {
		kind = "all at once"
	}
	rows := []Row{
		row(fmt.Sprintf("fire rate (%s periodic tasks, %s, offered %s/s)", fmtNum(float64(ps.Tasks)), kind, fmtNum(ps.OfferedRate)),
			ps.FireRate, "fires/s", rate, name),
		row("peak fires in one second", ps.PeakRate, "fires/s", 0, ""),
		row("lateness p50", ms(ps.Receiver.Lateness.P50), "ms", ms(oneWay.P50), name+" one-way"),
		row("lateness p99", ms(ps.Receiver.Lateness.P99), "ms", ms(oneWay.P99), name+" one-way"),
		row("lateness max", ms(ps.Receiver.MaxLateness), "ms", ms(oneWay.Max), name+" one-way"),
		row("occurrences expected in the window", float64(d.Expected), "", 0, ""),
		row("missed occurrences (gaps in k)", float64(d.Missed), "", 0, ""),
		row("drift: max abs(due − (start + k·period))", float64(d.MaxDriftNs), "ns", 0, ""),
		row("off-grid fires", float64(d.OffGrid), "", 0, ""),
		row("duplicate deliveries (by fire id)", float64(ps.Receiver.Duplicates), "", 0, ""),
		row("repeated occurrences", float64(d.Repeats), "", 0, ""),
		row("early requests", float64(ps.Receiver.Early), "", 0, ""),
	}
	return append(rows, resourceRows(ps.NodeCPUPerFire, "fire", cpu, node, nodes)...)
}

// periodicWarnings flags a periodic run whose numbers are not clean.
func periodicWarnings(ps PeriodicStats, hb *HTTPBaselineResult) []string {
	w := createWarnings(ps.Create)
	d := ps.Drift
	if ps.SlackSeconds < 0 {
		w = append(w, fmt.Sprintf("creation ended %.1f s after the first start_at: the first occurrences may be missed; raise --lead", -ps.SlackSeconds))
	}
	if d.OffGrid > 0 {
		w = append(w, fmt.Sprintf("%d fires were off their grid start + k·period (max drift %s); e.g. %s", d.OffGrid, time.Duration(d.MaxDriftNs), d.FirstOffGrid))
	}
	if d.Missed > 0 {
		w = append(w, fmt.Sprintf("%d of %d occurrences in the window never arrived (%d holes, %d tasks); e.g. %s", d.Missed, d.Expected, d.Holes, d.TasksWithGaps, d.FirstMissed))
	}
	if d.Unknown > 0 {
		w = append(w, fmt.Sprintf("%d requests carried an unparsable fire id or due", d.Unknown))
	}
	if ps.Receiver.Early > 0 {
		w = append(w, fmt.Sprintf("%d requests arrived before their due time (never-early guarantee broken)", ps.Receiver.Early))
	}
	if ps.DeleteFailed > 0 {
		w = append(w, fmt.Sprintf("%d tasks could not be deleted; first error: %s", ps.DeleteFailed, ps.DeleteFirstError))
	}
	if hb != nil && ps.PeakRate > 0.8*hb.PerSecond {
		w = append(w, fmt.Sprintf("peak fire rate %s/s is above 80%% of the receiver's measured capacity %s/s: the receiver may be the bottleneck",
			fmtNum(ps.PeakRate), fmtNum(hb.PerSecond)))
	}
	return w
}

// periodicCharts plots a periodic run: fires/s over time (100 ms buckets
// for bursts and short runs, 1 s buckets for long staggered runs) and the
// lateness distribution.
func periodicCharts(ps PeriodicStats, span time.Duration) []Chart {
	st := ps.Receiver
	width := st.Step
	if ps.Stagger && ps.WindowSeconds > 10 {
		width = time.Second
	}
	return []Chart{
		{
			Title:  fmt.Sprintf("Fires per second, %s-wide buckets (offered %s/s)", width, fmtNum(ps.OfferedRate)),
			XLabel: "seconds since the first start_at",
			YLabel: "fires/s",
			Lines: []Line{
				timelineRate(st.Timeline, st.Step, width, span),
				{Name: "offered", X: []float64{0, ps.WindowSeconds}, Y: []float64{ps.OfferedRate, ps.OfferedRate}},
			},
		},
		{
			Title: fmt.Sprintf("Lateness of %d fires (p50 %s ms, p99 %s ms, max %s ms)", st.Lateness.Count,
				fmtNum(float64(st.Lateness.P50)/1e3), fmtNum(float64(st.Lateness.P99)/1e3), fmtNum(float64(st.MaxLateness)/1e3)),
			XLabel: "lateness (ms, log scale)",
			YLabel: "fires",
			LogX:   true,
			Bars:   latenessBars(st.LatenessBuckets),
		},
	}
}

// timelineRate turns the arrivals timeline (buckets of step) into a
// fires/s line of buckets of width (a multiple of step), up to span.
func timelineRate(timeline []uint64, step, width, span time.Duration) Line {
	l := Line{Name: "delivered"}
	if step <= 0 {
		return l
	}
	group := max(int(width/step), 1)
	n := min(len(timeline), int(span/step))
	for i := 0; i < n; i += group {
		part := timeline[i:min(i+group, n)]
		var sum uint64
		for _, c := range part {
			sum += c
		}
		w := time.Duration(len(part)) * step
		l.X = append(l.X, (time.Duration(i)*step + w/2).Seconds())
		l.Y = append(l.Y, float64(sum)/w.Seconds())
	}
	return l
}
