package client

// The task endpoints (API.md "Task endpoints").

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"
)

// taskPath is the path of task id.
func taskPath(id string) string { return "/v1/tasks/" + url.PathEscape(id) }

// taskAnswer decodes a task answer.
func taskAnswer(a answer) (Task, error) {
	var w taskJSON
	if err := decode(a, &w); err != nil {
		return Task{}, err
	}
	return w.task(), nil
}

// Create creates t and returns it as stored. An existing id is ErrConflict.
// Without an ID the node makes one up (it is in the answer) and the request
// is sent once; with one it is retried like any idempotent request, so a
// retry after a lost answer may report ErrConflict for a task the first
// attempt stored.
func (c *Client) Create(ctx context.Context, t Task) (Task, error) {
	body, err := json.Marshal(t.request())
	if err != nil {
		return Task{}, err
	}
	a, err := c.do(ctx, call{method: http.MethodPost, path: "/v1/tasks", body: body, id: t.ID, idempotent: t.ID != ""})
	if err != nil {
		return Task{}, err
	}
	return taskAnswer(a)
}

// Put creates or replaces task t.ID and reports which. A replaced task keeps
// its created_at, fire sequence, counts and history.
func (c *Client) Put(ctx context.Context, t Task) (stored Task, created bool, err error) {
	if t.ID == "" {
		return Task{}, false, fmt.Errorf("%w: Put needs a task ID", ErrInvalid)
	}
	body, err := json.Marshal(t.request())
	if err != nil {
		return Task{}, false, err
	}
	a, err := c.do(ctx, call{method: http.MethodPut, path: taskPath(t.ID), body: body, id: t.ID, idempotent: true})
	if err != nil {
		return Task{}, false, err
	}
	stored, err = taskAnswer(a)
	return stored, a.status == http.StatusCreated, err
}

// Get returns task id (ErrNotFound when there is none).
func (c *Client) Get(ctx context.Context, id string) (Task, error) {
	a, err := c.do(ctx, call{method: http.MethodGet, path: taskPath(id), id: id, idempotent: true})
	if err != nil {
		return Task{}, err
	}
	return taskAnswer(a)
}

// Delete deletes task id (ErrNotFound when there is none; also when a retry
// follows an attempt that deleted it but whose answer was lost).
func (c *Client) Delete(ctx context.Context, id string) error {
	_, err := c.do(ctx, call{method: http.MethodDelete, path: taskPath(id), id: id, idempotent: true})
	return err
}

// Pause pauses task id: it does not fire until resumed. Pausing a paused
// task does nothing; a done, failed, inactive or completed one is ErrConflict.
func (c *Client) Pause(ctx context.Context, id string) (Task, error) {
	return c.action(ctx, id, "pause", true)
}

// Resume resumes task id; an inactive periodic task restarts at its next
// occurrence (ErrConflict if that is past its EndAt or its MaxRuns are
// used). A done, failed or completed one is ErrConflict.
func (c *Client) Resume(ctx context.Context, id string) (Task, error) {
	return c.action(ctx, id, "resume", true)
}

// Trigger fires task id once more now, also when it is paused, leaving its
// schedule as it is. It is not idempotent (each call is a fire), so it is
// sent once.
func (c *Client) Trigger(ctx context.Context, id string) (Task, error) {
	return c.action(ctx, id, "trigger", false)
}

// TriggerAt is Trigger with a logical due time: the fire's X-Chime-Due-At
// is dueAt instead of the request time (within 10 years of now).
func (c *Client) TriggerAt(ctx context.Context, id string, dueAt time.Time) (Task, error) {
	body, err := json.Marshal(map[string]string{"due_at": instant(dueAt)})
	if err != nil {
		return Task{}, err
	}
	a, err := c.do(ctx, call{method: http.MethodPost, path: taskPath(id) + "/trigger", id: id, body: body})
	if err != nil {
		return Task{}, err
	}
	return taskAnswer(a)
}

// BackfillResult is what Backfill queued: how many fires, the first and
// last occurrence (zero when none), and the task.
type BackfillResult struct {
	Queued      int
	First, Last time.Time
	Task        Task
}

