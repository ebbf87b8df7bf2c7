package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/chime-scheduler/chime/client"
)

// taskUsage is printed by `chime task`, `chime task -h` and on an unknown verb.
const taskUsage = `usage: chime task <verb> [args] [flags]

verbs:
  create             create a task (--replace: create or replace by id)
  get ID             show one task
  list               list tasks across the cluster
  delete ID          delete a task
  pause ID           pause a task
  resume ID          resume a paused task
  trigger ID [--due-at TIME]
                     fire a task once now; its schedule is unchanged (--due-at: its X-Chime-Due-At)
  backfill ID --from TIME --to TIME
                     fire each occurrence of a periodic task's schedule in the range once, in order
  retry ID [ID…] | --failed
                     fire failed tasks again now (by ID, or every failed one)
  executions ID      show a task's recent executions, newest first
  preview ID | --cron SPEC | --every D
                     show the next fires of a task or a schedule, with DST moves

common flags (any verb, before or after its arguments):
  --addr URL[,URL…]  node to talk to, or seeds of one cluster (default $CHIME_ADDR, else ` + defaultAddr + `)
  --token T          API token (default $CHIME_API_TOKEN)
  --json             print the answer as JSON instead of a table
  --timeout D        per-request timeout (default 10s)

Run 'chime task <verb> -h' for the flags of one verb.
`

// runTask runs `chime task <verb> ...`. args excludes "task". env looks up
// environment variables (os.Getenv in main). It reads stdin only for
// `create --file -` and `--payload @-`.
func runTask(ctx context.Context, args []string, stdout, stderr io.Writer, env func(string) string) error {
	tc := &taskCmd{stdin: os.Stdin, stdout: stdout, stderr: stderr, env: env}
	return tc.run(ctx, args)
}

// taskCmd holds the I/O of one `chime task` invocation, so tests can supply
// stdin as well as stdout, stderr and the environment.
type taskCmd struct {
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	env    func(string) string
}

// run dispatches on the verb.
func (tc *taskCmd) run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		fmt.Fprint(tc.stderr, taskUsage)
		return errors.New("task: missing verb")
	}
	verb, rest := args[0], args[1:]
	switch verb {
	case "-h", "-help", "--help", "help":
		fmt.Fprint(tc.stderr, taskUsage)
		return nil
	case "create":
		return tc.create(ctx, rest)
	case "get", "delete", "pause", "resume", "trigger":
		return tc.oneTask(ctx, verb, rest)
	case "backfill":
		return tc.backfill(ctx, rest)
	case "executions":
		return tc.executions(ctx, rest)
	case "retry":
		return tc.retry(ctx, rest)
	case "preview":
		return tc.preview(ctx, rest)
	case "list":
		return tc.list(ctx, rest)
	default:
		fmt.Fprint(tc.stderr, taskUsage)
		return fmt.Errorf("task: unknown verb %q", verb)
	}
}

// commonFlags are accepted by every verb.
type commonFlags struct {
	addr    string
	token   string
	ca      string
	json    bool
	timeout time.Duration
}

// register adds --addr, --token, --json and --timeout to fs.
func (cf *commonFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&cf.addr, "addr", "", "node `URL` or host:port, or a comma-separated list of seeds of one cluster: a request goes to the task's owner and fails over to the next (default $CHIME_ADDR, else "+defaultAddr+")")
	fs.StringVar(&cf.token, "token", "", "API `token`, sent as Authorization: Bearer (default $CHIME_API_TOKEN)")
	fs.StringVar(&cf.ca, "ca", "", "CA bundle `file` (PEM) that signs an https node's certificate (default $CHIME_CA, else the system roots)")
	fs.BoolVar(&cf.json, "json", false, "print the answer as JSON (indented) instead of a table")
	fs.DurationVar(&cf.timeout, "timeout", 10*time.Second, "per-request timeout, as a `duration`")
}

// isCommonFlag reports whether name is one of the flags commonFlags registers.
func isCommonFlag(name string) bool {
	probe := flag.NewFlagSet("", flag.ContinueOnError)
	(&commonFlags{}).register(probe)
	return probe.Lookup(name) != nil
}

