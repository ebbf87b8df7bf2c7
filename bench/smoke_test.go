package bench

import (
	"cmp"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestWorkloadsSmoke runs every workload at tiny sizes against real
// `chime serve` processes, so the harness cannot rot against the node. It
// is skipped with -short and when the chime binary cannot be built.
// CHIME_BENCH_BIN (or CHIME_TEST_BIN, which make check sets) names a
// prebuilt binary to use instead of building one (linking chime takes
// seconds to tens of seconds on a busy 2-core box).
func TestWorkloadsSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns real chime processes; skipped with -short")
	}
	bin := cmp.Or(os.Getenv("CHIME_BENCH_BIN"), os.Getenv("CHIME_TEST_BIN"))
	if bin == "" {
		bin = filepath.Join(t.TempDir(), "chime")
		if out, err := exec.CommandContext(t.Context(), "go", "build", "-o", bin, chimePackage).CombinedOutput(); err != nil {
			t.Skipf("cannot build %s: %v\n%s", chimePackage, err, out)
		}
	}
	target := TargetConfig{Spawn: true, ChimeBin: bin, ReadyTimeout: 15 * time.Second, StopTimeout: 15 * time.Second}
	// Spawned clusters live under this TMPDIR, so a run that fails to stop
	// its nodes is caught by the sweep below.
	// Not t.Setenv: the cluster subtests run two at a time (t.Parallel,
	// below), which t.Setenv forbids; none changes it.
	tmp := t.TempDir()
	old, had := os.LookupEnv("TMPDIR")
	if err := os.Setenv("TMPDIR", tmp); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if had {
			_ = os.Setenv("TMPDIR", old)
		} else {
			_ = os.Unsetenv("TMPDIR")
		}
	})
	t.Cleanup(func() { killLeftovers(t, tmp) })
	// Clusters are started through scripts/cluster.sh when the repository
	// has it, as `chime bench` does; cluster/fire starts its nodes from Go
	// either way, so both launchers stay covered.
	script := ""
	if p, err := filepath.Abs(filepath.Join("..", "scripts", "cluster.sh")); err == nil {
		if _, err := os.Stat(p); err == nil {
			script = p
		}
	}
	cluster := target
	cluster.Nodes, cluster.ClusterScript = 3, script
	if script != "" {
		// A copy with bytes appended (the loader ignores them): the
		// script's own build of this tree would differ from it, so
		// checkNodes sees whether the script ran the binary it was given.
		cluster.ChimeBin = taggedCopy(t, bin)
	}

	for _, mode := range []string{ModeSingle, ModeBatch} {
		t.Run("create/mode="+mode, func(t *testing.T) {
			cfg := DefaultCreateConfig()
			cfg.Target, cfg.Mode, cfg.N, cfg.Concurrency, cfg.Batch, cfg.BaselineN = target, mode, 200, 8, 50, 200
			res, err := RunCreate(t.Context(), cfg)
			if err != nil {
				t.Fatalf("RunCreate: %v", err)
			}
			if res.Create.Acked != 200 || res.Create.Rejected != 0 {
				t.Errorf("acked, rejected = %d, %d, want 200, 0 (first error %q)", res.Create.Acked, res.Create.Rejected, res.Create.FirstError)
			}
			if res.Node == nil || res.Node.PID == 0 || res.Node.RSSBytes == 0 {
				t.Errorf("Node = %+v, want the spawned process's pid and RSS", res.Node)
			}
			logWarnings(t, res)
		})
	}
	t.Run("fire", func(t *testing.T) {
		cfg := DefaultFireConfig()
		cfg.Target, cfg.N, cfg.Rate, cfg.Batch = target, 200, 400, 100
		cfg.Lead, cfg.Timeout, cfg.Settle = time.Second, 10*time.Second, 200*time.Millisecond
		cfg.Baseline.Requests, cfg.Baseline.Concurrency = 300, 8
		res, err := RunFire(t.Context(), cfg)
		if err != nil {
			t.Fatalf("RunFire: %v", err)
		}
		fs := res.Fire
		if fs.Completion != 1 || fs.Receiver.Early != 0 || fs.Receiver.Duplicates != 0 || fs.Receiver.DueMismatch != 0 {
			t.Errorf("completion %v, early %d, duplicates %d, due mismatch %d; want 1, 0, 0, 0",
				fs.Completion, fs.Receiver.Early, fs.Receiver.Duplicates, fs.Receiver.DueMismatch)
		}
		logWarnings(t, res)
	})
	t.Run("periodic", func(t *testing.T) {
		cfg := DefaultPeriodicConfig()
		cfg.Target, cfg.N, cfg.EveryMs, cfg.Duration, cfg.Lead = target, 20, 200, 2*time.Second, time.Second
		// A quarter as 6-field cron every second, so the cron path is covered.
		cfg.CronFraction, cfg.CronForm, cfg.CronPeriod = 0.25, CronFormFields, time.Second
		cfg.Baseline.Requests, cfg.Baseline.Concurrency = 300, 8
		res, err := RunPeriodic(t.Context(), cfg)
		if err != nil {
			t.Fatalf("RunPeriodic: %v", err)
		}
		d, rs := res.Periodic.Drift, res.Periodic.Receiver
		if d.Expected == 0 || d.Missed != 0 || d.OffGrid != 0 || d.MaxDriftNs != 0 || d.Repeats != 0 || d.Unknown != 0 {
			t.Errorf("drift = %+v, want occurrences expected and none missed, off-grid, repeated or unknown", d)
		}
		if rs.Early != 0 || rs.Duplicates != 0 {
			t.Errorf("early %d, duplicates %d; want 0, 0", rs.Early, rs.Duplicates)
		}
		logWarnings(t, res)
	})
	t.Run("scale", func(t *testing.T) {
		cfg := DefaultScaleConfig()
		cfg.Target, cfg.N, cfg.Batch, cfg.Concurrency, cfg.BaselineN = target, 200, 100, 2, 1000
		res, err := RunScale(t.Context(), cfg)
		if err != nil {
			t.Fatalf("RunScale: %v", err)
		}
		ss := res.Scale
		if ss.Create.Acked != 200 || ss.DiskBytes == 0 || ss.RestartSeconds == 0 || ss.RSSAfterRestart == 0 {
			t.Errorf("Scale = %+v, want 200 acked, disk size, restart time and RSS after restart", ss)
		}
		logWarnings(t, res)
	})

	// The cluster workloads (issue 6), a few hundred tasks on 2-3 nodes,
	// each bounded by clusterDeadline so a cluster that stops answering
	// fails the subtest instead of stalling the suite.
	var gate clusterGate
	t.Run("overload", func(t *testing.T) {
		// A write queue of 8 against 64 clients: most creates must be
		// refused 429 with Retry-After, the node must live, and every
		// acknowledged task must fire, none early.
		cfg := DefaultOverloadConfig()
		cfg.Target, cfg.Duration, cfg.Concurrency, cfg.Lead, cfg.Timeout = target, 2*time.Second, 64, time.Second, 20*time.Second
		cfg.Target.ServeArgs = []string{"--write-queue", "8"}
		res, err := RunOverload(t.Context(), cfg)
		if err != nil {
			t.Fatalf("RunOverload: %v", err)
		}
		o := res.Overload
		if !o.Alive || o.Acked == 0 || o.Refused429 == 0 || o.WithRetryAfter != o.Refused429 || o.Other+o.TransportErrors != 0 {
			t.Errorf("overload %+v: want the node alive, tasks acknowledged, 429s all with Retry-After, no other error", *o)
		}
		if o.Fired < uint64(o.Acked) || o.TimedOut || o.Receiver.Early != 0 {
			t.Errorf("fired %d of %d acknowledged (timed out %v), %d early: want all, none early", o.Fired, o.Acked, o.TimedOut, o.Receiver.Early)
		}
		t.Logf("overload: %d requests, %d acknowledged, %d answered 429, max RSS %.0f MiB", o.Requests, o.Acked, o.Refused429, float64(o.MaxRSSBytes)/(1<<20))
		logWarnings(t, res)
	})
	t.Run("cluster/create-compare", func(t *testing.T) {
		t.Parallel() // with the other cluster subtests, -parallel at a time (GOMAXPROCS)
		cfg := DefaultCreateConfig()
		cfg.Target, cfg.Mode, cfg.Route, cfg.N, cfg.Concurrency, cfg.SkipBaseline = cluster, ModeSingle, RouteCompare, 200, 8, true
		res, err := RunCreate(gate.context(t), cfg)
		if err != nil {
			t.Fatalf("RunCreate: %v", err)
		}
		if len(res.Routes) != 2 {
			t.Fatalf("Routes = %+v, want owner and foreign phases", res.Routes)
		}
		for k, want := range []int64{0, 200} { // owner: nothing forwarded; foreign: every request
			cs := res.Routes[k]
			if cs.Acked != 200 || cs.Forwarded == nil || *cs.Forwarded != want {
				t.Errorf("%s: acked %d, forwarded %v; want 200 and %d", cs.Route, cs.Acked, cs.Forwarded, want)
			}
		}
		checkNodes(t, res, 3)
		logWarnings(t, res)
	})
	t.Run("cluster/create-sdk-compare", func(t *testing.T) {
		t.Parallel() // with the other cluster subtests, -parallel at a time (GOMAXPROCS)
		const n = 300
		cfg := DefaultCreateConfig()
		cfg.Target, cfg.Mode, cfg.Route, cfg.N, cfg.Concurrency, cfg.SkipBaseline = cluster, ModeSingle, RouteSDKCompare, n, 8, true
		res, err := RunCreate(gate.context(t), cfg)
		if err != nil {
			t.Fatalf("RunCreate: %v", err)
		}
		if len(res.Routes) != 2 || res.Routes[0].Route != RouteSDK || res.Routes[1].Route != RouteSDKFixed {
			t.Fatalf("Routes = %+v, want sdk and sdk-fixed phases", res.Routes)
		}
		for _, cs := range res.Routes {
			if cs.Acked != n || cs.Rejected != 0 || cs.Forwarded == nil {
				t.Fatalf("%s: acked %d, rejected %d (%q), forwarded %v; want %d, 0 and a count", cs.Route, cs.Acked, cs.Rejected, cs.FirstError, cs.Forwarded, n)
			}
		}
		// sdk: every create to its owner. sdk-fixed: every create to n1,
		// which forwards those it does not own, about 2/3 of them.
		t.Logf("forwarded: sdk %d, sdk-fixed %d of %d", *res.Routes[0].Forwarded, *res.Routes[1].Forwarded, n)
		if f := *res.Routes[0].Forwarded; f != 0 {
			t.Errorf("sdk: forwarded %d, want 0", f)
		}
		if f := *res.Routes[1].Forwarded; f < n/2 || f > n*5/6 {
			t.Errorf("sdk-fixed: forwarded %d of %d, want about 2/3 (between 1/2 and 5/6)", f, n)
		}
		checkNodes(t, res, 3)
		logWarnings(t, res)
	})
	t.Run("cluster/fire", func(t *testing.T) {
		t.Parallel() // with the other cluster subtests, -parallel at a time (GOMAXPROCS)
		cfg := DefaultFireConfig()
		cfg.Target, cfg.N, cfg.Rate, cfg.Batch = cluster, 300, 300, 50
		cfg.Target.ClusterScript = "" // the Go launcher
		cfg.Lead, cfg.Timeout, cfg.Settle, cfg.SkipBaseline = time.Second, 10*time.Second, 200*time.Millisecond, true
		res, err := RunFire(gate.context(t), cfg)
		if err != nil {
			t.Fatalf("RunFire: %v", err)
		}
		fs := res.Fire
		if fs.Completion != 1 || fs.Receiver.Early != 0 || fs.Receiver.Duplicates != 0 || fs.Create.Acked != 300 {
			t.Errorf("acked %d, completion %v, early %d, duplicates %d; want 300, 1, 0, 0", fs.Create.Acked, fs.Completion, fs.Receiver.Early, fs.Receiver.Duplicates)
		}
		checkNodes(t, res, 3)
		logWarnings(t, res)
	})
	t.Run("cluster/failover", func(t *testing.T) {
		t.Parallel() // with the other cluster subtests, -parallel at a time (GOMAXPROCS)
		cfg := DefaultFailoverConfig()
		cfg.Target, cfg.N, cfg.Rate, cfg.Batch = cluster, 400, 400, 100
		// Timeout covers failure detection (~3 s) and the takeover: the
		// victim's tasks due after the kill fire late, not never.
		cfg.Lead, cfg.At, cfg.Timeout, cfg.Settle, cfg.SkipBaseline = time.Second, 300*time.Millisecond, 15*time.Second, 200*time.Millisecond, true
		res, err := RunFailover(gate.context(t), cfg)
		if err != nil {
			t.Fatalf("RunFailover: %v", err)
		}
		fs := res.Failover
		// With replication the dead node's followers fire its tasks: none
		// is missed and firing resumes. Fires in flight at the kill may be
		// repeated (same fire id): at least once.
		if fs.VictimDueAfterKill == 0 || fs.VictimMissedAfterKill != 0 || fs.VictimMissedBeforeKill != 0 || !fs.Resumed {
			t.Errorf("victim %s: %d tasks due after the kill, %d missed (+%d due before), resumed %v; want none missed and resumed",
				fs.Victim, fs.VictimDueAfterKill, fs.VictimMissedAfterKill, fs.VictimMissedBeforeKill, fs.Resumed)
		}
		// The survivors' own tasks never fire twice.
		missed := fs.Before.Missed + fs.During.Missed + fs.After.Missed
		dups := fs.Before.Duplicates + fs.During.Duplicates + fs.After.Duplicates
		if missed != 0 || dups != 0 || fs.Early != 0 {
			t.Errorf("survivors missed %d, duplicates %d; early %d; want 0, 0, 0", missed, dups, fs.Early)
		}
		if fs.TableDropSeconds <= 0 || len(fs.TableDrop) != 2 {
			t.Errorf("table drop = %v s (%v), want every survivor to drop the victim", fs.TableDropSeconds, fs.TableDrop)
		}
		checkNodes(t, res, 3)
		if !res.Nodes[slices.IndexFunc(res.Nodes, func(n NodeStats) bool { return n.Name == fs.Victim })].Killed {
			t.Errorf("Nodes = %+v, want the victim %s marked killed", res.Nodes, fs.Victim)
		}
		t.Logf("victim %s: table drop %.2f s, resume %.2f s, missed %d after + %d before the kill, %d duplicates in all, late after the kill: %+v",
			fs.Victim, fs.TableDropSeconds, fs.ResumeSeconds, fs.VictimMissedAfterKill, fs.VictimMissedBeforeKill, fs.Duplicates, fs.VictimAfter.Lateness)
		logWarnings(t, res)
	})
	t.Run("cluster/join", func(t *testing.T) {
		t.Parallel() // with the other cluster subtests, -parallel at a time (GOMAXPROCS)
		cfg := DefaultJoinConfig()
		// 10 s of fires: the join lands inside them even when the joiner
		// reaches every table only after 3-4 s (a busy 2-core machine:
		// make check runs node's tests beside this one), or after 8.2 s,
		// as in one make check (7 s of fires then: no moved task was due
		// after every table changed, nothing to check).
		cfg.Target, cfg.N, cfg.Rate, cfg.Batch = cluster, 4000, 400, 100
		cfg.Target.Nodes = 2
		cfg.Lead, cfg.At, cfg.Timeout, cfg.Settle, cfg.SkipBaseline = time.Second, 300*time.Millisecond, 15*time.Second, 200*time.Millisecond, true
		res, err := RunJoin(gate.context(t), cfg)
		if err != nil {
			t.Fatalf("RunJoin: %v", err)
		}
		js := res.Join
		// The joiner takes each slot from its old owner by a sealed
		// handover (the old owner stops firing, lets its running fires
		// finish and hands over their results) before it fires it:
		// nothing moved is stranded.
		if js.SlotsMoved == 0 || js.MovedDueAfterChange == 0 || js.MovedMissedAfterChange != 0 {
			t.Errorf("joiner %s took %d slots; %d moved tasks due after every table changed, %d of them missed; want none missed",
				js.Joiner, js.SlotsMoved, js.MovedDueAfterChange, js.MovedMissedAfterChange)
		}
		// Tasks that kept their owner never fire twice.
		missed := js.Before.Missed + js.During.Missed + js.After.Missed
		dups := js.Before.Duplicates + js.During.Duplicates + js.After.Duplicates
		if missed != 0 || dups != 0 || js.Early != 0 {
			t.Errorf("kept tasks missed %d, duplicates %d; early %d; want 0, 0, 0", missed, dups, js.Early)
		}
		if js.InEveryTableSeconds <= 0 || len(js.InTable) != 3 {
			t.Errorf("in every table after %v s (%v), want all three nodes", js.InEveryTableSeconds, js.InTable)
		}
		checkNodes(t, res, 3)
		t.Logf("joiner %s: ready %.2f s, in every table %.2f s, %d slots, %d tasks stranded, %d duplicates in all, moved lateness %+v",
			js.Joiner, js.ReadySeconds, js.InEveryTableSeconds, js.SlotsMoved, js.MovedMissed, js.Duplicates, js.MovedAfter.Lateness)
		logWarnings(t, res)
	})
	t.Run("cluster/idle", func(t *testing.T) {
		t.Parallel() // with the other cluster subtests, -parallel at a time (GOMAXPROCS)
		cfg := DefaultIdleConfig()
		cfg.Target, cfg.Settle, cfg.Duration = cluster, time.Second, 2*time.Second
		cfg.Target.Nodes, cfg.Target.ClusterScript = 2, "" // the Go launcher: faster to start
		res, err := RunIdle(gate.context(t), cfg)
		if err != nil {
			t.Fatalf("RunIdle: %v", err)
		}
		is := res.Idle
		if len(is.PerNode) != 2 {
			t.Fatalf("PerNode = %+v, want 2 nodes", is.PerNode)
		}
		for _, n := range is.PerNode {
			if n.CPUSeconds <= 0 || n.Goroutines <= 0 || n.Goroutines >= 10_000 || n.RSSBytes == 0 || n.SwitchesPerSec <= 0 {
				t.Errorf("node %+v: want CPU > 0, 0 < goroutines < 10000, RSS and context switches", n)
			}
		}
		checkNodes(t, res, 2)
		t.Logf("idle: mean CPU %.2f %% of a core, %.0f goroutines, %.0f context switches a second, %.1f MiB RSS over %.1f s",
			is.MeanCPUShare*100, is.MeanGoroutines, is.MeanSwitchesPerSec, float64(is.MeanRSSBytes)/(1<<20), is.WindowSeconds)
		logWarnings(t, res)
	})
}

