package storage

import (
	"errors"
	"strings"
	"testing"
	"testing/synctest"
)

// A store on a MemFS keeps its data across Close and reopen; a CrashClone
// keeps what was synced and nothing written to the original afterwards.
// All of it inside a synctest bubble: pebble's goroutines on a MemFS must
// let the bubble end.
func TestMemFSSurvivesCloseAndCrashClone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := NewMemFS()
		open := func(m *MemFS) *Store {
			t.Helper()
			s, err := Open(Options{Mem: m, Logger: testLogger(t)})
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			return s
		}
		put := func(s *Store, id string, sync bool) {
			t.Helper()
			b := s.NewBatch()
			b.PutTask(newTask(1, id, 1000), 0)
			if err := b.Commit(sync); err != nil {
				t.Fatalf("Commit %s: %v", id, err)
			}
		}
		has := func(s *Store, id string) bool {
			t.Helper()
			_, err := s.Get(1, id)
			if err != nil && !errors.Is(err, ErrNotFound) {
				t.Fatalf("Get %s: %v", id, err)
			}
			return err == nil
		}

		s := open(mem)
		put(s, "synced", true)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		s = open(mem)
		if !has(s, "synced") {
			t.Error("a reopened MemFS store lost a synced task")
		}
		clone := mem.CrashClone()
		put(s, "after", true)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		c := open(clone)
		defer c.Close()
		for id, want := range map[string]bool{"synced": true, "after": false} {
			if got := has(c, id); got != want {
				t.Errorf("crash clone has %q = %v, want %v", id, got, want)
			}
		}
	})
}

// A failed write-ahead-log write or sync fails the store instead of
// crashing the process: the commit returns ErrFailed, so does every later
// write (with the first error), Close returns, and a reopen finds what was
// synced before the failure.
func TestFailedWALFailsTheStore(t *testing.T) {
	for _, sync := range []bool{true, false} {
		name := map[bool]string{true: "sync", false: "nosync"}[sync]
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				mem := NewMemFS()
				s, err := Open(Options{Mem: mem, Logger: testLogger(t)})
				if err != nil {
					t.Fatal(err)
				}
				put := func(id string, sync bool) error {
					b := s.NewBatch()
					b.PutTask(newTask(1, id, 1000), 0)
					return b.Commit(sync)
				}
				if err := put("before", true); err != nil {
					t.Fatal(err)
				}
				disk := errors.New("EIO: the disk said no")
				mem.FailWAL(disk)
				// A commit without sync may stay in pebble's WAL buffer; the
				// sync after it reaches the disk.
				err = put("during", sync)
				if err == nil {
					err = s.Sync()
				}
				if !errors.Is(err, ErrFailed) || !strings.Contains(err.Error(), "EIO") {
					t.Fatalf("write while the WAL fails = %v; want ErrFailed naming the disk's error", err)
				}
				if s.Failed() == nil {
					t.Error("Failed() = nil after a failed write")
				}
				select {
				case <-s.FailedC():
				default:
					t.Error("FailedC() not closed after a failed write")
				}
				mem.FailWAL(nil) // the disk recovers: the store stays failed
				for what, f := range map[string]func() error{
					"commit": func() error { return put("after", true) },
					"sync":   s.Sync,
					"voters": func() error { return s.SetVoters([]string{"n1"}) },
					"drop":   func() error { return s.DropSlot(2) },
				} {
					if err := f(); !errors.Is(err, ErrFailed) {
						t.Errorf("%s after the failure = %v, want ErrFailed", what, err)
					}
				}
				_ = s.Close() // returns (its error, if any, does not matter)
				s2, err := Open(Options{Mem: mem, Logger: testLogger(t)})
				if err != nil {
					t.Fatalf("reopen after the failure: %v", err)
				}
				defer s2.Close()
				if _, err := s2.Get(1, "before"); err != nil {
					t.Errorf("a task synced before the failure: %v", err)
				}
				if _, err := s2.Get(1, "after"); !errors.Is(err, ErrNotFound) {
					t.Errorf("a write refused after the failure is there: %v", err)
				}
			})
		})
	}
}
