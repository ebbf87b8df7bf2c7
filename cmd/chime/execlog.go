package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/chime-scheduler/chime/client"
)

// executionsUsage is printed by `chime executions` and `chime executions -h`.
const executionsUsage = `usage: chime executions list [--status failed|succeeded|all] [--task ID] [--since T] [--until T] [--limit N] [--cursor C] [--all] [flags]

The execution log of the whole cluster, newest first (GET /v1/executions).
Run 'chime executions list -h' for the flags.
`

// runExecutions runs `chime executions list …`. args excludes "executions".
func runExecutions(ctx context.Context, args []string, stdout, stderr io.Writer, env func(string) string) error {
	tc := &taskCmd{stdin: os.Stdin, stdout: stdout, stderr: stderr, env: env}
	return runVerb(ctx, "executions", executionsUsage, args, stderr, map[string]func(context.Context, []string) error{
		"list": tc.execLog,
	})
}

// runVerb runs the verb args[0] of command name with the rest of args,
// or prints usage: for help (no error), for a missing or unknown verb.
func runVerb(ctx context.Context, name, usage string, args []string, stderr io.Writer, verbs map[string]func(context.Context, []string) error) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return fmt.Errorf("%s: missing verb", name)
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stderr, usage)
		return nil
	}
	if run, ok := verbs[args[0]]; ok {
		return run(ctx, args[1:])
	}
	fmt.Fprint(stderr, usage)
	return fmt.Errorf("%s: unknown verb %q", name, args[0])
}

// execLogPage is what `executions list --json` prints.
type execLogPage struct {
	Executions []loggedExecJSON `json:"executions"`
	NextCursor string           `json:"next_cursor,omitempty"`
}

type loggedExecJSON struct {
	TaskID string `json:"task_id"`
	client.Execution
}

func (tc *taskCmd) execLog(ctx context.Context, args []string) error {
	fs := flag2(tc, "executions list", "[--status S] [--task ID] [--since T] [--until T] [--limit N] [--cursor C] [--all] [flags]")
	var cf commonFlags
	cf.register(fs)
	status := fs.String("status", "all", "`failed`, succeeded or all")
	task := fs.String("task", "", "only this task's executions (`ID`)")
	since := fs.String("since", "", "finished at or after this RFC 3339 `time`")
	until := fs.String("until", "", "finished before this RFC 3339 `time`")
	limit := fs.Int("limit", 0, "at most `N` executions per page, 1..1000 (default: the server's, 100)")
	cursor := fs.String("cursor", "", "continue from this `cursor` (a previous next_cursor)")
	all := fs.Bool("all", false, "follow next_cursor until the log is exhausted")
	pos, help, err := parseArgs(fs, args)
	if help || err != nil {
		return err
	}
	if len(pos) > 0 {
		return fmt.Errorf("executions list: unexpected argument %q", pos[0])
	}
	var f client.ExecFilter
	switch *status {
	case "all":
	case "failed", "succeeded":
		f.Status = *status
	default:
		return fmt.Errorf("executions list: --status must be failed, succeeded or all, got %q", *status)
	}
	f.TaskID = *task
	if err := sinceUntilLimit("executions list", *since, *until, *limit, &f.Since, &f.Until); err != nil {
		return err
	}
	f.PageSize = *limit
	c, err := tc.client(&cf)
	if err != nil {
		return err
	}
	var out []client.LoggedExecution
	next := *cursor
	for pages := 0; ; pages++ {
		page, nc, err := c.ExecutionLogPage(ctx, f, next)
		if err != nil {
			return c.fail(err)
		}
		out = append(out, page...)
		if !*all || nc == "" || nc == next {
			next = nc
			break
		}
		next = nc
	}
	if *all {
		next = ""
	}
	page := execLogPage{Executions: []loggedExecJSON{}, NextCursor: next}
	for _, e := range out {
		page.Executions = append(page.Executions, loggedExecJSON{TaskID: e.TaskID, Execution: e.Execution})
	}
	if cf.json {
		return tc.printValue(page)
	}
	var buf bytes.Buffer
	if len(out) == 0 {
		buf.WriteString("no executions\n")
	} else {
		rows := [][]string{{"FINISHED", "TASK", "FIRE ID", "ATTEMPT", "CODE", "ERROR / ANSWER"}}
		for _, e := range out {
			msg := e.Error
			if msg == "" {
				msg = e.Result
			}
			rows = append(rows, []string{
				cell(text(e.FinishedAt.UTC().Format(time.RFC3339Nano))), cell(text(e.TaskID)), cell(text(e.FireID)),
				fmt.Sprint(e.Attempt), cell(nonZero(text(fmt.Sprint(e.StatusCode)))),
				shorten(strings.ReplaceAll(cell(text(msg)), "\n", " "), maxErrorCell),
			})
		}
		if err := writeTable(&buf, rows); err != nil {
			return err
		}
	}
	if next != "" {
		fmt.Fprintf(&buf, "next cursor: %s\n", next)
	}
	return tc.write(buf.Bytes())
}

