package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// CreateStats is what a phase of task creation measured.
type CreateStats struct {
	// Mode is "single" (POST /v1/tasks) or "batch" (POST /v1/tasks:batch).
	Mode        string `json:"mode"`
	Tasks       int    `json:"tasks"`
	Batch       int    `json:"batch"`
	Concurrency int    `json:"concurrency"`
	// Acked counts tasks the node acknowledged (201, or 200 on replace).
	Acked int64 `json:"acked"`
	// Rejected counts tasks the node refused with an error.
	Rejected int64 `json:"rejected"`
	// Retries counts requests answered 429 or 503 and sent again, and
	// batches sent again with the tasks a batch answer refused with 429 or
	// 503 (a slot moving between nodes).
	Retries int64 `json:"retries"`
	// TaskRetries counts tasks sent again after such a per-task answer.
	TaskRetries int64 `json:"task_retries,omitempty"`
	// ExistedOnRetry counts tasks answered 409 after a retry: an attempt
	// answered 503 had stored them after all. They count as acknowledged.
	ExistedOnRetry int64 `json:"existed_on_retry,omitempty"`
	// Seconds is the wall time of the phase; TasksPerSecond is Acked over it.
	Seconds        float64 `json:"seconds"`
	TasksPerSecond float64 `json:"tasks_per_second"`
	// Latency is per request (one task or one batch), retries included.
	Latency Summary `json:"latency"`
	// NodeCPUPerTask is node CPU µs per acknowledged task (0 = unknown).
	NodeCPUPerTask float64 `json:"node_cpu_us_per_task,omitempty"`
	// HarnessCPUPerTask is this process's CPU µs per acknowledged task:
	// the client's cost, which shares the machine with the node.
	HarnessCPUPerTask float64 `json:"harness_cpu_us_per_task"`
	// FirstError is the first error answer, for diagnosis.
	FirstError string `json:"first_error,omitempty"`
	// Route is how requests were spread over a cluster's nodes (RouteAny,
	// RouteOwner, RouteForeign, RouteSDK, RouteSDKFixed); empty for a
	// single node.
	Route string `json:"route,omitempty"`
	// Forwarded is how many requests the nodes forwarded to a slot's owner
	// during the phase (chime_forwarded_requests_total); nil when unknown.
	Forwarded *int64 `json:"forwarded_requests,omitempty"`
}

// createPlan describes a creation phase: n tasks, concurrency workers, each
// request carrying batch tasks (single: one task per POST /v1/tasks).
// Tasks are handed out in index order, so low indexes are created first.
type createPlan struct {
	n, batch, concurrency int
	single                bool
	// task appends the JSON object of task i to dst.
	task func(dst []byte, i int) []byte
	// via picks the node that gets request req, whose first task is
	// first; nil sends every request to the api createTasks is given.
	via func(req, first int) *apiClient
	// result, when set, learns whether task i was acknowledged. It is
	// called once per task, from the creating goroutines (for distinct i).
	result func(i int, ok bool)
	// send, when set, creates the tasks idx instead of postCreate (and
	// via is not used): the Go SDK's routes. It has postCreate's contract.
	send func(ctx context.Context, idx []int) (createOutcome, error)
}

// maxRetries bounds how often one request is retried on 429/503, and
// retryBudget how long it keeps retrying: a node that answers 503 for good
// (a stuck follower: 10 s per attempt) must not stall a run for hours.
const (
	maxRetries  = 100
	retryBudget = time.Minute
)

