package storage

import (
	"errors"
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
