package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// OverloadConfig configures the overload workload (issue 17 item 8): for
// Duration, Concurrency clients send creates back to back, each with a new
// id and no pause after an answer (a 429 is counted, not retried), far
// more than one node can take; the node must answer the excess 429 with
// Retry-After, keep its memory bounded, not crash, and fire every task it
// acknowledged (all due Lead after the overload ends), none early.
type OverloadConfig struct {
	// Target is the node; default a spawned single node (its RSS is
	// sampled from /proc every 250 ms).
	Target TargetConfig `json:"target"`
	// Duration of the overload. Default 60 s.
	Duration time.Duration `json:"duration_ns"`
	// Concurrency is how many requests are in flight at once: beyond the
	// node's write queue (--write-queue, 1024) the node must refuse.
	// Default 2048.
	Concurrency int `json:"concurrency"`
	// Batch is tasks per request: 1 sends POST /v1/tasks, more POST
	// /v1/tasks:batch. Default 1.
	Batch int `json:"batch"`
	// Lead is how long after the overload every acknowledged task is due.
	// Default 5 s.
	Lead time.Duration `json:"lead_ns"`
	// Timeout bounds the wait for the fires after the due time. Default
	// 5 minutes.
	Timeout time.Duration `json:"timeout_ns"`
	// Progress reports the phases.
	Progress Progress `json:"-"`
}

// DefaultOverloadConfig returns the defaults described on each field.
func DefaultOverloadConfig() OverloadConfig {
	return OverloadConfig{Target: TargetConfig{Spawn: true, Nodes: 1}, Duration: time.Minute, Concurrency: 2048,
		Batch: 1, Lead: 5 * time.Second, Timeout: 5 * time.Minute}
}

// Validate reports every problem with c.
func (c OverloadConfig) Validate() error {
	errs := []error{c.Target.validate()}
	if c.Duration <= 0 || c.Lead <= 0 || c.Timeout <= 0 {
		errs = append(errs, fmt.Errorf("bench: duration %s, lead %s and timeout %s must be > 0", c.Duration, c.Lead, c.Timeout))
	}
	if c.Concurrency < 1 || c.Concurrency > 20000 {
		errs = append(errs, fmt.Errorf("bench: concurrency %d must be 1..20000", c.Concurrency))
	}
	if c.Batch < 1 || c.Batch > 1000 {
		errs = append(errs, fmt.Errorf("bench: batch %d must be 1..1000", c.Batch))
	}
	return errors.Join(errs...)
}

// OverloadStats is what the overload workload measured.
type OverloadStats struct {
	Seconds float64 `json:"seconds"`
	// Requests is every request answered; RequestsPerSecond over Seconds.
	Requests          int64   `json:"requests"`
	RequestsPerSecond float64 `json:"requests_per_second"`
	// Acked counts tasks the node acknowledged, AckedPerSecond their rate.
	Acked          int64   `json:"acked"`
	AckedPerSecond float64 `json:"acked_per_second"`
	// Refused429 counts requests answered 429, WithRetryAfter those of
	// them that said when to come back.
	Refused429     int64 `json:"refused_429"`
	WithRetryAfter int64 `json:"refused_429_with_retry_after"`
	// Other counts the other error answers (per task in a batch), and
	// TransportErrors requests that got no answer.
	Other           int64  `json:"other_errors"`
	TransportErrors int64  `json:"transport_errors"`
	FirstOther      string `json:"first_other,omitempty"`
	// MaxRSSBytes is the largest resident set sampled during the overload
	// and the fires; PeakRSSBytes the kernel's high-water mark (VmHWM).
	MaxRSSBytes  int64 `json:"max_rss_bytes"`
	PeakRSSBytes int64 `json:"peak_rss_bytes"`
	// Alive: every node still ran at the end.
	Alive bool `json:"alive"`
	// Fired is how many acknowledged tasks fired (distinct, 2xx), and
	// Receiver what the callback receiver recorded (Early must be 0).
	Fired    uint64        `json:"fired"`
	TimedOut bool          `json:"timed_out"`
	Receiver ReceiverStats `json:"receiver"`
}