// client builds the SDK client from the flags, falling back to the
// environment. Defaults from the environment are applied here rather than
// as flag defaults so -h never prints the token.
func (tc *taskCmd) client(cf *commonFlags) (*remote, error) {
	addr, token := cf.addr, cf.token
	if addr == "" {
		addr = tc.getenv("CHIME_ADDR")
	}
	if addr == "" {
		addr = defaultAddr
	}
	if token == "" {
		token = tc.getenv("CHIME_API_TOKEN")
	}
	ca := cf.ca
	if ca == "" {
		ca = tc.getenv("CHIME_CA")
	}
	var tlsConf *tls.Config
	if ca != "" {
		var err error
		if tlsConf, err = caConfig(ca); err != nil {
			return nil, err
		}
	}
	return newRemote(addr, token, cf.timeout, tlsConf)
}

func (tc *taskCmd) getenv(key string) string {
	if tc.env == nil {
		return ""
	}
	return tc.env(key)
}

// newFlagSet returns a flag set for one verb whose -h prints synopsis and
// the verb's flags to stderr.
func (tc *taskCmd) newFlagSet(verb, synopsis string) *flag.FlagSet {
	fs := flag.NewFlagSet("task "+verb, flag.ContinueOnError)
	fs.SetOutput(tc.stderr)
	fs.Usage = func() {
		fmt.Fprintf(tc.stderr, "usage: chime task %s %s\n\nflags:\n", verb, synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// commandFlags returns the flag set of a command other than task (export,
// import, backup) with the common flags in cf; its -h prints usage and the
// flags to stderr.
func (tc *taskCmd) commandFlags(name, usage string, cf *commonFlags) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(tc.stderr)
	fs.Usage = func() { fmt.Fprint(tc.stderr, usage); fs.PrintDefaults() }
	cf.register(fs)
	return fs
}

// parseArgs parses flags that may come before, between or after positional
// arguments (`get ID --json`), and returns the positional ones. A "--" ends
// flag parsing; everything after it is positional. It reports help=true
// when -h was given (usage is already printed); other parse errors come
// back as a printedError.
func parseArgs(fs *flag.FlagSet, args []string) (positional []string, help bool, err error) {
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, true, nil
			}
			return nil, false, printedError{fmt.Errorf("%s: %w", fs.Name(), err)}
		}
		rest := fs.Args()
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" && !isFlagValue(fs, args[:consumed]) {
			return append(positional, rest...), false, nil
		}
		if len(rest) == 0 {
			return positional, false, nil
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
}

// printedError is a flag parsing error that the flag package has already
// printed to stderr, followed by the verb's usage. It matches flag.ErrHelp,
// which main takes as "already reported": exit 1 without printing again.
type printedError struct{ err error }

// Error implements error.
func (e printedError) Error() string { return e.err.Error() }

// Unwrap lets errors.Is match both the parse error and flag.ErrHelp.
func (e printedError) Unwrap() []error { return []error{e.err, flag.ErrHelp} }

// isFlagValue reports whether the last element of parsed (a "--") was the
// value of a preceding non-boolean flag written as "-name" "--", rather
// than the end-of-flags marker.
func isFlagValue(fs *flag.FlagSet, parsed []string) bool {
	if len(parsed) < 2 {
		return false
	}
	prev := parsed[len(parsed)-2]
	if !strings.HasPrefix(prev, "-") || strings.Contains(prev, "=") {
		return false
	}
	f := fs.Lookup(strings.TrimLeft(prev, "-"))
	if f == nil {
		return false
	}
	bf, ok := f.Value.(interface{ IsBoolFlag() bool })
	return !ok || !bf.IsBoolFlag()
}

// setFlags returns the names of the flags given on the command line.
func setFlags(fs *flag.FlagSet) map[string]bool {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	return set
}

// oneID checks that exactly one positional argument, a task id, was given.
func oneID(verb string, positional []string) (string, error) {
	switch {
	case len(positional) == 0:
		return "", fmt.Errorf("task %s: missing task ID", verb)
	case len(positional) > 1:
		return "", fmt.Errorf("task %s: unexpected argument %q", verb, positional[1])
	case positional[0] == "":
		return "", fmt.Errorf("task %s: empty task ID", verb)
	}
	return positional[0], nil
}

