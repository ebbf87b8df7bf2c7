package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/chime-scheduler/chime/bench"
)

const benchUsage = `usage: chime bench <workload> [flags]

workloads:
  create           create N tasks due in 1 h (--mode single|batch); ceiling: baseline-pebble
  fire             N one-shot tasks due over N/rate s, fired into a built-in receiver; ceiling: baseline-http
  periodic         N every_ms (and optionally cron) tasks fired for --duration; lateness, drift, missed; ceiling: baseline-http
  scale            store N tasks due in 1 h; node RSS, disk size, restart time
  failover         fire N tasks through a spawned cluster and SIGKILL one node midway; detection, missed, lateness
  join             fire N tasks through a spawned cluster and start one more node midway; join time, stranded, lateness
  idle             a spawned cluster with no tasks, settled, then measured: CPU share of a core, goroutines, RSS per node
  overload         clients far beyond one node's write queue for a while: 429s with Retry-After, RSS, every acknowledged task fires
  baseline-http    bare net/http client posting to the receiver: the fire ceiling and the receiver's capacity
  baseline-pebble  bare storage batches committed with sync: the create ceiling

The nodes under test: --target URL[,URL…] (default $CHIME_ADDR, else ` + defaultAddr + `)
or --spawn [--nodes N] (start N chime serve on free loopback ports with temporary data dirs;
N > 1 forms a cluster, through scripts/cluster.sh when it is there).
Results: a markdown table on stdout; JSON, markdown and (fire, periodic) SVG in --out.
Run 'chime bench <workload> -h' for its flags; docs/BENCHMARKS.md explains them.
`

