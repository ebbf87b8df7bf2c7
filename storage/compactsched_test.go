package storage

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// fakeCompactions is a DBForCompaction with a fixed allowance and a count
// of compactions waiting to run.
type fakeCompactions struct {
	mu        sync.Mutex
	allowed   int
	waiting   int
	scheduled []pebble.CompactionGrantHandle
}

func (f *fakeCompactions) GetAllowedWithoutPermission() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.allowed
}

func (f *fakeCompactions) GetWaitingCompaction() (bool, pebble.WaitingCompaction) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.waiting > 0, pebble.WaitingCompaction{}
}

func (f *fakeCompactions) Schedule(h pebble.CompactionGrantHandle) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.waiting--
	f.scheduled = append(f.scheduled, h)
	return true
}

func (f *fakeCompactions) set(allowed, waiting int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.allowed, f.waiting = allowed, waiting
}

func (f *fakeCompactions) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.scheduled)
}

// TestCompactionSchedulerGrants: the scheduler never lets more compactions
// run than the store allows, grants a waiting one when another ends or a
// flush raises the allowance (without waiting for its periodic sample),
// and grants nothing once unregistered.
func TestCompactionSchedulerGrants(t *testing.T) {
	f := &fakeCompactions{allowed: 1}
	s := newCompactionScheduler()
	s.Register(1, f)
	if ok, _ := s.TrySchedule(); !ok {
		t.Fatal("TrySchedule with room: refused")
	}
	if ok, _ := s.TrySchedule(); ok {
		t.Fatal("TrySchedule over the allowance of 1: granted")
	}
	// Two wait; the running one ends: exactly one more is granted.
	f.set(1, 2)
	s.Done()
	if got := f.count(); got != 1 {
		t.Fatalf("after Done: %d scheduled, want 1", got)
	}
	// A flush raises the allowance to 2: the other one runs, soon (the
	// poke), well before the periodic sample.
	f.set(2, 1)
	start := time.Now()
	s.UpdateGetAllowedWithoutPermission()
	for f.count() < 2 {
		if time.Since(start) > compactionSampleEvery/2 {
			t.Fatalf("a raised allowance: %d scheduled after %v, want 2", f.count(), time.Since(start))
		}
		time.Sleep(time.Millisecond)
	}
	s.Unregister()
	f.set(5, 3)
	s.Done()
	if got := f.count(); got != 2 {
		t.Errorf("after Unregister: %d scheduled, want still 2", got)
	}
}

// TestCompactionsRun: a real store under this scheduler compacts:
// eight small memtables flushed into L0 (pebble compacts L0 from 4 files
// and stops writes at 12) are compacted down.
func TestCompactionsRun(t *testing.T) {
	s := openMem(t, Options{CacheSize: 1 << 20, MemTableSize: 1 << 20})
	for i := range 8 {
		b := s.NewBatch()
		for j := range 400 {
			tk := newTask(uint16(j%64), fmt.Sprintf("c%d-%d", i, j), int64(j+1))
			tk.Spec.Payload = []byte(strings.Repeat("p", 200))
			b.PutTask(tk, 0)
		}
		if err := b.Commit(false); err != nil {
			t.Fatalf("Commit: %v", err)
		}
		if err := s.db.Flush(); err != nil {
			t.Fatalf("Flush: %v", err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for s.db.Metrics().Compact.Count == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no compaction in 10 s after 8 flushes: %d files in L0", s.db.Metrics().Levels[0].TablesCount)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
