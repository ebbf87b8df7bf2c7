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
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
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
  trigger ID         fire a task once now; its schedule is unchanged
  executions ID      show a task's recent executions, newest first

common flags (any verb, before or after its arguments):
  --addr URL         node to talk to (default $CHIME_ADDR, else ` + defaultAddr + `)
  --token T          API token (default $CHIME_API_TOKEN)
  --json             print the server's JSON answer instead of a table
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
	case "executions":
		return tc.executions(ctx, rest)
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
	fs.StringVar(&cf.addr, "addr", "", "node `URL` or host:port (default $CHIME_ADDR, else "+defaultAddr+")")
	fs.StringVar(&cf.token, "token", "", "API `token`, sent as Authorization: Bearer (default $CHIME_API_TOKEN)")
	fs.StringVar(&cf.ca, "ca", "", "CA bundle `file` (PEM) that signs an https node's certificate (default $CHIME_CA, else the system roots)")
	fs.BoolVar(&cf.json, "json", false, "print the server's JSON answer (indented) instead of a table")
	fs.DurationVar(&cf.timeout, "timeout", 10*time.Second, "per-request timeout, as a `duration`")
}

// isCommonFlag reports whether name is one of the flags commonFlags registers.
func isCommonFlag(name string) bool {
	probe := flag.NewFlagSet("", flag.ContinueOnError)
	(&commonFlags{}).register(probe)
	return probe.Lookup(name) != nil
}

