package bench

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"
)

// FailoverConfig configures the failover workload: a fire run through a
// spawned cluster (ChangeConfig) during which one node is SIGKILLed, At
// after the first due.
type FailoverConfig struct {
	ChangeConfig
	// Kill is the node to SIGKILL, 1-based (node I is nI). 0 picks the
	// node owning the most tasks due after the kill (node 2 on a tie), so
	// the most fires are at stake.
	Kill int `json:"kill"`
}

// DefaultFailoverConfig returns the defaults described on each field: a
// spawned 3-node cluster, 20,000 fires at 1,000/s, the kill 5 s in.
func DefaultFailoverConfig() FailoverConfig {
	return FailoverConfig{ChangeConfig: defaultChangeConfig()}
}

// Validate reports every problem with c.
func (c FailoverConfig) Validate() error {
	errs := []error{c.validate(2)}
	if c.Kill < 0 || (c.Target.Spawn && c.Kill > c.Target.nodeCount()) {
		errs = append(errs, fmt.Errorf("bench: kill %d is not a node of 1..%d", c.Kill, c.Target.nodeCount()))
	}
	return errors.Join(errs...)
}

// FailoverStats is what the failover workload measured.
//
// The killed node's followers take its slots over: VictimMissedAfterKill
// should be 0 and ResumeSeconds finite (about the failure detection plus
// the lease). Before replication, nobody fired a killed node's tasks until
// it came back: every task of its slots due after the kill was missed.
type FailoverStats struct {
	Nodes       int         `json:"nodes"`
	Tasks       int         `json:"tasks"`
	OfferedRate float64     `json:"offered_rate"`
	Create      CreateStats `json:"create"`
	FirstDue    time.Time   `json:"first_due"`
	// SlackSeconds is first due minus the end of creation (< 0: overlap).
	SlackSeconds float64 `json:"slack_seconds"`
	// Victim is the node killed (name, pid) and KilledAt the instant of the
	// SIGKILL, KillAfterSeconds after the first due.
	Victim           string    `json:"victim"`
	VictimPID        int       `json:"victim_pid"`
	KilledAt         time.Time `json:"killed_at"`
	KillAfterSeconds float64   `json:"kill_after_seconds"`
	// TableDrop is, per survivor, the seconds from the kill until its GET
	// /v1/cluster gave the victim no slot (-1: not seen within 30 s of the
	// end of the fires);
	// TableDropSeconds the slowest survivor. Polled every Poll.
	TableDrop        map[string]float64 `json:"table_drop_seconds_by_node"`
	TableDropSeconds float64            `json:"table_drop_seconds"`
	Polls            int                `json:"polls"`
	// VictimTasks is how many tasks the victim owned; VictimDueAfterKill
	// how many of them were due after the kill.
	VictimTasks        int `json:"victim_tasks"`
	VictimDueAfterKill int `json:"victim_due_after_kill"`
	// VictimMissedAfterKill and VictimMissedBeforeKill are the victim's
	// tasks never delivered, due after and before the kill.
	VictimMissedAfterKill  int `json:"victim_missed_after_kill"`
	VictimMissedBeforeKill int `json:"victim_missed_before_kill"`
	// Resumed says a task of the victim's due after the kill was fired by
	// someone; ResumeSeconds is from the kill to the first such fire.
	Resumed       bool    `json:"resumed"`
	ResumeSeconds float64 `json:"resume_seconds"`
	// VictimAfter are the fires of the victim's tasks due after the kill:
	// how late a takeover delivered them.
	VictimAfter WindowStats `json:"victim_after"`
	// SurvivorTasks is how many tasks the survivors owned; Before, During
	// and After split them by due: before the kill, from the kill until
	// one second after the slowest survivor dropped the victim, and after.
	SurvivorTasks int         `json:"survivor_tasks"`
	Before        WindowStats `json:"survivors_before"`
	During        WindowStats `json:"survivors_during"`
	After         WindowStats `json:"survivors_after"`
	// Timeline splits the survivors' tasks due from 1 s before the kill
	// to 8 s after it into half seconds: when they ran late (the stall of
	// the slots whose follower died, or the load of the takeover).
	Timeline []WindowStats `json:"survivors_timeline"`
	// Fired, Duplicates and Early are over all tasks (receiver counts).
	Fired      uint64 `json:"fired"`
	Duplicates uint64 `json:"duplicates"`
	Early      uint64 `json:"early"`
	// ClusterCPUPerFire is the CPU of all nodes (the victim's until the
	// kill) from the first due to the end of the wait, per fire delivered.
	ClusterCPUPerFire  float64       `json:"cluster_cpu_us_per_fire,omitempty"`
	ReceiverCPUPerFire float64       `json:"receiver_cpu_us_per_fire"`
	Receiver           ReceiverStats `json:"receiver"`
}