// runBench runs `chime bench <workload> [flags]`.
func runBench(ctx context.Context, args []string, stdout, stderr io.Writer, env func(string) string) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, benchUsage)
		return flag.ErrHelp
	}
	if env == nil {
		env = func(string) string { return "" }
	}
	workload := args[0]
	if workload == "-h" || workload == "--help" || workload == "help" {
		fmt.Fprint(stdout, benchUsage)
		return nil
	}
	fs := flag.NewFlagSet("chime bench "+workload, flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("out", "bench/out", "`directory` for the JSON, markdown and SVG results")
	prog := bench.Progress{W: stderr, Bars: isTerminal(stderr) && env("TERM") != "dumb"}

	var run func() (bench.Result, error)
	var tf *benchTargetFlags
	switch workload {
	case "create":
		cfg := bench.DefaultCreateConfig()
		tf = registerTargetFlags(fs, bench.TargetConfig{})
		fs.StringVar(&cfg.Mode, "mode", cfg.Mode, "single (POST /v1/tasks) or batch (POST /v1/tasks:batch)")
		fs.IntVar(&cfg.N, "n", cfg.N, "tasks to create")
		fs.IntVar(&cfg.Concurrency, "concurrency", cfg.Concurrency, "requests in flight")
		fs.IntVar(&cfg.Batch, "batch", cfg.Batch, "tasks per batch request")
		fs.StringVar(&cfg.Route, "route", cfg.Route, "in a cluster: any (round robin), owner (each task to its slot's owner), foreign (always to a non-owner: every request forwarded), compare (owner then foreign), sdk (the Go SDK routing to owners), sdk-fixed (the Go SDK, owner routing off, first node only: it forwards what it does not own), sdk-compare (sdk then sdk-fixed); all but any need --mode single")
		fs.BoolVar(&cfg.SkipBaseline, "no-baseline", false, "skip baseline-pebble")
		fs.IntVar(&cfg.BaselineN, "baseline-n", 0, "records baseline-pebble writes (default min(n, 100000))")
		run = func() (bench.Result, error) {
			cfg.Target, cfg.Progress = tf.config(env), prog
			return bench.RunCreate(ctx, cfg)
		}
	case "fire":
		cfg := bench.DefaultFireConfig()
		tf = registerTargetFlags(fs, bench.TargetConfig{})
		fs.IntVar(&cfg.N, "n", cfg.N, "one-shot tasks to fire")
		fs.Float64Var(&cfg.Rate, "rate", cfg.Rate, "offered fires per second (dues spread over n/rate seconds)")
		fs.IntVar(&cfg.Batch, "batch", cfg.Batch, "tasks per create request")
		fs.IntVar(&cfg.Concurrency, "concurrency", cfg.Concurrency, "create requests in flight")
		fs.DurationVar(&cfg.Lead, "lead", 0, "start of creation to first due (default 3s + n/10000 s)")
		fs.DurationVar(&cfg.Timeout, "timeout", cfg.Timeout, "wait this long after the last due for missing fires")
		fs.DurationVar(&cfg.Settle, "settle", cfg.Settle, "keep listening this long after the last fire, for duplicates")
		fs.BoolVar(&cfg.SkipBaseline, "no-baseline", false, "skip baseline-http")
		fs.IntVar(&cfg.Baseline.Requests, "baseline-requests", cfg.Baseline.Requests, "requests baseline-http times")
		fs.IntVar(&cfg.Baseline.Concurrency, "baseline-concurrency", cfg.Baseline.Concurrency, "baseline-http requests in flight")
		fs.StringVar(&cfg.FlowKey, "flow-key", "", "fire a second round of n tasks with this flow_key on every task (a flow whose limits never bind) and compare")
		run = func() (bench.Result, error) {
			cfg.Target, cfg.Progress = tf.config(env), prog
			return bench.RunFire(ctx, cfg)
		}
	case "periodic":
		cfg := bench.DefaultPeriodicConfig()
		tf = registerTargetFlags(fs, bench.TargetConfig{})
		fs.IntVar(&cfg.N, "n", cfg.N, "periodic tasks")
		fs.Int64Var(&cfg.EveryMs, "every", cfg.EveryMs, "every_ms of the periodic tasks")
		fs.Float64Var(&cfg.CronFraction, "cron-fraction", cfg.CronFraction, "fraction of the tasks scheduled with cron instead of every_ms")
		fs.StringVar(&cfg.CronForm, "cron-form", cfg.CronForm, "cron tasks as 'every' (@every <period> + start_at) or 'fields' (6-field <o>/<S> * * * * *)")
		fs.DurationVar(&cfg.CronPeriod, "cron-period", cfg.CronPeriod, "period of the cron tasks (whole seconds)")
		fs.BoolVar(&cfg.Stagger, "stagger", cfg.Stagger, "spread start_at over the period; --stagger=false starts all tasks at once (bursts)")
		fs.DurationVar(&cfg.Duration, "duration", cfg.Duration, "measurement window after the first start_at")
		fs.DurationVar(&cfg.Lead, "lead", 0, "start of creation to first start_at (default 3s + n/10000 s)")
		fs.DurationVar(&cfg.Drain, "drain", cfg.Drain, "wait this long after the window for fires due inside it")
		fs.IntVar(&cfg.Batch, "batch", cfg.Batch, "tasks per create request")
		fs.IntVar(&cfg.Concurrency, "concurrency", cfg.Concurrency, "create and delete requests in flight")
		fs.BoolVar(&cfg.KeepTasks, "keep", false, "with --target: leave the tasks on the node instead of deleting them")
		fs.BoolVar(&cfg.SkipBaseline, "no-baseline", false, "skip baseline-http")
		fs.IntVar(&cfg.Baseline.Requests, "baseline-requests", cfg.Baseline.Requests, "requests baseline-http times")
		fs.IntVar(&cfg.Baseline.Concurrency, "baseline-concurrency", cfg.Baseline.Concurrency, "baseline-http requests in flight")
		run = func() (bench.Result, error) {
			cfg.Target, cfg.Progress = tf.config(env), prog
			return bench.RunPeriodic(ctx, cfg)
		}
	case "scale":
		cfg := bench.DefaultScaleConfig()
		tf = registerTargetFlags(fs, bench.TargetConfig{})
		fs.IntVar(&cfg.N, "n", cfg.N, "tasks to store")
		fs.IntVar(&cfg.Batch, "batch", cfg.Batch, "tasks per create request")
		fs.IntVar(&cfg.Concurrency, "concurrency", cfg.Concurrency, "create requests in flight")
		fs.BoolVar(&cfg.Restart, "restart", cfg.Restart, "with --spawn: restart the node and time it until /readyz")
		fs.BoolVar(&cfg.SkipBaseline, "no-baseline", false, "skip baseline-pebble")
		fs.IntVar(&cfg.BaselineN, "baseline-n", 0, "records baseline-pebble writes (default min(n, 100000))")
		run = func() (bench.Result, error) {
			cfg.Target, cfg.Progress = tf.config(env), prog
			return bench.RunScale(ctx, cfg)
		}
	case "failover":
		cfg := bench.DefaultFailoverConfig()
		tf = registerTargetFlags(fs, cfg.Target)
		registerChangeFlags(fs, &cfg.ChangeConfig, "kill-after", "SIGKILL the node this long after the first due (default a quarter of n/rate)")
		fs.IntVar(&cfg.Kill, "kill", 0, "node to SIGKILL, 1-based (default: the one owning the most tasks due after the kill, node 2 on a tie)")
		run = func() (bench.Result, error) {
			cfg.Target, cfg.Progress = tf.config(env), prog
			return bench.RunFailover(ctx, cfg)
		}
	case "join":
		cfg := bench.DefaultJoinConfig()
		tf = registerTargetFlags(fs, cfg.Target)
		registerChangeFlags(fs, &cfg.ChangeConfig, "join-after", "start node nodes+1 this long after the first due (default a quarter of n/rate)")
		run = func() (bench.Result, error) {
			cfg.Target, cfg.Progress = tf.config(env), prog
			return bench.RunJoin(ctx, cfg)
		}
	case "idle":
		cfg := bench.DefaultIdleConfig()
		tf = registerTargetFlags(fs, cfg.Target)
		fs.DurationVar(&cfg.Settle, "settle", cfg.Settle, "wait this long after every node is ready before measuring")
		fs.DurationVar(&cfg.Duration, "duration", cfg.Duration, "measurement window: CPU time from /proc at its start and end")
		run = func() (bench.Result, error) {
			cfg.Target, cfg.Progress = tf.config(env), prog
			return bench.RunIdle(ctx, cfg)
		}
	case "overload":
		cfg := bench.DefaultOverloadConfig()
		tf = registerTargetFlags(fs, cfg.Target)
		fs.DurationVar(&cfg.Duration, "duration", cfg.Duration, "how long the clients send creates back to back")
		fs.IntVar(&cfg.Concurrency, "concurrency", cfg.Concurrency, "requests in flight (beyond the node's --write-queue it must answer 429)")
		fs.IntVar(&cfg.Batch, "batch", cfg.Batch, "tasks per request (1: POST /v1/tasks, more: POST /v1/tasks:batch)")
		fs.DurationVar(&cfg.Lead, "lead", cfg.Lead, "every acknowledged task is due this long after the overload")
		fs.DurationVar(&cfg.Timeout, "timeout", cfg.Timeout, "how long to wait for the fires after the due time")
		run = func() (bench.Result, error) {
			cfg.Target, cfg.Progress = tf.config(env), prog
			return bench.RunOverload(ctx, cfg)
		}
	case "baseline-http":
		cfg := bench.DefaultHTTPBaselineConfig()
		fs.IntVar(&cfg.Requests, "requests", cfg.Requests, "requests to time")
		fs.IntVar(&cfg.Concurrency, "concurrency", cfg.Concurrency, "requests in flight")
		run = func() (bench.Result, error) {
			cfg.Progress = prog
			return bench.RunHTTPBaseline(ctx, cfg)
		}
	case "baseline-pebble":
		cfg := bench.DefaultPebbleBaselineConfig()
		fs.IntVar(&cfg.Tasks, "n", cfg.Tasks, "task records to write")
		fs.IntVar(&cfg.Batch, "batch", cfg.Batch, "records per synced commit")
		fs.IntVar(&cfg.Concurrency, "concurrency", cfg.Concurrency, "committing goroutines")
		fs.StringVar(&cfg.Dir, "dir", "", "parent `directory` of the temporary store (default $TMPDIR)")
		run = func() (bench.Result, error) {
			cfg.Progress = prog
			return bench.RunPebbleBaseline(ctx, cfg)
		}
	default:
		fmt.Fprint(stderr, benchUsage)
		return fmt.Errorf("bench: unknown workload %q", workload)
	}
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("bench: unexpected argument %q", fs.Arg(0))
	}

	res, err := run()
	if err != nil {
		return fmt.Errorf("bench %s: %w", workload, err)
	}
	paths, err := bench.Save(*out, &res)
	if mdErr := res.WriteMarkdown(stdout); mdErr != nil {
		err = errors.Join(err, mdErr)
	}
	if len(paths) > 0 {
		fmt.Fprintf(stdout, "\nwrote %s\n", strings.Join(paths, ", "))
	}
	return err
}

