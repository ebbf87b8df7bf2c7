package storage

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// benchTask is a realistic task: ~200 B payload, a header and two labels.
func benchTask(i int) *Task {
	tk := newTask(uint16(i%16384), "task-"+strconv.Itoa(i), int64(1_700_000_000_000_000_000+i*1_000_000))
	tk.Spec.Payload = []byte(`{"order":"` + strconv.Itoa(i) + `","action":"remind","body":"` +
		"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx" + `"}`)
	tk.Spec.Headers = map[string]string{"X-Tenant": "acme"}
	tk.Spec.Labels = map[string]string{"env": "prod", "team": "billing"}
	tk.CreatedAt, tk.UpdatedAt, tk.Version = 1_700_000_000_000_000_000, 1_700_000_000_000_000_000, 1
	return tk
}

// fill writes tasks 0..n-1 in batches and flushes them to sstables, so reads
// go through the LSM (bloom filters, block cache) rather than the memtable.
func fill(b *testing.B, s *Store, n int) {
	b.Helper()
	for i := 0; i < n; {
		bt := s.NewBatch()
		for j := 0; j < 1000 && i < n; j, i = j+1, i+1 {
			bt.PutTask(benchTask(i), 0)
		}
		if err := bt.Commit(false); err != nil {
			b.Fatalf("Commit: %v", err)
		}
	}
	if err := s.db.Flush(); err != nil {
		b.Fatalf("Flush: %v", err)
	}
}

func openBenchDisk(b *testing.B) *Store {
	b.Helper()
	s, err := Open(Options{Dir: b.TempDir(), Logger: testLogger(b)})
	if err != nil {
		b.Fatalf("Open: %v", err)
	}
	b.Cleanup(func() { _ = s.Close() })
	return s
}

// BenchmarkBatchPutSync commits batches of n new tasks (task + due key) with
// an fsync, on the real filesystem.
func BenchmarkBatchPutSync(b *testing.B) {
	for _, n := range []int{1, 100, 1000} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			s := openBenchDisk(b)
			tasks := make([]*Task, n)
			for i := range tasks {
				tasks[i] = benchTask(i)
			}
			b.ReportAllocs()
			round := 0
			for b.Loop() {
				bt := s.NewBatch()
				for _, tk := range tasks {
					tk.Slot = uint16(round) // new keys every round
					bt.PutTask(tk, 0)
				}
				if err := bt.Commit(true); err != nil {
					b.Fatalf("Commit: %v", err)
				}
				round++
			}
			b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "tasks/s")
		})
	}
}

// BenchmarkPutTask measures encoding one task into a batch (no commit).
func BenchmarkPutTask(b *testing.B) {
	s := openMem(b, Options{})
	tk := benchTask(1)
	b.ReportAllocs()
	bt := s.NewBatch()
	for b.Loop() {
		if bt.Count() >= 2000 {
			bt.Close()
			bt = s.NewBatch()
		}
		bt.PutTask(tk, 0)
	}
	bt.Close()
}

func BenchmarkGet(b *testing.B) {
	for _, n := range []int{1000, 100000} {
		s := openMem(b, Options{})
		fill(b, s, n)
		for _, hit := range []bool{true, false} {
			b.Run(fmt.Sprintf("n=%d/hit=%v", n, hit), func(b *testing.B) {
				rng := rand.New(rand.NewPCG(1, 2))
				b.ReportAllocs()
				for b.Loop() {
					i := rng.IntN(n)
					id := "task-" + strconv.Itoa(i)
					if !hit {
						id = "miss-" + strconv.Itoa(i)
					}
					_, err := s.Get(uint16(i%16384), id)
					if hit && err != nil || !hit && err != ErrNotFound {
						b.Fatalf("Get(%s) = %v", id, err)
					}
				}
			})
		}
	}
}

// BenchmarkScanDue scans the due index of n tasks with every slot owned,
// over the whole index (window=all) or the earliest 1% of wakes
// (window=1pct, the loader's usual shape: one seek per slot dominates).
func BenchmarkScanDue(b *testing.B) {
	for _, n := range []int{1000, 100000} {
		s := openMem(b, Options{})
		fill(b, s, n)
		base := benchTask(0).Wake()
		for _, w := range []struct {
			name string
			want int
		}{{"all", n}, {"1pct", n / 100}} {
			b.Run(fmt.Sprintf("n=%d/window=%s", n, w.name), func(b *testing.B) {
				to := base + int64(w.want)*1_000_000
				b.ReportAllocs()
				for b.Loop() {
					got := 0
					err := s.ScanDue(nil, base, to, func(uint16, string, int64) bool { got++; return true })
					if err != nil || got != w.want {
						b.Fatalf("ScanDue = %d entries, %v; want %d", got, err, w.want)
					}
				}
				b.ReportMetric(float64(w.want*b.N)/b.Elapsed().Seconds(), "keys/s")
			})
		}
	}
}