// oneTask runs get, delete, pause, resume and trigger.
func (tc *taskCmd) oneTask(ctx context.Context, verb string, args []string) error {
	fs := tc.newFlagSet(verb, "ID [flags]")
	var cf commonFlags
	cf.register(fs)
	var dueAt string
	if verb == "trigger" {
		fs.StringVar(&dueAt, "due-at", "", "the fire's logical RFC 3339 `time` (X-Chime-Due-At; default now)")
	}
	pos, help, err := parseArgs(fs, args)
	if help || err != nil {
		return err
	}
	id, err := oneID(verb, pos)
	if err != nil {
		return err
	}
	var due time.Time
	if dueAt != "" {
		if due, err = time.Parse(time.RFC3339Nano, dueAt); err != nil {
			return fmt.Errorf("task trigger: --due-at %q is not an RFC 3339 time (e.g. 2030-01-02T15:04:05Z)", dueAt)
		}
	}
	c, err := tc.client(&cf)
	if err != nil {
		return err
	}
	var t client.Task
	switch verb {
	case "get":
		t, err = c.Get(ctx, id)
	case "delete":
		err = c.Delete(ctx, id)
	case "pause":
		t, err = c.Pause(ctx, id)
	case "resume":
		t, err = c.Resume(ctx, id)
	case "trigger":
		if due.IsZero() {
			t, err = c.Trigger(ctx, id)
		} else {
			t, err = c.TriggerAt(ctx, id, due)
		}
	}
	if err != nil {
		return c.fail(err)
	}
	switch {
	case verb == "delete":
		return tc.write([]byte("deleted " + id + "\n"))
	case verb == "trigger" && !cf.json:
		return tc.write([]byte("triggered " + id + "\n"))
	default:
		return tc.printTask(&cf, t)
	}
}

// backfill runs `backfill ID --from TIME --to TIME`.
func (tc *taskCmd) backfill(ctx context.Context, args []string) error {
	fs := tc.newFlagSet("backfill", "ID --from TIME --to TIME [flags]")
	var cf commonFlags
	cf.register(fs)
	from := fs.String("from", "", "first RFC 3339 `time` of the range (required)")
	to := fs.String("to", "", "last RFC 3339 `time` of the range, inclusive (required)")
	pos, help, err := parseArgs(fs, args)
	if help || err != nil {
		return err
	}
	id, err := oneID("backfill", pos)
	if err != nil {
		return err
	}
	var at [2]time.Time
	for i, v := range []struct{ name, value string }{{"from", *from}, {"to", *to}} {
		if at[i], err = time.Parse(time.RFC3339Nano, v.value); err != nil {
			return fmt.Errorf("task backfill: --%s %q is not an RFC 3339 time (e.g. 2030-01-02T15:04:05Z)", v.name, v.value)
		}
	}
	c, err := tc.client(&cf)
	if err != nil {
		return err
	}
	res, err := c.Backfill(ctx, id, at[0], at[1])
	if err != nil {
		return c.fail(err)
	}
	if cf.json {
		out, err := json.Marshal(map[string]any{"queued": res.Queued, "first": res.First, "last": res.Last})
		if err != nil {
			return err
		}
		return tc.write(append(out, '\n'))
	}
	if res.Queued == 0 {
		return tc.write([]byte("backfill " + id + ": no occurrence in the range\n"))
	}
	return tc.write(fmt.Appendf(nil, "backfill %s: %d fires queued, %s to %s\n", id, res.Queued,
		res.First.UTC().Format(time.RFC3339Nano), res.Last.UTC().Format(time.RFC3339Nano)))
}

// executions runs `executions ID [--limit N]`.
func (tc *taskCmd) executions(ctx context.Context, args []string) error {
	fs := tc.newFlagSet("executions", "ID [--limit N] [flags]")
	var cf commonFlags
	cf.register(fs)
	limit := fs.Int("limit", 0, "at most `N` records (default: the server's)")
	pos, help, err := parseArgs(fs, args)
	if help || err != nil {
		return err
	}
	id, err := oneID("executions", pos)
	if err != nil {
		return err
	}
	if *limit < 0 {
		return fmt.Errorf("task executions: --limit must be ≥ 0, got %d", *limit)
	}
	c, err := tc.client(&cf)
	if err != nil {
		return err
	}
	execs, err := c.Executions(ctx, id, *limit)
	if err != nil {
		return c.fail(err)
	}
	// The table reads the answer's JSON shape, as --json prints it.
	answer, err := json.Marshal(struct {
		Executions []client.Execution `json:"executions"`
	}{execs})
	if err != nil {
		return err
	}
	if cf.json {
		return tc.printJSON(answer)
	}
	var page struct {
		Executions []execView `json:"executions"`
	}
	if err := decodeAnswer(answer, &page); err != nil {
		return err
	}
	var buf bytes.Buffer
	if err := writeExecutions(&buf, page.Executions); err != nil {
		return err
	}
	return tc.write(buf.Bytes())
}

