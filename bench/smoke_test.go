package bench

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestWorkloadsSmoke runs every workload at tiny sizes against real
// `chime serve` processes, so the harness cannot rot against the node. It
// is skipped with -short and when the chime binary cannot be built.
// CHIME_BENCH_BIN names a prebuilt binary to use instead of building one
// (linking chime takes seconds to tens of seconds on a busy 2-core box).
func TestWorkloadsSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns real chime processes; skipped with -short")
	}
	bin := os.Getenv("CHIME_BENCH_BIN")
	if bin == "" {
		bin = filepath.Join(t.TempDir(), "chime")
		if out, err := exec.CommandContext(t.Context(), "go", "build", "-o", bin, chimePackage).CombinedOutput(); err != nil {
			t.Skipf("cannot build %s: %v\n%s", chimePackage, err, out)
		}
	}
	target := TargetConfig{Spawn: true, ChimeBin: bin, ReadyTimeout: 15 * time.Second, StopTimeout: 15 * time.Second}

	for _, mode := range []string{ModeSingle, ModeBatch} {
		t.Run("create/mode="+mode, func(t *testing.T) {
			cfg := DefaultCreateConfig()
			cfg.Target, cfg.Mode, cfg.N, cfg.Concurrency, cfg.Batch, cfg.BaselineN = target, mode, 200, 8, 50, 200
			res, err := RunCreate(t.Context(), cfg)
			if err != nil {
				t.Fatalf("RunCreate: %v", err)
			}
			if res.Create.Acked != 200 || res.Create.Rejected != 0 {
				t.Errorf("acked, rejected = %d, %d, want 200, 0 (first error %q)", res.Create.Acked, res.Create.Rejected, res.Create.FirstError)
			}
			if res.Node == nil || res.Node.PID == 0 || res.Node.RSSBytes == 0 {
				t.Errorf("Node = %+v, want the spawned process's pid and RSS", res.Node)
			}
			logWarnings(t, res)
		})
	}
	t.Run("fire", func(t *testing.T) {
		cfg := DefaultFireConfig()
		cfg.Target, cfg.N, cfg.Rate, cfg.Batch = target, 200, 400, 100
		cfg.Lead, cfg.Timeout, cfg.Settle = time.Second, 10*time.Second, 200*time.Millisecond
		cfg.Baseline.Requests, cfg.Baseline.Concurrency = 300, 8
		res, err := RunFire(t.Context(), cfg)
		if err != nil {
			t.Fatalf("RunFire: %v", err)
		}
		fs := res.Fire
		if fs.Completion != 1 || fs.Receiver.Early != 0 || fs.Receiver.Duplicates != 0 || fs.Receiver.DueMismatch != 0 {
			t.Errorf("completion %v, early %d, duplicates %d, due mismatch %d; want 1, 0, 0, 0",
				fs.Completion, fs.Receiver.Early, fs.Receiver.Duplicates, fs.Receiver.DueMismatch)
		}
		logWarnings(t, res)
	})
	t.Run("periodic", func(t *testing.T) {
		cfg := DefaultPeriodicConfig()
		cfg.Target, cfg.N, cfg.EveryMs, cfg.Duration, cfg.Lead = target, 20, 200, 2*time.Second, time.Second
		// A quarter as 6-field cron every second, so the cron path is covered.
		cfg.CronFraction, cfg.CronForm, cfg.CronPeriod = 0.25, CronFormFields, time.Second
		cfg.Baseline.Requests, cfg.Baseline.Concurrency = 300, 8
		res, err := RunPeriodic(t.Context(), cfg)
		if err != nil {
			t.Fatalf("RunPeriodic: %v", err)
		}
		d, rs := res.Periodic.Drift, res.Periodic.Receiver
		if d.Expected == 0 || d.Missed != 0 || d.OffGrid != 0 || d.MaxDriftNs != 0 || d.Repeats != 0 || d.Unknown != 0 {
			t.Errorf("drift = %+v, want occurrences expected and none missed, off-grid, repeated or unknown", d)
		}
		if rs.Early != 0 || rs.Duplicates != 0 {
			t.Errorf("early %d, duplicates %d; want 0, 0", rs.Early, rs.Duplicates)
		}
		logWarnings(t, res)
	})
	t.Run("scale", func(t *testing.T) {
		cfg := DefaultScaleConfig()
		cfg.Target, cfg.N, cfg.Batch, cfg.Concurrency, cfg.BaselineN = target, 200, 100, 2, 1000
		res, err := RunScale(t.Context(), cfg)
		if err != nil {
			t.Fatalf("RunScale: %v", err)
		}
		ss := res.Scale
		if ss.Create.Acked != 200 || ss.DiskBytes == 0 || ss.RestartSeconds == 0 || ss.RSSAfterRestart == 0 {
			t.Errorf("Scale = %+v, want 200 acked, disk size, restart time and RSS after restart", ss)
		}
		logWarnings(t, res)
	})
}

// logWarnings shows a result's warnings in the test log.
func logWarnings(t *testing.T, res Result) {
	t.Helper()
	for _, w := range res.Warnings {
		t.Logf("warning: %s", w)
	}
}
