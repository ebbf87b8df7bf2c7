package bench

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// ms is a millisecond in the Unix-nanosecond instants the ledger uses.
const ms = int64(time.Millisecond)

func TestGridTaskPlace(t *testing.T) {
	g := gridTask{start: 1000 * ms, period: 200 * ms}
	tests := []struct {
		name    string
		due     int64
		k, off  int64
		wantExp int64 // expectedBefore(due)
	}{
		{"start", 1000 * ms, 0, 0, 0},
		{"k=3", 1600 * ms, 3, 0, 3},
		{"just after k=3", 1600*ms + 1, 3, 1, 4},
		{"just before k=4", 1800*ms - 1, 4, -1, 4},
		{"halfway rounds up", 1700 * ms, 4, -100 * ms, 4},
		{"before start", 900 * ms, 0, -100 * ms, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k, off := g.place(tt.due)
			if k != tt.k || off != tt.off {
				t.Errorf("place(%d) = %d, %d, want %d, %d", tt.due, k, off, tt.k, tt.off)
			}
			if got := g.expectedBefore(tt.due); got != tt.wantExp {
				t.Errorf("expectedBefore(%d) = %d, want %d", tt.due, got, tt.wantExp)
			}
		})
	}
}

// TestDriftLedger feeds synthetic arrivals into the accounting: two tasks
// with period 100 ms starting at 0 and 50 ms, a window ending at 1 s, so
// each expects 10 occurrences.
func TestDriftLedger(t *testing.T) {
	grid := []gridTask{{start: 0, period: 100 * ms}, {start: 50 * ms, period: 100 * ms}}
	const end = 1000 * ms
	due := func(i, k int64) int64 { return grid[i].start + k*grid[i].period }
	// all returns arrivals of every occurrence of both tasks except skip.
	all := func(skip map[[2]int64]bool) [][2]int64 {
		var out [][2]int64
		for i := range int64(2) {
			for k := range int64(10) {
				if !skip[[2]int64{i, k}] {
					out = append(out, [2]int64{i, due(i, k)})
				}
			}
		}
		return out
	}
	tests := []struct {
		name     string
		arrivals [][2]int64 // task index, due
		want     DriftStats
	}{
		{name: "every occurrence once", arrivals: all(nil),
			want: DriftStats{Expected: 20, Received: 20}},
		{name: "nothing arrived", arrivals: nil,
			want: DriftStats{Expected: 20, Missed: 20, TasksWithGaps: 2}},
		{name: "a hole and a missing tail", arrivals: all(map[[2]int64]bool{{0, 3}: true, {1, 8}: true, {1, 9}: true}),
			want: DriftStats{Expected: 20, Received: 17, Missed: 3, Holes: 1, TasksWithGaps: 2}},
		{name: "off-grid dues count apart and leave their occurrence missed",
			arrivals: append(all(map[[2]int64]bool{{1, 4}: true}), [2]int64{1, due(1, 4) + 250*ms}, [2]int64{0, due(0, 2) - 3}),
			want:     DriftStats{Expected: 20, Received: 19, Missed: 1, Holes: 1, TasksWithGaps: 1, OffGrid: 2, MaxDriftNs: 50 * ms}},
		{name: "repeats of an occurrence", arrivals: append(all(nil), [2]int64{0, due(0, 0)}, [2]int64{1, due(1, 9)}),
			want: DriftStats{Expected: 20, Received: 20, Repeats: 2}},
		{name: "on-grid fires after the window are later, not expected",
			arrivals: append(all(nil), [2]int64{0, due(0, 10)}, [2]int64{1, due(1, 12)}),
			want:     DriftStats{Expected: 20, Received: 20, Later: 2}},
		{name: "a due before the start is off-grid", arrivals: append(all(nil), [2]int64{1, 10 * ms}),
			want: DriftStats{Expected: 20, Received: 20, OffGrid: 1, MaxDriftNs: 40 * ms}},
		{name: "unknown task index", arrivals: append(all(nil), [2]int64{-1, 0}, [2]int64{2, 0}),
			want: DriftStats{Expected: 20, Received: 20, Unknown: 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newDriftLedger(grid, end, "bp-t-")
			for _, a := range tt.arrivals {
				l.record(int(a[0]), a[1])
			}
			got := l.stats()
			if (got.Missed > 0) != (got.FirstMissed != "") || (got.OffGrid > 0) != (got.FirstOffGrid != "") {
				t.Errorf("examples: missed %d %q, off-grid %d %q; want an example exactly when counted",
					got.Missed, got.FirstMissed, got.OffGrid, got.FirstOffGrid)
			}
			got.FirstMissed, got.FirstOffGrid = "", ""
			if got != tt.want {
				t.Errorf("stats() = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestDriftLedgerExamplesNameTheTask(t *testing.T) {
	l := newDriftLedger([]gridTask{{start: 0, period: 100 * ms}}, 300*ms, "bp-t-")
	l.record(0, 0)
	l.record(0, 150*ms+7) // k=2 is 50 ms + 7 ns early
	st := l.stats()
	if !strings.HasPrefix(st.FirstMissed, "bp-t-0 k=1 due 1970-01-01T00:00:00.1Z") {
		t.Errorf("FirstMissed = %q, want task bp-t-0 k=1 and its due", st.FirstMissed)
	}
	if !strings.Contains(st.FirstOffGrid, "bp-t-0 due 1970-01-01T00:00:00.150000007Z is -49.999993ms off its grid (k=2)") {
		t.Errorf("FirstOffGrid = %q, want the task, due, offset and k", st.FirstOffGrid)
	}
}

func TestPlanPeriodic(t *testing.T) {
	base := time.Date(2026, 3, 4, 5, 6, 7, 250_000_000, time.UTC) // .250 s: not a whole second
	b := base.UnixNano()
	sec := int64(time.Second)
	tests := []struct {
		name      string
		cfg       func(*PeriodicConfig)
		wantStart []int64 // offsets from base, per task
		wantCron  []string
		offered   float64
	}{
		{name: "staggered every_ms", cfg: func(c *PeriodicConfig) { c.N, c.EveryMs = 4, 1000 },
			wantStart: []int64{0, 250 * ms, 500 * ms, 750 * ms}, offered: 4},
		{name: "all at once", cfg: func(c *PeriodicConfig) { c.N, c.EveryMs, c.Stagger = 3, 200, false },
			wantStart: []int64{0, 0, 0}, offered: 15},
		{name: "more tasks than milliseconds share them", cfg: func(c *PeriodicConfig) { c.N, c.EveryMs = 300, 100 },
			offered: 3000},
		{name: "@every cron staggered over its period",
			cfg:       func(c *PeriodicConfig) { c.N, c.EveryMs, c.CronFraction = 4, 1000, 0.5 },
			wantStart: []int64{0, 500 * ms, 0, 1000 * ms}, wantCron: []string{"@every 2s", "@every 2s"}, offered: 3},
		{name: "6-field cron on whole seconds, staggered by second",
			cfg: func(c *PeriodicConfig) {
				c.N, c.CronFraction, c.CronForm, c.CronPeriod = 3, 1, CronFormFields, 3*time.Second
			},
			// base is 05:06:07.25; second-of-minute 8 ≡ 2 (mod 3), 9 ≡ 0, 10 ≡ 1.
			wantStart: []int64{2*sec - 250*ms, 3*sec - 250*ms, 750 * ms},
			wantCron:  []string{"0/3 * * * * *", "1/3 * * * * *", "2/3 * * * * *"}, offered: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultPeriodicConfig()
			tt.cfg(&cfg)
			p := planPeriodic(cfg, base)
			if len(p.grid) != cfg.N {
				t.Fatalf("%d tasks planned, want %d", len(p.grid), cfg.N)
			}
			if p.offered != tt.offered {
				t.Errorf("offered = %v, want %v", p.offered, tt.offered)
			}
			for i, g := range p.grid {
				if tt.wantStart != nil && g.start-b != tt.wantStart[i] {
					t.Errorf("task %d starts at base%+v, want base%+v", i, time.Duration(g.start-b), time.Duration(tt.wantStart[i]))
				}
				if g.start < b || g.start >= b+g.period+sec || g.start%ms != 0 {
					t.Errorf("task %d starts at base%+v, want whole ms in [base, base + period + 1s)", i, time.Duration(g.start-b))
				}
			}
			if strings.Join(p.cron, "|") != strings.Join(tt.wantCron, "|") {
				t.Errorf("cron = %q, want %q", p.cron, tt.wantCron)
			}
		})
	}
}

func TestPlanPeriodicStaggerIsUniform(t *testing.T) {
	cfg := DefaultPeriodicConfig()
	cfg.N, cfg.EveryMs = 5000, 1000
	base := time.Unix(1_000_000, 0)
	p := planPeriodic(cfg, base)
	perMs := make(map[int64]int)
	for _, g := range p.grid {
		perMs[(g.start-base.UnixNano())/ms]++
	}
	if len(perMs) != 1000 {
		t.Fatalf("starts fall on %d distinct ms, want all 1000 of the period", len(perMs))
	}
	for off, c := range perMs {
		if c != 5 {
			t.Fatalf("%d tasks start at +%d ms, want 5 in every ms", c, off)
		}
	}
}

func TestPeriodicTaskJSON(t *testing.T) {
	cfg := DefaultPeriodicConfig()
	cfg.N, cfg.EveryMs, cfg.CronFraction = 2, 250, 0.5
	base := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	p := planPeriodic(cfg, base)
	tt := newTaskTemplate("bp-r-", "http://127.0.0.1:1/periodic", "r")
	body := buildCreateBody(nil, createPlan{batch: 2, task: func(dst []byte, i int) []byte { return p.appendTask(tt, dst, i) }}, 0, 2)
	var req struct {
		Tasks []struct {
			ID      string    `json:"id"`
			EveryMs int64     `json:"every_ms"`
			Cron    string    `json:"cron"`
			StartAt time.Time `json:"start_at"`
		} `json:"tasks"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatalf("body is not JSON: %v\n%s", err, body)
	}
	if len(req.Tasks) != 2 {
		t.Fatalf("%d tasks, want 2", len(req.Tasks))
	}
	if got := req.Tasks[0]; got.ID != "bp-r-0" || got.EveryMs != 250 || got.Cron != "" || !got.StartAt.Equal(base) {
		t.Errorf("task 0 = %+v, want bp-r-0 every 250 ms from %s", got, base)
	}
	if got := req.Tasks[1]; got.ID != "bp-r-1" || got.EveryMs != 0 || got.Cron != "@every 2s" || !got.StartAt.Equal(base) {
		t.Errorf("task 1 = %+v, want bp-r-1 @every 2s from %s", got, base)
	}
}

func TestPeriodicConfigValidate(t *testing.T) {
	good := TargetConfig{URLs: []string{"http://127.0.0.1:7070"}}
	tests := []struct {
		name    string
		edit    func(*PeriodicConfig)
		wantErr string
	}{
		{"defaults", func(*PeriodicConfig) {}, ""},
		{"fields form, 15 s", func(c *PeriodicConfig) { c.CronForm, c.CronPeriod = CronFormFields, 15*time.Second }, ""},
		{"every below the API minimum", func(c *PeriodicConfig) { c.EveryMs = 99 }, "every 99 ms"},
		{"cron fraction above 1", func(c *PeriodicConfig) { c.CronFraction = 1.5 }, "cron fraction 1.5"},
		{"sub-second cron period", func(c *PeriodicConfig) { c.CronPeriod = 1500 * time.Millisecond }, "whole seconds"},
		{"fields period not dividing a minute", func(c *PeriodicConfig) { c.CronForm, c.CronPeriod = CronFormFields, 7*time.Second }, "dividing a minute"},
		{"unknown cron form", func(c *PeriodicConfig) { c.CronForm = "quartz" }, `cron form "quartz"`},
		{"zero duration", func(c *PeriodicConfig) { c.Duration = 0 }, "duration 0s"},
		{"negative drain", func(c *PeriodicConfig) { c.Drain = -time.Second }, "drain"},
		{"no target", func(c *PeriodicConfig) { c.Target = TargetConfig{} }, "target URL or spawn"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := DefaultPeriodicConfig()
			c.Target = good
			tt.edit(&c)
			err := c.Validate()
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("Validate() = %v, want nil", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("Validate() = %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}

// TestRunPeriodicAgainstFakeNode runs the whole workload against a fake
// periodic node that misbehaves on purpose: task 0 skips occurrence k=2,
// task 1 fires 1 ms off its grid from k=1 on, task 2 delivers k=0 twice
// under one fire id. Every misbehaviour must show up, and nothing else.
func TestRunPeriodicAgainstFakeNode(t *testing.T) {
	f := startFakePeriodicNode(t, fakePeriodicFaults{skip: [2]int{0, 2}, shiftTask: 1, shift: time.Millisecond, dupTask: 2})
	cfg := DefaultPeriodicConfig()
	cfg.Target.URLs = []string{f.url}
	cfg.N, cfg.EveryMs, cfg.Concurrency, cfg.Batch = 10, 200, 2, 4
	cfg.Duration, cfg.Lead, cfg.Drain = time.Second, 300*time.Millisecond, 2*time.Second
	cfg.Baseline.Requests, cfg.Baseline.Concurrency = 100, 4
	res, err := RunPeriodic(t.Context(), cfg)
	if err != nil {
		t.Fatalf("RunPeriodic: %v", err)
	}
	ps := res.Periodic
	if ps == nil {
		t.Fatal("Periodic = nil")
	}
	d := ps.Drift
	// Staggered starts are 0, 20, …, 180 ms into a 1 s window: 5 each.
	if d.Expected != 50 || d.Received != 45 || d.Missed != 5 || d.Holes != 1 || d.TasksWithGaps != 2 {
		t.Errorf("expected, received, missed, holes, tasks with gaps = %d, %d, %d, %d, %d, want 50, 45, 5, 1, 2 (first missed %s)",
			d.Expected, d.Received, d.Missed, d.Holes, d.TasksWithGaps, d.FirstMissed)
	}
	if d.OffGrid < 4 || d.MaxDriftNs != int64(time.Millisecond) || !strings.Contains(d.FirstOffGrid, "-1 due ") {
		t.Errorf("off-grid %d, max drift %d ns, first %q; want ≥ 4 fires of task 1, 1 ms", d.OffGrid, d.MaxDriftNs, d.FirstOffGrid)
	}
	if d.Repeats != 1 || ps.Receiver.Duplicates != 1 || d.Unknown != 0 || ps.Receiver.Early != 0 {
		t.Errorf("repeats %d, duplicates %d, unknown %d, early %d; want 1, 1, 0, 0", d.Repeats, ps.Receiver.Duplicates, d.Unknown, ps.Receiver.Early)
	}
	if ps.Deleted != 10 || ps.DeleteFailed != 0 || f.stored() != 0 {
		t.Errorf("deleted %d, failed %d, fake still holds %d; want 10, 0, 0", ps.Deleted, ps.DeleteFailed, f.stored())
	}
	if res.HTTPBaseline == nil || ps.Receiver.Lateness.Count == 0 || len(res.Charts) != 2 {
		t.Errorf("baseline %v, lateness count %d, %d charts; want a baseline, lateness, 2 charts", res.HTTPBaseline, ps.Receiver.Lateness.Count, len(res.Charts))
	}
	warned := strings.Join(res.Warnings, "\n")
	for _, w := range []string{"off their grid", "never arrived"} {
		if !strings.Contains(warned, w) {
			t.Errorf("warnings %q lack %q", res.Warnings, w)
		}
	}
}

// fakePeriodicFaults are the fake periodic node's deliberate mistakes.
type fakePeriodicFaults struct {
	skip      [2]int // task index, k: that occurrence is never fired
	shiftTask int    // this task's occurrences k ≥ 1 are due shift later
	shift     time.Duration
	dupTask   int // this task's k=0 is delivered twice under one fire id
}

// fakePeriodicNode speaks what the periodic workload uses: /readyz, POST
// /v1/tasks:batch with every_ms and start_at, DELETE /v1/tasks/{id}. One
// goroutine fires due occurrences every 2 ms, in order, with the callback
// headers, never before their due.
type fakePeriodicNode struct {
	url    string
	faults fakePeriodicFaults
	hc     *http.Client

	mu    sync.Mutex // guards tasks
	tasks map[string]*fakePeriodic
}

type fakePeriodic struct {
	index  int
	url    string
	start  time.Time
	period time.Duration
	k      int // next occurrence to fire
	seq    int // fires so far
}

func startFakePeriodicNode(t *testing.T, faults fakePeriodicFaults) *fakePeriodicNode {
	t.Helper()
	f := &fakePeriodicNode{faults: faults, tasks: map[string]*fakePeriodic{}, hc: newHTTPClient(4, 5*time.Second)}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	mux.HandleFunc("POST /v1/tasks:batch", f.createBatch)
	mux.HandleFunc("DELETE /v1/tasks/{id}", f.delete)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f.url = "http://" + ln.Addr().String()
	srv := &http.Server{Handler: mux}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { _ = srv.Serve(ln) })
	wg.Go(func() { f.loop(stop) })
	t.Cleanup(func() {
		close(stop)
		_ = srv.Close()
		wg.Wait()
		f.hc.CloseIdleConnections()
	})
	return f
}

func (f *fakePeriodicNode) createBatch(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Tasks []struct {
			ID          string    `json:"id"`
			CallbackURL string    `json:"callback_url"`
			EveryMs     int64     `json:"every_ms"`
			StartAt     time.Time `json:"start_at"`
		} `json:"tasks"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, `{"error":{"code":"invalid_argument","message":"bad json"}}`, http.StatusBadRequest)
		return
	}
	var out strings.Builder
	out.WriteString(`{"results":[`)
	f.mu.Lock()
	for i, tr := range req.Tasks {
		if i > 0 {
			out.WriteByte(',')
		}
		idx, _ := strconv.Atoi(tr.ID[strings.LastIndexByte(tr.ID, '-')+1:])
		f.tasks[tr.ID] = &fakePeriodic{index: idx, url: tr.CallbackURL, start: tr.StartAt,
			period: time.Duration(tr.EveryMs) * time.Millisecond}
		out.WriteString(`{"id":"` + tr.ID + `","status":201}`)
	}
	f.mu.Unlock()
	out.WriteString(`]}`)
	_, _ = io.WriteString(w, out.String())
}

func (f *fakePeriodicNode) delete(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	_, ok := f.tasks[r.PathValue("id")]
	delete(f.tasks, r.PathValue("id"))
	f.mu.Unlock()
	if !ok {
		w.WriteHeader(http.StatusNotFound)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (f *fakePeriodicNode) stored() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.tasks)
}

// loop fires due occurrences until stop is closed.
func (f *fakePeriodicNode) loop(stop <-chan struct{}) {
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	type fire struct {
		id, url string
		due     time.Time
		seq     int
		times   int
	}
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		now := time.Now()
		var due []fire
		f.mu.Lock()
		for id, tk := range f.tasks {
			for {
				k := tk.k
				at := tk.start.Add(time.Duration(k) * tk.period)
				if tk.index == f.faults.shiftTask && k >= 1 {
					at = at.Add(f.faults.shift)
				}
				if at.After(now) {
					break
				}
				tk.k++
				if f.faults.skip == [2]int{tk.index, k} {
					continue
				}
				tk.seq++
				times := 1
				if tk.index == f.faults.dupTask && k == 0 {
					times = 2
				}
				due = append(due, fire{id: id, url: tk.url, due: at, seq: tk.seq, times: times})
			}
		}
		f.mu.Unlock()
		for _, fr := range due {
			for range fr.times {
				f.post(fr.url, fr.id, fr.id+":"+strconv.Itoa(fr.seq), fr.due)
			}
		}
	}
}

// post sends one callback as the contract describes.
func (f *fakePeriodicNode) post(url, id, fireID string, due time.Time) {
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(`{}`))
	if err != nil {
		return
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(headerTaskID, id)
	req.Header.Set(headerFireID, fireID)
	req.Header.Set(headerDueAt, due.UTC().Format(time.RFC3339Nano))
	req.Header.Set(headerAttempt, "1")
	resp, err := f.hc.Do(req)
	if err != nil {
		return
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
}
