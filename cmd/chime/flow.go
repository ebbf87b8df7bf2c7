package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/chime-scheduler/chime/client"
)

// flowUsage is printed by `chime flow` and `chime flow -h`.
const flowUsage = `usage: chime flow <verb> [args] [flags]

A flow key's limits, shared by the tasks created with that --flow-key
(docs/API.md "Flow keys").

verbs:
  put KEY [--rate N --period D] [--parallelism M]
              create or replace the key's limits (a limit left out is removed)
  get KEY     show the key's limits and its limiter's state on the owner
  list        list the flow keys of the cluster, in (slot, key) order
  delete KEY  remove the key's limits (its held fires go at once)

The common flags of 'chime task' apply (--addr, --token, --ca, --json,
--timeout). Run 'chime flow <verb> -h' for the flags of one verb.
`

// runFlow runs `chime flow <verb> …`. args excludes "flow".
func runFlow(ctx context.Context, args []string, stdout, stderr io.Writer, env func(string) string) error {
	tc := &taskCmd{stdin: os.Stdin, stdout: stdout, stderr: stderr, env: env}
	return runVerb(ctx, "flow", flowUsage, args, stderr, map[string]func(context.Context, []string) error{
		"put":    tc.flowPut,
		"get":    func(ctx context.Context, args []string) error { return tc.oneFlow(ctx, "get", args) },
		"delete": func(ctx context.Context, args []string) error { return tc.oneFlow(ctx, "delete", args) },
		"list":   tc.flowList,
	})
}

// flowKeyArg checks that exactly one positional argument, a flow key, was
// given (the SDK checks the key itself, before any request).
func flowKeyArg(verb string, pos []string) (string, error) {
	switch {
	case len(pos) == 0:
		return "", fmt.Errorf("flow %s: missing flow key", verb)
	case len(pos) > 1:
		return "", fmt.Errorf("flow %s: unexpected argument %q", verb, pos[1])
	}
	return pos[0], nil
}

// flowPut runs `flow put KEY [--rate N --period D] [--parallelism M]`.
func (tc *taskCmd) flowPut(ctx context.Context, args []string) error {
	fs := flag2(tc, "flow put", "KEY [--rate N --period D] [--parallelism M] [flags]")
	var cf commonFlags
	cf.register(fs)
	rate := fs.Int("rate", 0, "at most `N` callback attempts of the key start per --period, 1..100000")
	var period millisFlag
	fs.Var(&period, "period", "the rate's window, a `duration` (1s, 500ms, or an integer of milliseconds), up to 24h")
	parallelism := fs.Int("parallelism", 0, "at most `M` callbacks of the key in flight at once, 1..100000")
	pos, help, err := parseArgs(fs, args)
	if help || err != nil {
		return err
	}
	key, err := flowKeyArg("put", pos)
	if err != nil {
		return err
	}
	set := setFlags(fs)
	switch {
	case set["rate"] != set["period"]:
		return errors.New("flow put: --rate and --period go together")
	case !set["rate"] && !set["parallelism"]:
		return errors.New("flow put: give a limit: --rate with --period, --parallelism, or both")
	case set["rate"] && (*rate < 1 || period.ms < 1):
		return fmt.Errorf("flow put: --rate and --period must be positive, got %d per %dms", *rate, period.ms)
	case set["parallelism"] && *parallelism < 1:
		return fmt.Errorf("flow put: --parallelism must be positive, got %d", *parallelism)
	}
	c, err := tc.client(&cf)
	if err != nil {
		return err
	}
	l := client.FlowLimits{Rate: *rate, Period: time.Duration(period.ms) * time.Millisecond, Parallelism: *parallelism}
	f, created, err := c.PutFlow(ctx, key, l)
	if err != nil {
		return c.fail(err)
	}
	if cf.json {
		return tc.printValue(f)
	}
	verb := "replaced"
	if created {
		verb = "created"
	}
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "%s flow %s\n", verb, cell(text(f.Key)))
	if err := writeFlow(&buf, f); err != nil {
		return err
	}
	return tc.write(buf.Bytes())
}

// oneFlow runs `flow get KEY` and `flow delete KEY`.
func (tc *taskCmd) oneFlow(ctx context.Context, verb string, args []string) error {
	fs := flag2(tc, "flow "+verb, "KEY [flags]")
	var cf commonFlags
	cf.register(fs)
	pos, help, err := parseArgs(fs, args)
	if help || err != nil {
		return err
	}
	key, err := flowKeyArg(verb, pos)
	if err != nil {
		return err
	}
	c, err := tc.client(&cf)
	if err != nil {
		return err
	}
	if verb == "delete" {
		if err := c.DeleteFlow(ctx, key); err != nil {
			return c.fail(err)
		}
		return tc.write([]byte("deleted flow " + key + "\n"))
	}
	f, err := c.GetFlow(ctx, key)
	if err != nil {
		return c.fail(err)
	}
	if cf.json {
		return tc.printValue(f)
	}
	var buf bytes.Buffer
	if err := writeFlow(&buf, f); err != nil {
		return err
	}
	return tc.write(buf.Bytes())
}

