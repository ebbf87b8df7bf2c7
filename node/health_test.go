package node

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/chime-scheduler/chime/node/dashboard"
	"github.com/chime-scheduler/chime/node/health"
)

// overdueScanEvery is how often the node runs the overdue scan.
const overdueScanEvery = health.ScanEvery

// TestSafetyNetShowsAStall: a stall must be visible within seconds. n1 is
// cut off alone: in its own view it owns every slot and may fire none (no
// majority). After OverdueAfter (3 s here) its /v1/stats, /metrics,
// /readyz and dashboard snapshot show the stalled slots and the overdue
// tasks it holds, with the reason; the majority side, which took n1's
// slots over, shows nothing. After the heal it all clears.
func TestSafetyNetShowsAStall(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		const after = 3 * time.Second
		c := newFaultCluster(t, 3, 31, func(cfg *Config) { cfg.OverdueAfter = after })
		defer c.close()
		stats := func(i int) health.Stats {
			t.Helper()
			code, body := c.request(i, http.MethodGet, "/v1/stats", nil)
			var st health.Stats
			if code != http.StatusOK || json.Unmarshal(body, &st) != nil {
				t.Fatalf("n%d /v1/stats: %d %s", i+1, code, body)
			}
			return st
		}
		time.Sleep(overdueScanEvery + time.Second)
		for i := range 3 {
			if st := stats(i); st.SlotsStalled != 0 || st.TasksOverdue != 0 || len(st.Degraded) != 0 {
				t.Fatalf("n%d healthy: stalled %d, overdue %d, degraded %q", i+1, st.SlotsStalled, st.TasksOverdue, st.Degraded)
			}
			if code, body := c.request(i, http.MethodGet, "/readyz", nil); code != http.StatusOK || !strings.Contains(string(body), `"ready"`) {
				t.Fatalf("n%d healthy /readyz: %d %s", i+1, code, body)
			}
		}

		// Tasks of every slot, due just after the cut: n1 holds those of
		// its own slots and its replicas, none of which it may fire.
		tb := c.table(0)
		c.create(ids("net", 40, tb, nil), time.Now().Add(1500*time.Millisecond), 10*time.Millisecond)
		cut := time.Now()
		c.partition([]int{0}, []int{1, 2})
		deadline := cut.Add(30 * time.Second)
		var st health.Stats
		for {
			st = stats(0)
			if st.SlotsStalled > 0 && st.TasksOverdue > 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("n1 cut off for %v: stalled %d, overdue %d, degraded %q", time.Since(cut), st.SlotsStalled, st.TasksOverdue, st.Degraded)
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Logf("%v: n1 %v after the cut: %d slots stalled %v, %d tasks overdue; degraded: %q", fakeClock{},
			time.Since(cut).Round(time.Millisecond), st.SlotsStalled, st.StallReasons, st.TasksOverdue, st.Degraded)
		if len(st.StalledSlots) == 0 || len(st.Degraded) == 0 || st.Metrics["chime_slots_stalled"] != float64(st.SlotsStalled) ||
			st.Metrics["chime_tasks_overdue"] != float64(st.TasksOverdue) {
			t.Errorf("n1's stats disagree: %+v", st)
		}
		code, body := c.request(0, http.MethodGet, "/readyz", nil)
		var ready struct {
			Status  string   `json:"status"`
			Reasons []string `json:"reasons"`
			Error   *Error   `json:"error"`
		}
		if err := json.Unmarshal(body, &ready); err != nil || code != http.StatusServiceUnavailable || ready.Status != "degraded" ||
			!strings.Contains(strings.Join(ready.Reasons, ";"), "not firing") || ready.Error == nil {
			t.Errorf("n1 /readyz while stalled: %d %s", code, body)
		}
		code, body = c.request(0, http.MethodGet, "/v1/snapshot", nil)
		var snap dashboard.Snapshot
		if err := json.Unmarshal(body, &snap); code != http.StatusOK || err != nil {
			t.Fatalf("n1 /v1/snapshot: %d %v", code, err)
		}
		marked := 0
		for _, s := range snap.SlotStates {
			if s == dashboard.SlotStalled {
				marked++
			}
		}
		if marked == 0 || snap.Members[0].SlotsStalled == 0 {
			t.Errorf("n1's dashboard snapshot shows %d stalled slots, its row %d", marked, snap.Members[0].SlotsStalled)
		}
		for _, i := range []int{1, 2} {
			if st := stats(i); st.SlotsStalled != 0 || st.TasksOverdue != 0 {
				t.Errorf("n%d on the majority side: stalled %d, overdue %d, degraded %q", i+1, st.SlotsStalled, st.TasksOverdue, st.Degraded)
			}
		}

		c.heal()
		healed := time.Now()
		for {
			st = stats(0)
			code, _ := c.request(0, http.MethodGet, "/readyz", nil)
			if st.SlotsStalled == 0 && st.TasksOverdue == 0 && code == http.StatusOK {
				break
			}
			if time.Since(healed) > 30*time.Second {
				t.Fatalf("n1 %v after the heal: stalled %d, overdue %d, /readyz %d", time.Since(healed), st.SlotsStalled, st.TasksOverdue, code)
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Logf("%v: n1 clear %v after the heal", fakeClock{}, time.Since(healed).Round(time.Millisecond))
	})
}
