package bench

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"
)

// JoinConfig configures the join workload: a fire run through a spawned
// cluster of Target.Nodes nodes (ChangeConfig) during which node Nodes+1
// is started, At after the first due, and joins.
type JoinConfig struct {
	ChangeConfig
}

// DefaultJoinConfig returns the defaults described on each field: a
// spawned 3-node cluster that a fourth node joins 5 s into 20,000 fires at
// 1,000/s.
func DefaultJoinConfig() JoinConfig {
	return JoinConfig{ChangeConfig: defaultChangeConfig()}
}

// Validate reports every problem with c.
func (c JoinConfig) Validate() error {
	if err := c.validate(1); err != nil {
		return err
	}
	if c.Target.nodeCount() >= maxNodes {
		return fmt.Errorf("bench: nodes %d leaves no room for one more (max %d)", c.Target.nodeCount(), maxNodes)
	}
	return nil
}

// JoinStats is what the join workload measured.
//
// Without data movement (a later issue) the tasks of the slots that move to
// the new node stay on their old owner's disk, and the old owner stops
// firing them once its table gives the slots away: MovedMissed counts them,
// and all those due after every table changed are missed. Once handoff
// lands they should fire from the new owner: MovedMissed 0.
type JoinStats struct {
	// Nodes is the cluster's size before the join.
	Nodes        int         `json:"nodes"`
	Tasks        int         `json:"tasks"`
	OfferedRate  float64     `json:"offered_rate"`
	Create       CreateStats `json:"create"`
	FirstDue     time.Time   `json:"first_due"`
	SlackSeconds float64     `json:"slack_seconds"`
	// Joiner is the new node; StartedAt when the harness started it,
	// StartAfterSeconds after the first due.
	Joiner            string    `json:"joiner"`
	JoinerPID         int       `json:"joiner_pid"`
	StartedAt         time.Time `json:"started_at"`
	StartAfterSeconds float64   `json:"start_after_seconds"`
	// ReadySeconds is from the start until the joiner's /readyz answered
	// 200 (joined and settled).
	ReadySeconds float64 `json:"ready_seconds"`
	// InTable is, per node (the joiner too), the seconds from the start
	// until its GET /v1/cluster gave the joiner slots (-1: not seen within
	// 30 s of the end of the fires); InEveryTableSeconds is the slowest.
	// Polled every Poll.
	InTable             map[string]float64 `json:"in_table_seconds_by_node"`
	InEveryTableSeconds float64            `json:"in_every_table_seconds"`
	Polls               int                `json:"polls"`
	// SlotsMoved is how many slots the joiner owns afterwards; MovedTasks
	// how many of the run's tasks are in them, MovedDueAfterStart and
	// MovedDueAfterChange how many of those were due after the start and
	// after every table included the joiner.
	SlotsMoved          int `json:"slots_moved"`
	MovedTasks          int `json:"moved_tasks"`
	MovedDueAfterStart  int `json:"moved_due_after_start"`
	MovedDueAfterChange int `json:"moved_due_after_change"`
	// MovedMissed is how many moved tasks never fired (stranded);
	// MovedMissedAfterChange those of them due after every table changed.
	MovedMissed            int `json:"moved_missed"`
	MovedMissedAfterChange int `json:"moved_missed_after_change"`
	// MovedAfter are the fires of moved tasks due after the start: how
	// late the handoff delivered them.
	MovedAfter WindowStats `json:"moved_after"`
	// StayedTasks is how many tasks kept their owner; Before, During and
	// After split them by due: before the start, from the start until one
	// second after the last table changed, and after.
	StayedTasks int         `json:"stayed_tasks"`
	Before      WindowStats `json:"stayed_before"`
	During      WindowStats `json:"stayed_during"`
	After       WindowStats `json:"stayed_after"`
	// Timeline splits the kept tasks due from 1 s before the start to
	// 15 s after it into windows of timelineStep: where the move's
	// lateness falls, whatever the windows above make of it.
	Timeline []WindowStats `json:"stayed_timeline"`
	// Fired, Duplicates and Early are over all tasks (receiver counts).
	Fired      uint64 `json:"fired"`
	Duplicates uint64 `json:"duplicates"`
	Early      uint64 `json:"early"`
	// ClusterCPUPerFire is the CPU of all nodes (the joiner's from its
	// start) from the first due to the end of the wait, per fire.
	// Stored is about the ChangeConfig.Stored tasks (nil without them).
	Stored             *StoredStats  `json:"stored,omitempty"`
	ClusterCPUPerFire  float64       `json:"cluster_cpu_us_per_fire,omitempty"`
	ReceiverCPUPerFire float64       `json:"receiver_cpu_us_per_fire"`
	Receiver           ReceiverStats `json:"receiver"`
}