// registerChangeFlags registers the flags failover and join share; at
// names the flag of ChangeConfig.At.
func registerChangeFlags(fs *flag.FlagSet, cfg *bench.ChangeConfig, at, atUsage string) {
	fs.IntVar(&cfg.N, "n", cfg.N, "one-shot tasks to fire")
	fs.Float64Var(&cfg.Rate, "rate", cfg.Rate, "offered fires per second (dues spread over n/rate seconds)")
	fs.IntVar(&cfg.Stored, "stored", 0, "tasks to create besides, due an hour after the run: they only fill the stores (a change moves them); a sample is read back at the end")
	fs.IntVar(&cfg.Batch, "batch", cfg.Batch, "tasks per create request")
	fs.IntVar(&cfg.Concurrency, "concurrency", cfg.Concurrency, "create requests in flight")
	fs.DurationVar(&cfg.Lead, "lead", 0, "start of creation to first due (default 3s + n/10000 s)")
	fs.DurationVar(&cfg.At, at, 0, atUsage)
	fs.DurationVar(&cfg.Poll, "poll", cfg.Poll, "poll GET /v1/cluster on every node this often while the change spreads")
	fs.DurationVar(&cfg.LateAfter, "late-after", cfg.LateAfter, "a fire arriving more than this after its due counts as late")
	fs.DurationVar(&cfg.Timeout, "timeout", cfg.Timeout, "wait this long after the last due for missing fires (stranded ones never come)")
	fs.DurationVar(&cfg.Settle, "settle", cfg.Settle, "keep listening this long after the last fire, for duplicates")
	fs.BoolVar(&cfg.SkipBaseline, "no-baseline", false, "skip baseline-http")
	fs.IntVar(&cfg.Baseline.Requests, "baseline-requests", cfg.Baseline.Requests, "requests baseline-http times")
	fs.IntVar(&cfg.Baseline.Concurrency, "baseline-concurrency", cfg.Baseline.Concurrency, "baseline-http requests in flight")
}

