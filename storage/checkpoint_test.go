package storage

import (
	"path/filepath"
	"testing"
)

// TestCheckpointOpens: a checkpoint holds every task committed before it,
// none written after, and opens as a store of its own.
func TestCheckpointOpens(t *testing.T) {
	s, err := Open(Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	put := func(id string) {
		b := s.NewBatch()
		b.PutTask(&Task{ID: id, Slot: 7, Status: StatusScheduled, NextDue: 1e18, Spec: Spec{Kind: KindOnce, DueAt: 1e18}}, 0)
		if err := b.Commit(false); err != nil { // not synced: the checkpoint flushes the WAL
			t.Fatal(err)
		}
	}
	put("before")
	dir := filepath.Join(t.TempDir(), "cp")
	if err := s.Checkpoint(dir); err != nil {
		t.Fatal(err)
	}
	put("after")
	if err := s.Checkpoint(dir); err == nil {
		t.Error("a checkpoint into an existing directory succeeded")
	}
	c, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Get(7, "before"); err != nil {
		t.Errorf("the checkpoint lacks a task committed before it: %v", err)
	}
	if _, err := c.Get(7, "after"); err != ErrNotFound {
		t.Errorf("the checkpoint has a task written after it: %v", err)
	}
}