// RunJoin runs the join workload.
func RunJoin(ctx context.Context, cfg JoinConfig) (res Result, err error) {
	cfg.setDefaults()
	cfg.Baseline.Progress = cfg.Progress
	res = Result{Workload: "join", Started: time.Now(), Env: currentEnv(), Config: cfg}
	if err := cfg.Validate(); err != nil {
		return res, err
	}
	r, err := startChange(ctx, cfg.ChangeConfig, 1, &res)
	defer r.close(&res)
	if err != nil {
		return res, err
	}
	tg := r.tg
	js := JoinStats{Nodes: len(tg.nodes), Tasks: cfg.N, OfferedRate: cfg.Rate, Create: r.create, FirstDue: r.firstDue,
		SlackSeconds: r.firstDue.Sub(r.createEnd).Seconds()}
	jm, err := tg.addNode()
	if err != nil {
		return res, err
	}
	js.Joiner = jm.name
	at, err := r.changeAt(&res)
	if err != nil {
		return res, err
	}
	if err := sleepCtx(ctx, time.Until(at)); err != nil {
		return res, err
	}

	// Every node, the joiner too, is watched from before its start.
	watched := slices.Clone(tg.nodes)
	watch := watchTables(ctx, watched, cfg.Poll, func(v clusterView) bool { return v.owned(jm.name) > 0 })
	js.StartedAt = time.Now()
	js.StartAfterSeconds = js.StartedAt.Sub(r.firstDue).Seconds()
	cfg.Progress.logf("starting %s at first due + %.3f s", jm.name, js.StartAfterSeconds)
	if err := tg.startNode(ctx, jm); err != nil {
		watch.stop()
		return res, err
	}
	js.ReadySeconds = time.Since(js.StartedAt).Seconds()
	js.JoinerPID = jm.pid
	fires, err := r.finish(ctx)
	if err != nil {
		watch.stop()
		return res, err
	}
	seen, polls := watch.wait(ctx, changeWait)

	js.Polls = polls
	js.InTable = map[string]float64{}
	var changed time.Time
	all := true
	for k, at := range seen {
		js.InTable[watched[k].name], _ = sinceText(js.StartedAt, at, "")
		switch {
		case at.IsZero():
			all = false
		case at.After(changed):
			changed = at
		}
	}
	js.InEveryTableSeconds = -1
	if all {
		js.InEveryTableSeconds = changed.Sub(js.StartedAt).Seconds()
	} else {
		changed = r.lastDue.Add(time.Millisecond)
	}

	after, err := fetchCluster(ctx, jm.api)
	if err != nil {
		return res, err
	}
	newOwners, err := after.owners(tg.nodes)
	if err != nil {
		return res, err
	}
	js.SlotsMoved = after.owned(jm.name)
	joiner := len(tg.nodes) - 1
	moved := func(i int) bool { return r.acked[i] && newOwners.of(r.id(i)) == joiner }
	stayed := func(i int) bool { return !moved(i) && r.owner(i) >= 0 }
	for i := range cfg.N {
		if !moved(i) {
			if stayed(i) {
				js.StayedTasks++
			}
			continue
		}
		js.MovedTasks++
		due := r.dueOf(i)
		_, fired := r.led.arrival(i)
		if !due.Before(js.StartedAt) {
			js.MovedDueAfterStart++
		}
		afterChange := all && !due.Before(changed)
		if afterChange {
			js.MovedDueAfterChange++
		}
		if !fired {
			js.MovedMissed++
			if afterChange {
				js.MovedMissedAfterChange++
			}
		}
	}
	js.Before, js.During, js.After = r.windowsAround(js.StartedAt, changed.Add(time.Second), stayed)
	for from := js.StartedAt.Add(-time.Second); from.Before(js.StartedAt.Add(15*time.Second)) && from.Before(r.lastDue); from = from.Add(timelineStep) {
		js.Timeline = append(js.Timeline, r.led.window(from, from.Add(timelineStep), js.StartedAt, r.dueOf, stayed, cfg.LateAfter))
	}
	js.MovedAfter = r.led.window(js.StartedAt, r.lastDue.Add(time.Millisecond), js.StartedAt, r.dueOf, moved, cfg.LateAfter)
	st := fires.stats
	js.Fired, js.Duplicates, js.Early, js.Receiver = st.Delivered, st.Duplicates, st.Early, st
	js.ClusterCPUPerFire, js.ReceiverCPUPerFire = fires.cpuPerFire, fires.rcvPerFire
	if cfg.Stored > 0 {
		ss := r.checkStored(ctx, 2000, func(id string) bool { return newOwners.of(id) == joiner })
		js.Stored = &ss
	}

	res.Join = &js
	res.Node, res.Nodes = tg.allStats()
	res.Summary = joinRows(js, res.HTTPBaseline, res.Node, cfg.ChangeConfig)
	res.Warnings = append(res.Warnings, joinWarnings(js)...)
	res.Seconds = time.Since(res.Started).Seconds()
	return res, nil
}

