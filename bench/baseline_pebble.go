package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chime-scheduler/chime/slots"
	"github.com/chime-scheduler/chime/storage"
)

// PebbleBaselineConfig configures the durable-create ceiling: the same
// task records a create writes, put with storage.Batch.PutTask and
// committed with Commit(true) straight into a fresh storage.Store, with no
// HTTP, JSON or scheduling in between.
type PebbleBaselineConfig struct {
	// Dir is where the temporary store is created (and removed after).
	// Default os.TempDir(); use the filesystem the node's data dir is on.
	Dir string `json:"dir,omitempty"`
	// Tasks is the number of records written. Default 100,000: about 1 s
	// at limits.md's 124k/s, long enough for several memtable flushes.
	Tasks int `json:"tasks"`
	// Batch is records per synced commit. Default 1,000, as limits.md.
	Batch int `json:"batch"`
	// Concurrency is the number of committing goroutines. Default 1; a
	// create workload mirrors its own batch size and concurrency so its
	// ceiling does the same number of syncs per task.
	Concurrency int `json:"concurrency"`
	// Progress reports the phase.
	Progress Progress `json:"-"`
}

// DefaultPebbleBaselineConfig returns the defaults described on each field.
func DefaultPebbleBaselineConfig() PebbleBaselineConfig {
	return PebbleBaselineConfig{Tasks: 100_000, Batch: 1000, Concurrency: 1}
}

func (c PebbleBaselineConfig) validate() error {
	var errs []error
	if c.Tasks < 1 {
		errs = append(errs, fmt.Errorf("bench: baseline tasks %d < 1", c.Tasks))
	}
	if c.Batch < 1 {
		errs = append(errs, fmt.Errorf("bench: baseline batch %d < 1", c.Batch))
	}
	if c.Concurrency < 1 {
		errs = append(errs, fmt.Errorf("bench: baseline concurrency %d < 1", c.Concurrency))
	}
	return errors.Join(errs...)
}

// PebbleBaselineResult is the measured durable-create ceiling.
type PebbleBaselineResult struct {
	Tasks       int64 `json:"tasks"`
	Batch       int   `json:"batch"`
	Concurrency int   `json:"concurrency"`
	// Seconds and PerSecond: wall time and durable tasks per second.
	Seconds   float64 `json:"seconds"`
	PerSecond float64 `json:"per_second"`
	// CommitLatency is per synced commit.
	CommitLatency Summary `json:"commit_latency"`
	// CPUPerTask is this process's CPU µs per task.
	CPUPerTask float64 `json:"cpu_us_per_task"`
	// DiskBytes is the store's size after Close; BytesPerTask that over
	// Tasks (WAL included: nothing is compacted away in a short run).
	DiskBytes    int64   `json:"disk_bytes"`
	BytesPerTask float64 `json:"bytes_per_task"`
}

// MeasurePebble measures the durable-create ceiling in a temporary store.
func MeasurePebble(ctx context.Context, cfg PebbleBaselineConfig) (PebbleBaselineResult, error) {
	if err := cfg.validate(); err != nil {
		return PebbleBaselineResult{}, err
	}
	dir, err := os.MkdirTemp(cfg.Dir, "chime-bench-pebble-")
	if err != nil {
		return PebbleBaselineResult{}, fmt.Errorf("bench: baseline-pebble dir: %w", err)
	}
	defer os.RemoveAll(dir)
	st, err := storage.Open(storage.Options{Dir: dir})
	if err != nil {
		return PebbleBaselineResult{}, err
	}
	closed := false
	defer func() {
		if !closed {
			_ = st.Close() // error path: the store is thrown away
		}
	}()

	now := time.Now()
	run := runID(now)
	spec := storage.Spec{
		CallbackURL: "http://127.0.0.1:9/bench-never",
		Kind:        storage.KindOnce,
		DelayMs:     3_600_000,
		DueAt:       now.Add(time.Hour).UnixNano(),
		Payload:     benchPayload(run),
		TimeoutMs:   5000,
		MaxRetries:  3,
		Misfire:     storage.MisfireFireOnce,
	}
	prefix := "bp-" + run + "-"
	ops := (cfg.Tasks + cfg.Batch - 1) / cfg.Batch
	ph := cfg.Progress.startPhase("baseline-pebble", int64(cfg.Tasks))
	var (
		next     atomic.Int64
		written  atomic.Int64
		mu       sync.Mutex // guards lat and firstErr
		lat      Histogram
		firstErr error
		wg       sync.WaitGroup
	)
	self0 := selfCPU()
	start := time.Now()
	for range cfg.Concurrency {
		wg.Go(func() {
			var local Histogram
			defer func() {
				mu.Lock()
				lat.Merge(&local)
				mu.Unlock()
			}()
			t := storage.Task{Spec: spec, Status: storage.StatusScheduled, NextDue: spec.DueAt,
				CreatedAt: now.UnixNano(), UpdatedAt: now.UnixNano(), Version: 1}
			for {
				k := int(next.Add(1) - 1)
				if k >= ops || ctx.Err() != nil {
					return
				}
				lo, hi := k*cfg.Batch, min(cfg.Tasks, (k+1)*cfg.Batch)
				t0 := time.Now()
				b := st.NewBatch()
				for i := lo; i < hi; i++ {
					t.ID = prefix + strconv.Itoa(i)
					t.Slot = slots.Of(t.ID)
					b.PutTask(&t, 0)
				}
				if err := b.Commit(true); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					return
				}
				local.RecordDuration(time.Since(t0))
				written.Add(int64(hi - lo))
				ph.Add(int64(hi - lo))
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	cpu := selfCPU() - self0
	ph.End()
	if firstErr != nil {
		return PebbleBaselineResult{}, fmt.Errorf("bench: baseline-pebble: %w", firstErr)
	}
	if err := ctx.Err(); err != nil {
		return PebbleBaselineResult{}, err
	}
	closed = true
	if err := st.Close(); err != nil {
		return PebbleBaselineResult{}, err
	}
	n := written.Load()
	disk, err := dirSize(dir)
	if err != nil {
		return PebbleBaselineResult{}, err
	}
	return PebbleBaselineResult{
		Tasks:         n,
		Batch:         cfg.Batch,
		Concurrency:   cfg.Concurrency,
		Seconds:       took.Seconds(),
		PerSecond:     perSecond(n, took),
		CommitLatency: lat.Summary(),
		CPUPerTask:    perOp(cpu, n),
		DiskBytes:     disk,
		BytesPerTask:  float64(disk) / float64(max(n, 1)),
	}, nil
}

// RunPebbleBaseline is the baseline-pebble workload on its own.
func RunPebbleBaseline(ctx context.Context, cfg PebbleBaselineConfig) (Result, error) {
	res := Result{Workload: "baseline-pebble", Started: time.Now(), Env: currentEnv(), Config: cfg}
	pb, err := MeasurePebble(ctx, cfg)
	if err != nil {
		return res, err
	}
	res.PebbleBaseline = &pb
	res.Summary = []Row{
		row(fmt.Sprintf("durable creates/s (batch=%d, c=%d, sync)", cfg.Batch, cfg.Concurrency), pb.PerSecond, "tasks/s", 0, ""),
		row("commit p50", float64(pb.CommitLatency.P50)/1e3, "ms", 0, ""),
		row("commit p99", float64(pb.CommitLatency.P99)/1e3, "ms", 0, ""),
		row("CPU per task", pb.CPUPerTask, "µs", 0, ""),
		row("disk per task", pb.BytesPerTask, "B", 0, ""),
	}
	res.Seconds = time.Since(res.Started).Seconds()
	return res, nil
}
