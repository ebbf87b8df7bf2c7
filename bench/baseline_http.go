package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// HTTPBaselineConfig configures the HTTP ceiling: a bare Go net/http
// client posting callback-shaped requests to a Receiver, which is the most
// a node could fire into the same receiver on the same machine.
type HTTPBaselineConfig struct {
	// Requests is how many POSTs to time. Default 50,000: a few seconds on
	// a quiet 2-core box (~22k/s), long enough to average out scheduling.
	Requests int `json:"requests"`
	// Concurrency is the number of requests in flight. Default 64, like
	// limits.md's measurement and the node dispatcher's scale.
	Concurrency int `json:"concurrency"`
	// Progress reports the phase.
	Progress Progress `json:"-"`
}

// DefaultHTTPBaselineConfig returns the defaults described on each field.
func DefaultHTTPBaselineConfig() HTTPBaselineConfig {
	return HTTPBaselineConfig{Requests: 50_000, Concurrency: 64}
}

func (c HTTPBaselineConfig) validate() error {
	var errs []error
	if c.Requests < 1 {
		errs = append(errs, fmt.Errorf("bench: baseline requests %d < 1", c.Requests))
	}
	if c.Concurrency < 1 {
		errs = append(errs, fmt.Errorf("bench: baseline concurrency %d < 1", c.Concurrency))
	}
	return errors.Join(errs...)
}

// HTTPBaselineResult is the measured HTTP ceiling. It doubles as the
// receiver's capacity: the receiver answered this rate while sharing the
// machine with a bare client.
type HTTPBaselineResult struct {
	Requests    int64 `json:"requests"`
	Errors      int64 `json:"errors"`
	Concurrency int   `json:"concurrency"`
	BodyBytes   int   `json:"body_bytes"`
	// Seconds and PerSecond: wall time and successful requests per second.
	Seconds   float64 `json:"seconds"`
	PerSecond float64 `json:"per_second"`
	// Latency is the client's round trip per request.
	Latency Summary `json:"latency"`
	// OneWay is what the receiver saw as lateness: arrival minus the
	// instant the client stamped into X-Chime-Due-At just before sending.
	// It is the lateness of a scheduler that fires exactly on time.
	OneWay Summary `json:"one_way"`
	// CPUPerRequest is this process's CPU µs per request: client and
	// receiver together, as they share the process.
	CPUPerRequest float64 `json:"cpu_us_per_request"`
}

// MeasureHTTP measures the HTTP ceiling against rcv, which must be started.
// It resets rcv before and after, so the caller's recording starts clean.
func MeasureHTTP(ctx context.Context, rcv *Receiver, cfg HTTPBaselineConfig) (HTTPBaselineResult, error) {
	if err := cfg.validate(); err != nil {
		return HTTPBaselineResult{}, err
	}
	url := rcv.URL() + "/baseline"
	if rcv.URL() == "" {
		return HTTPBaselineResult{}, errors.New("bench: MeasureHTTP needs a started receiver")
	}
	hc := newHTTPClient(cfg.Concurrency, 30*time.Second)
	defer hc.CloseIdleConnections()
	body := benchPayload("baseline")

	// Warm up: one request per connection, so dialing is not timed.
	var warm sync.WaitGroup
	for i := range cfg.Concurrency {
		warm.Go(func() { _ = postCallback(ctx, hc, url, body, "warmup:"+strconv.Itoa(i)) })
	}
	warm.Wait()
	rcv.Reset(time.Now())

	ph := cfg.Progress.startPhase("baseline-http", int64(cfg.Requests))
	var (
		next, errs atomic.Int64
		mu         sync.Mutex // guards lat and firstErr
		lat        Histogram
		firstErr   error
		wg         sync.WaitGroup
	)
	self0 := selfCPU()
	start := time.Now()
	for range cfg.Concurrency {
		wg.Go(func() {
			var local Histogram
			for {
				i := next.Add(1) - 1
				if i >= int64(cfg.Requests) || ctx.Err() != nil {
					break
				}
				t0 := time.Now()
				if err := postCallback(ctx, hc, url, body, "baseline:"+strconv.FormatInt(i, 10)); err != nil {
					errs.Add(1)
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					continue
				}
				local.RecordDuration(time.Since(t0))
				ph.Add(1)
			}
			mu.Lock()
			lat.Merge(&local)
			mu.Unlock()
		})
	}
	wg.Wait()
	took := time.Since(start)
	cpu := selfCPU() - self0
	ph.End()
	if err := ctx.Err(); err != nil {
		return HTTPBaselineResult{}, err
	}
	st := rcv.Stats()
	rcv.Reset(time.Now())
	ok := int64(lat.Count())
	res := HTTPBaselineResult{
		Requests:      ok,
		Errors:        errs.Load(),
		Concurrency:   cfg.Concurrency,
		BodyBytes:     len(body),
		Seconds:       took.Seconds(),
		PerSecond:     perSecond(ok, took),
		Latency:       lat.Summary(),
		OneWay:        st.Lateness,
		CPUPerRequest: perOp(cpu, ok+errs.Load()),
	}
	if ok == 0 {
		return res, fmt.Errorf("bench: baseline-http: every request failed: %w", firstErr)
	}
	return res, nil
}

// postCallback sends one callback-shaped POST, stamped due now.
func postCallback(ctx context.Context, hc *http.Client, url string, body []byte, fireID string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(headerTaskID, "baseline")
	req.Header.Set(headerFireID, fireID)
	req.Header.Set(headerAttempt, "1")
	req.Header.Set(headerDueAt, time.Now().UTC().Format(time.RFC3339Nano))
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("bench: receiver answered %d", resp.StatusCode)
	}
	return nil
}

// RunHTTPBaseline is the baseline-http workload on its own: it starts a
// Receiver, measures the ceiling and reports it.
func RunHTTPBaseline(ctx context.Context, cfg HTTPBaselineConfig) (Result, error) {
	res := Result{Workload: "baseline-http", Started: time.Now(), Env: currentEnv(), Config: cfg}
	rcv, err := NewReceiver(ReceiverConfig{})
	if err != nil {
		return res, err
	}
	if err := rcv.Start(); err != nil {
		return res, err
	}
	defer rcv.Close()
	hb, err := MeasureHTTP(ctx, rcv, cfg)
	if err != nil {
		return res, err
	}
	res.HTTPBaseline = &hb
	res.Summary = []Row{
		row("callbacks/s (bare client → receiver, c="+strconv.Itoa(cfg.Concurrency)+")", hb.PerSecond, "req/s", 0, ""),
		row("round trip p50", float64(hb.Latency.P50)/1e3, "ms", 0, ""),
		row("round trip p99", float64(hb.Latency.P99)/1e3, "ms", 0, ""),
		row("one-way p50", float64(hb.OneWay.P50)/1e3, "ms", 0, ""),
		row("one-way p99", float64(hb.OneWay.P99)/1e3, "ms", 0, ""),
		row("CPU per request (client+receiver)", hb.CPUPerRequest, "µs", 0, ""),
	}
	res.Seconds = time.Since(res.Started).Seconds()
	return res, nil
}