// flowPage is what `flow list --json` prints: an answer of GET /v1/flows,
// or with --all the flows of all of them.
type flowPage struct {
	Flows      []client.Flow `json:"flows"`
	NextCursor string        `json:"next_cursor,omitempty"`
}

// flowList runs `flow list [--limit N] [--cursor C] [--all]`.
func (tc *taskCmd) flowList(ctx context.Context, args []string) error {
	fs := flag2(tc, "flow list", "[--limit N] [--cursor C] [--all] [flags]")
	var cf commonFlags
	cf.register(fs)
	limit := fs.Int("limit", 0, "at most `N` flows per page, 1..1000 (default: the server's, 100)")
	cursor := fs.String("cursor", "", "continue from this `cursor` (a previous next_cursor)")
	all := fs.Bool("all", false, "follow next_cursor until the listing is exhausted")
	pos, help, err := parseArgs(fs, args)
	if help || err != nil {
		return err
	}
	if len(pos) > 0 {
		return fmt.Errorf("flow list: unexpected argument %q", pos[0])
	}
	if *limit < 0 || *limit > 1000 {
		return fmt.Errorf("flow list: --limit must be in 0..1000, got %d", *limit)
	}
	c, err := tc.client(&cf)
	if err != nil {
		return err
	}
	page := flowPage{Flows: []client.Flow{}}
	next := *cursor
	seen := map[string]bool{}
	for {
		flows, nc, err := c.FlowsPage(ctx, *limit, next)
		if err != nil {
			return c.fail(err)
		}
		page.Flows = append(page.Flows, flows...)
		if !*all {
			page.NextCursor = nc
			break
		}
		if nc == "" {
			break
		}
		if seen[nc] {
			return fmt.Errorf("flow list --all: server repeated cursor %q; stopping after %d flows", nc, len(page.Flows))
		}
		seen[nc] = true
		next = nc
	}
	if cf.json {
		return tc.printValue(page)
	}
	var buf bytes.Buffer
	if len(page.Flows) == 0 {
		buf.WriteString("no flows\n")
	} else {
		rows := [][]string{{"KEY", "RATE", "PARALLELISM", "SLOT", "OWNER", "UPDATED"}}
		for _, f := range page.Flows {
			rows = append(rows, []string{cell(text(f.Key)), cell(text(rateText(f.FlowLimits))), cell(text(parallelismText(f.FlowLimits))),
				strconv.Itoa(int(f.Slot)), cell(text(f.Owner)), cell(text(instantText(f.UpdatedAt)))})
		}
		if err := writeTable(&buf, rows); err != nil {
			return err
		}
	}
	if page.NextCursor != "" {
		fmt.Fprintf(&buf, "next cursor: %s\n", cell(text(page.NextCursor)))
	}
	return tc.write(buf.Bytes())
}

// writeFlow renders one flow as a vertical table, its state when it has
// one.
func writeFlow(buf *bytes.Buffer, f client.Flow) error {
	rows := [][]string{
		{"key", cell(text(f.Key))},
		{"rate", cell(text(rateText(f.FlowLimits)))},
		{"parallelism", cell(text(parallelismText(f.FlowLimits)))},
		{"slot", strconv.Itoa(int(f.Slot))},
		{"owner", cell(text(f.Owner))},
		{"created", cell(text(instantText(f.CreatedAt)))},
		{"updated", cell(text(instantText(f.UpdatedAt)))},
	}
	if s := f.State; s != nil {
		rows = append(rows,
			[]string{"in flight", strconv.Itoa(s.InFlight)},
			[]string{"rate count", strconv.Itoa(s.RateCount)},
			[]string{"waiting", strconv.Itoa(s.Waiting)},
			[]string{"oldest waiting due", cell(text(instantText(s.OldestWaitingDue)))})
	}
	return writeTable(buf, rows)
}

// rateText is a flow's rate limit, "10 per 1s", or "" when it has none.
func rateText(l client.FlowLimits) string {
	if l.Rate == 0 {
		return ""
	}
	return fmt.Sprintf("%d per %s", l.Rate, l.Period)
}

// parallelismText is a flow's parallelism, or "" when it has none.
func parallelismText(l client.FlowLimits) string {
	if l.Parallelism == 0 {
		return ""
	}
	return strconv.Itoa(l.Parallelism)
}

// instantText is t in UTC, RFC 3339, or "" for the zero time.
func instantText(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}
