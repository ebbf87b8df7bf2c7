package storage

import (
	"fmt"
	"testing"
)

// TestKnownPriorsSkipReads follows the node writer's ways of writing a task
// and counts the keys Commit reads for the checksums: none where the
// writer knows what it replaces (a new id, a record it read or wrote, an
// encoding it cached), one per key where it does not. After every step the
// maintained checksums equal the ones computed from the keys (and a build
// with -tags invariants checks every claim against a read).
func TestKnownPriorsSkipReads(t *testing.T) {
	s := openMem(t, Options{HistoryLimit: 2})
	const n = 20
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("k%02d", i)
	}
	slot := func(i int) uint16 { return uint16(i % 4) }
	get := func(i int) *Task {
		tk, err := s.Get(slot(i), ids[i])
		if err != nil {
			t.Fatalf("Get(%s): %v", ids[i], err)
		}
		return tk
	}
	// A cache of written records, as the writer's hot cache keeps them.
	cached := map[string][]byte{}
	steps := []struct {
		name      string
		write     func(b *Batch)
		wantReads uint64
	}{
		{"creates of new ids, first commit (reads each slot's checksum key)", func(b *Batch) {
			for i := range n / 2 {
				tk := newTask(slot(i), ids[i], 100)
				tk.Replaces(nil)
				b.PutTask(tk, 0)
			}
		}, 4},
		{"creates of new ids", func(b *Batch) {
			for i := n / 2; i < n; i++ {
				tk := newTask(slot(i), ids[i], 100)
				tk.Replaces(nil)
				b.PutTask(tk, 0)
			}
		}, 0},
		{"updates of records read with Get (a fire's start)", func(b *Batch) {
			for i := range n {
				tk := get(i)
				prev := tk.Wake()
				tk.NextDue += 10
				b.PutTask(tk, prev)
				enc, _ := EncodeTask(tk)
				cached[tk.ID] = enc
			}
		}, 0},
		{"updates of cached encodings, the same record twice in the batch", func(b *Batch) {
			for i := range n {
				tk := new(Task)
				if err := s.DecodeStoredTask(cached[ids[i]], tk); err != nil {
					t.Fatal(err)
				}
				for range 2 {
					prev := tk.Wake()
					tk.NextDue += 10
					b.PutTask(tk, prev)
				}
			}
		}, 0},
		{"results with history, within the limit (a fire's end)", func(b *Batch) {
			for i := range n {
				tk := get(i)
				for range 2 {
					prev := tk.Wake()
					b.AppendExecution(tk, &Execution{FireID: tk.ID, Attempt: 1})
					tk.NextDue += 10
					b.PutTask(tk, prev)
				}
			}
		}, 0},
		{"results past the history limit: the trimmed record and its execution log key are read", func(b *Batch) {
			// The log key may be missing (a record written before the
			// index existed), so it is not claimed known.
			for i := range n {
				tk := get(i)
				prev := tk.Wake()
				b.AppendExecution(tk, &Execution{FireID: tk.ID, Attempt: 1})
				b.PutTask(tk, prev)
			}
		}, 2 * n},
		{"a replace declared with Replaces(old)", func(b *Batch) {
			for i := range n {
				old := get(i)
				tk := newTask(slot(i), ids[i], 5000)
				tk.HistSeq = old.HistSeq
				tk.Replaces(old)
				b.PutTask(tk, old.Wake())
			}
		}, 0},
		{"records built without knowledge: every key read", func(b *Batch) {
			for i := range n {
				tk := get(i)
				prev := tk.Wake()
				forget(tk)
				tk.NextDue += 10
				b.PutTask(tk, prev) // task key, old and new due key
			}
		}, 3 * n},
		{"deletes of records read with Get: their history and its execution log keys are read", func(b *Batch) {
			for i := range n / 2 {
				b.DeleteTask(get(i)) // HistoryLimit (2) history keys and their log keys each
			}
		}, 4 * n / 2},
		{"delete and create of one id in a batch", func(b *Batch) {
			for i := range n / 2 {
				tk := newTask(slot(i), ids[i], 7)
				tk.Replaces(nil)
				b.PutTask(tk, 0)
				b.DeleteTask(tk)
				tk.Replaces(nil)
				b.PutTask(tk, 0)
			}
		}, 0},
	}
	for _, st := range steps {
		s.sums.Lock()
		before := s.sums.reads
		s.sums.Unlock()
		b := s.NewBatch()
		st.write(b)
		commit(t, b, false)
		s.sums.Lock()
		got := s.sums.reads - before
		s.sums.Unlock()
		if got != st.wantReads && !checkPriors {
			t.Errorf("%s: Commit read %d keys, want %d", st.name, got, st.wantReads)
		}
		checkChecksums(t, s)
	}
}

