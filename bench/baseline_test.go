package bench

import (
	"testing"
)

func TestMeasureHTTPTiny(t *testing.T) {
	r := startReceiver(t, ReceiverConfig{Now: nil})
	tests := []struct {
		name        string
		requests    int
		concurrency int
	}{
		{"sequential", 50, 1},
		{"concurrent", 300, 8},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := MeasureHTTP(t.Context(), r, HTTPBaselineConfig{Requests: tt.requests, Concurrency: tt.concurrency})
			if err != nil {
				t.Fatalf("MeasureHTTP: %v", err)
			}
			if res.Requests != int64(tt.requests) || res.Errors != 0 {
				t.Errorf("requests, errors = %d, %d, want %d, 0", res.Requests, res.Errors, tt.requests)
			}
			if res.Latency.Count != uint64(tt.requests) || res.OneWay.Count != uint64(tt.requests) {
				t.Errorf("latency count %d, one-way count %d, want %d each", res.Latency.Count, res.OneWay.Count, tt.requests)
			}
			if res.PerSecond <= 0 || res.BodyBytes < 80 {
				t.Errorf("per second %v, body %d B, want > 0 and about 100 B", res.PerSecond, res.BodyBytes)
			}
			if st := r.Stats(); st.Requests != 0 {
				t.Errorf("receiver holds %d requests after the baseline, want a clean recording", st.Requests)
			}
		})
	}
}

func TestMeasureHTTPNeedsStartedReceiver(t *testing.T) {
	r, err := NewReceiver(ReceiverConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := MeasureHTTP(t.Context(), r, DefaultHTTPBaselineConfig()); err == nil {
		t.Error("MeasureHTTP on an unstarted receiver = nil error")
	}
}

func TestMeasurePebbleTiny(t *testing.T) {
	tests := []struct {
		name string
		cfg  PebbleBaselineConfig
	}{
		{"one writer, batches of 1000", PebbleBaselineConfig{Tasks: 2500, Batch: 1000, Concurrency: 1}},
		{"concurrent single syncs", PebbleBaselineConfig{Tasks: 40, Batch: 1, Concurrency: 4}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.Dir = t.TempDir()
			res, err := MeasurePebble(t.Context(), tt.cfg)
			if err != nil {
				t.Fatalf("MeasurePebble: %v", err)
			}
			if res.Tasks != int64(tt.cfg.Tasks) || res.PerSecond <= 0 || res.DiskBytes <= 0 {
				t.Errorf("tasks %d, per second %v, disk %d; want %d, > 0, > 0", res.Tasks, res.PerSecond, res.DiskBytes, tt.cfg.Tasks)
			}
			commits := (tt.cfg.Tasks + tt.cfg.Batch - 1) / tt.cfg.Batch
			if res.CommitLatency.Count != uint64(commits) {
				t.Errorf("commit count = %d, want %d", res.CommitLatency.Count, commits)
			}
		})
	}
}

func TestMeasurePebbleValidates(t *testing.T) {
	if _, err := MeasurePebble(t.Context(), PebbleBaselineConfig{Tasks: 0, Batch: 0, Concurrency: 0}); err == nil {
		t.Error("MeasurePebble with zero config = nil error")
	}
}

func TestRunBaselinesReportSummaries(t *testing.T) {
	hres, err := RunHTTPBaseline(t.Context(), HTTPBaselineConfig{Requests: 100, Concurrency: 2})
	if err != nil {
		t.Fatalf("RunHTTPBaseline: %v", err)
	}
	pres, err := RunPebbleBaseline(t.Context(), PebbleBaselineConfig{Dir: t.TempDir(), Tasks: 1000, Batch: 500, Concurrency: 1})
	if err != nil {
		t.Fatalf("RunPebbleBaseline: %v", err)
	}
	for _, res := range []Result{hres, pres} {
		if len(res.Summary) == 0 || res.Summary[0].Value <= 0 {
			t.Errorf("%s summary = %+v, want a positive first row", res.Workload, res.Summary)
		}
	}
}
