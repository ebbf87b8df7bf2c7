package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
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
  baseline-http    bare net/http client posting to the receiver: the fire ceiling and the receiver's capacity
  baseline-pebble  bare storage batches committed with sync: the create ceiling

The node under test: --target URL (default $CHIME_ADDR, else ` + defaultAddr + `)
or --spawn (start chime serve on a free loopback port with a temporary data dir).
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
		tf = registerTargetFlags(fs)
		fs.StringVar(&cfg.Mode, "mode", cfg.Mode, "single (POST /v1/tasks) or batch (POST /v1/tasks:batch)")
		fs.IntVar(&cfg.N, "n", cfg.N, "tasks to create")
		fs.IntVar(&cfg.Concurrency, "concurrency", cfg.Concurrency, "requests in flight")
		fs.IntVar(&cfg.Batch, "batch", cfg.Batch, "tasks per batch request")
		fs.BoolVar(&cfg.SkipBaseline, "no-baseline", false, "skip baseline-pebble")
		fs.IntVar(&cfg.BaselineN, "baseline-n", 0, "records baseline-pebble writes (default min(n, 100000))")
		run = func() (bench.Result, error) {
			cfg.Target, cfg.Progress = tf.config(env), prog
			return bench.RunCreate(ctx, cfg)
		}
	case "fire":
		cfg := bench.DefaultFireConfig()
		tf = registerTargetFlags(fs)
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
		run = func() (bench.Result, error) {
			cfg.Target, cfg.Progress = tf.config(env), prog
			return bench.RunFire(ctx, cfg)
		}
	case "periodic":
		cfg := bench.DefaultPeriodicConfig()
		tf = registerTargetFlags(fs)
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
		tf = registerTargetFlags(fs)
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

// benchTargetFlags are the flags that pick the node under test.
type benchTargetFlags struct {
	target, chimeBin, token, dataDir string
	spawn                            bool
	pid                              int
	serveArgs                        benchArgsFlag
	readyTimeout                     time.Duration
}

func registerTargetFlags(fs *flag.FlagSet) *benchTargetFlags {
	tf := &benchTargetFlags{}
	fs.StringVar(&tf.target, "target", "", "`URL` of a running node (default $CHIME_ADDR, else "+defaultAddr+")")
	fs.BoolVar(&tf.spawn, "spawn", false, "start a chime serve on a free loopback port with a temporary data dir, stop it at the end")
	fs.StringVar(&tf.chimeBin, "chime-bin", "", "chime `binary` to spawn (default: go build ./cmd/chime into a temp dir)")
	fs.Var(&tf.serveArgs, "serve-arg", "extra `argument` for the spawned chime serve (repeatable)")
	fs.StringVar(&tf.token, "token", "", "API `token` for --target (default $CHIME_API_TOKEN)")
	fs.IntVar(&tf.pid, "pid", 0, "process id of the --target node on this machine, to read its CPU and RSS")
	fs.StringVar(&tf.dataDir, "data-dir", "", "data `directory` of the --target node on this machine, for its disk size")
	fs.DurationVar(&tf.readyTimeout, "ready-timeout", 0, "how long to wait for /readyz (default 60s)")
	return tf
}

// config builds the TargetConfig, taking defaults from the environment.
func (tf *benchTargetFlags) config(env func(string) string) bench.TargetConfig {
	c := bench.TargetConfig{
		URL:          tf.target,
		Spawn:        tf.spawn,
		ChimeBin:     tf.chimeBin,
		ServeArgs:    tf.serveArgs,
		Token:        tf.token,
		PID:          tf.pid,
		DataDir:      tf.dataDir,
		ReadyTimeout: tf.readyTimeout,
	}
	if !c.Spawn && c.URL == "" {
		c.URL = env("CHIME_ADDR")
		if c.URL == "" {
			c.URL = defaultAddr
		}
		if !strings.Contains(c.URL, "://") {
			c.URL = "http://" + c.URL
		}
	}
	if c.Token == "" && !c.Spawn {
		c.Token = env("CHIME_API_TOKEN")
	}
	return c
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
