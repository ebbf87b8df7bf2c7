package main

import (
	"bytes"
	"context"
	"testing"
)

// TestRunVerb: the commands with verbs print their usage and fail on a
// missing or unknown verb, print it without failing on help.
func TestRunVerb(t *testing.T) {
	for _, c := range []struct {
		name string
		run  func(context.Context, []string, *bytes.Buffer, *bytes.Buffer) error
		args []string
		err  string
	}{
		{"stats none", statsRun, nil, "stats: missing verb"},
		{"stats bogus", statsRun, []string{"bogus"}, `stats: unknown verb "bogus"`},
		{"stats help", statsRun, []string{"help"}, ""},
		{"executions none", execRun, nil, "executions: missing verb"},
		{"executions -h", execRun, []string{"-h"}, ""},
		{"flow none", flowRun, nil, "flow: missing verb"},
		{"flow bogus", flowRun, []string{"bogus"}, `flow: unknown verb "bogus"`},
		{"flow help", flowRun, []string{"help"}, ""},
	} {
		var out, errOut bytes.Buffer
		err := c.run(t.Context(), c.args, &out, &errOut)
		if got := errString(err); got != c.err || errOut.Len() == 0 {
			t.Errorf("%s: error %q, usage %d bytes; want %q and the usage", c.name, got, errOut.Len(), c.err)
		}
	}
}

func statsRun(ctx context.Context, args []string, out, errOut *bytes.Buffer) error {
	return runStats(ctx, args, out, errOut, func(string) string { return "" })
}

func execRun(ctx context.Context, args []string, out, errOut *bytes.Buffer) error {
	return runExecutions(ctx, args, out, errOut, func(string) string { return "" })
}

func flowRun(ctx context.Context, args []string, out, errOut *bytes.Buffer) error {
	return runFlow(ctx, args, out, errOut, func(string) string { return "" })
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
