package node

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// breakerOutage is one run of the outage scenario of TestBreakerOutage: a
// receiver that answers 500 for the first 20 s, then 200, and 60
// one-shot tasks (max_retries 3) due every 500 ms from t0. It returns the
// hits, t0 and the recovery time, and the tasks' final statuses.
type breakerOutage struct {
	hits           []hit
	t0, recover    time.Time
	status         map[string]string
	statsDuring    statsCallbacks // GET /v1/stats at t0+15s
	metricsDuring  string         // /metrics at t0+15s
	dashDuring     []string       // the dashboard's callback table at t0+15s: "host circuit held"
	metricsAfter   string         // /metrics at the end
	circuitEvents  []string       // the dashboard timeline's circuit events
	outageAttempts int            // hits before recover
	deliveredTwice []string
	earlyHits      []string
	attemptsGapped []string
}

type statsCallbacks struct {
	Callbacks struct {
		Breaker  string `json:"breaker"`
		Circuits []struct {
			Host     string    `json:"host"`
			State    string    `json:"state"`
			Held     int       `json:"held"`
			OpenedAt time.Time `json:"opened_at"`
		} `json:"circuits"`
	} `json:"callbacks"`
}

const (
	breakerTasks   = 60
	breakerOutageD = 20 * time.Second
)

func runBreakerOutage(t *testing.T, off bool) *breakerOutage {
	out := &breakerOutage{status: map[string]string{}}
	rcv := newReceiver(t)
	tn := startNode(t, func(c *Config) { c.Breaker.Off = off })
	out.t0 = time.Now().Truncate(time.Second).Add(time.Second)
	out.recover = out.t0.Add(breakerOutageD)
	rcv.setRespond(func(h hit, _ int) int {
		if h.At.Before(out.recover) {
			return 500
		}
		return 200
	})
	for i := range breakerTasks {
		due := out.t0.Add(time.Duration(i) * 500 * time.Millisecond).UTC().Format(time.RFC3339Nano)
		body := fmt.Sprintf(`{"id":"b%02d","callback_url":%q,"due_at":%q,"max_retries":3}`, i, rcv.url("/cb"), due)
		if code := tn.do(t, "POST", "/v1/tasks", body, nil); code != 201 {
			t.Fatalf("create b%02d: %d", i, code)
		}
	}
	time.Sleep(time.Until(out.t0.Add(15 * time.Second)))
	if code := tn.do(t, "GET", "/v1/stats", nil, &out.statsDuring); code != 200 {
		t.Fatalf("stats: %d", code)
	}
	out.metricsDuring = tn.metricsText(t)
	if snap, err := tn.Dashboard().Snapshot(context.Background()); err != nil {
		t.Fatal(err)
	} else {
		for _, h := range snap.Hosts {
			out.dashDuring = append(out.dashDuring, fmt.Sprintf("%s %s %d", h.Host, h.Circuit, h.Held))
		}
	}
	time.Sleep(time.Until(out.t0.Add(150 * time.Second)))
	out.metricsAfter = tn.metricsText(t)
	snap, err := tn.Dashboard().Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range snap.Events {
		if e.Kind == "circuit" {
			out.circuitEvents = append(out.circuitEvents, e.Text)
		}
	}
	for i := range breakerTasks {
		id := fmt.Sprintf("b%02d", i)
		var got map[string]any
		if code := tn.do(t, "GET", "/v1/tasks/"+id, nil, &got); code != 200 {
			t.Fatalf("get %s: %d", id, code)
		}
		out.status[id], _ = got["status"].(string)
	}
	out.hits = rcv.hits()
	delivered := map[string]int{}
	lastAttempt := map[string]int{}
	for _, h := range out.hits {
		if h.At.Before(out.recover) {
			out.outageAttempts++
		} else {
			delivered[h.TaskID]++
			if delivered[h.TaskID] == 2 {
				out.deliveredTwice = append(out.deliveredTwice, h.TaskID)
			}
		}
		if h.At.Before(h.Due) {
			out.earlyHits = append(out.earlyHits, h.FireID)
		}
		// A held fire is not an attempt: the attempts a receiver sees
		// of one fire are numbered 1, 2, 3… without a gap.
		if h.Attempt != lastAttempt[h.TaskID]+1 {
			out.attemptsGapped = append(out.attemptsGapped, fmt.Sprintf("%s attempt %d after %d", h.TaskID, h.Attempt, lastAttempt[h.TaskID]))
		}
		lastAttempt[h.TaskID] = h.Attempt
	}
	return out
}