// RunOverload runs the overload workload.
func RunOverload(ctx context.Context, cfg OverloadConfig) (res Result, err error) {
	cfg.Target.setDefaults()
	res = Result{Workload: "overload", Started: time.Now(), Env: currentEnv(), Config: cfg}
	if err := cfg.Validate(); err != nil {
		return res, err
	}
	run := runID(time.Now())
	prefix := "bo-" + run + "-"
	var due atomic.Int64 // unix ms, fixed before the first create
	rcv, err := NewReceiver(ReceiverConfig{Expect: func(fireID string) (time.Time, bool) {
		if _, ok := fireIndex(fireID, prefix, 1<<40); !ok || due.Load() == 0 {
			return time.Time{}, false
		}
		return time.UnixMilli(due.Load()), true
	}})
	if err != nil {
		return res, err
	}
	if err := rcv.Start(); err != nil {
		return res, err
	}
	defer rcv.Close()
	tg, err := openTarget(ctx, cfg.Target, cfg.Concurrency, cfg.Progress)
	if err != nil {
		return res, err
	}
	defer func() { res.Warnings = appendErr(res.Warnings, tg.close()) }()
	res.Warnings = append(res.Warnings, tg.warnings...)

	// RSS, sampled from the overload's start to the last fire.
	var rssMu sync.Mutex
	var maxRSS, peakRSS int64
	sampleCtx, stopSampling := context.WithCancel(ctx)
	var sampler sync.WaitGroup
	sampler.Go(func() {
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			if s, ok := tg.sample(); ok {
				rssMu.Lock()
				maxRSS, peakRSS = max(maxRSS, s.rss), max(peakRSS, s.peakRSS)
				rssMu.Unlock()
			}
			select {
			case <-sampleCtx.Done():
				return
			case <-tick.C:
			}
		}
	})
	defer func() { stopSampling(); sampler.Wait() }()

	start := time.Now()
	end := start.Add(cfg.Duration)
	dueAt := end.Add(cfg.Lead).Truncate(time.Millisecond)
	due.Store(dueAt.UnixMilli())
	rcv.Reset(dueAt)
	tt := newTaskTemplate(prefix, rcv.URL()+"/fire", run)
	path := "/v1/tasks"
	if cfg.Batch > 1 {
		path = "/v1/tasks:batch"
	}
	var (
		next                             atomic.Int64
		requests, acked, refused, withRA atomic.Int64
		other, transport                 atomic.Int64
		firstMu                          sync.Mutex
		firstOther                       string
		workers                          sync.WaitGroup
		loadCtx, stopLoad                = context.WithDeadline(ctx, end)
	)
	noteOther := func(msg string) {
		firstMu.Lock()
		if firstOther == "" {
			firstOther = msg
		}
		firstMu.Unlock()
	}
	cfg.Progress.logf("overload: %d clients for %s, every task due at +%s after it", cfg.Concurrency, cfg.Duration, cfg.Lead)
	for range cfg.Concurrency {
		workers.Go(func() {
			var body []byte
			for loadCtx.Err() == nil && time.Now().Before(end) {
				lo := int(next.Add(int64(cfg.Batch))) - cfg.Batch
				body = body[:0]
				if cfg.Batch > 1 {
					body = append(body, `{"tasks":[`...)
				}
				for i := lo; i < lo+cfg.Batch; i++ {
					if i > lo {
						body = append(body, ',')
					}
					body = tt.appendDue(body, i, dueAt)
				}
				if cfg.Batch > 1 {
					body = append(body, "]}"...)
				}
				a, err := tg.api.do(loadCtx, http.MethodPost, path, body)
				switch {
				case err != nil && loadCtx.Err() != nil:
					return // the overload ended with the request in flight
				case err != nil && !time.Now().Before(end):
					return // ditto: fasthttp's deadline passes before the context's timer fires
				case err != nil:
					transport.Add(1)
					noteOther(err.Error())
					continue
				}
				requests.Add(1)
				switch {
				case a.status == http.StatusTooManyRequests:
					refused.Add(1)
					if a.retryAfter > 0 {
						withRA.Add(1)
					}
				case cfg.Batch == 1 && a.status == http.StatusCreated:
					acked.Add(1)
				case cfg.Batch > 1 && a.status == http.StatusOK:
					ok, bad := batchCounts(a.body)
					acked.Add(int64(ok))
					other.Add(int64(bad))
					if bad > 0 {
						noteOther("batch: " + answerText(a))
					}
				default:
					other.Add(1)
					noteOther(answerText(a))
				}
			}
		})
	}
	workers.Wait()
	stopLoad()
	took := time.Since(start)

	ost := OverloadStats{Seconds: took.Seconds(), Requests: requests.Load(), Acked: acked.Load(),
		Refused429: refused.Load(), WithRetryAfter: withRA.Load(), Other: other.Load(),
		TransportErrors: transport.Load(), FirstOther: firstOther}
	ost.RequestsPerSecond = perSecond(ost.Requests, took)
	ost.AckedPerSecond = perSecond(ost.Acked, took)
	cfg.Progress.logf("overload over: %d requests, %d tasks acknowledged, %d answered 429; waiting for the fires", ost.Requests, ost.Acked, ost.Refused429)
	timedOut, err := waitFires(ctx, rcv, uint64(ost.Acked), dueAt.Add(cfg.Timeout), cfg.Progress.startPhase("fire", ost.Acked))
	if err != nil {
		return res, err
	}
	stopSampling()
	sampler.Wait()
	ost.Alive = true
	for _, m := range tg.nodes {
		if tg.launch != nil && !tg.launch.alive(m.index) {
			ost.Alive = false
			res.Warnings = append(res.Warnings, fmt.Sprintf("%s (pid %d) exited\n%s", m.label(), m.pid, tg.launch.logTail(m.index)))
		}
	}
	st := rcv.Stats()
	rssMu.Lock()
	ost.MaxRSSBytes, ost.PeakRSSBytes = maxRSS, peakRSS
	rssMu.Unlock()
	ost.Fired, ost.TimedOut, ost.Receiver = st.Delivered, timedOut, st
	res.Overload = &ost
	res.Node, res.Nodes = tg.allStats()
	res.Summary = overloadRows(ost, cfg)
	if ost.Fired > uint64(ost.Acked) {
		res.Warnings = append(res.Warnings, fmt.Sprintf("%d tasks fired whose create got no answer: in flight when the overload ended (the client gave up at the deadline), stored all the same", ost.Fired-uint64(ost.Acked)))
	}
	if ost.Fired < uint64(ost.Acked) {
		res.Warnings = append(res.Warnings, fmt.Sprintf("%d of %d acknowledged tasks did not fire", uint64(ost.Acked)-ost.Fired, ost.Acked))
	}
	if st.Early > 0 {
		res.Warnings = append(res.Warnings, fmt.Sprintf("%d fires came early", st.Early))
	}
	if ost.Refused429 > ost.WithRetryAfter {
		res.Warnings = append(res.Warnings, fmt.Sprintf("%d answers 429 without Retry-After", ost.Refused429-ost.WithRetryAfter))
	}
	res.Seconds = time.Since(res.Started).Seconds()
	return res, nil
}