// Backfill fires each occurrence of task id's schedule in [from, to] once,
// in order, each with its own fire id and the occurrence as X-Chime-Due-At
// (API.md "Catch-up and backfill"). More occurrences than the task's
// max_catchup, or a range over 10 years, is an invalid-argument error; a
// backfill already pending is ErrConflict. Sent once (not retried).
func (c *Client) Backfill(ctx context.Context, id string, from, to time.Time) (BackfillResult, error) {
	body, err := json.Marshal(map[string]string{"from": instant(from), "to": instant(to)})
	if err != nil {
		return BackfillResult{}, err
	}
	a, err := c.do(ctx, call{method: http.MethodPost, path: taskPath(id) + "/backfill", id: id, body: body})
	if err != nil {
		return BackfillResult{}, err
	}
	var w struct {
		Queued int      `json:"queued"`
		First  string   `json:"first"`
		Last   string   `json:"last"`
		Task   taskJSON `json:"task"`
	}
	if err := decode(a, &w); err != nil {
		return BackfillResult{}, err
	}
	return BackfillResult{Queued: w.Queued, First: parseInstant(w.First), Last: parseInstant(w.Last), Task: w.Task.task()}, nil
}

func (c *Client) action(ctx context.Context, id, what string, idempotent bool) (Task, error) {
	a, err := c.do(ctx, call{method: http.MethodPost, path: taskPath(id) + "/" + what, id: id, idempotent: idempotent})
	if err != nil {
		return Task{}, err
	}
	return taskAnswer(a)
}

// Executions returns the last limit execution records of task id, newest
// first, one per attempt (limit 0: the node's history size).
func (c *Client) Executions(ctx context.Context, id string, limit int) ([]Execution, error) {
	var q url.Values
	if limit > 0 {
		q = url.Values{"limit": {strconv.Itoa(limit)}}
	}
	a, err := c.do(ctx, call{method: http.MethodGet, path: taskPath(id) + "/executions", query: q, id: id, idempotent: true})
	if err != nil {
		return nil, err
	}
	var w struct {
		Executions []executionJSON `json:"executions"`
	}
	if err := decode(a, &w); err != nil {
		return nil, err
	}
	out := make([]Execution, len(w.Executions))
	for i := range w.Executions {
		out[i] = w.Executions[i].execution()
	}
	return out, nil
}

// ListFilter selects the tasks of List. The zero value lists every task.
type ListFilter struct {
	Status Status // only tasks in this state ("": any)
	// LabelKey and LabelValue: only tasks with this label (LabelKey "":
	// any).
	LabelKey, LabelValue string
	// PageSize is how many tasks one request asks for (1..1000; 0: the
	// node's default, 100).
	PageSize int
}