// TestBreakerOutage (API.md "Circuit breaker"): a receiver fails (500)
// for 20 s then recovers. With the breaker the circuit opens (/v1/stats,
// the gauge, the dashboard's timeline), the fires are held instead of
// attempted, no task exhausts its retries, every task is delivered once
// after the recovery, none early, and the attempts a task's receiver sees
// are numbered without gaps (holding is not an attempt). Without it
// (Breaker.Off) the same outage costs more attempts and fails tasks. Both
// attempt counts are logged (docs/BENCHMARKS.md).
func TestBreakerOutage(t *testing.T) {
	var on, off *breakerOutage
	synctest.Test(t, func(t *testing.T) { on = runBreakerOutage(t, false) })
	synctest.Test(t, func(t *testing.T) { off = runBreakerOutage(t, true) })
	if t.Failed() {
		return
	}
	failedOff := 0
	for _, s := range off.status {
		if s == "failed" {
			failedOff++
		}
	}
	t.Logf("attempts sent to the dead host during the %v outage: %d with the breaker, %d without (%d of %d tasks failed without)",
		breakerOutageD, on.outageAttempts, off.outageAttempts, failedOff, breakerTasks)

	for id, s := range on.status {
		if s != "done" {
			t.Errorf("breaker on: %s ended %q, want done", id, s)
		}
	}
	if len(on.deliveredTwice) > 0 || len(on.earlyHits) > 0 || len(on.attemptsGapped) > 0 {
		t.Errorf("breaker on: delivered twice %v, early %v, attempt gaps %v", on.deliveredTwice, on.earlyHits, on.attemptsGapped)
	}
	delivered := map[string]bool{}
	var closed, last time.Time // the first success (the probe that closes the circuit), the last
	for _, h := range on.hits {
		if !h.At.Before(on.recover) {
			delivered[h.TaskID] = true
			if closed.IsZero() {
				closed = h.At
			}
			last = h.At
		}
	}
	if len(delivered) != breakerTasks {
		t.Errorf("breaker on: %d tasks delivered after the recovery, want %d", len(delivered), breakerTasks)
	}
	// The held fires are released as the circuit closes, ramped (10 in the
	// first second, 20 in the next, …): not at their next probe time.
	if last.Sub(closed) > 4*time.Second || last.Sub(closed) < time.Second {
		t.Errorf("breaker on: deliveries from %v to %v after t0: want the held ones released over 1-4 s", closed.Sub(on.t0), last.Sub(on.t0))
	}
	cb := on.statsDuring.Callbacks
	if cb.Breaker != "on" || len(cb.Circuits) != 1 || cb.Circuits[0].State == "closed" || cb.Circuits[0].Held == 0 ||
		!strings.HasPrefix(cb.Circuits[0].Host, "http://127.0.0.1:") {
		t.Errorf("breaker on: /v1/stats callbacks during the outage = %+v, want one open circuit with fires held", cb)
	}
	if !strings.Contains(on.metricsDuring, "chime_callback_circuit_open{host=\"http://127.0.0.1:") ||
		!strings.Contains(on.metricsDuring, "} 1\n") {
		t.Errorf("breaker on: no open circuit gauge during the outage")
	}
	for _, l := range strings.Split(on.metricsAfter, "\n") {
		if strings.HasPrefix(l, "chime_callback_circuit_open{") && !strings.HasSuffix(l, " 0") {
			t.Errorf("breaker on: after the recovery: %s, want 0", l)
		}
	}
	if len(on.dashDuring) != 1 || !strings.Contains(on.dashDuring[0], " open ") && !strings.Contains(on.dashDuring[0], " half_open ") ||
		strings.HasSuffix(on.dashDuring[0], " 0") {
		t.Errorf("breaker on: dashboard callback table during the outage %q, want the host open with fires held", on.dashDuring)
	}
	if len(off.dashDuring) != 1 || strings.Contains(off.dashDuring[0], "open") {
		t.Errorf("breaker off: dashboard callback table during the outage %q, want no circuit", off.dashDuring)
	}
	if len(on.circuitEvents) != 2 || !strings.Contains(on.circuitEvents[0], "opened") || !strings.Contains(on.circuitEvents[1], "closed") {
		t.Errorf("breaker on: timeline circuit events %q, want one opening then one closing", on.circuitEvents)
	}
	// Far fewer attempts reach the dead host with the breaker.
	if on.outageAttempts*2 > off.outageAttempts {
		t.Errorf("attempts during the outage: %d with the breaker, %d without: want under half", on.outageAttempts, off.outageAttempts)
	}
	if off.statsDuring.Callbacks.Breaker != "off" || len(off.statsDuring.Callbacks.Circuits) != 0 {
		t.Errorf("breaker off: /v1/stats callbacks = %+v", off.statsDuring.Callbacks)
	}
	if len(off.earlyHits) > 0 {
		t.Errorf("breaker off: early %v", off.earlyHits)
	}
}