// cpuTime returns the CPU time (user and system) the process has used. On
// a shared machine it measures a benchmark's cost better than the wall
// clock does, and it includes pebble's background flushes and compactions.
func cpuTime(b *testing.B) time.Duration {
	b.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatalf("Getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkBatchCommit commits batches of n task writes without an fsync,
// as the node's writer does (Commit(false); one fsync covers many groups):
// the CPU cost of the write path, which a sync benchmark hides behind the
// disk's fsync latency. The store is on the real filesystem and holds
// 100000 tasks flushed to tables. Besides ns/op it reports cpu-ns/op, the
// process CPU time per batch.
//
//   - op=create writes n new tasks (task record and due key each).
//   - op=update moves the wake of n random stored tasks, a fire's shape:
//     the record is rewritten and its due key moved.
//   - op=create-new and op=update-known are the same writes by a writer
//     that knows what they replace (prior.go): a new id (Replaces(nil)),
//     a record it read or cached (DecodeStoredTask of its encoding).
//     Commit then reads nothing for the checksums. op=create and op=update
//     know nothing and read every key they replace.
//   - op=apply applies, as a follower, the captured ops of such updates
//     (ApplySlotOps).
//   - op=snapshot rebuilds one slot of n tasks from its snapshot in one
//     batch (DropSlot, then ApplySlotOps), as a resync does.
func BenchmarkBatchCommit(b *testing.B) {
	const stored = 100000
	for _, op := range []string{"create", "create-new", "update", "update-known", "apply", "snapshot"} {
		for _, n := range []int{1, 100, 1000} {
			b.Run(fmt.Sprintf("op=%s/n=%d", op, n), func(b *testing.B) {
				s := openBenchDisk(b)
				fill(b, s, stored)
				// Compact everything now, so no compaction of the fill runs
				// (and counts as CPU time) during the loop.
				if err := s.db.Compact(context.Background(), slotKeysLower, slotKeysUpper, true); err != nil {
					b.Fatalf("Compact: %v", err)
				}
				rng := rand.New(rand.NewPCG(1, 2))
				var excluded time.Duration // CPU time of work that is not measured
				var write func(bt *Batch)
				switch op {
				case "create", "create-new":
					seq := 0
					write = func(bt *Batch) {
						for range n {
							tk := benchTask(seq)
							tk.ID = "new-" + strconv.Itoa(seq)
							if op == "create-new" {
								tk.Replaces(nil)
							}
							bt.PutTask(tk, 0)
							seq++
						}
					}
				case "update", "update-known":
					tasks := make([]*Task, stored)
					for i := range tasks {
						tasks[i] = benchTask(i)
						if op == "update-known" {
							// What the writer's hot cache does: decode
							// the encoding it wrote (fill's).
							enc, _ := EncodeTask(tasks[i])
							if err := s.DecodeStoredTask(enc, tasks[i]); err != nil {
								b.Fatal(err)
							}
						}
					}
					write = func(bt *Batch) {
						for range n {
							tk := tasks[rng.IntN(stored)]
							prev := tk.Wake()
							tk.NextDue += 1_000_000_000
							if op == "update" {
								forget(tk) // its last write taught it
							}
							bt.PutTask(tk, prev)
						}
					}
				case "apply":
					// Each round an owner-side batch (captured, never
					// committed) moves the wakes of n random tasks; the
					// follower, filled with the same tasks, applies its ops.
					// Building the ops is not measured.
					scratch := openMem(b, Options{})
					tasks := make([]*Task, stored)
					for i := range tasks {
						tasks[i] = benchTask(i)
					}
					write = func(bt *Batch) {
						b.StopTimer()
						c0 := cpuTime(b)
						ob := scratch.NewBatch()
						ob.Capture()
						for range n {
							tk := tasks[rng.IntN(stored)]
							prev := tk.Wake()
							tk.NextDue += 1_000_000_000
							ob.PutTask(tk, prev)
						}
						ops := ob.TakeSlotOps()
						ob.Close()
						excluded += cpuTime(b) - c0
						b.StartTimer()
						for _, o := range ops {
							if err := bt.ApplySlotOps(o); err != nil {
								b.Fatalf("ApplySlotOps: %v", err)
							}
						}
					}
				case "snapshot":
					src := openMem(b, Options{})
					sb := src.NewBatch()
					for i := range n {
						tk := benchTask(i)
						tk.Slot = 20000 // beyond fill's slots
						sb.PutTask(tk, 0)
					}
					if err := sb.Commit(false); err != nil {
						b.Fatalf("Commit: %v", err)
					}
					snap, err := src.SnapshotSlot(20000)
					if err != nil {
						b.Fatalf("SnapshotSlot: %v", err)
					}
					write = func(bt *Batch) {
						bt.DropSlot(snap.Slot)
						if err := bt.ApplySlotOps(snap); err != nil {
							b.Fatalf("ApplySlotOps: %v", err)
						}
					}
				}
				b.ReportAllocs()
				s.sums.Lock()
				reads0 := s.sums.reads
				s.sums.Unlock()
				cpu := cpuTime(b)
				for b.Loop() {
					bt := s.NewBatch()
					write(bt)
					if err := bt.Commit(false); err != nil {
						b.Fatalf("Commit: %v", err)
					}
				}
				b.ReportMetric(float64(cpuTime(b)-cpu-excluded)/float64(b.N), "cpu-ns/op")
				s.sums.Lock()
				b.ReportMetric(float64(s.sums.reads-reads0)/float64(b.N), "reads/op")
				s.sums.Unlock()
				b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "tasks/s")
			})
		}
	}
}
