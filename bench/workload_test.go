package bench

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// Workloads against fakeNode: the harness's own logic (creation, retries,
// counting, fire bookkeeping, results) without the real node.

func TestCreateTasksAgainstFakeNode(t *testing.T) {
	tests := []struct {
		name         string
		single       bool
		n, batch     int
		throttle     int
		rejectSuffix string
		wantAcked    int64
		wantRejected int64
		wantRetries  int64
	}{
		{name: "single", single: true, n: 50, batch: 1, wantAcked: 50},
		{name: "batch", n: 250, batch: 100, wantAcked: 250},
		{name: "429 is retried", n: 30, batch: 10, throttle: 2, wantAcked: 30, wantRetries: 2},
		{name: "per-task errors are counted", n: 100, batch: 25, rejectSuffix: "7", wantAcked: 90, wantRejected: 10},
		{name: "single errors are counted", single: true, n: 20, batch: 1, rejectSuffix: "3", wantAcked: 18, wantRejected: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := startFakeNode(t, tt.throttle, tt.rejectSuffix)
			tg := urlTarget(f.url, 4)
			defer tg.close()
			tt2 := newTaskTemplate("bt-x-", "http://127.0.0.1:9/never", "x")
			plan := createPlan{n: tt.n, batch: tt.batch, concurrency: 4, single: tt.single,
				task: func(dst []byte, i int) []byte { return tt2.appendDelay(dst, i, 3_600_000) }}
			st, err := createTasks(t.Context(), tg.api, tg, plan, Progress{}.startPhase("create", int64(tt.n)))
			if err != nil {
				t.Fatalf("createTasks: %v", err)
			}
			if st.Acked != tt.wantAcked || st.Rejected != tt.wantRejected || st.Retries != tt.wantRetries {
				t.Errorf("acked, rejected, retries = %d, %d, %d, want %d, %d, %d (first error %q)",
					st.Acked, st.Rejected, st.Retries, tt.wantAcked, tt.wantRejected, tt.wantRetries, st.FirstError)
			}
			if (tt.wantRejected > 0) != (st.FirstError != "") {
				t.Errorf("FirstError = %q with %d rejected", st.FirstError, st.Rejected)
			}
			if f.stored() != int(tt.wantAcked) {
				t.Errorf("fake stored %d tasks, want %d", f.stored(), tt.wantAcked)
			}
			ops := (tt.n + max(tt.batch, 1) - 1) / max(tt.batch, 1)
			if st.Latency.Count != uint64(ops) {
				t.Errorf("latency count = %d, want %d requests", st.Latency.Count, ops)
			}
		})
	}
}

// urlTarget is a target of one running node at url, without waiting for
// its /readyz.
func urlTarget(url string, conns int) *target {
	m := &member{index: 1, api: newAPIClient(url, "", conns)}
	return &target{cfg: TargetConfig{URLs: []string{url}}, nodes: []*member{m}, api: m.api}
}

// A node answers 503 for the tasks of a slot that is moving (and for a
// write it stored but could not replicate); the harness sends those tasks
// again on their own and reports every task's outcome.
func TestCreateTasksRetriesTasksOfMovingSlots(t *testing.T) {
	for _, stores := range []bool{false, true} {
		for _, single := range []bool{false, true} {
			t.Run(fmt.Sprintf("single=%v/stored=%v", single, stores), func(t *testing.T) {
				f := startFakeNode(t, 0, "9")
				f.movingSuffix, f.movingStores = "3", stores
				tg := urlTarget(f.url, 4)
				defer tg.close()
				tt := newTaskTemplate("bt-m-", "http://127.0.0.1:9/never", "m")
				var mu sync.Mutex
				results := map[int]bool{}
				plan := createPlan{n: 100, batch: 25, concurrency: 2, single: single,
					task: func(dst []byte, i int) []byte { return tt.appendDelay(dst, i, 3_600_000) },
					result: func(i int, ok bool) {
						mu.Lock()
						defer mu.Unlock()
						if _, dup := results[i]; dup {
							t.Errorf("result(%d) called twice", i)
						}
						results[i] = ok
					}}
				st, err := createTasks(t.Context(), tg.api, tg, plan, Progress{}.startPhase("create", 100))
				if err != nil {
					t.Fatal(err)
				}
				// Ids ending in 9 are rejected for good; those ending in 3
				// are answered 503 once, then stored (or found stored).
				wantExisted := int64(0)
				if stores {
					wantExisted = 10
				}
				if st.Acked != 90 || st.Rejected != 10 || st.ExistedOnRetry != wantExisted {
					t.Errorf("acked %d, rejected %d, existed on retry %d; want 90, 10, %d (first error %q)", st.Acked, st.Rejected, st.ExistedOnRetry, wantExisted, st.FirstError)
				}
				if !single && st.TaskRetries != 10 {
					t.Errorf("task retries = %d, want 10", st.TaskRetries)
				}
				if st.Retries == 0 {
					t.Error("retries = 0, want the requests sent again counted")
				}
				if len(results) != 100 {
					t.Fatalf("result called for %d tasks, want 100", len(results))
				}
				for i, ok := range results {
					if want := i%10 != 9; ok != want {
						t.Errorf("result(%d) = %v, want %v", i, ok, want)
					}
				}
			})
		}
	}
}