// RunFailover runs the failover workload.
func RunFailover(ctx context.Context, cfg FailoverConfig) (res Result, err error) {
	cfg.setDefaults()
	cfg.Baseline.Progress = cfg.Progress
	res = Result{Workload: "failover", Started: time.Now(), Env: currentEnv(), Config: cfg}
	if err := cfg.Validate(); err != nil {
		return res, err
	}
	r, err := startChange(ctx, cfg.ChangeConfig, 0, &res)
	defer r.close(&res)
	if err != nil {
		return res, err
	}
	tg := r.tg
	killAt, err := r.changeAt(&res)
	if err != nil {
		return res, err
	}
	victim := cfg.Kill - 1
	if cfg.Kill == 0 {
		victim = busiestAfter(r, killAt)
	}
	vm := tg.nodes[victim]
	survivors := make([]*member, 0, len(tg.nodes)-1)
	for k, m := range tg.nodes {
		if k != victim {
			survivors = append(survivors, m)
		}
	}
	if err := sleepCtx(ctx, time.Until(killAt)); err != nil {
		return res, err
	}
	fs := FailoverStats{Nodes: len(tg.nodes), Tasks: cfg.N, OfferedRate: cfg.Rate, Create: r.create, FirstDue: r.firstDue,
		SlackSeconds: r.firstDue.Sub(r.createEnd).Seconds(), Victim: vm.name, VictimPID: vm.pid}
	if fs.KilledAt, err = tg.kill(vm); err != nil {
		return res, err
	}
	fs.KillAfterSeconds = fs.KilledAt.Sub(r.firstDue).Seconds()
	cfg.Progress.logf("SIGKILLed %s (pid %d) at first due + %.3f s", vm.name, fs.VictimPID, fs.KillAfterSeconds)

	// Survivors drop the victim from their tables while the fires go on.
	watch := watchTables(ctx, survivors, cfg.Poll, func(v clusterView) bool { return v.owned(vm.name) == 0 })
	fires, err := r.finish(ctx)
	if err != nil {
		watch.stop()
		return res, err
	}
	drops, polls := watch.wait(ctx, changeWait) // detection may outlast the fires

	fs.Polls = polls
	fs.TableDrop = map[string]float64{}
	var lastDrop time.Time
	allDropped := true
	for k, at := range drops {
		fs.TableDrop[survivors[k].name], _ = sinceText(fs.KilledAt, at, "")
		switch {
		case at.IsZero():
			allDropped = false
		case at.After(lastDrop):
			lastDrop = at
		}
	}
	fs.TableDropSeconds = -1
	if allDropped {
		fs.TableDropSeconds = lastDrop.Sub(fs.KilledAt).Seconds()
	} else {
		lastDrop = time.Time{}
	}

	ofVictim := func(i int) bool { return r.owner(i) == victim }
	ofSurvivor := func(i int) bool { o := r.owner(i); return o >= 0 && o != victim }
	for i := range cfg.N {
		if !ofVictim(i) {
			if ofSurvivor(i) {
				fs.SurvivorTasks++
			}
			continue
		}
		fs.VictimTasks++
		_, fired := r.led.arrival(i)
		after := !r.dueOf(i).Before(fs.KilledAt)
		switch {
		case after:
			fs.VictimDueAfterKill++
			if !fired {
				fs.VictimMissedAfterKill++
			}
		case !fired:
			fs.VictimMissedBeforeKill++
		}
	}
	if at, ok := r.led.firstAfter(func(i int) bool { return ofVictim(i) && !r.dueOf(i).Before(fs.KilledAt) }); ok {
		fs.Resumed, fs.ResumeSeconds = true, at.Sub(fs.KilledAt).Seconds()
	}
	done := r.lastDue.Add(time.Millisecond)
	if !lastDrop.IsZero() {
		done = lastDrop.Add(time.Second)
	}
	fs.Before, fs.During, fs.After = r.windowsAround(fs.KilledAt, done, ofSurvivor)
	for from := fs.KilledAt.Add(-time.Second); from.Before(fs.KilledAt.Add(8*time.Second)) && from.Before(r.lastDue); from = from.Add(timelineStep) {
		fs.Timeline = append(fs.Timeline, r.led.window(from, from.Add(timelineStep), fs.KilledAt, r.dueOf, ofSurvivor, cfg.LateAfter))
	}
	fs.VictimAfter = r.led.window(fs.KilledAt, r.lastDue.Add(time.Millisecond), fs.KilledAt, r.dueOf, ofVictim, cfg.LateAfter)
	st := fires.stats
	fs.Fired, fs.Duplicates, fs.Early, fs.Receiver = st.Delivered, st.Duplicates, st.Early, st
	fs.ClusterCPUPerFire, fs.ReceiverCPUPerFire = fires.cpuPerFire, fires.rcvPerFire

	res.Failover = &fs
	res.Node, res.Nodes = tg.allStats()
	res.Summary = failoverRows(fs, res.HTTPBaseline, res.Node, cfg.ChangeConfig)
	res.Warnings = append(res.Warnings, failoverWarnings(fs)...)
	res.Seconds = time.Since(res.Started).Seconds()
	return res, nil
}

