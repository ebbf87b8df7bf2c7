package main

import (
	"fmt"
	"net/http"
	"os"
	"runtime"
	"testing"
	"time"
)

func TestProcsGovernor(t *testing.T) {
	tests := []struct {
		name    string
		quiet   int
		samples []float64 // share of one core
		want    []int     // P count after each
	}{
		{"stays on every CPU until quiet long enough", 3, []float64{0.01, 0.01, 0.01, 0.01}, []int{2, 2, 1, 1}},
		{"a middling sample restarts the quiet run", 2, []float64{0.01, 0.10, 0.01, 0.01}, []int{2, 2, 2, 1}},
		{"busy goes back to every CPU at once", 1, []float64{0.01, 0.30, 0.01}, []int{1, 2, 1}},
		{"middling load keeps one P", 1, []float64{0.01, 0.10, 0.15, 0.19}, []int{1, 1, 1, 1}},
		{"the busy threshold itself is busy", 1, []float64{0.01, procsBusy}, []int{1, 2}},
		{"the idle threshold itself is not quiet", 1, []float64{procsIdle, procsIdle}, []int{2, 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := procsGovernor{max: 2, cur: 2, quiet: tt.quiet}
			for i, s := range tt.samples {
				if got := g.next(s); got != tt.want[i] {
					t.Fatalf("sample %d (%v): %d Ps, want %d", i, s, got, tt.want[i])
				}
			}
		})
	}
}

// TestIdleNodeRunsOnOneProcessor: a real chime process that stays idle
// drops to one P (go_sched_gomaxprocs_threads in /metrics), and a burst of
// creates brings every CPU back within seconds.
func TestIdleNodeRunsOnOneProcessor(t *testing.T) {
	needsProcesses(t)
	if runtime.NumCPU() < 2 || os.Getenv("GOMAXPROCS") != "" {
		t.Skip("one CPU, or GOMAXPROCS set: the governor stays off")
	}
	p := startChime(t, t.TempDir(), "--idle-procs-after", "1s")
	const metric = "go_sched_gomaxprocs_threads"
	awaitProcs := func(want float64, load func()) time.Duration {
		t.Helper()
		start := time.Now()
		for time.Since(start) < 20*time.Second {
			if metricValue(t, p.url, metric) == want {
				return time.Since(start)
			}
			if load != nil {
				load()
			} else {
				time.Sleep(100 * time.Millisecond)
			}
		}
		t.Fatalf("%s not %v after 20s: %v", metric, want, metricValue(t, p.url, metric))
		return 0
	}
	t.Logf("idle: one P after %v", awaitProcs(1, nil).Round(time.Millisecond))
	n := 0
	burst := func() {
		tasks := make([]map[string]any, 500)
		for i := range tasks {
			n++
			tasks[i] = map[string]any{"id": fmt.Sprintf("p-%d", n), "callback_url": "http://127.0.0.1:9/",
				"due_at": time.Now().Add(time.Hour).Format(time.RFC3339Nano)}
		}
		if code := postJSON(t, p.url+"/v1/tasks:batch", map[string]any{"tasks": tasks}, nil); code != http.StatusOK {
			t.Fatalf("batch: %d", code)
		}
	}
	t.Logf("busy: every CPU after %v and %d creates", awaitProcs(float64(runtime.NumCPU()), burst).Round(time.Millisecond), n)
}