// listPage is what list --json prints: an answer of GET /v1/tasks, or
// with --all the tasks of all of them.
type listPage struct {
	Tasks      []client.Task `json:"tasks"`
	NextCursor string        `json:"next_cursor,omitempty"`
}

// list runs `list [--status S] [--label k:v] [--limit N] [--cursor C] [--all]`.
func (tc *taskCmd) list(ctx context.Context, args []string) error {
	fs := tc.newFlagSet("list", "[--status S] [--label k:v] [--limit N] [--cursor C] [--all] [flags]")
	var cf commonFlags
	cf.register(fs)
	status := fs.String("status", "", "only tasks with this `status` (scheduled, paused, awaiting_ack, done, failed, inactive, completed)")
	label := fs.String("label", "", "only tasks with this label, as `key:value`")
	limit := fs.Int("limit", 0, "at most `N` tasks per page (default: the server's)")
	cursor := fs.String("cursor", "", "continue from this `cursor` (a previous next_cursor)")
	all := fs.Bool("all", false, "follow next_cursor until the listing is exhausted")
	pos, help, err := parseArgs(fs, args)
	if help || err != nil {
		return err
	}
	if len(pos) > 0 {
		return fmt.Errorf("task list: unexpected argument %q", pos[0])
	}
	set := setFlags(fs)
	if set["label"] {
		if k, _, ok := strings.Cut(*label, ":"); !ok || k == "" {
			return fmt.Errorf("task list: --label must be key:value, got %q", *label)
		}
	}
	if *limit < 0 {
		return fmt.Errorf("task list: --limit must be ≥ 0, got %d", *limit)
	}
	c, err := tc.client(&cf)
	if err != nil {
		return err
	}

	var filter client.ListFilter
	if set["status"] {
		filter.Status = client.Status(*status)
	}
	if set["label"] {
		filter.LabelKey, filter.LabelValue, _ = strings.Cut(*label, ":")
	}
	filter.PageSize = *limit
	tasks := []client.Task{}
	next := *cursor
	seen := map[string]bool{}
	for {
		page, nextCursor, err := c.ListPage(ctx, filter, next)
		if err != nil {
			return c.fail(err)
		}
		if !*all {
			if cf.json {
				return tc.printValue(listPage{Tasks: append(tasks, page...), NextCursor: nextCursor})
			}
			return tc.printTaskList(page, nextCursor)
		}
		tasks = append(tasks, page...)
		if nextCursor == "" {
			break
		}
		if seen[nextCursor] {
			return fmt.Errorf("task list --all: server repeated cursor %q; stopping after %d tasks", nextCursor, len(tasks))
		}
		seen[nextCursor] = true
		next = nextCursor
	}
	if cf.json {
		return tc.printValue(listPage{Tasks: tasks})
	}
	return tc.printTaskList(tasks, "")
}

// createFlags are the create flags that do not map one to one onto a
// client.Task field.
type createFlags struct {
	delay, every              millisFlag
	dueAt, startAt, endAt     string
	maxRuns                   int
	maxCatchup                int
	retention                 time.Duration
	misfire                   string
	gap, overlap              string
	payload                   string
	timeoutMS, retries, fails int
	headers, labels           kvFlag
	ackDelay                  millisFlag
	ackRetries                int
}