// clusterDeadline bounds one cluster subtest of the smoke test: each takes
// 4-10 s on a healthy cluster.
const clusterDeadline = 60 * time.Second

// clusterGate skips the cluster subtests not yet started once one has
// failed (they run two at a time: t.Parallel, -parallel): a cluster that
// stops answering would otherwise cost a deadline and a forced stop per
// subtest, and the suite's timeout could strike while script-started
// nodes (detached) still run.
type clusterGate struct {
	mu     sync.Mutex
	failed string
}

// context returns t's context with clusterDeadline, or skips t when an
// earlier cluster subtest failed.
func (g *clusterGate) context(t *testing.T) context.Context {
	t.Helper()
	g.mu.Lock()
	failed := g.failed
	g.mu.Unlock()
	if failed != "" {
		t.Skipf("skipped: %s failed before it", failed)
	}
	ctx, cancel := context.WithTimeout(t.Context(), clusterDeadline)
	t.Cleanup(func() {
		cancel()
		if t.Failed() {
			g.mu.Lock()
			g.failed = cmp.Or(g.failed, t.Name())
			g.mu.Unlock()
		}
	})
	return ctx
}

// checkNodes checks that a cluster run reports each of its n nodes with a
// pid and memory, and a total.
func checkNodes(t *testing.T, res Result, n int) {
	t.Helper()
	if len(res.Nodes) != n {
		t.Fatalf("Nodes = %+v, want %d", res.Nodes, n)
	}
	var rss int64
	for _, ns := range res.Nodes {
		if ns.PID == 0 || ns.RSSBytes == 0 || ns.Name == "" {
			t.Errorf("node %+v lacks a name, pid or RSS", ns)
		}
		rss += ns.RSSBytes
	}
	if res.Node == nil || res.Node.RSSBytes != rss {
		t.Errorf("Node = %+v, want the total RSS %d", res.Node, rss)
	}
	for _, w := range res.Warnings {
		if strings.Contains(w, "binary other than") { // the binary under test must be what ran
			t.Errorf("warning %q", w)
		}
	}
}

// taggedCopy copies the executable bin into a temporary directory with a
// few bytes appended, and returns the copy's path.
func taggedCopy(t *testing.T, bin string) string {
	t.Helper()
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "chime")
	if err := os.WriteFile(p, append(b, "chime bench smoke test"...), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// killLeftovers SIGKILLs any chime serve still running from a spawned
// cluster under tmp (a pid file of scripts/cluster.sh) and fails the test:
// every run must stop its nodes.
func killLeftovers(t *testing.T, tmp string) {
	t.Helper()
	pids, _ := filepath.Glob(filepath.Join(tmp, "*", "cluster", "n*", "pid"))
	for _, f := range pids {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || !isServe(pid, filepath.Join(filepath.Dir(f), "data")) {
			continue
		}
		_ = syscall.Kill(pid, syscall.SIGKILL)
		t.Errorf("chime serve pid %d (%s) outlived its run; killed it", pid, f)
	}
}

// logWarnings shows a result's warnings in the test log.
func logWarnings(t *testing.T, res Result) {
	t.Helper()
	for _, w := range res.Warnings {
		t.Logf("warning: %s", w)
	}
}
