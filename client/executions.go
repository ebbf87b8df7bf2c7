package client

import (
	"context"
	"encoding/json"
	"iter"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// LoggedExecution is one execution of the cluster's execution log
// (Client.ExecutionLog): an attempt of one fire, with its task.
type LoggedExecution struct {
	TaskID string
	Execution
}

// ExecFilter selects the executions of ExecutionLog. The zero value
// selects every execution.
type ExecFilter struct {
	// Status is "failed", "succeeded" or "" (all). An execution failed
	// when it has an Error or a StatusCode outside 2xx.
	Status string
	TaskID string    // only this task's executions ("": every task)
	Since  time.Time // FinishedAt at or after it (zero: no bound)
	Until  time.Time // FinishedAt before it (zero: no bound)
	// PageSize is how many executions one request asks for (1..1000; 0:
	// the node's default, 100).
	PageSize int
}

// ExecutionLog returns the executions f selects across the cluster, newest
// first, following the pages' cursors. An error ends the sequence: it is
// yielded once, with a zero LoggedExecution.
func (c *Client) ExecutionLog(ctx context.Context, f ExecFilter) iter.Seq2[LoggedExecution, error] {
	return func(yield func(LoggedExecution, error) bool) {
		cursor := ""
		for {
			page, next, err := c.ExecutionLogPage(ctx, f, cursor)
			if err != nil {
				yield(LoggedExecution{}, err)
				return
			}
			for i := range page {
				if !yield(page[i], nil) {
					return
				}
			}
			if next == "" {
				return
			}
			cursor = next
		}
	}
}

// ExecutionLogPage returns one page of ExecutionLog from cursor ("": the
// first page) and the cursor of the next page ("" after the last).
func (c *Client) ExecutionLogPage(ctx context.Context, f ExecFilter, cursor string) (execs []LoggedExecution, next string, err error) {
	q := url.Values{}
	if f.Status != "" {
		q.Set("status", f.Status)
	}
	if f.TaskID != "" {
		q.Set("task_id", f.TaskID)
	}
	if !f.Since.IsZero() {
		q.Set("since", instant(f.Since))
	}
	if !f.Until.IsZero() {
		q.Set("until", instant(f.Until))
	}
	if f.PageSize > 0 {
		q.Set("limit", strconv.Itoa(f.PageSize))
	}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	a, err := c.do(ctx, call{method: http.MethodGet, path: "/v1/executions", query: q, idempotent: true})
	if err != nil {
		return nil, "", err
	}
	var page struct {
		Executions []struct {
			TaskID string `json:"task_id"`
			executionJSON
		} `json:"executions"`
		NextCursor string `json:"next_cursor"`
	}
	if err := decode(a, &page); err != nil {
		return nil, "", err
	}
	execs = make([]LoggedExecution, len(page.Executions))
	for i := range page.Executions {
		execs[i] = LoggedExecution{TaskID: page.Executions[i].TaskID, Execution: page.Executions[i].execution()}
	}
	return execs, page.NextCursor, nil
}

// Retry fires the failed task id again now, as a new fire (a new fire id,
// attempts from 1). A task in any other state is a conflict (409).
func (c *Client) Retry(ctx context.Context, id string) (Task, error) {
	return c.action(ctx, id, "retry", false)
}

// RetryResult is the outcome of one task of RetryMany or RetryFailed.
type RetryResult struct {
	ID     string
	Status int    // 200 retried, else the HTTP status of Err
	Err    *Error // nil when retried
}

// RetryAnswer is the answer of RetryMany or RetryFailed.
type RetryAnswer struct {
	Retried int // how many were retried
	Results []RetryResult
	// More reports that a filter has more tasks to look at: pass
	// NextCursor to RetryFailed to go on.
	More       bool
	NextCursor string
}

// RetryFilter selects the failed tasks of RetryFailed.
type RetryFilter struct {
	LabelKey, LabelValue string    // only tasks with this label (LabelKey "": any)
	Since, Until         time.Time // their last fire finished in [Since, Until) (zero: no bound)
	Limit                int       // tasks looked at per request, 1..1000 (0: 100)
}

// RetryMany retries the failed tasks ids (at most 1000), each on its owner.
func (c *Client) RetryMany(ctx context.Context, ids []string) (RetryAnswer, error) {
	return c.retryTasks(ctx, map[string]any{"ids": ids})
}

// RetryFailed retries one page of the failed tasks f selects, from cursor
// ("": the start); while the answer's More is true, call it again with
// its NextCursor.
func (c *Client) RetryFailed(ctx context.Context, f RetryFilter, cursor string) (RetryAnswer, error) {
	body := map[string]any{"status": "failed"}
	if f.LabelKey != "" {
		body["label"] = f.LabelKey + ":" + f.LabelValue
	}
	if !f.Since.IsZero() {
		body["since"] = instant(f.Since)
	}
	if !f.Until.IsZero() {
		body["until"] = instant(f.Until)
	}
	if f.Limit > 0 {
		body["limit"] = f.Limit
	}
	if cursor != "" {
		body["cursor"] = cursor
	}
	return c.retryTasks(ctx, body)
}

func (c *Client) retryTasks(ctx context.Context, body map[string]any) (RetryAnswer, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return RetryAnswer{}, err
	}
	a, err := c.do(ctx, call{method: http.MethodPost, path: "/v1/tasks:retry", body: b})
	if err != nil {
		return RetryAnswer{}, err
	}
	var w struct {
		Retried int `json:"retried"`
		Results []struct {
			ID     string `json:"id"`
			Status int    `json:"status"`
			Error  *Error `json:"error"`
		} `json:"results"`
		More       bool   `json:"more"`
		NextCursor string `json:"next_cursor"`
	}
	if err := decode(a, &w); err != nil {
		return RetryAnswer{}, err
	}
	out := RetryAnswer{Retried: w.Retried, More: w.More, NextCursor: w.NextCursor}
	for _, r := range w.Results {
		if r.Error != nil {
			r.Error.Status = r.Status
		}
		out.Results = append(out.Results, RetryResult{ID: r.ID, Status: r.Status, Err: r.Error})
	}
	return out, nil
}