func TestCreateTasksStopsOnTransportError(t *testing.T) {
	addr, err := freeLoopbackAddr() // nothing listens there
	if err != nil {
		t.Fatal(err)
	}
	tg := urlTarget("http://"+addr, 2)
	api := tg.api
	defer tg.close()
	tt := newTaskTemplate("bt-", "http://127.0.0.1:9/", "x")
	plan := createPlan{n: 10, batch: 5, concurrency: 2, task: func(dst []byte, i int) []byte { return tt.appendDelay(dst, i, 1) }}
	if _, err := createTasks(t.Context(), api, tg, plan, Progress{}.startPhase("x", 10)); err == nil {
		t.Fatal("createTasks against a closed port = nil error, want a transport error")
	}
}

func TestTaskTemplateRendersValidJSON(t *testing.T) {
	tt := newTaskTemplate("bf-run-", `http://127.0.0.1:1/fire?a="b"`, "run")
	due := time.Date(2026, 5, 6, 7, 8, 9, 123_000_000, time.UTC)
	plan := createPlan{batch: 3, task: func(dst []byte, i int) []byte { return tt.appendDue(dst, i, due) }}
	body := buildCreateBody(nil, plan, 4, 7)
	var req struct {
		Tasks []struct {
			ID          string          `json:"id"`
			CallbackURL string          `json:"callback_url"`
			DueAt       time.Time       `json:"due_at"`
			Payload     json.RawMessage `json:"payload"`
		} `json:"tasks"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatalf("batch body is not JSON: %v\n%s", err, body)
	}
	if len(req.Tasks) != 3 || req.Tasks[0].ID != "bf-run-4" || req.Tasks[2].ID != "bf-run-6" {
		t.Fatalf("tasks = %+v, want ids bf-run-4..6", req.Tasks)
	}
	if req.Tasks[1].CallbackURL != `http://127.0.0.1:1/fire?a="b"` || !req.Tasks[1].DueAt.Equal(due) {
		t.Errorf("task = %+v, want the callback and due given", req.Tasks[1])
	}
	if n := len(req.Tasks[0].Payload); n < 80 || n > 120 {
		t.Errorf("payload is %d bytes, want about 100", n)
	}
	single := tt.appendDelay(nil, 9, 3_600_000)
	var one map[string]any
	if err := json.Unmarshal(single, &one); err != nil || one["delay_ms"] != float64(3_600_000) || one["id"] != "bf-run-9" {
		t.Errorf("single task = %s (err %v), want id bf-run-9 and delay_ms 3600000", single, err)
	}
}

