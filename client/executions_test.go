package client_test

import (
	"errors"
	"testing"
	"time"

	"github.com/chime-scheduler/chime/client"
)

// TestNodeExecutionLogAndRetry: a task whose callback fails shows in the
// execution log as failed; Retry fires it again with a new fire id; a
// second Retry of the now scheduled or failed-again task answers per state.
func TestNodeExecutionLogAndRetry(t *testing.T) {
	c := newNodeClient(t)
	ctx := t.Context()
	retries := 0
	in := client.Task{ID: "execlog-1", CallbackURL: "http://" + nodeAddr + "/v1/test/callback?status=500", Delay: time.Millisecond, MaxRetries: &retries}
	if _, err := c.Create(ctx, in); err != nil {
		t.Fatal(err)
	}
	failedExecs := func() []client.LoggedExecution {
		var out []client.LoggedExecution
		for e, err := range c.ExecutionLog(ctx, client.ExecFilter{Status: "failed", TaskID: in.ID, PageSize: 1}) {
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, e)
		}
		return out
	}
	var got []client.LoggedExecution
	for deadline := time.Now().Add(10 * time.Second); len(got) == 0 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		got = failedExecs()
	}
	if len(got) != 1 || got[0].TaskID != in.ID || got[0].StatusCode != 500 {
		t.Fatalf("failed executions %+v", got)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if tk, err := c.Get(ctx, in.ID); err == nil && tk.Status == client.StatusFailed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the task did not fail")
		}
	}
	if _, err := c.Retry(ctx, in.ID); err != nil {
		t.Fatalf("Retry: %v", err)
	}
	for deadline := time.Now().Add(10 * time.Second); len(got) < 2 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		got = failedExecs()
	}
	if len(got) != 2 || got[0].FireID == got[1].FireID || got[1].FinishedAt.After(got[0].FinishedAt) {
		t.Fatalf("after Retry: %+v", got)
	}
	ans, err := c.RetryMany(ctx, []string{in.ID, "execlog-none"})
	if err != nil || len(ans.Results) != 2 || ans.Results[1].Status != 404 || ans.Results[1].Err == nil {
		t.Fatalf("RetryMany = %+v, %v", ans, err)
	}
	var ce *client.Error
	if _, _, err := c.ExecutionLogPage(ctx, client.ExecFilter{Status: "dead"}, ""); !errors.As(err, &ce) || ce.Field != "status" {
		t.Fatalf("bad status: %v", err)
	}
	if _, err := c.RetryFailed(ctx, client.RetryFilter{Limit: 1000}, ""); err != nil {
		t.Fatalf("RetryFailed: %v", err)
	}
}