// List returns the tasks that f selects, cluster-wide, in (slot, id) order,
// following the pages' cursors. An error ends the sequence: it is yielded
// once, with a zero Task. Stopping the loop early sends no more requests.
//
//	for t, err := range c.List(ctx, client.ListFilter{Status: client.StatusPaused}) {
//		if err != nil { … }
//		…
//	}
func (c *Client) List(ctx context.Context, f ListFilter) iter.Seq2[Task, error] {
	return func(yield func(Task, error) bool) {
		cursor := ""
		for {
			tasks, next, err := c.ListPage(ctx, f, cursor)
			if err != nil {
				yield(Task{}, err)
				return
			}
			for i := range tasks {
				if !yield(tasks[i], nil) {
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

// ListPage returns one page of List: the tasks f selects from cursor on
// ("": the first page) and the cursor of the next page ("" after the last).
// It is for callers that keep a cursor themselves (a CLI's --cursor); List
// follows the cursors.
func (c *Client) ListPage(ctx context.Context, f ListFilter, cursor string) (tasks []Task, next string, err error) {
	q := url.Values{}
	if f.Status != "" {
		q.Set("status", string(f.Status))
	}
	if f.LabelKey != "" {
		q.Set("label", f.LabelKey+":"+f.LabelValue)
	}
	if f.PageSize > 0 {
		q.Set("limit", strconv.Itoa(f.PageSize))
	}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	a, err := c.do(ctx, call{method: http.MethodGet, path: "/v1/tasks", query: q, idempotent: true})
	if err != nil {
		return nil, "", err
	}
	var page struct {
		Tasks      []taskJSON `json:"tasks"`
		NextCursor string     `json:"next_cursor"`
	}
	if err := decode(a, &page); err != nil {
		return nil, "", err
	}
	tasks = make([]Task, len(page.Tasks))
	for i := range page.Tasks {
		tasks[i] = page.Tasks[i].task()
	}
	return tasks, page.NextCursor, nil
}

// BatchResult is the outcome of one task of CreateBatch.
type BatchResult struct {
	// ID is the task's id (made up by the node when the task had none);
	// empty when the task was refused before it got one.
	ID string
	// Status is the HTTP status its own request would have had: 201
	// created, 400 invalid, 409 the id exists, …
	Status int
	// Err is why it was not created; nil when it was.
	Err *Error
}

// maxBatch is the most tasks one POST /v1/tasks:batch takes.
const maxBatch = 10000

// CreateBatch creates tasks, each as Create would, and returns one result
// per task in input order. When the slot map is known, the tasks are split
// by the owners of their ids' slots and each part goes to its owner, the
// parts in parallel (tasks without an ID go to a seed, which places them).
// A part is retried only when all its tasks carry an ID. err is non-nil
// when a part got no per-task answer (it joins the parts' errors; every
// task of such a part has its part's error in its result too).
func (c *Client) CreateBatch(ctx context.Context, tasks []Task) ([]BatchResult, error) {
	results := make([]BatchResult, len(tasks))
	groups := map[string][]int{} // owner base URL ("": any node) → task indexes
	var order []string
	m := c.slotMap(ctx)
	for i := range tasks {
		to := ""
		if id := tasks[i].ID; id != "" && m != nil {
			to, _ = m.route(id)
		}
		if _, ok := groups[to]; !ok {
			order = append(order, to)
		}
		groups[to] = append(groups[to], i)
	}
	var wg sync.WaitGroup
	errs := make([]error, 0, len(order))
	var mu sync.Mutex
	for _, to := range order {
		idx := groups[to]
		for len(idx) > 0 {
			part := idx[:min(len(idx), maxBatch)]
			idx = idx[len(part):]
			wg.Go(func() {
				if err := c.batchPart(ctx, to, tasks, part, results); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	return results, errors.Join(errs...)
}

// batchPart sends the tasks of part (indexes into tasks) as one batch to
// the node at to ("": any) and fills in their results.
func (c *Client) batchPart(ctx context.Context, to string, tasks []Task, part []int, results []BatchResult) error {
	env := struct {
		Tasks []taskJSON `json:"tasks"`
	}{make([]taskJSON, len(part))}
	idempotent := true
	for k, i := range part {
		env.Tasks[k] = tasks[i].request()
		idempotent = idempotent && tasks[i].ID != ""
	}
	body, err := json.Marshal(env)
	if err != nil {
		return err
	}
	fail := func(err error) error {
		var e *Error
		if !errors.As(err, &e) {
			e = &Error{Status: http.StatusServiceUnavailable, Code: "unavailable", Message: err.Error()}
		}
		for _, i := range part {
			results[i] = BatchResult{ID: tasks[i].ID, Status: e.Status, Err: e}
		}
		return err
	}
	a, err := c.do(ctx, call{method: http.MethodPost, path: "/v1/tasks:batch", body: body, to: to, idempotent: idempotent})
	if err != nil {
		return fail(err)
	}
	var w struct {
		Results []struct {
			Index  int    `json:"index"`
			ID     string `json:"id"`
			Status int    `json:"status"`
			Error  *struct {
				Code    string `json:"code"`
				Message string `json:"message"`
				Field   string `json:"field"`
			} `json:"error"`
		} `json:"results"`
	}
	if err := decode(a, &w); err != nil {
		return fail(err)
	}
	if len(w.Results) != len(part) {
		return fail(fmt.Errorf("chime: the batch answer has %d results for %d tasks", len(w.Results), len(part)))
	}
	for _, r := range w.Results {
		if r.Index < 0 || r.Index >= len(part) {
			return fail(fmt.Errorf("chime: the batch answer has a result for task %d of %d", r.Index, len(part)))
		}
		res := BatchResult{ID: r.ID, Status: r.Status}
		if res.ID == "" {
			res.ID = tasks[part[r.Index]].ID // refused before the node read it
		}
		if r.Error != nil {
			res.Err = &Error{Status: r.Status, Code: r.Error.Code, Message: r.Error.Message, Field: r.Error.Field}
		}
		results[part[r.Index]] = res
	}
	return nil
}