// busiestAfter returns the index of the node owning the most tasks due at
// or after t; ties go to node 2, then to the lower index.
func busiestAfter(r *changeRun, t time.Time) int {
	counts := make([]int, len(r.tg.nodes))
	for i := range r.cfg.N {
		if o := r.owner(i); o >= 0 && !r.dueOf(i).Before(t) {
			counts[o]++
		}
	}
	best := 1
	for k := range counts {
		if counts[k] > counts[best] {
			best = k
		}
	}
	return best
}

// failoverRows is the summary of a failover run.
func failoverRows(fs FailoverStats, hb *HTTPBaselineResult, node *NodeStats, cfg ChangeConfig) []Row {
	var cpu float64
	if hb != nil {
		cpu = hb.CPUPerRequest
	}
	ms := func(us int64) float64 { return float64(us) / 1e3 }
	resume := row(fmt.Sprintf("fires of %s's tasks resume (kill → first fire of one due after it)", fs.Victim), fs.ResumeSeconds, "s", 0, "")
	if !fs.Resumed {
		resume.Text = "never"
	}
	rows := []Row{
		{Metric: "killed", Text: fmt.Sprintf("%s (pid %d) with SIGKILL at first due + %.1f s; it owned %s of %s tasks",
			fs.Victim, fs.VictimPID, fs.KillAfterSeconds, fmtNum(float64(fs.VictimTasks)), fmtNum(float64(fs.Tasks)))},
	}
	drop := row(fmt.Sprintf("kill → every survivor's table drops %s (polled every %s, %d polls)", fs.Victim, cfg.Poll, fs.Polls), fs.TableDropSeconds, "s", 0, "")
	if fs.TableDropSeconds < 0 {
		drop.Text = "not seen"
	}
	rows = append(rows, drop)
	for _, name := range slices.Sorted(maps.Keys(fs.TableDrop)) {
		d := row("  … on "+name, fs.TableDrop[name], "s", 0, "")
		if fs.TableDrop[name] < 0 {
			d.Text = "not seen"
		}
		rows = append(rows, d)
	}
	rows = append(rows, resume,
		row(fmt.Sprintf("missed: %s's tasks due after the kill", fs.Victim), float64(fs.VictimMissedAfterKill), fmt.Sprintf("of %s", fmtNum(float64(fs.VictimDueAfterKill))), 0, ""),
		row(fmt.Sprintf("missed: %s's tasks due before the kill", fs.Victim), float64(fs.VictimMissedBeforeKill), "", 0, ""),
		row(fmt.Sprintf("%s's tasks due after the kill: lateness p50", fs.Victim), ms(fs.VictimAfter.Lateness.P50), "ms", 0, ""),
		row(fmt.Sprintf("%s's tasks due after the kill: lateness max", fs.Victim), ms(fs.VictimAfter.Lateness.Max), "ms", 0, ""),
		row(fmt.Sprintf("%s's tasks due after the kill: late fires > %s", fs.Victim, cfg.LateAfter), float64(fs.VictimAfter.Late), "", 0, ""),
		row("missed: survivors' tasks", float64(fs.Before.Missed+fs.During.Missed+fs.After.Missed), fmt.Sprintf("of %s", fmtNum(float64(fs.SurvivorTasks))), 0, ""),
		row("duplicate deliveries (all tasks)", float64(fs.Duplicates), "", 0, ""),
		row("early requests (all tasks)", float64(fs.Early), "", 0, ""))
	rows = append(rows, windowRows("survivors'", cfg.LateAfter, fs.Before, fs.During, fs.After)...)
	for _, w := range fs.Timeline {
		rows = append(rows, row(fmt.Sprintf("survivors' lateness p99, due %+.1f…%+.1f s (%d tasks, %d late)", w.From, w.To, w.Tasks, w.Late),
			ms(w.Lateness.P99), "ms", 0, ""))
	}
	return append(rows, resourceRows(fs.ClusterCPUPerFire, "fire", cpu, node, fs.Nodes)...)
}

// timelineStep is the span of FailoverStats.Timeline's windows.
const timelineStep = 500 * time.Millisecond

// failoverWarnings flags a failover run whose numbers are not clean.
func failoverWarnings(fs FailoverStats) []string {
	w := createWarnings(fs.Create)
	if fs.SlackSeconds < 0 {
		w = append(w, fmt.Sprintf("creation ended %.1f s after the first due; raise --lead", -fs.SlackSeconds))
	}
	if fs.Early > 0 {
		w = append(w, fmt.Sprintf("%d requests arrived before their due time (never-early guarantee broken)", fs.Early))
	}
	if fs.Receiver.DueMismatch > 0 {
		w = append(w, fmt.Sprintf("%d requests carried an X-Chime-Due-At other than the scheduled due", fs.Receiver.DueMismatch))
	}
	return w
}