// flag2 is a flag set for a command other than `task <verb>`.
func flag2(tc *taskCmd, name, synopsis string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(tc.stderr)
	fs.Usage = func() {
		fmt.Fprintf(tc.stderr, "usage: chime %s %s\n\nflags:\n", name, synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// retry runs `task retry ID [ID…]` and `task retry --failed [--label k:v]
// [--limit N] [--cursor C] [--all]`.
func (tc *taskCmd) retry(ctx context.Context, args []string) error {
	fs := tc.newFlagSet("retry", "ID [ID…] | --failed [--label k:v] [--since T] [--until T] [--limit N] [--cursor C] [--all] [flags]")
	var cf commonFlags
	cf.register(fs)
	failed := fs.Bool("failed", false, "retry the failed tasks (of one page, or every page with --all) instead of the IDs given")
	label := fs.String("label", "", "with --failed: only tasks with this label, as `key:value`")
	since := fs.String("since", "", "with --failed: last fire finished at or after this RFC 3339 `time`")
	until := fs.String("until", "", "with --failed: last fire finished before this RFC 3339 `time`")
	limit := fs.Int("limit", 0, "with --failed: tasks looked at per request, 1..1000 (default 100)")
	cursor := fs.String("cursor", "", "with --failed: continue from this `cursor`")
	all := fs.Bool("all", false, "with --failed: follow the cursor until every failed task was looked at")
	pos, help, err := parseArgs(fs, args)
	if help || err != nil {
		return err
	}
	set := setFlags(fs)
	if !*failed {
		for _, n := range []string{"label", "since", "until", "limit", "cursor", "all"} {
			if set[n] {
				return fmt.Errorf("task retry: --%s needs --failed", n)
			}
		}
		if len(pos) == 0 {
			return errors.New("task retry: missing task ID (or --failed)")
		}
		if len(pos) > 1000 {
			return fmt.Errorf("task retry: at most 1000 IDs, got %d", len(pos))
		}
	} else if len(pos) > 0 {
		return fmt.Errorf("task retry: --failed takes no IDs, got %q", pos[0])
	}
	var f client.RetryFilter
	if set["label"] {
		k, v, ok := strings.Cut(*label, ":")
		if !ok || k == "" {
			return fmt.Errorf("task retry: --label must be key:value, got %q", *label)
		}
		f.LabelKey, f.LabelValue = k, v
	}
	if err := sinceUntilLimit("task retry", *since, *until, *limit, &f.Since, &f.Until); err != nil {
		return err
	}
	f.Limit = *limit
	c, err := tc.client(&cf)
	if err != nil {
		return err
	}
	if !*failed && len(pos) == 1 {
		t, err := c.Retry(ctx, pos[0])
		if err != nil {
			return c.fail(err)
		}
		if cf.json {
			return tc.printTask(&cf, t)
		}
		return tc.write([]byte("retried " + pos[0] + "\n"))
	}
	var total client.RetryAnswer
	next := *cursor
	for {
		var ans client.RetryAnswer
		if *failed {
			ans, err = c.RetryFailed(ctx, f, next)
		} else {
			ans, err = c.RetryMany(ctx, pos)
		}
		if err != nil {
			return c.fail(err)
		}
		total.Retried += ans.Retried
		total.Results = append(total.Results, ans.Results...)
		total.More, total.NextCursor = ans.More, ans.NextCursor
		if !*all || !ans.More || ans.NextCursor == next {
			break
		}
		next = ans.NextCursor
	}
	if cf.json {
		return tc.printValue(total)
	}
	var buf bytes.Buffer
	for _, r := range total.Results {
		if r.Err != nil {
			fmt.Fprintf(&buf, "%s: %d %s\n", r.ID, r.Status, r.Err.Message)
		}
	}
	fmt.Fprintf(&buf, "retried %d of %d\n", total.Retried, len(total.Results))
	if total.More {
		fmt.Fprintf(&buf, "more: continue with --cursor %s\n", total.NextCursor)
	}
	return tc.write(buf.Bytes())
}

// sinceUntilLimit parses the --since and --until flags of cmd (RFC 3339,
// empty: unset) into since and until, and checks --limit (0..1000).
func sinceUntilLimit(cmd, sinceFlag, untilFlag string, limit int, since, until *time.Time) error {
	for _, p := range []struct {
		name, v string
		dst     *time.Time
	}{{"since", sinceFlag, since}, {"until", untilFlag, until}} {
		if p.v == "" {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, p.v)
		if err != nil {
			return fmt.Errorf("%s: --%s must be an RFC 3339 time, got %q", cmd, p.name, p.v)
		}
		*p.dst = t
	}
	if limit < 0 || limit > 1000 {
		return fmt.Errorf("%s: --limit must be in 0..1000, got %d", cmd, limit)
	}
	return nil
}