// create runs `create`: from flags, or from --file.
func (tc *taskCmd) create(ctx context.Context, args []string) error {
	fs := tc.newFlagSet("create", "--url URL (--delay D | --due-at T | --every D | --cron SPEC) [flags]\n       chime task create --file task.json|- [--replace] [flags]")
	var cf commonFlags
	cf.register(fs)
	var (
		t       client.Task
		f       createFlags
		file    string
		replace bool
	)
	fs.StringVar(&t.ID, "id", "", "task `ID` (default: the server generates a ULID)")
	fs.StringVar(&t.CallbackURL, "url", "", "callback `URL`, POSTed at each fire (required)")
	fs.StringVar(&t.SuccessURL, "success-url", "", "result callback `URL`: POSTed a summary of each fire that succeeds")
	fs.StringVar(&t.FailureURL, "failure-url", "", "result callback `URL`: POSTed a summary of each fire that fails (after its retries)")
	fs.Var(&f.delay, "delay", "one-shot after this `duration` (5s, 1500ms, or a plain integer of ms)")
	fs.StringVar(&f.dueAt, "due-at", "", "one-shot at this RFC 3339 `time`")
	fs.Var(&f.every, "every", "periodic at this fixed `rate` (duration or ms, ≥ 100ms)")
	fs.StringVar(&t.Cron, "cron", "", "cron `spec`: 5 fields, 6 with seconds first, or @daily-style")
	fs.StringVar(&t.Timezone, "tz", "", "IANA time `zone` for --cron (server default UTC)")
	fs.StringVar(&f.startAt, "start-at", "", "periodic or cron: no fire before this RFC 3339 `time`")
	fs.StringVar(&f.endAt, "end-at", "", "periodic or cron: no fire due after this RFC 3339 `time` (one due exactly then fires); then the task is completed")
	fs.IntVar(&f.maxRuns, "max-runs", 0, "periodic or cron: completed after this many scheduled fires (`n` ≥ 1; triggers not counted)")
	fs.IntVar(&f.maxCatchup, "max-catchup", 0, "periodic or cron: misfire fire_all fires at most the `n` most recent missed occurrences, and a backfill at most n (server default 100)")
	fs.DurationVar(&f.retention, "retention", 0, "keep the task this `duration` (e.g. 72h) once done, failed, inactive or completed, then delete it with its executions; 0 = forever (server default: its --retention, 7 days)")
	fs.StringVar(&f.payload, "payload", "", "callback body: JSON `text`, @file, or @- for stdin")
	fs.Var(&f.headers, "header", "extra callback header `k=v` (repeatable)")
	fs.Var(&f.labels, "label", "label `k=v` for filtering (repeatable)")
	fs.IntVar(&f.timeoutMS, "timeout-ms", 0, "one callback attempt's timeout in `ms` (server default 5000)")
	fs.IntVar(&f.retries, "max-retries", 0, "retries of one fire after the first attempt (server default 3)")
	fs.StringVar(&f.misfire, "misfire", "", "missed periodic fires: fire_once, skip or fire_all (server default fire_once)")
	fs.IntVar(&f.fails, "max-fails", 0, "periodic or cron: consecutive failed fires before inactive; 0 = never (server default 0)")
	fs.StringVar(&f.gap, "gap", "", "cron: a local time that does not exist (spring forward): shift or skip (server default shift)")
	fs.StringVar(&f.overlap, "overlap", "", "cron: a local time that occurs twice (fall back): first or both (server default first)")
	fs.StringVar(&t.AckURL, "ack-url", "", "one-shot: after the callback's 2xx, POST this `URL` (same body, X-Chime-Ack: 1); the task is done on its 2xx, failed (reason ack) after --ack-retries")
	fs.Var(&f.ackDelay, "ack-delay", "with --ack-url: wait this `duration` after the callback's 2xx (duration or ms, ≤ 1h; server default 1s)")
	fs.IntVar(&f.ackRetries, "ack-retries", 0, "with --ack-url: retries of the ACK after its first attempt (≤ 100; server default 3)")
	fs.StringVar(&t.FlowKey, "flow-key", "", "flow `key`: the fires wait for the limits chime flow put KEY gives the key; --id, if given, must have the key as its hash tag ({key}…)")
	fs.StringVar(&file, "file", "", "read the task from this JSON `file` (- = stdin), in the API's request shape; other create flags are then not allowed")
	fs.BoolVar(&replace, "replace", false, "PUT /v1/tasks/{id}: create or replace (needs --id, or an id in --file)")
	pos, help, err := parseArgs(fs, args)
	if help || err != nil {
		return err
	}
	if len(pos) > 0 {
		return fmt.Errorf("task create: unexpected argument %q (flags only)", pos[0])
	}
	set := setFlags(fs)

	if set["file"] {
		for _, name := range slices.Sorted(maps.Keys(set)) {
			if !isCommonFlag(name) && name != "file" && name != "replace" {
				return fmt.Errorf("task create: --%s cannot be combined with --file", name)
			}
		}
		body, err := tc.readFile(file)
		if err != nil {
			return fmt.Errorf("task create: --file: %w", err)
		}
		if !json.Valid(body) {
			return fmt.Errorf("task create: --file %s is not valid JSON", file)
		}
		if t, err = client.ParseTask(body); err != nil {
			return fmt.Errorf("task create: --file %s: %w", file, err)
		}
		if replace && t.ID == "" {
			return errors.New("task create: --replace with --file needs a string \"id\" in the file")
		}
	} else {
		if err := tc.fillCreate(&t, set, &f); err != nil {
			return err
		}
		if replace && t.ID == "" {
			return errors.New("task create: --replace needs --id")
		}
	}

	c, err := tc.client(&cf)
	if err != nil {
		return err
	}
	if replace {
		t, _, err = c.Put(ctx, t)
	} else {
		t, err = c.Create(ctx, t)
	}
	if err != nil {
		return c.fail(err)
	}
	return tc.printTask(&cf, t)
}