// benchTargetFlags are the flags that pick the nodes under test.
type benchTargetFlags struct {
	target, chimeBin, token, pids, dataDirs, script string
	ca                                              string
	spawn                                           bool
	nodes, basePort, gossipBasePort                 int
	serveArgs                                       benchArgsFlag
	readyTimeout                                    time.Duration
}

// defaultClusterScript is what --cluster-script=auto looks for, relative
// to the working directory (the repository root).
const defaultClusterScript = "scripts/cluster.sh"

// registerTargetFlags registers the target flags with def's Spawn and
// Nodes as defaults.
func registerTargetFlags(fs *flag.FlagSet, def bench.TargetConfig) *benchTargetFlags {
	tf := &benchTargetFlags{}
	fs.StringVar(&tf.target, "target", "", "`URLs` of running nodes, comma separated: one node or members of one cluster (default $CHIME_ADDR, else "+defaultAddr+")")
	fs.BoolVar(&tf.spawn, "spawn", def.Spawn, "start chime serve processes on free loopback ports with temporary data dirs, stop them at the end")
	fs.IntVar(&tf.nodes, "nodes", max(def.Nodes, 1), "with --spawn: how many nodes; more than 1 forms a cluster")
	fs.StringVar(&tf.script, "cluster-script", "auto", "with --spawn of a cluster: drive this scripts/cluster.sh; auto = "+defaultClusterScript+" if it exists here, empty = start the processes from Go")
	fs.IntVar(&tf.basePort, "base-port", 0, "with --spawn: HTTP port of n1 (nI gets base+I-1; default free ports)")
	fs.IntVar(&tf.gossipBasePort, "gossip-base-port", 0, "with --spawn of a cluster: gossip port of n1 (default free ports)")
	fs.StringVar(&tf.chimeBin, "chime-bin", "", "chime `binary` to spawn (default: go build ./cmd/chime into a temp dir)")
	fs.Var(&tf.serveArgs, "serve-arg", "extra `argument` for every spawned chime serve (repeatable)")
	fs.StringVar(&tf.token, "token", "", "API `token` for --target (default $CHIME_API_TOKEN)")
	fs.StringVar(&tf.ca, "ca", "", "CA bundle `file` (PEM) that signs https --target nodes' certificates (default $CHIME_CA, else the system roots)")
	fs.StringVar(&tf.pids, "pid", "", "process ids of the --target nodes on this machine, comma separated in URL order, to read their CPU and RSS")
	fs.StringVar(&tf.dataDirs, "data-dir", "", "data `directories` of the --target nodes on this machine, comma separated in URL order, for their disk size")
	fs.DurationVar(&tf.readyTimeout, "ready-timeout", 0, "how long to wait for /readyz (default 60s)")
	return tf
}