func TestFireIndex(t *testing.T) {
	tests := []struct {
		fireID string
		want   int
		ok     bool
	}{
		{"bf-r-0:1", 0, true},
		{"bf-r-41:7", 41, true},
		{"bf-r-99:1", 99, true},
		{"bf-r-100:1", 0, false}, // out of range
		{"bf-r-5", 0, false},     // no sequence
		{"bf-q-5:1", 0, false},   // another run
		{"bf-r--1:1", 0, false},
		{"bf-r-x:1", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.fireID, func(t *testing.T) {
			got, ok := fireIndex(tt.fireID, "bf-r-", 100)
			if got != tt.want || ok != tt.ok {
				t.Errorf("fireIndex(%q) = %d, %v, want %d, %v", tt.fireID, got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestRunCreateAgainstFakeNode(t *testing.T) {
	f := startFakeNode(t, 0, "")
	for _, mode := range []string{ModeSingle, ModeBatch} {
		t.Run("mode="+mode, func(t *testing.T) {
			cfg := DefaultCreateConfig()
			cfg.Target.URLs = []string{f.url}
			cfg.Mode, cfg.N, cfg.Concurrency, cfg.Batch, cfg.BaselineN = mode, 200, 4, 50, 200
			res, err := RunCreate(t.Context(), cfg)
			if err != nil {
				t.Fatalf("RunCreate: %v", err)
			}
			if res.Create == nil || res.Create.Acked != 200 || res.Create.Mode != mode {
				t.Fatalf("Create = %+v, want 200 acked in mode %s", res.Create, mode)
			}
			if res.PebbleBaseline == nil || res.PebbleBaseline.Tasks != 200 {
				t.Fatalf("PebbleBaseline = %+v, want 200 tasks", res.PebbleBaseline)
			}
			if r := res.Summary[0]; r.Ceiling != res.PebbleBaseline.PerSecond || r.Ratio <= 0 {
				t.Errorf("summary row = %+v, want the pebble ceiling and a ratio", r)
			}
			if len(res.Warnings) != 0 {
				t.Errorf("Warnings = %q, want none", res.Warnings)
			}
		})
	}
}

func TestRunFireAgainstFakeNode(t *testing.T) {
	f := startFakeNode(t, 0, "")
	cfg := DefaultFireConfig()
	cfg.Target.URLs = []string{f.url}
	cfg.N, cfg.Rate, cfg.Batch, cfg.Concurrency = 100, 400, 30, 2
	cfg.Lead, cfg.Timeout, cfg.Settle = 400*time.Millisecond, 10*time.Second, 50*time.Millisecond
	cfg.Baseline.Requests, cfg.Baseline.Concurrency = 200, 4
	res, err := RunFire(t.Context(), cfg)
	if err != nil {
		t.Fatalf("RunFire: %v", err)
	}
	fs := res.Fire
	if fs == nil {
		t.Fatal("Fire = nil")
	}
	if fs.Fired != 100 || fs.Completion != 1 || fs.TimedOut {
		t.Errorf("fired, completion, timed out = %d, %v, %v, want 100, 1, false", fs.Fired, fs.Completion, fs.TimedOut)
	}
	if r := fs.Receiver; r.Early != 0 || r.Duplicates != 0 || r.DueMismatch != 0 || r.Malformed != 0 || r.MinLateness < 0 {
		t.Errorf("receiver = early %d, duplicates %d, due mismatch %d, malformed %d, min lateness %d µs; want 0s and ≥ 0",
			r.Early, r.Duplicates, r.DueMismatch, r.Malformed, r.MinLateness)
	}
	if fs.Receiver.Lateness.Count != 100 {
		t.Errorf("lateness count = %d, want 100 (baseline requests must not leak in)", fs.Receiver.Lateness.Count)
	}
	if res.HTTPBaseline == nil || res.HTTPBaseline.Requests != 200 || res.HTTPBaseline.OneWay.Count != 200 {
		t.Errorf("HTTPBaseline = %+v, want 200 requests seen by the receiver", res.HTTPBaseline)
	}
	if len(res.Charts) != 2 {
		t.Errorf("%d charts, want 2", len(res.Charts))
	}
	want := []string{"fire rate", "completion", "lateness p50", "lateness p99", "early requests", "duplicate deliveries"}
	var metrics []string
	for _, r := range res.Summary {
		metrics = append(metrics, r.Metric)
	}
	joined := strings.Join(metrics, "|")
	for _, w := range want {
		if !strings.Contains(joined, w) {
			t.Errorf("summary metrics %q lack %q", metrics, w)
		}
	}
}

// TestRunFireFlowKeyAgainstFakeNode: --flow-key defines the flow, fires a
// second round of tasks with the key (ids with the key as their hash
// tag), and adds the comparison rows.
func TestRunFireFlowKeyAgainstFakeNode(t *testing.T) {
	f := startFakeNode(t, 0, "")
	cfg := DefaultFireConfig()
	cfg.Target.URLs = []string{f.url}
	cfg.N, cfg.Rate, cfg.Batch, cfg.Concurrency = 60, 400, 30, 2
	cfg.Lead, cfg.Timeout, cfg.Settle = 300*time.Millisecond, 10*time.Second, 50*time.Millisecond
	cfg.SkipBaseline = true
	cfg.FlowKey = "tenant-7"
	res, err := RunFire(t.Context(), cfg)
	if err != nil {
		t.Fatalf("RunFire: %v", err)
	}
	if fs := res.Fire; fs == nil || fs.Fired != 60 || fs.Flow == nil || fs.Flow.Fired != 60 || fs.Flow.Receiver.Early != 0 {
		t.Fatalf("Fire = %+v, want 60 fires in each round", res.Fire)
	}
	f.mu.Lock()
	flows, keyed, ids := slices.Clone(f.flows), f.keyed, len(f.ids)
	f.mu.Unlock()
	if len(flows) != 1 || !strings.HasPrefix(flows[0], "tenant-7 {") || keyed != 60 || ids != 120 {
		t.Errorf("flows %q, %d keyed tasks of %d; want one PUT of tenant-7, 60 of 120", flows, keyed, ids)
	}
	var metrics []string
	for _, r := range res.Summary {
		metrics = append(metrics, r.Metric)
	}
	if j := strings.Join(metrics, "|"); !strings.Contains(j, "fire rate with flow_key") || !strings.Contains(j, "completion with flow_key") {
		t.Errorf("summary metrics %q lack the flow_key rows", metrics)
	}
	cfg.FlowKey = "a{b"
	if err := cfg.Validate(); err == nil {
		t.Error("a flow key with a brace validated")
	}
}

func TestRunScaleAgainstFakeNode(t *testing.T) {
	f := startFakeNode(t, 0, "")
	cfg := DefaultScaleConfig()
	cfg.Target.URLs = []string{f.url}
	cfg.N, cfg.Batch, cfg.Concurrency, cfg.SkipBaseline = 500, 100, 2, true
	res, err := RunScale(t.Context(), cfg)
	if err != nil {
		t.Fatalf("RunScale: %v", err)
	}
	if res.Scale == nil || res.Scale.Create.Acked != 500 || f.stored() != 500 {
		t.Fatalf("Scale = %+v, fake stored %d, want 500 acked and stored", res.Scale, f.stored())
	}
	if res.Scale.RestartSeconds != 0 {
		t.Errorf("RestartSeconds = %v for a URL target, want 0", res.Scale.RestartSeconds)
	}
}

func TestConfigsValidate(t *testing.T) {
	good := TargetConfig{URLs: []string{"http://127.0.0.1:7070"}}
	tests := []struct {
		name    string
		err     error
		wantErr string
	}{
		{"create defaults", withTarget(DefaultCreateConfig(), good).Validate(), ""},
		{"fire defaults", func() error { c := DefaultFireConfig(); c.Target = good; return c.Validate() }(), ""},
		{"scale defaults", func() error { c := DefaultScaleConfig(); c.Target = good; return c.Validate() }(), ""},
		{"no target", DefaultCreateConfig().Validate(), "target URL or spawn"},
		{"both targets", withTarget(DefaultCreateConfig(), TargetConfig{URLs: good.URLs, Spawn: true}).Validate(), "not both"},
		{"bad URL", withTarget(DefaultCreateConfig(), TargetConfig{URLs: []string{"ftp://x"}}).Validate(), "not an http(s) URL"},
		{"bad mode", func() error {
			c := withTarget(DefaultCreateConfig(), good)
			c.Mode = "bulk"
			return c.Validate()
		}(), `mode "bulk"`},
		{"batch too large", func() error {
			c := withTarget(DefaultCreateConfig(), good)
			c.Batch = 10_001
			return c.Validate()
		}(), "batch 10001"},
		{"zero rate", func() error { c := DefaultFireConfig(); c.Target = good; c.Rate = 0; return c.Validate() }(), "rate"},
		{"route owner needs single mode", func() error {
			c := withTarget(DefaultCreateConfig(), TargetConfig{URLs: []string{good.URLs[0], good.URLs[0]}})
			c.Route = RouteOwner
			return c.Validate()
		}(), "needs --mode single"},
		{"route foreign needs a cluster", func() error {
			c := withTarget(DefaultCreateConfig(), good)
			c.Mode, c.Route = ModeSingle, RouteForeign
			return c.Validate()
		}(), "at least 2 nodes"},
		{"route sdk-compare needs single mode", func() error {
			c := withTarget(DefaultCreateConfig(), TargetConfig{URLs: []string{good.URLs[0], good.URLs[0]}})
			c.Route = RouteSDKCompare
			return c.Validate()
		}(), "needs --mode single"},
		{"route sdk needs a cluster", func() error {
			c := withTarget(DefaultCreateConfig(), good)
			c.Mode, c.Route = ModeSingle, RouteSDK
			return c.Validate()
		}(), "at least 2 nodes"},
		{"route sdk-fixed needs a cluster", func() error {
			c := withTarget(DefaultCreateConfig(), TargetConfig{Spawn: true})
			c.Mode, c.Route = ModeSingle, RouteSDKFixed
			return c.Validate()
		}(), "at least 2 nodes"},
		{"unknown route", func() error {
			c := withTarget(DefaultCreateConfig(), good)
			c.Route = "random"
			return c.Validate()
		}(), `route "random"`},
		{"too many nodes", withTarget(DefaultCreateConfig(), TargetConfig{Spawn: true, Nodes: 17}).Validate(), "nodes 17"},
		{"nodes with URLs", withTarget(DefaultCreateConfig(), TargetConfig{URLs: good.URLs, Nodes: 3}).Validate(), "spawned clusters"},
		{"failover defaults", DefaultFailoverConfig().Validate(), ""},
		{"join defaults", DefaultJoinConfig().Validate(), ""},
		{"failover needs a spawned cluster", func() error { c := DefaultFailoverConfig(); c.Target = good; return c.Validate() }(), "needs a spawned cluster"},
		{"failover needs two nodes", func() error { c := DefaultFailoverConfig(); c.Target.Nodes = 1; return c.Validate() }(), "nodes 1 < 2"},
		{"kill a node that is not there", func() error { c := DefaultFailoverConfig(); c.Kill = 4; return c.Validate() }(), "kill 4"},
		{"change after the last due", func() error { c := DefaultJoinConfig(); c.At = time.Minute; return c.Validate() }(), "after the last due"},
		{"join leaves room for one more", func() error { c := DefaultJoinConfig(); c.Target.Nodes = 16; return c.Validate() }(), "no room"},
		{"all problems at once", func() error {
			c := withTarget(DefaultCreateConfig(), good)
			c.N, c.Concurrency = 0, 0
			return c.Validate()
		}(), "n 0 < 1\nbench: concurrency 0 < 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			switch {
			case tt.wantErr == "" && tt.err != nil:
				t.Errorf("Validate() = %v, want nil", tt.err)
			case tt.wantErr != "" && (tt.err == nil || !strings.Contains(tt.err.Error(), tt.wantErr)):
				t.Errorf("Validate() = %v, want an error containing %q", tt.err, tt.wantErr)
			}
		})
	}
}

func withTarget(c CreateConfig, t TargetConfig) CreateConfig {
	c.Target = t
	return c
}

func TestRunRejectsBadConfigBeforeAnyWork(t *testing.T) {
	cfg := DefaultFireConfig()
	cfg.Target.URLs = []string{"http://127.0.0.1:1"}
	cfg.N = -1
	if _, err := RunFire(t.Context(), cfg); err == nil || !strings.Contains(err.Error(), "n -1") {
		t.Errorf("RunFire(n=-1) = %v, want a validation error", err)
	}
}

// TestScaleRowsPeakRSS: the summary of a scale run shows the node's peak
// RSS of the ingest (VmHWM) beside its RSS at the end.
func TestScaleRowsPeakRSS(t *testing.T) {
	ss := ScaleStats{Tasks: 10, RSSBytes: 100 << 20, PeakRSSBytes: 300 << 20}
	ss.Create.Acked = 10
	got := map[string]float64{}
	for _, r := range scaleRows(ss, nil) {
		got[r.Metric] = r.Value
	}
	if got["node RSS loaded"] != 100 || got["node peak RSS storing (VmHWM)"] != 300 {
		t.Errorf("scaleRows() = %v, want node RSS loaded 100 and peak 300 (MiB)", got)
	}
}