// batchCounts counts the acknowledged (201, 200) and refused results of a
// POST /v1/tasks:batch answer.
func batchCounts(body []byte) (ok, bad int) {
	var ba batchAnswer
	if err := json.Unmarshal(body, &ba); err != nil {
		return 0, 1
	}
	for _, r := range ba.Results {
		if r.Status == http.StatusCreated || r.Status == http.StatusOK {
			ok++
		} else {
			bad++
		}
	}
	return ok, bad
}

// overloadRows is the summary of an overload run.
func overloadRows(ost OverloadStats, cfg OverloadConfig) []Row {
	mib := func(v int64) float64 { return float64(v) / (1 << 20) }
	share := 0.0
	if ost.Requests > 0 {
		share = 100 * float64(ost.Refused429) / float64(ost.Requests)
	}
	alive := "yes"
	if !ost.Alive {
		alive = "NO"
	}
	return []Row{
		{Metric: "overload", Text: fmt.Sprintf("%d clients back to back for %s, %d task(s) per request", cfg.Concurrency, cfg.Duration, cfg.Batch)},
		row("requests answered", ost.RequestsPerSecond, "req/s", 0, ""),
		row("tasks acknowledged", ost.AckedPerSecond, "tasks/s", 0, ""),
		row("answered 429 (share of requests)", share, "%", 0, ""),
		row("429s with Retry-After", float64(ost.WithRetryAfter), "", 0, ""),
		row("other errors, transport errors", float64(ost.Other+ost.TransportErrors), "", 0, ""),
		row("max RSS (sampled every 250 ms)", mib(ost.MaxRSSBytes), "MiB", 0, ""),
		row("peak RSS (VmHWM)", mib(ost.PeakRSSBytes), "MiB", 0, ""),
		{Metric: "node alive at the end", Text: alive},
		row("acknowledged tasks fired", float64(ost.Fired), fmt.Sprintf("of %d", ost.Acked), 0, ""),
		row("early fires", float64(ost.Receiver.Early), "", 0, ""),
		row("fire lateness p99", float64(ost.Receiver.Lateness.P99)/1e3, "ms", 0, ""),
	}
}
