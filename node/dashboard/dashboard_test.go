package dashboard

import (
	"fmt"
	"testing"
	"time"

	"github.com/chime-scheduler/chime/slots"
)

// TestStandaloneSnapshot: without a view the node is a one-node cluster
// (every slot its own, ok, table version 1); rates cover the time since
// the previous call once it is rateWindow old, lateness quantiles the fires
// since then, the heatmap the owned due entries of the next hour; an
// active node that is not ready shows as loading, and the timeline keeps
// the last maxEvents.
func TestStandaloneSnapshot(t *testing.T) {
	now := time.Date(2026, 1, 1, 10, 0, 30, 0, time.UTC)
	m := map[string]float64{`chime_fires_total{result="success"}`: 10, "chime_tasks_created_total": 5, "go_goroutines": 12}
	src := &fakeSource{stats: Stats{Metrics: m, TasksStored: -1, UptimeSeconds: 9},
		wakes:    []int64{now.Add(10 * time.Minute).UnixNano(), now.Add(2 * time.Hour).UnixNano()},
		lateness: []uint64{0, 0, 0, 0}}
	d := newTestDashboard(src, &now)
	for i := range maxEvents + 5 {
		d.Note("join", fmt.Sprint(i))
	}
	s, err := d.Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Members) != 1 || s.Self != "a" || s.TableVersion != SingleTableVersion || s.CheckSlotTable() != nil {
		t.Fatalf("snapshot %+v, want one member, version 1, a valid table", s.Members)
	}
	r := s.Members[0]
	if r.State != "loading" || r.Status != "alive" || r.SlotsOwned != slots.Count || r.TasksStored != -1 || r.Goroutines != 12 || r.FiresPerSec != 0 {
		t.Errorf("row %+v, want loading, alive, every slot, unknown tasks, no rates yet", r)
	}
	if len(s.Events) != maxEvents || s.Events[0].Text != "5" {
		t.Errorf("%d events from %q, want %d from 5", len(s.Events), s.Events[0].Text, maxEvents)
	}
	if s.Wheel.Counts[10] != 1 || s.Wheel.Truncated || len(s.Wheel.Counts) != heatmapBuckets {
		t.Errorf("wheel %+v, want the one entry within the hour in bucket 10", s.Wheel)
	}

	// Two seconds on: 20 more fires, 90 of 100 fires at most 10 ms late.
	now = now.Add(2 * time.Second)
	src.stats.Ready = true
	src.stats.Metrics = map[string]float64{`chime_fires_total{result="success"}`: 30, "chime_tasks_created_total": 9}
	src.lateness = []uint64{90, 100, 100, 100}
	s, _ = d.Snapshot(t.Context())
	r = s.Members[0]
	if r.State != "active" || r.FiresPerSec != 10 || r.CreatesPerSec != 2 || r.LatenessP50Ms <= 0 || r.LatenessP50Ms > 10 || r.LatenessP99Ms <= 10 {
		t.Errorf("row %+v, want active, 10 fires/s, 2 creates/s, p50 within 10 ms, p99 above", r)
	}
	// Another call within rateWindow keeps the rates.
	now = now.Add(100 * time.Millisecond)
	src.stats.Metrics = map[string]float64{`chime_fires_total{result="success"}`: 1000}
	if s, _ = d.Snapshot(t.Context()); s.Members[0].FiresPerSec != 10 {
		t.Errorf("rate %v within the window, want the previous 10", s.Members[0].FiresPerSec)
	}
}

func TestCumQuantile(t *testing.T) {
	bounds := []float64{1, 2, 4}
	for _, tt := range []struct {
		cum  []uint64
		q    float64
		want float64
	}{
		{nil, 0.5, 0},
		{[]uint64{0, 0, 0, 0}, 0.5, 0},
		{[]uint64{10, 10, 10, 10}, 0.5, 0.5},
		{[]uint64{0, 10, 10, 10}, 0.5, 1.5},
		{[]uint64{0, 0, 0, 10}, 0.99, 4}, // all above the last bound: the bound
	} {
		if got := cumQuantile(tt.cum, bounds, tt.q); got != tt.want {
			t.Errorf("cumQuantile(%v, %v) = %v, want %v", tt.cum, tt.q, got, tt.want)
		}
	}
}
