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
	// Retries counts requests answered 429 or 503 and sent again.
	Retries int64 `json:"retries"`
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
	// RouteOwner, RouteForeign); empty for a single node.
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
}

// maxRetries bounds how often one request is retried on 429/503.
const maxRetries = 100

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
			var buf []byte
			for {
				k := int(next.Add(1) - 1)
				if k >= ops || ctx.Err() != nil {
					return
				}
				lo, hi := k*per, min(plan.n, (k+1)*per)
				buf = buildCreateBody(buf[:0], plan, lo, hi)
				c := api
				if plan.via != nil {
					c = plan.via(k, lo)
				}
				t0 := time.Now()
				ok, bad, tries, msg, err := postCreate(ctx, c, plan.single, buf, hi-lo)
				if err != nil {
					cancel(err)
					return
				}
				local.RecordDuration(time.Since(t0))
				acked.Add(int64(ok))
				rejected.Add(int64(bad))
				retries.Add(int64(tries))
				if msg != "" {
					noteErr(msg)
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
	if plan.single {
		return plan.task(dst, lo)
	}
	dst = append(dst, `{"tasks":[`...)
	for i := lo; i < hi; i++ {
		if i > lo {
			dst = append(dst, ',')
		}
		dst = plan.task(dst, i)
	}
	return append(dst, "]}"...)
}

// batchAnswer is the body of a POST /v1/tasks:batch answer.
type batchAnswer struct {
	Results []struct {
		Status int `json:"status"`
		Error  *struct {
			Code    string `json:"code"`
			Message string `json:"message"`
			Field   string `json:"field"`
		} `json:"error"`
	} `json:"results"`
}

// postCreate sends one create request of count tasks, retrying on 429 and
// 503, and returns the tasks acknowledged and rejected, the retries, and the
// first error answer as text.
func postCreate(ctx context.Context, api *apiClient, single bool, body []byte, count int) (ok, bad, tries int, msg string, err error) {
	path := "/v1/tasks:batch"
	if single {
		path = "/v1/tasks"
	}
	backoff := 10 * time.Millisecond
	for {
		a, err := api.do(ctx, http.MethodPost, path, body)
		if err != nil {
			return 0, 0, tries, "", err
		}
		if (a.status == http.StatusTooManyRequests || a.status == http.StatusServiceUnavailable) && tries < maxRetries {
			tries++
			wait := a.retryAfter
			if wait == 0 {
				wait, backoff = backoff, min(2*backoff, time.Second)
			}
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return 0, 0, tries, "", context.Cause(ctx)
			case <-t.C:
			}
			continue
		}
		switch {
		case single && (a.status == http.StatusCreated || a.status == http.StatusOK):
			return 1, 0, tries, "", nil
		case single || a.status != http.StatusOK:
			return 0, count, tries, answerText(a), nil
		}
		var ba batchAnswer
		if err := json.Unmarshal(a.body, &ba); err != nil {
			return 0, count, tries, "batch answer: " + err.Error(), nil
		}
		for _, r := range ba.Results {
			switch {
			case r.Error == nil && (r.Status == http.StatusCreated || r.Status == http.StatusOK):
				ok++
			default:
				bad++
				if msg == "" && r.Error != nil {
					msg = fmt.Sprintf("%s: %s %s", r.Error.Code, r.Error.Field, r.Error.Message)
				}
			}
		}
		if ok+bad != count && msg == "" {
			msg = fmt.Sprintf("batch of %d answered %d results", count, ok+bad)
		}
		return ok, count - ok, tries, msg, nil
	}
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
	callback []byte // JSON string, quoted
	payload  []byte // JSON object
}

func newTaskTemplate(prefix, callback, run string) taskTemplate {
	cb, _ := json.Marshal(callback) // a string always marshals
	return taskTemplate{prefix: prefix, callback: cb, payload: benchPayload(run)}
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
