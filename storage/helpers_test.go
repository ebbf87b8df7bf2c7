package storage

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
)

// testLogger routes a store's logs to t.Log, so they show only on failure.
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// openMem opens an in-memory store closed at cleanup.
func openMem(t testing.TB, opts Options) *Store {
	t.Helper()
	opts.InMemory = true
	opts.Logger = testLogger(t)
	s, err := Open(opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

// newTask returns a scheduled one-shot task due at due (0 = not indexed).
func newTask(slot uint16, id string, due int64) *Task {
	return &Task{
		ID:   id,
		Slot: slot,
		Spec: Spec{
			CallbackURL: "http://127.0.0.1:9/cb",
			Kind:        KindOnce,
			DueAt:       due,
			TimeoutMs:   5000,
			MaxRetries:  3,
			Misfire:     MisfireFireOnce,
		},
		Status:    StatusScheduled,
		NextDue:   due,
		CreatedAt: 1,
		UpdatedAt: 1,
	}
}

// put writes tasks as new tasks in one batch and syncs it.
func put(t testing.TB, s *Store, tasks ...*Task) {
	t.Helper()
	b := s.NewBatch()
	for _, tk := range tasks {
		b.PutTask(tk, 0)
	}
	if err := b.Commit(true); err != nil {
		t.Fatalf("Commit: %v", err)
	}
}

// dueEntry is one due index entry as ScanDue reports it.
type dueEntry struct {
	Slot uint16
	ID   string
	Wake int64
}

func (e dueEntry) String() string { return fmt.Sprintf("%d/%s@%d", e.Slot, e.ID, e.Wake) }

// allDue returns every due index entry.
func allDue(t testing.TB, s *Store) []dueEntry {
	t.Helper()
	var got []dueEntry
	err := s.ScanDue(nil, 0, 1<<63-1, func(slot uint16, id string, wake int64) bool {
		got = append(got, dueEntry{slot, id, wake})
		return true
	})
	if err != nil {
		t.Fatalf("ScanDue: %v", err)
	}
	return got
}

// countKeys counts raw keys with the given prefix.
func countKeys(t testing.TB, s *Store, prefix []byte) int {
	t.Helper()
	upper := bytes.Clone(prefix)
	for len(upper) > 0 && upper[len(upper)-1] == 0xff {
		upper = upper[:len(upper)-1]
	}
	if len(upper) == 0 {
		t.Fatalf("countKeys(%q): no successor", prefix)
	}
	upper[len(upper)-1]++
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: upper})
	if err != nil {
		t.Fatalf("NewIter: %v", err)
	}
	defer it.Close()
	n := 0
	for valid := it.First(); valid; valid = it.Next() {
		n++
	}
	return n
}