// TestBreakerHeldSurvivesRestart: fires held by an open circuit are not
// written anywhere: their records stay due, so a node stopped while it
// holds them fires every one after its restart (the breaker starts
// closed), none early, each delivered once.
func TestBreakerHeldSurvivesRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rcv := newReceiver(t)
		var up atomicBool
		rcv.setRespond(func(hit, int) int {
			if up.get() {
				return 200
			}
			return 503
		})
		tn := startNode(t, nil)
		t0 := time.Now().Truncate(time.Second).Add(time.Second)
		const n = 30
		for i := range n {
			due := t0.Add(time.Duration(i) * 200 * time.Millisecond).UTC().Format(time.RFC3339Nano)
			body := fmt.Sprintf(`{"id":"r%02d","callback_url":%q,"due_at":%q,"max_retries":3}`, i, rcv.url("/cb"), due)
			if code := tn.do(t, "POST", "/v1/tasks", body, nil); code != 201 {
				t.Fatalf("create: %d", code)
			}
		}
		time.Sleep(time.Until(t0.Add(8 * time.Second)))
		var st statsCallbacks
		if code := tn.do(t, "GET", "/v1/stats", nil, &st); code != 200 || len(st.Callbacks.Circuits) != 1 || st.Callbacks.Circuits[0].Held == 0 {
			t.Fatalf("stats before the stop: %d %+v, want an open circuit holding fires", code, st.Callbacks)
		}
		stopped := time.Now()
		tn.stop(t)
		up.set(true)
		tn = restartNode(t, tn.cfg)
		rcv.waitHits(t, 60*time.Second, func(hs []hit) bool {
			ok := map[string]bool{}
			for _, h := range hs {
				if !h.At.Before(stopped) {
					ok[h.TaskID] = true
				}
			}
			return len(ok) == n
		})
		time.Sleep(20 * time.Second) // a repeat would come by now
		hs := rcv.hits()
		seen := map[string]int{}
		for _, h := range hs {
			if h.At.Before(h.Due) {
				t.Errorf("%s sent %v before its due time", h.FireID, h.Due.Sub(h.At))
			}
			if !h.At.Before(stopped) {
				seen[h.TaskID]++
			}
		}
		for id, c := range seen {
			if c != 1 {
				t.Errorf("%s delivered %d times after the restart, want 1", id, c)
			}
		}
		for i := range n {
			var got map[string]any
			if code := tn.do(t, "GET", fmt.Sprintf("/v1/tasks/r%02d", i), nil, &got); code != 200 || got["status"] != "done" {
				t.Errorf("r%02d: %d %v, want done", i, code, got["status"])
			}
		}
	})
}

type atomicBool struct {
	mu sync.Mutex
	v  bool
}

func (b *atomicBool) get() bool  { b.mu.Lock(); defer b.mu.Unlock(); return b.v }
func (b *atomicBool) set(v bool) { b.mu.Lock(); b.v = v; b.mu.Unlock() }
