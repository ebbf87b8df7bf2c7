package storage

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// openFS opens a store on fs (the unexported seam crash tests need).
func openFS(t *testing.T, fs vfs.FS) *Store {
	t.Helper()
	s, err := open(Options{Logger: testLogger(t)}, fs, "db")
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	return s
}

// crashTask is the i-th task a writer w creates in crash tests.
func crashTask(w, i int) *Task {
	tk := newTask(uint16((w*1000+i)%16384), fmt.Sprintf("w%d-%d", w, i), int64(1_000_000+i))
	tk.Spec.Payload = []byte(`{"n":` + fmt.Sprint(i) + `}`)
	return tk
}

// checkSurvived asserts every task in want is stored intact, with its due
// index entry, in the store opened on fs, and that every slot's checksum
// matches its keys.
func checkSurvived(t *testing.T, fs vfs.FS, want []*Task) {
	t.Helper()
	s := openFS(t, fs)
	defer s.Close()
	due := make(map[dueEntry]bool)
	for _, e := range allDue(t, s) {
		due[e] = true
	}
	lost := 0
	for _, tk := range want {
		got, err := s.Get(tk.Slot, tk.ID)
		if err != nil || !reflect.DeepEqual(got, tk) {
			lost++
			if lost <= 3 {
				t.Errorf("after crash Get(%d, %s) = %+v, %v; want %+v", tk.Slot, tk.ID, got, err, tk)
			}
			continue
		}
		if !due[dueEntry{tk.Slot, tk.ID, tk.Wake()}] {
			t.Errorf("after crash task %s has no due entry at %d", tk.ID, tk.Wake())
		}
	}
	if lost > 0 {
		t.Errorf("%d of %d synced tasks lost in the crash", lost, len(want))
	}
	// Checksums are in the batches they cover: whatever survived, they match.
	checkChecksums(t, s)
}

func TestCrashDurability(t *testing.T) {
	const seed = 20240601
	tests := []struct {
		name     string
		writers  int
		batches  int  // per writer
		sync     bool // Commit(true) instead of Commit(false) + Store.Sync
		unsynced int  // CrashCloneCfg.UnsyncedDataPercent
	}{
		{name: "nosync commits then Sync", writers: 1, batches: 20},
		{name: "sync commits", writers: 1, batches: 20, sync: true},
		{name: "concurrent writers share Sync", writers: 4, batches: 10},
		{name: "torn unsynced tail", writers: 2, batches: 10, unsynced: 50},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := vfs.NewCrashableMem()
			s := openFS(t, fs)
			defer s.Close()

			var mu sync.Mutex
			var acked []*Task
			var wg sync.WaitGroup
			for w := range tt.writers {
				wg.Go(func() {
					for i := range tt.batches {
						b := s.NewBatch()
						var tasks []*Task
						for j := range 50 {
							tk := crashTask(w, i*50+j)
							b.PutTask(tk, 0)
							tasks = append(tasks, tk)
						}
						if err := b.Commit(tt.sync); err != nil {
							t.Errorf("Commit: %v", err)
							return
						}
						if !tt.sync {
							if err := s.Sync(); err != nil {
								t.Errorf("Sync: %v", err)
								return
							}
						}
						mu.Lock()
						acked = append(acked, tasks...)
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			// Writes after the last sync may or may not survive; they must not
			// break recovery of what was synced.
			b := s.NewBatch()
			b.PutTask(crashTask(99, 0), 0)
			if err := b.Commit(false); err != nil {
				t.Fatalf("Commit: %v", err)
			}

			cfg := vfs.CrashCloneCfg{UnsyncedDataPercent: tt.unsynced}
			if tt.unsynced > 0 {
				cfg.RNG = rand.New(rand.NewPCG(seed, 0))
				t.Logf("crash clone seed %d", seed)
			}
			checkSurvived(t, fs.CrashClone(cfg), acked)
		})
	}
}

// TestCrashWithoutSyncLoses shows the crash test has teeth: commits that no
// sync covers are gone after a crash that keeps only synced data.
func TestCrashWithoutSyncLoses(t *testing.T) {
	fs := vfs.NewCrashableMem()
	s := openFS(t, fs)
	defer s.Close()
	tk := crashTask(0, 0)
	b := s.NewBatch()
	b.PutTask(tk, 0)
	if err := b.Commit(false); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	if _, err := s.Get(tk.Slot, tk.ID); err != nil {
		t.Fatalf("Get before crash = %v, want visible", err)
	}
	clone := openFS(t, fs.CrashClone(vfs.CrashCloneCfg{}))
	defer clone.Close()
	if _, err := clone.Get(tk.Slot, tk.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get of unsynced task after crash = %v, want ErrNotFound", err)
	}
}