// fillCreate fills t from the create flags and validates them: the
// callback URL, exactly one schedule, the RFC 3339 times and the payload.
// Range checks the server makes anyway (every ≥ 100 ms, timeout bounds,
// misfire names) are left to it so the two cannot drift apart.
func (tc *taskCmd) fillCreate(t *client.Task, set map[string]bool, f *createFlags) error {
	if t.CallbackURL == "" {
		return errors.New("task create: --url is required")
	}
	var given []string
	for _, name := range []string{"delay", "due-at", "every", "cron"} { // exactly one must be set
		if set[name] {
			given = append(given, "--"+name)
		}
	}
	switch len(given) {
	case 0:
		return errors.New("task create: one of --delay, --due-at, --every, --cron is required")
	case 1:
	default:
		return fmt.Errorf("task create: only one schedule may be given, got %s", strings.Join(given, " and "))
	}
	t.Delay = time.Duration(f.delay.ms) * time.Millisecond
	t.Every = time.Duration(f.every.ms) * time.Millisecond
	if set["every"] && t.Every == 0 {
		// A task without a schedule is a one-shot due now.
		return errors.New("task create: --every must be positive")
	}
	if set["cron"] && strings.TrimSpace(t.Cron) == "" {
		return errors.New("task create: --cron is empty")
	}
	for _, tf := range []struct {
		name, value string
		to          *time.Time
	}{{"due-at", f.dueAt, &t.DueAt}, {"start-at", f.startAt, &t.StartAt}, {"end-at", f.endAt, &t.EndAt}} {
		if set[tf.name] {
			at, err := time.Parse(time.RFC3339, tf.value)
			if err != nil {
				return fmt.Errorf("task create: --%s %q is not an RFC 3339 time (e.g. 2030-01-02T15:04:05Z)", tf.name, tf.value)
			}
			*tf.to = at
		}
	}
	if set["payload"] {
		data, err := tc.readPayload(f.payload)
		if err != nil {
			return fmt.Errorf("task create: --payload: %w", err)
		}
		if !json.Valid(data) {
			return fmt.Errorf("task create: --payload is not valid JSON: %s", excerpt(data, 80))
		}
		t.Payload = data
	}
	if len(f.headers) > 0 {
		t.Headers = f.headers
	}
	if len(f.labels) > 0 {
		t.Labels = f.labels
	}
	t.Timeout = time.Duration(f.timeoutMS) * time.Millisecond
	if set["max-retries"] {
		t.MaxRetries = &f.retries
	}
	t.Misfire = client.Misfire(f.misfire)
	t.MaxFails = f.fails
	if set["max-runs"] {
		if f.maxRuns < 1 {
			// 0 would be sent as "no limit".
			return fmt.Errorf("task create: --max-runs must be at least 1, got %d", f.maxRuns)
		}
		t.MaxRuns = f.maxRuns
	}
	if set["max-catchup"] {
		if f.maxCatchup < 1 {
			// 0 would be sent as "the default".
			return fmt.Errorf("task create: --max-catchup must be at least 1, got %d", f.maxCatchup)
		}
		t.MaxCatchup = f.maxCatchup
	}
	if set["retention"] {
		if f.retention < 0 || f.retention%time.Millisecond != 0 {
			return fmt.Errorf("task create: --retention must be a whole number of milliseconds, 0 or more, got %v", f.retention)
		}
		t.Retention = &f.retention
	}
	if set["gap"] || set["overlap"] {
		t.DST = &client.DST{Gap: client.DSTGap(f.gap), Overlap: client.DSTOverlap(f.overlap)}
	}
	if set["ack-delay"] {
		d := time.Duration(f.ackDelay.ms) * time.Millisecond
		t.AckDelay = &d
	}
	if set["ack-retries"] {
		t.AckRetries = &f.ackRetries
	}
	return nil
}

