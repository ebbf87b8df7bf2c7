package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/chime-scheduler/chime/client"
)

// statsUsage is printed by `chime stats` and `chime stats -h`.
const statsUsage = `usage: chime stats due [--hours N] [--by node|slot] [--hour H] [--node NAME] [flags]

The fires due ahead across the cluster (GET /v1/stats/due): per node and
hour, or the busiest slots. Run 'chime stats due -h' for the flags.
`

// runStats runs `chime stats due …`. args excludes "stats".
func runStats(ctx context.Context, args []string, stdout, stderr io.Writer, env func(string) string) error {
	tc := &taskCmd{stdin: os.Stdin, stdout: stdout, stderr: stderr, env: env}
	return runVerb(ctx, "stats", statsUsage, args, stderr, map[string]func(context.Context, []string) error{
		"due": tc.statsDue,
	})
}

func (tc *taskCmd) statsDue(ctx context.Context, args []string) error {
	fs := flag2(tc, "stats due", "[--hours N] [--by node|slot] [--hour H] [--node NAME] [flags]")
	var cf commonFlags
	cf.register(fs)
	hours := fs.Int("hours", 24, "the window, `N` hours from now, 1..168")
	by := fs.String("by", "node", "`node`: per node and hour; slot: the 50 busiest slots too")
	hour := fs.Int("hour", -1, "with --by slot: only the hour bucket `H` (0..hours-1)")
	node := fs.String("node", "", "ask only this member (`NAME`)")
	pos, help, err := parseArgs(fs, args)
	if help || err != nil {
		return err
	}
	if len(pos) > 0 {
		return fmt.Errorf("stats due: unexpected argument %q", pos[0])
	}
	q := client.DueQuery{Hours: *hours, Node: *node}
	switch *by {
	case "node":
	case "slot":
		q.BySlot = true
	default:
		return fmt.Errorf("stats due: --by must be node or slot, got %q", *by)
	}
	if *hours < 1 || *hours > 168 {
		return fmt.Errorf("stats due: --hours must be in 1..168, got %d", *hours)
	}
	if setFlags(fs)["hour"] {
		if !q.BySlot || *hour < 0 || *hour >= *hours {
			return fmt.Errorf("stats due: --hour needs --by slot and must be in 0..%d", *hours-1)
		}
		q.Hour = hour
	}
	c, err := tc.client(&cf)
	if err != nil {
		return err
	}
	d, err := c.DueLoad(ctx, q)
	if err != nil {
		return c.fail(err)
	}
	if cf.json {
		return tc.printValue(d)
	}
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "from %s, %d h: %d due, %d overdue\n", d.From.UTC().Format(time.RFC3339), d.Hours, d.Total, d.Overdue)
	head := []string{"NODE", "TOTAL", "OVERDUE"}
	for i := range d.Hours {
		head = append(head, "+"+strconv.Itoa(i)+"h")
	}
	rows := [][]string{head}
	var notes []string
	for _, n := range d.Nodes {
		r := []string{cell(text(n.Node))}
		if !n.Available {
			rows = append(rows, append(r, "unavailable"))
			notes = append(notes, fmt.Sprintf("%s: %s", cell(text(n.Node)), cell(text(n.Error))))
			continue
		}
		r = append(r, strconv.FormatInt(n.Total, 10), strconv.FormatInt(n.Overdue, 10))
		for _, v := range n.Hours {
			r = append(r, strconv.FormatInt(v, 10))
		}
		rows = append(rows, r)
		if n.Truncated {
			notes = append(notes, fmt.Sprintf("%s: cut short, complete until %s", cell(text(n.Node)), n.CompleteUntil.UTC().Format(time.RFC3339)))
		}
	}
	if err := writeTable(&buf, rows); err != nil {
		return err
	}
	if q.BySlot {
		buf.WriteString("\n")
		srows := [][]string{{"SLOT", "NODE", "DUE"}}
		for _, s := range d.Slots {
			srows = append(srows, []string{strconv.Itoa(int(s.Slot)), cell(text(s.Node)), strconv.FormatInt(s.Count, 10)})
		}
		if err := writeTable(&buf, srows); err != nil {
			return err
		}
	}
	for _, n := range notes {
		buf.WriteString(n + "\n")
	}
	return tc.write(buf.Bytes())
}