// createTasks runs plan against api. It returns an error only for transport
// failures or a cancelled ctx; error answers are counted in the stats.
func createTasks(ctx context.Context, api *apiClient, tg *target, plan createPlan, ph *phase) (CreateStats, error) {
	per := plan.batch
	mode := "batch"
	if plan.single {
		per, mode = 1, "single"
	}
	st := CreateStats{Mode: mode, Tasks: plan.n, Batch: per, Concurrency: plan.concurrency}
	ops := (plan.n + per - 1) / per

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var (
		next                     atomic.Int64
		acked, rejected, retries atomic.Int64
		taskRetries, existed     atomic.Int64
		mu                       sync.Mutex // guards lat and firstErr
		lat                      Histogram
		firstErr                 string
		wg                       sync.WaitGroup
	)
	noteErr := func(msg string) {
		mu.Lock()
		if firstErr == "" {
			firstErr = msg
		}
		mu.Unlock()
	}
	node0, _ := tg.sample()
	self0 := selfCPU()
	start := time.Now()
	for range plan.concurrency {
		wg.Go(func() {
			var local Histogram
			defer func() {
				mu.Lock()
				lat.Merge(&local)
				mu.Unlock()
			}()
			var idx []int
			for {
				k := int(next.Add(1) - 1)
				if k >= ops || ctx.Err() != nil {
					return
				}
				lo, hi := k*per, min(plan.n, (k+1)*per)
				idx = idx[:0]
				for i := lo; i < hi; i++ {
					idx = append(idx, i)
				}
				c := api
				if plan.via != nil {
					c = plan.via(k, lo)
				}
				t0 := time.Now()
				var out createOutcome
				var err error
				if plan.send != nil {
					out, err = plan.send(ctx, idx)
				} else {
					out, err = postCreate(ctx, c, plan, idx)
				}
				if err != nil {
					cancel(err)
					return
				}
				local.RecordDuration(time.Since(t0))
				acked.Add(int64(out.ok))
				rejected.Add(int64(out.bad))
				retries.Add(int64(out.tries))
				taskRetries.Add(int64(out.taskRetries))
				existed.Add(int64(out.existed))
				if out.msg != "" {
					noteErr(out.msg)
				}
				ph.Add(int64(hi - lo))
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	ph.End()
	if err := context.Cause(ctx); err != nil {
		return st, err
	}
	st.Acked, st.Rejected, st.Retries = acked.Load(), rejected.Load(), retries.Load()
	st.TaskRetries, st.ExistedOnRetry = taskRetries.Load(), existed.Load()
	st.Seconds = took.Seconds()
	st.TasksPerSecond = perSecond(st.Acked, took)
	st.Latency = lat.Summary()
	st.FirstError = firstErr
	st.HarnessCPUPerTask = perOp(selfCPU()-self0, st.Acked)
	if node1, ok := tg.sample(); ok {
		st.NodeCPUPerTask = perOp(node1.cpu-node0.cpu, st.Acked)
	}
	return st, nil
}

// buildCreateBody appends the request body for tasks [lo, hi).
func buildCreateBody(dst []byte, plan createPlan, lo, hi int) []byte {
	idx := make([]int, 0, hi-lo)
	for i := lo; i < hi; i++ {
		idx = append(idx, i)
	}
	return buildBody(dst, plan, idx)
}

// buildBody appends the request body for the tasks idx (single: idx[0]).
func buildBody(dst []byte, plan createPlan, idx []int) []byte {
	if plan.single {
		return plan.task(dst, idx[0])
	}
	dst = append(dst, `{"tasks":[`...)
	for k, i := range idx {
		if k > 0 {
			dst = append(dst, ',')
		}
		dst = plan.task(dst, i)
	}
	return append(dst, "]}"...)
}

// batchAnswer is the body of a POST /v1/tasks:batch answer.
type batchAnswer struct {
	Results []struct {
		Index  *int `json:"index"` // position in the request
		Status int  `json:"status"`
		Error  *struct {
			Code    string `json:"code"`
			Message string `json:"message"`
			Field   string `json:"field"`
		} `json:"error"`
	} `json:"results"`
}

// createOutcome is what one create request, with its retries, came to.
type createOutcome struct {
	ok, bad int
	// tries counts requests sent again: the whole request after a 429 or
	// 503, or the tasks of a batch answered 503 or 429 on their own.
	tries int
	// taskRetries counts tasks sent again after a per-task 503 or 429 in
	// a batch answer (a slot moving between nodes answers that).
	taskRetries int
	// existed counts tasks answered 409 after a retry: an attempt answered
	// 503 had stored them after all. They count as acknowledged.
	existed int
	msg     string
}

// retryable reports whether a status asks the client to come back later.
func retryable(status int) bool {
	return status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable
}

// postCreate sends one create request for the tasks idx (single: one
// task), retrying the whole request on 429 and 503 and, in a batch, the
// tasks answered 429 or 503 on their own, up to maxRetries times within
// retryBudget; then the last answer counts as a rejection. It calls
// plan.result for every task. Errors are transport failures only.
func postCreate(ctx context.Context, api *apiClient, plan createPlan, idx []int) (createOutcome, error) {
	path := "/v1/tasks:batch"
	if plan.single {
		path = "/v1/tasks"
	}
	var out createOutcome
	result := func(i int, ok bool) {
		if plan.result != nil {
			plan.result(i, ok)
		}
	}
	fail := func(idx []int, msg string) {
		out.bad += len(idx)
		for _, i := range idx {
			result(i, false)
		}
		if out.msg == "" {
			out.msg = msg
		}
	}
	backoff := 10 * time.Millisecond
	wait := func(d time.Duration) error {
		if d == 0 {
			d, backoff = backoff, min(2*backoff, time.Second)
		}
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-t.C:
			return nil
		}
	}
	var body []byte
	retried := false
	giveUp := time.Now().Add(retryBudget)
	canRetry := func() bool { return out.tries < maxRetries && time.Now().Before(giveUp) }
	for len(idx) > 0 {
		body = buildBody(body[:0], plan, idx)
		a, err := api.do(ctx, http.MethodPost, path, body)
		if err != nil {
			return out, err
		}
		if retryable(a.status) && canRetry() {
			out.tries++
			retried = true
			if err := wait(a.retryAfter); err != nil {
				return out, err
			}
			continue
		}
		if plan.single {
			switch {
			case a.status == http.StatusCreated || a.status == http.StatusOK:
				out.ok++
				result(idx[0], true)
			case a.status == http.StatusConflict && retried:
				out.ok++
				out.existed++
				result(idx[0], true)
			default:
				fail(idx, answerText(a))
			}
			return out, nil
		}
		if a.status != http.StatusOK {
			fail(idx, answerText(a))
			return out, nil
		}
		var ba batchAnswer
		if err := json.Unmarshal(a.body, &ba); err != nil {
			fail(idx, "batch answer: "+err.Error())
			return out, nil
		}
		answered := make([]bool, len(idx))
		var again []int
		for k, r := range ba.Results {
			pos := k
			if r.Index != nil {
				pos = *r.Index
			}
			if pos < 0 || pos >= len(idx) || answered[pos] {
				continue
			}
			answered[pos] = true
			i := idx[pos]
			switch {
			case r.Error == nil && (r.Status == http.StatusCreated || r.Status == http.StatusOK):
				out.ok++
				result(i, true)
			case r.Status == http.StatusConflict && retried:
				out.ok++
				out.existed++
				result(i, true)
			case retryable(r.Status) && canRetry():
				again = append(again, i)
			default:
				msg := fmt.Sprintf("status %d", r.Status)
				if r.Error != nil {
					msg = fmt.Sprintf("%s: %s %s", r.Error.Code, r.Error.Field, r.Error.Message)
				}
				fail([]int{i}, msg)
			}
		}
		var missing []int
		for pos, ok := range answered {
			if !ok {
				missing = append(missing, idx[pos])
			}
		}
		if len(missing) > 0 {
			fail(missing, fmt.Sprintf("batch of %d answered %d results", len(idx), len(idx)-len(missing)))
		}
		if len(again) == 0 {
			return out, nil
		}
		out.tries++
		out.taskRetries += len(again)
		retried = true
		if err := wait(0); err != nil {
			return out, err
		}
		idx = again
	}
	return out, nil
}

// answerText renders an error answer briefly.
func answerText(a answer) string {
	b := a.body
	if len(b) > 300 {
		b = b[:300]
	}
	return strconv.Itoa(a.status) + " " + string(b)
}

// taskTemplate renders the JSON of benchmark tasks. Ids are
// prefix + index; every task carries the same ~100-byte payload, so a
// callback body is about the size the HTTP baseline posts.
type taskTemplate struct {
	prefix   string // e.g. "bf-lx2k3-"
	url      string // the callback URL
	callback []byte // the same, as a quoted JSON string
	payload  []byte // JSON object
	flowKey  string // the tasks' flow_key; "" = none (bench fire --flow-key)
}

func newTaskTemplate(prefix, callback, run string) taskTemplate {
	cb, _ := json.Marshal(callback) // a string always marshals
	return taskTemplate{prefix: prefix, url: callback, callback: cb, payload: benchPayload(run)}
}

// benchPayload is the callback body of benchmark tasks: about 100 bytes.
func benchPayload(run string) []byte {
	p, _ := json.Marshal(map[string]string{
		"bench": run,
		"pad":   "0123456789abcdef0123456789abcdef0123456789abcdef0123456789",
	})
	return p
}

// appendDelay appends task i due delayMs after the node receives it.
func (tt taskTemplate) appendDelay(dst []byte, i int, delayMs int64) []byte {
	dst = tt.appendHead(dst, i)
	dst = append(dst, `,"delay_ms":`...)
	dst = strconv.AppendInt(dst, delayMs, 10)
	return append(dst, '}')
}

// appendDue appends task i due at the given instant.
func (tt taskTemplate) appendDue(dst []byte, i int, due time.Time) []byte {
	dst = tt.appendHead(dst, i)
	dst = append(dst, `,"due_at":"`...)
	dst = due.UTC().AppendFormat(dst, time.RFC3339Nano)
	return append(dst, `"}`...)
}

func (tt taskTemplate) appendHead(dst []byte, i int) []byte {
	dst = append(dst, `{"id":"`...)
	dst = append(dst, tt.prefix...)
	dst = strconv.AppendInt(dst, int64(i), 10)
	if tt.flowKey != "" {
		dst = append(dst, `","flow_key":"`...)
		dst = append(dst, tt.flowKey...) // validFlowKey: no escapes
	}
	dst = append(dst, `","callback_url":`...)
	dst = append(dst, tt.callback...)
	dst = append(dst, `,"payload":`...)
	return append(dst, tt.payload...)
}

// runID returns a short id unique to this run, for task id prefixes, so
// runs against a long-lived node never collide (409).
func runID(now time.Time) string {
	return strconv.FormatInt(now.UnixNano(), 36)
}