// config builds the TargetConfig, taking defaults from the environment.
// Malformed --pid entries become -1, which validation refuses.
func (tf *benchTargetFlags) config(env func(string) string) bench.TargetConfig {
	c := bench.TargetConfig{
		URLs:           splitList(tf.target),
		Spawn:          tf.spawn,
		ChimeBin:       tf.chimeBin,
		ServeArgs:      tf.serveArgs,
		Token:          tf.token,
		CAFile:         cmp.Or(tf.ca, env("CHIME_CA")),
		DataDirs:       splitList(tf.dataDirs),
		BasePort:       tf.basePort,
		GossipBasePort: tf.gossipBasePort,
		ReadyTimeout:   tf.readyTimeout,
	}
	if c.Spawn {
		c.Nodes = tf.nodes
		c.ClusterScript = tf.script
		if c.ClusterScript == "auto" {
			c.ClusterScript = ""
			if st, err := os.Stat(defaultClusterScript); err == nil && !st.IsDir() {
				c.ClusterScript = defaultClusterScript
			}
		}
	}
	for _, p := range splitList(tf.pids) {
		n, err := strconv.Atoi(p)
		if err != nil {
			n = -1
		}
		c.PIDs = append(c.PIDs, n)
	}
	if !c.Spawn && len(c.URLs) == 0 {
		u := env("CHIME_ADDR")
		if u == "" {
			u = defaultAddr
		}
		c.URLs = []string{u}
	}
	for i, u := range c.URLs {
		if !strings.Contains(u, "://") {
			c.URLs[i] = "http://" + u
		}
	}
	if c.Token == "" && !c.Spawn {
		c.Token = env("CHIME_API_TOKEN")
	}
	return c
}

// splitList splits a comma-separated flag value, dropping empty items.
func splitList(s string) []string {
	var out []string
	for item := range strings.SplitSeq(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// benchArgsFlag collects a repeatable string flag.
type benchArgsFlag []string

func (a *benchArgsFlag) String() string { return strings.Join(*a, " ") }

func (a *benchArgsFlag) Set(v string) error {
	*a = append(*a, v)
	return nil
}

// isTerminal reports whether w is a character device (a terminal), where
// progress bars can redraw in place.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