// preview runs `preview ID [--n N]` and `preview (--cron SPEC | --every D)
// [--tz Z] [--gap G] [--overlap O] [--start-at T] [--end-at T] [--n N]`.
func (tc *taskCmd) preview(ctx context.Context, args []string) error {
	fs := tc.newFlagSet("preview", "ID [--n N] [flags]\n       chime task preview (--cron SPEC [--tz Z] [--gap shift|skip] [--overlap first|both] | --every D) [--start-at T] [--end-at T] [--n N] [flags]")
	var cf commonFlags
	cf.register(fs)
	var (
		s              client.ScheduleSpec
		every          millisFlag
		startAt, endAt string
		gap, overlap   string
	)
	fs.IntVar(&s.N, "n", 0, "how many fires, 1 to 1000 (server default 10)")
	fs.StringVar(&s.Cron, "cron", "", "cron `spec` to preview instead of a task")
	fs.Var(&every, "every", "fixed `rate` to preview instead of a task (duration or ms)")
	fs.StringVar(&s.Timezone, "tz", "", "IANA time `zone` for --cron (default UTC)")
	fs.StringVar(&s.Timezone, "timezone", "", "same as --tz")
	fs.StringVar(&gap, "gap", "", "--cron: a local time that does not exist: shift or skip (default shift)")
	fs.StringVar(&overlap, "overlap", "", "--cron: a local time that occurs twice: first or both (default first)")
	fs.StringVar(&startAt, "start-at", "", "first fire at or after this RFC 3339 `time` (default now)")
	fs.StringVar(&endAt, "end-at", "", "only fires before this RFC 3339 `time`")
	pos, help, err := parseArgs(fs, args)
	if help || err != nil {
		return err
	}
	set := setFlags(fs)
	if s.N < 0 {
		return fmt.Errorf("task preview: --n must be ≥ 0, got %d", s.N)
	}
	var scheduleFlags []string
	for _, name := range []string{"cron", "every", "tz", "timezone", "gap", "overlap", "start-at", "end-at"} {
		if set[name] {
			scheduleFlags = append(scheduleFlags, "--"+name)
		}
	}
	var (
		p   *client.Preview
		c   *remote
		ask func() (*client.Preview, error)
	)
	switch {
	case len(pos) > 0:
		id, err := oneID("preview", pos)
		if err != nil {
			return err
		}
		if len(scheduleFlags) > 0 {
			return fmt.Errorf("task preview: %s previews a schedule, not task %s; give one or the other", scheduleFlags[0], id)
		}
		ask = func() (*client.Preview, error) { return c.PreviewTask(ctx, id, s.N) }
	case set["cron"] == set["every"]:
		return errors.New("task preview: give a task ID, or exactly one of --cron and --every")
	default:
		s.Every = time.Duration(every.ms) * time.Millisecond
		if set["gap"] || set["overlap"] {
			s.DST = &client.DST{Gap: client.DSTGap(gap), Overlap: client.DSTOverlap(overlap)}
		}
		for _, tf := range []struct {
			name, value string
			to          *time.Time
		}{{"start-at", startAt, &s.StartAt}, {"end-at", endAt, &s.EndAt}} {
			if set[tf.name] {
				at, err := time.Parse(time.RFC3339, tf.value)
				if err != nil {
					return fmt.Errorf("task preview: --%s %q is not an RFC 3339 time (e.g. 2030-01-02T15:04:05Z)", tf.name, tf.value)
				}
				*tf.to = at
			}
		}
		ask = func() (*client.Preview, error) { return c.PreviewSchedule(ctx, s) }
	}
	if c, err = tc.client(&cf); err != nil {
		return err
	}
	if p, err = ask(); err != nil {
		return c.fail(err)
	}
	if cf.json {
		return tc.printValue(p)
	}
	var buf bytes.Buffer
	if err := writePreview(&buf, p); err != nil {
		return err
	}
	return tc.write(buf.Bytes())
}

// readPayload reads a --payload value: "@-" is stdin, "@path" a file, and
// anything else the JSON text itself.
func (tc *taskCmd) readPayload(v string) ([]byte, error) {
	if name, ok := strings.CutPrefix(v, "@"); ok {
		return tc.readFile(name)
	}
	return []byte(v), nil
}