// joinRows is the summary of a join run.
func joinRows(js JoinStats, hb *HTTPBaselineResult, node *NodeStats, cfg ChangeConfig) []Row {
	var cpu float64
	if hb != nil {
		cpu = hb.CPUPerRequest
	}
	ms := func(us int64) float64 { return float64(us) / 1e3 }
	rows := []Row{
		{Metric: "joined", Text: fmt.Sprintf("%s (pid %d) started at first due + %.1f s into %d nodes", js.Joiner, js.JoinerPID, js.StartAfterSeconds, js.Nodes)},
		row(fmt.Sprintf("start → %s answers /readyz", js.Joiner), js.ReadySeconds, "s", 0, ""),
	}
	every := row(fmt.Sprintf("start → %s in every node's table (polled every %s, %d polls)", js.Joiner, cfg.Poll, js.Polls), js.InEveryTableSeconds, "s", 0, "")
	if js.InEveryTableSeconds < 0 {
		every.Text = "not seen"
	}
	rows = append(rows, every)
	for _, name := range slices.Sorted(maps.Keys(js.InTable)) {
		d := row("  … on "+name, js.InTable[name], "s", 0, "")
		if js.InTable[name] < 0 {
			d.Text = "not seen"
		}
		rows = append(rows, d)
	}
	rows = append(rows,
		row(fmt.Sprintf("slots moved to %s", js.Joiner), float64(js.SlotsMoved), "of 16,384", 0, ""),
		row("tasks in moved slots (due after the start)", float64(js.MovedTasks), fmt.Sprintf("(%s)", fmtNum(float64(js.MovedDueAfterStart))), 0, ""),
		row("stranded: moved tasks never fired", float64(js.MovedMissed), fmt.Sprintf("of %s", fmtNum(float64(js.MovedTasks))), 0, ""),
		row("  … of them due after every table changed", float64(js.MovedMissedAfterChange), fmt.Sprintf("of %s", fmtNum(float64(js.MovedDueAfterChange))), 0, ""),
		row("moved tasks due after the start: lateness p50", ms(js.MovedAfter.Lateness.P50), "ms", 0, ""),
		row("moved tasks due after the start: lateness max", ms(js.MovedAfter.Lateness.Max), "ms", 0, ""),
		row(fmt.Sprintf("moved tasks due after the start: late fires > %s", cfg.LateAfter), float64(js.MovedAfter.Late), "", 0, ""),
		row("missed: tasks that kept their owner", float64(js.Before.Missed+js.During.Missed+js.After.Missed), fmt.Sprintf("of %s", fmtNum(float64(js.StayedTasks))), 0, ""),
		row("duplicate deliveries (all tasks)", float64(js.Duplicates), "", 0, ""),
		row("early requests (all tasks)", float64(js.Early), "", 0, ""))
	if ss := js.Stored; ss != nil {
		rows = append(rows,
			row("stored tasks (due after the run), acknowledged", float64(ss.Create.Acked), fmt.Sprintf("of %s", fmtNum(float64(ss.Create.Tasks))), 0, ""),
			row(fmt.Sprintf("  … in slots moved to %s", js.Joiner), float64(ss.Moved), "", 0, ""),
			row("  … read back after the run: missing", float64(ss.Missing), fmt.Sprintf("of %s sampled (%d errors)", fmtNum(float64(ss.Sampled)), ss.Errors), 0, ""))
	}
	rows = append(rows, windowRows("kept tasks'", cfg.LateAfter, js.Before, js.During, js.After)...)
	for _, w := range js.Timeline {
		rows = append(rows, row(fmt.Sprintf("kept tasks' lateness p99, due %+.1f…%+.1f s (%d tasks, %d late)", w.From, w.To, w.Tasks, w.Late),
			ms(w.Lateness.P99), "ms", 0, ""))
	}
	return append(rows, resourceRows(js.ClusterCPUPerFire, "fire", cpu, node, js.Nodes+1)...)
}

// joinWarnings flags a join run whose numbers are not clean.
func joinWarnings(js JoinStats) []string {
	w := createWarnings(js.Create)
	if js.SlackSeconds < 0 {
		w = append(w, fmt.Sprintf("creation ended %.1f s after the first due; raise --lead", -js.SlackSeconds))
	}
	if ss := js.Stored; ss != nil && (ss.Missing > 0 || ss.Errors > 0) {
		w = append(w, fmt.Sprintf("%d of %d sampled stored tasks missing, %d unreadable after the join", ss.Missing, ss.Sampled, ss.Errors))
	}
	if js.Early > 0 {
		w = append(w, fmt.Sprintf("%d requests arrived before their due time (never-early guarantee broken)", js.Early))
	}
	if js.Receiver.DueMismatch > 0 {
		w = append(w, fmt.Sprintf("%d requests carried an X-Chime-Due-At other than the scheduled due", js.Receiver.DueMismatch))
	}
	return w
}