// client builds the HTTP client from the flags, falling back to the
// environment. Defaults from the environment are applied here rather than
// as flag defaults so -h never prints the token.
func (tc *taskCmd) client(cf *commonFlags) (*client, error) {
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
	c, err := newClient(addr, token, cf.timeout)
	if err == nil && ca != "" {
		var tc *tls.Config
		if tc, err = caConfig(ca); err == nil {
			c.hc.Transport = &http.Transport{TLSClientConfig: tc, Proxy: http.ProxyFromEnvironment, ForceAttemptHTTP2: true}
		}
	}
	return c, err
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

// taskPath is the escaped path of one task, plus an optional suffix such as
// "/pause".
func taskPath(id, suffix string) string {
	return "/v1/tasks/" + url.PathEscape(id) + suffix
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
	pos, help, err := parseArgs(fs, args)
	if help || err != nil {
		return err
	}
	id, err := oneID(verb, pos)
	if err != nil {
		return err
	}
	c, err := tc.client(&cf)
	if err != nil {
		return err
	}
	method, path := "POST", taskPath(id, "/"+verb)
	switch verb {
	case "get":
		method, path = "GET", taskPath(id, "")
	case "delete":
		method, path = "DELETE", taskPath(id, "")
	}
	ans, err := c.do(ctx, method, path, nil, nil)
	if err != nil {
		return err
	}
	switch verb {
	case "delete", "trigger":
		if cf.json && len(bytes.TrimSpace(ans.body)) > 0 {
			return tc.printJSON(ans.body)
		}
		done := "deleted"
		if verb == "trigger" {
			done = "triggered"
		}
		return tc.write([]byte(done + " " + id + "\n"))
	default:
		return tc.printTask(&cf, ans.body)
	}
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
	q := url.Values{}
	if setFlags(fs)["limit"] {
		q.Set("limit", strconv.Itoa(*limit))
	}
	ans, err := c.do(ctx, "GET", taskPath(id, "/executions"), q, nil)
	if err != nil {
		return err
	}
	if cf.json {
		return tc.printJSON(ans.body)
	}
	var page struct {
		Executions []execView `json:"executions"`
	}
	if err := decodeAnswer(ans.body, &page); err != nil {
		return err
	}
	var buf bytes.Buffer
	if err := writeExecutions(&buf, page.Executions); err != nil {
		return err
	}
	return tc.write(buf.Bytes())
}

// listPage is one answer of GET /v1/tasks. Tasks stay raw so --json --all
// can pass the server's task objects through unchanged.
type listPage struct {
	Tasks      []json.RawMessage `json:"tasks"`
	NextCursor string            `json:"next_cursor,omitempty"`
}

// list runs `list [--status S] [--label k:v] [--limit N] [--cursor C] [--all]`.
func (tc *taskCmd) list(ctx context.Context, args []string) error {
	fs := tc.newFlagSet("list", "[--status S] [--label k:v] [--limit N] [--cursor C] [--all] [flags]")
	var cf commonFlags
	cf.register(fs)
	status := fs.String("status", "", "only tasks with this `status` (scheduled, paused, done, failed, inactive)")
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

	var tasks []json.RawMessage
	next := *cursor
	seen := map[string]bool{}
	for {
		q := url.Values{}
		if set["status"] {
			q.Set("status", *status)
		}
		if set["label"] {
			q.Set("label", *label)
		}
		if set["limit"] {
			q.Set("limit", strconv.Itoa(*limit))
		}
		if next != "" {
			q.Set("cursor", next)
		}
		ans, err := c.do(ctx, "GET", "/v1/tasks", q, nil)
		if err != nil {
			return err
		}
		var page listPage
		if err := decodeAnswer(ans.body, &page); err != nil {
			return err
		}
		if !*all {
			if cf.json {
				return tc.printJSON(ans.body)
			}
			return tc.printTaskList(page.Tasks, page.NextCursor)
		}
		tasks = append(tasks, page.Tasks...)
		if page.NextCursor == "" {
			break
		}
		if seen[page.NextCursor] {
			return fmt.Errorf("task list --all: server repeated cursor %q; stopping after %d tasks", page.NextCursor, len(tasks))
		}
		seen[page.NextCursor] = true
		next = page.NextCursor
	}
	if cf.json {
		out, err := json.MarshalIndent(listPage{Tasks: append([]json.RawMessage{}, tasks...)}, "", "  ")
		if err != nil {
			return fmt.Errorf("encode merged listing: %w", err)
		}
		return tc.write(append(out, '\n'))
	}
	return tc.printTaskList(tasks, "")
}

// createRequest mirrors the request fields of API.md's task body; fields
// that were not given are omitted so the server applies its defaults.
type createRequest struct {
	ID          string            `json:"id,omitempty"`
	CallbackURL string            `json:"callback_url"`
	DelayMS     *int64            `json:"delay_ms,omitempty"`
	DueAt       string            `json:"due_at,omitempty"`
	EveryMS     *int64            `json:"every_ms,omitempty"`
	Cron        string            `json:"cron,omitempty"`
	Timezone    string            `json:"timezone,omitempty"`
	StartAt     string            `json:"start_at,omitempty"`
	Payload     json.RawMessage   `json:"payload,omitempty"`
	Headers     map[string]string `json:"headers,omitempty"`
	TimeoutMS   *int              `json:"timeout_ms,omitempty"`
	MaxRetries  *int              `json:"max_retries,omitempty"`
	Misfire     string            `json:"misfire,omitempty"`
	MaxFails    *int              `json:"max_fails,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
}

// create runs `create`: from flags, or from --file sent as is.
func (tc *taskCmd) create(ctx context.Context, args []string) error {
	fs := tc.newFlagSet("create", "--url URL (--delay D | --due-at T | --every D | --cron SPEC) [flags]\n       chime task create --file task.json|- [--replace] [flags]")
	var cf commonFlags
	cf.register(fs)
	var (
		req                       createRequest
		delay, every              millisFlag
		payload, file             string
		timeoutMS, retries, fails int
		replace                   bool
		headers, labels           kvFlag
	)
	fs.StringVar(&req.ID, "id", "", "task `ID` (default: the server generates a ULID)")
	fs.StringVar(&req.CallbackURL, "url", "", "callback `URL`, POSTed at each fire (required)")
	fs.Var(&delay, "delay", "one-shot after this `duration` (5s, 1500ms, or a plain integer of ms)")
	fs.StringVar(&req.DueAt, "due-at", "", "one-shot at this RFC 3339 `time`")
	fs.Var(&every, "every", "periodic at this fixed `rate` (duration or ms, ≥ 100ms)")
	fs.StringVar(&req.Cron, "cron", "", "cron `spec`: 5 fields, 6 with seconds first, or @daily-style")
	fs.StringVar(&req.Timezone, "tz", "", "IANA time `zone` for --cron (server default UTC)")
	fs.StringVar(&req.StartAt, "start-at", "", "periodic or cron: no fire before this RFC 3339 `time`")
	fs.StringVar(&payload, "payload", "", "callback body: JSON `text`, @file, or @- for stdin")
	fs.Var(&headers, "header", "extra callback header `k=v` (repeatable)")
	fs.Var(&labels, "label", "label `k=v` for filtering (repeatable)")
	fs.IntVar(&timeoutMS, "timeout-ms", 0, "one callback attempt's timeout in `ms` (server default 5000)")
	fs.IntVar(&retries, "max-retries", 0, "retries of one fire after the first attempt (server default 3)")
	fs.StringVar(&req.Misfire, "misfire", "", "missed periodic fires: fire_once, skip or fire_all (server default fire_once)")
	fs.IntVar(&fails, "max-fails", 0, "periodic or cron: consecutive failed fires before inactive; 0 = never (server default 0)")
	fs.StringVar(&file, "file", "", "send this JSON task `file` as is (- = stdin); other create flags are then not allowed")
	fs.BoolVar(&replace, "replace", false, "PUT /v1/tasks/{id}: create or replace (needs --id, or an id in --file)")
	pos, help, err := parseArgs(fs, args)
	if help || err != nil {
		return err
	}
	if len(pos) > 0 {
		return fmt.Errorf("task create: unexpected argument %q (flags only)", pos[0])
	}
	set := setFlags(fs)

	var body []byte
	if set["file"] {
		for _, name := range slices.Sorted(maps.Keys(set)) {
			if !isCommonFlag(name) && name != "file" && name != "replace" {
				return fmt.Errorf("task create: --%s cannot be combined with --file", name)
			}
		}
		if body, err = tc.readFile(file); err != nil {
			return fmt.Errorf("task create: --file: %w", err)
		}
		if !json.Valid(body) {
			return fmt.Errorf("task create: --file %s is not valid JSON", file)
		}
		if replace {
			var withID struct {
				ID string `json:"id"`
			}
			if err := json.Unmarshal(body, &withID); err != nil || withID.ID == "" {
				return errors.New("task create: --replace with --file needs a string \"id\" in the file")
			}
			req.ID = withID.ID
		}
	} else {
		if err := tc.fillCreate(&req, set, delay, every, payload, headers, labels); err != nil {
			return err
		}
		if set["timeout-ms"] {
			req.TimeoutMS = &timeoutMS
		}
		if set["max-retries"] {
			req.MaxRetries = &retries
		}
		if set["max-fails"] {
			req.MaxFails = &fails
		}
		if replace && req.ID == "" {
			return errors.New("task create: --replace needs --id")
		}
		if body, err = json.Marshal(req); err != nil {
			return fmt.Errorf("task create: encode request: %w", err)
		}
	}

	c, err := tc.client(&cf)
	if err != nil {
		return err
	}
	method, path := "POST", "/v1/tasks"
	if replace {
		method, path = "PUT", taskPath(req.ID, "")
	}
	ans, err := c.do(ctx, method, path, nil, body)
	if err != nil {
		return err
	}
	return tc.printTask(&cf, ans.body)
}

// fillCreate validates the flag-built request: the callback URL, exactly
// one schedule, the RFC 3339 times and the payload. Range checks the server
// makes anyway (every ≥ 100 ms, timeout bounds, misfire names) are left to
// it so the two cannot drift apart.
func (tc *taskCmd) fillCreate(req *createRequest, set map[string]bool, delay, every millisFlag, payload string, headers, labels kvFlag) error {
	if req.CallbackURL == "" {
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
	if set["delay"] {
		req.DelayMS = &delay.ms
	}
	if set["every"] {
		req.EveryMS = &every.ms
	}
	if set["cron"] && strings.TrimSpace(req.Cron) == "" {
		return errors.New("task create: --cron is empty")
	}
	for _, tf := range []struct{ name, value string }{{"due-at", req.DueAt}, {"start-at", req.StartAt}} {
		if set[tf.name] {
			if _, err := time.Parse(time.RFC3339, tf.value); err != nil {
				return fmt.Errorf("task create: --%s %q is not an RFC 3339 time (e.g. 2030-01-02T15:04:05Z)", tf.name, tf.value)
			}
		}
	}
	if set["payload"] {
		data, err := tc.readPayload(payload)
		if err != nil {
			return fmt.Errorf("task create: --payload: %w", err)
		}
		if !json.Valid(data) {
			return fmt.Errorf("task create: --payload is not valid JSON: %s", excerpt(data, 80))
		}
		req.Payload = data
	}
	if len(headers) > 0 {
		req.Headers = headers
	}
	if len(labels) > 0 {
		req.Labels = labels
	}
	return nil
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
func (tc *taskCmd) printTask(cf *commonFlags, body []byte) error {
	if cf.json {
		return tc.printJSON(body)
	}
	var t taskView
	if err := decodeAnswer(body, &t); err != nil {
		return err
	}
	var buf bytes.Buffer
	if err := writeTask(&buf, t); err != nil {
		return err
	}
	return tc.write(buf.Bytes())
}

// printTaskList decodes raw task objects and prints them as a table.
func (tc *taskCmd) printTaskList(raw []json.RawMessage, nextCursor string) error {
	tasks := make([]taskView, len(raw))
	for i, r := range raw {
		if err := decodeAnswer(r, &tasks[i]); err != nil {
			return fmt.Errorf("task %d of the listing: %w", i, err)
		}
	}
	var buf bytes.Buffer
	if err := writeTaskList(&buf, tasks, nextCursor); err != nil {
		return err
	}
	return tc.write(buf.Bytes())
}

// printJSON prints the server's JSON answer indented by two spaces.
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