// readFile reads the file at path, or stdin when path is "-".
func (tc *taskCmd) readFile(path string) ([]byte, error) {
	if path == "-" {
		return io.ReadAll(tc.stdin)
	}
	return os.ReadFile(path)
}

// decodeAnswer decodes a 2xx JSON answer, turning odd output into an error
// that quotes the start of what the server sent.
func decodeAnswer(body []byte, v any) error {
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("unexpected answer from server (%v): %s", err, excerpt(body, 120))
	}
	return nil
}

// printTask prints a task answer as JSON or as a vertical table.
func (tc *taskCmd) printTask(cf *commonFlags, t client.Task) error {
	body, err := json.Marshal(t)
	if err != nil {
		return err
	}
	if cf.json {
		return tc.printJSON(body)
	}
	var v taskView
	if err := decodeAnswer(body, &v); err != nil {
		return err
	}
	var buf bytes.Buffer
	if err := writeTask(&buf, v); err != nil {
		return err
	}
	return tc.write(buf.Bytes())
}

// printTaskList prints tasks as a table.
func (tc *taskCmd) printTaskList(tasks []client.Task, nextCursor string) error {
	views := make([]taskView, len(tasks))
	for i, t := range tasks {
		body, err := json.Marshal(t)
		if err == nil {
			err = decodeAnswer(body, &views[i])
		}
		if err != nil {
			return fmt.Errorf("task %d of the listing: %w", i, err)
		}
	}
	var buf bytes.Buffer
	if err := writeTaskList(&buf, views, nextCursor); err != nil {
		return err
	}
	return tc.write(buf.Bytes())
}

// printValue prints v as indented JSON.
func (tc *taskCmd) printValue(v any) error {
	body, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return tc.printJSON(body)
}

// printJSON prints a JSON answer (the node's, or the SDK's rendering of it)
// indented by two spaces.
func (tc *taskCmd) printJSON(body []byte) error {
	var buf bytes.Buffer
	if err := json.Indent(&buf, bytes.TrimSpace(body), "", "  "); err != nil {
		return fmt.Errorf("server answered with invalid JSON (%v): %s", err, excerpt(body, 120))
	}
	buf.WriteByte('\n')
	return tc.write(buf.Bytes())
}

// write sends finished output to stdout in one call.
func (tc *taskCmd) write(b []byte) error {
	_, err := tc.stdout.Write(b)
	return err
}

// millisFlag is a flag.Value for a non-negative whole number of
// milliseconds, written as a Go duration ("5s", "1500ms") or a plain
// integer meaning milliseconds.
type millisFlag struct{ ms int64 }

// String implements flag.Value.
func (m *millisFlag) String() string {
	if m == nil || m.ms == 0 {
		return ""
	}
	return strconv.FormatInt(m.ms, 10)
}

// Set implements flag.Value.
func (m *millisFlag) Set(s string) error {
	ms, err := parseMillis(s)
	if err != nil {
		return err
	}
	m.ms = ms
	return nil
}

// parseMillis parses a Go duration or a plain integer of milliseconds into
// a non-negative millisecond count. Sub-millisecond precision is refused
// rather than silently truncated.
func parseMillis(s string) (int64, error) {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		if n < 0 {
			return 0, fmt.Errorf("negative duration %q", s)
		}
		return n, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is neither a duration (5s, 1500ms) nor an integer of milliseconds", s)
	}
	if d < 0 {
		return 0, fmt.Errorf("negative duration %q", s)
	}
	if d%time.Millisecond != 0 {
		return 0, fmt.Errorf("duration %q is not a whole number of milliseconds", s)
	}
	return d.Milliseconds(), nil
}

// kvFlag is a repeatable flag.Value collecting "k=v" pairs. A key given
// twice is an error rather than a silent overwrite.
type kvFlag map[string]string

// String implements flag.Value; pairs are listed in key order.
func (f *kvFlag) String() string {
	if f == nil || *f == nil {
		return ""
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(*f)) {
		parts = append(parts, k+"="+(*f)[k])
	}
	return strings.Join(parts, ",")
}

// Set implements flag.Value.
func (f *kvFlag) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("%q is not k=v", s)
	}
	if *f == nil {
		*f = kvFlag{}
	}
	if _, dup := (*f)[k]; dup {
		return fmt.Errorf("key %q given twice", k)
	}
	(*f)[k] = v
	return nil
}