// TestUnappliedBatchForgets: a task written to a batch that is closed
// without a commit does not keep what it learnt; its next write reads.
func TestUnappliedBatchForgets(t *testing.T) {
	s := openMem(t, Options{})
	tk := newTask(1, "a", 10)
	tk.Replaces(nil)
	b := s.NewBatch()
	b.PutTask(tk, 0)
	if got := tk.knows().kind; got != priorValue {
		t.Fatalf("after PutTask: knows %v, want priorValue", got)
	}
	b.Close()
	if got := tk.knows().kind; got != priorUnknown {
		t.Errorf("after Close without Commit: knows %v, want priorUnknown", got)
	}
	b = s.NewBatch()
	b.PutTask(tk, 0)
	commit(t, b, false)
	if got := tk.knows().kind; got != priorValue {
		t.Errorf("after Commit: knows %v, want priorValue", got)
	}
	checkChecksums(t, s)
	// A copy with another id knows nothing.
	c := *tk
	c.ID = "b"
	if got := c.knows().kind; got != priorUnknown {
		t.Errorf("copy with another ID: knows %v, want priorUnknown", got)
	}
}

// TestReplicaCreatesSkipReads: a replica applying an owner's creates with
// an id filter that knows the ids are new reads no key for the checksums;
// without the filter, or for ids it may hold, it reads each key the ops
// write (the task key and its due entry). Ops that carry the priors the
// owner's commit found (KeepPriors) are read not at all. The checksums
// agree every time.
func TestReplicaCreatesSkipReads(t *testing.T) {
	owner := openMem(t, Options{})
	replica := openMem(t, Options{})
	const n = 10
	reads := func() uint64 {
		replica.sums.Lock()
		defer replica.sums.Unlock()
		return replica.sums.reads
	}
	stored := map[string]bool{}
	for _, step := range []struct {
		name      string
		first     int // ids first..first+n-1, in slot 3
		mayHold   func(id []byte) bool
		update    bool // update the records written by the step before
		priors    bool // with the priors the owner's commit found
		wantReads uint64
	}{
		{"creates, filter says new (reads only the slot's checksum key)", 0, func(id []byte) bool { return stored[string(id)] }, false, false, 1},
		{"creates, no filter", n, nil, false, false, 2 * n},
		{"creates, filter says maybe", 2 * n, func([]byte) bool { return true }, false, false, 2 * n},
		{"updates of stored ids, filter knows them", 2 * n, func(id []byte) bool { return stored[string(id)] }, true, false, 3 * n},
		{"updates with the owner's priors", 2 * n, nil, true, true, 0},
		{"creates with the owner's priors", 3 * n, nil, false, true, 0},
	} {
		b := owner.NewBatch()
		b.Capture()
		for i := step.first; i < step.first+n; i++ {
			id := fmt.Sprintf("r%03d", i)
			if step.update {
				tk, err := owner.Get(3, id)
				if err != nil {
					t.Fatal(err)
				}
				prev := tk.Wake()
				tk.NextDue += 10
				b.PutTask(tk, prev) // task key, old and new due entry
				continue
			}
			tk := newTask(3, id, 100)
			tk.Replaces(nil)
			b.PutTask(tk, 0)
		}
		ops := b.TakeSlotOps()
		if step.priors {
			b.KeepPriors(ops)
		}
		commit(t, b, false)
		before := reads()
		rb := replica.NewBatch()
		for _, o := range ops {
			if err := rb.ApplySlotOpsKnowing(o, step.mayHold); err != nil {
				t.Fatal(err)
			}
			for _, id := range o.TaskIDs() {
				stored[id] = true
			}
		}
		commit(t, rb, false)
		if got := reads() - before; got != step.wantReads && !checkPriors {
			t.Errorf("%s: Commit read %d keys, want %d", step.name, got, step.wantReads)
		}
		want := checkChecksums(t, owner)
		if got := checkChecksums(t, replica); got[3] != want[3] {
			t.Fatalf("%s: replica checksum %v, owner %v", step.name, got[3], want[3])
		}
	}
}
