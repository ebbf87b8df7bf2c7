package storage

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
)

// scanAsked runs ScanDue from 0 over every slot and returns the slots it
// asked owned about (the ones its marks say may hold due keys) and the
// entries it found.
func scanAsked(t *testing.T, s *Store) (asked []uint16, found []dueEntry) {
	t.Helper()
	return scanTo(t, s, 1<<62)
}

// scanTo runs ScanDue over [0, to) of every slot and returns the slots it
// asked owned about and the entries it found.
func scanTo(t *testing.T, s *Store, to int64) (asked []uint16, found []dueEntry) {
	t.Helper()
	err := s.ScanDue(func(slot uint16) bool {
		asked = append(asked, slot)
		return true
	}, 0, to, func(slot uint16, id string, wake int64) bool {
		found = append(found, dueEntry{slot, id, wake})
		return true
	})
	if err != nil {
		t.Fatalf("ScanDue: %v", err)
	}
	return asked, found
}

func TestScanDueMarks(t *testing.T) {
	s := openMem(t, Options{})
	// Slot meta and checksum keys, but no due key: what an idle node holds.
	b := s.NewBatch()
	for slot := range uint16(100) {
		b.PutSlotMeta(slot, SlotMeta{Epoch: 1})
	}
	b.PutTask(newTask(7, "nowake", 0), 0)
	if err := b.Commit(false); err != nil {
		t.Fatal(err)
	}
	if asked, _ := scanAsked(t, s); len(asked) != 1<<16 {
		t.Fatalf("first scan asked about %d slots, want all 65536 (a fresh store knows nothing)", len(asked))
	}
	if asked, _ := scanAsked(t, s); len(asked) != 0 {
		t.Fatalf("second scan asked about %v, want none: no slot holds a due key", asked)
	}

	put(t, s, newTask(42, "a", 10), newTask(42, "b", 20), newTask(9000, "c", 5))
	asked, found := scanAsked(t, s)
	if want := []uint16{42, 9000}; !slices.Equal(asked, want) {
		t.Fatalf("after puts the scan asked about %v, want %v", asked, want)
	}
	if want := []dueEntry{{42, "a", 10}, {42, "b", 20}, {9000, "c", 5}}; !slices.Equal(found, want) {
		t.Fatalf("found %v, want %v", found, want)
	}

	// A scan that does not start at 0 cannot tell that a slot is empty.
	b = s.NewBatch()
	b.DeleteTask(newTask(9000, "c", 5))
	if err := b.Commit(false); err != nil {
		t.Fatal(err)
	}
	if err := s.ScanDue(nil, 6, 100, func(uint16, string, int64) bool { return true }); err != nil {
		t.Fatal(err)
	}
	if asked, _ := scanAsked(t, s); !slices.Equal(asked, []uint16{42, 9000}) {
		t.Fatalf("after the delete the scan asked about %v, want [42 9000]", asked)
	}
	if asked, _ := scanAsked(t, s); !slices.Equal(asked, []uint16{42}) {
		t.Fatalf("then about %v, want [42]", asked)
	}

	// Keys that arrive as replicated ops mark their slot too.
	src := openMem(t, Options{})
	put(t, src, newTask(3, "r", 7))
	ops, err := src.SnapshotSlot(3)
	if err != nil {
		t.Fatal(err)
	}
	b = s.NewBatch()
	if err := b.ApplySlotOps(ops); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(false); err != nil {
		t.Fatal(err)
	}
	if _, found := scanAsked(t, s); !slices.Contains(found, dueEntry{3, "r", 7}) {
		t.Fatalf("a replicated due key was not found: %v", found)
	}
}

// A batch built (its slot marked) before a scan's snapshot and committed
// after it: the scan finds the slot empty in its snapshot, and must not
// leave it marked empty.
func TestScanDueMarksCommitAfterSnapshot(t *testing.T) {
	s := openMem(t, Options{})
	scanAsked(t, s) // every slot marked empty
	// Slot 5 marked as possibly holding due keys: it held one.
	put(t, s, newTask(5, "gone", 1))
	b := s.NewBatch()
	b.DeleteTask(newTask(5, "gone", 1))
	if err := b.Commit(false); err != nil {
		t.Fatal(err)
	}
	b = s.NewBatch()
	b.PutTask(newTask(5, "late", 3), 0)
	testHookScanDueIter = func() {
		testHookScanDueIter = nil
		if err := b.Commit(false); err != nil {
			t.Error(err)
		}
	}
	defer func() { testHookScanDueIter = nil }()
	if _, found := scanAsked(t, s); len(found) != 0 {
		t.Fatalf("the scan saw %v committed after its snapshot", found)
	}
	if _, found := scanAsked(t, s); !slices.Equal(found, []dueEntry{{5, "late", 3}}) {
		t.Fatalf("the next scan found %v, want the task committed during the last one", found)
	}
}

// scanning starts n goroutines that scan [0, to(i)) of every slot until
// stop is closed (i: the goroutine's number).
func scanning(t *testing.T, s *Store, wg *sync.WaitGroup, stop <-chan struct{}, n int, to func(i int) int64) {
	for i := range n {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if err := s.ScanDue(nil, 0, to(i), func(uint16, string, int64) bool { return true }); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
}

// Writers and scans from 0 at once: once the writers are done, a scan finds
// every due key (run under -race).
func TestScanDueMarksConcurrent(t *testing.T) {
	s := openMem(t, Options{DisableChecksums: true})
	stop := make(chan struct{})
	var wg sync.WaitGroup
	scanning(t, s, &wg, stop, 2, func(int) int64 { return 1 << 62 })
	var want []dueEntry
	for i := range 300 {
		slot := uint16(rand.IntN(64))
		id := fmt.Sprintf("t%d", i)
		put(t, s, newTask(slot, id, int64(i+1)))
		want = append(want, dueEntry{slot, id, int64(i + 1)})
		if i%3 == 0 {
			// Delete an earlier one: its slot may become empty.
			d := want[len(want)/2]
			b := s.NewBatch()
			b.DeleteTask(newTask(d.Slot, d.ID, d.Wake))
			if err := b.Commit(false); err != nil {
				t.Fatal(err)
			}
			want = slices.Delete(want, len(want)/2, len(want)/2+1)
		}
	}
	close(stop)
	wg.Wait()
	_, found := scanAsked(t, s)
	cmp := func(a, b dueEntry) int {
		if a.Slot != b.Slot {
			return int(a.Slot) - int(b.Slot)
		}
		return int(a.Wake - b.Wake)
	}
	slices.SortFunc(want, cmp)
	if !slices.Equal(found, want) {
		t.Fatalf("after concurrent scans found %d entries, want %d", len(found), len(want))
	}
}

// TestScanDueFloor: a scan from 0 learns each slot's earliest wake; a scan
// whose window ends at or before it skips the slot without a seek, until a
// commit sets an earlier key there (also one committed during the scan
// that learnt the floor, after its snapshot).
func TestScanDueFloor(t *testing.T) {
	s := openMem(t, Options{})
	put(t, s, newTask(42, "a", 100), newTask(42, "b", 200), newTask(9000, "c", 50))
	scanAsked(t, s) // learns the floors: 100 and 50
	if asked, found := scanTo(t, s, 50); len(asked) != 0 || len(found) != 0 {
		t.Fatalf("window [0, 50): asked %v, found %v; want neither (both slots wake at 50 or later)", asked, found)
	}
	if asked, found := scanTo(t, s, 51); !slices.Equal(asked, []uint16{9000}) || !slices.Equal(found, []dueEntry{{9000, "c", 50}}) {
		t.Fatalf("window [0, 51): asked %v, found %v; want slot 9000 and c", asked, found)
	}
	// An earlier key lowers the floor with its commit.
	put(t, s, newTask(42, "early", 10))
	if _, found := scanTo(t, s, 50); !slices.Equal(found, []dueEntry{{42, "early", 10}}) {
		t.Fatalf("after an earlier put: found %v, want early", found)
	}
	// Deleting it leaves the floor low (a seek too many), until a scan
	// from 0 raises it again.
	b := s.NewBatch()
	b.DeleteTask(newTask(42, "early", 10))
	if err := b.Commit(false); err != nil {
		t.Fatal(err)
	}
	if asked, _ := scanTo(t, s, 50); !slices.Equal(asked, []uint16{42}) {
		t.Fatalf("after the delete: asked %v, want [42]", asked)
	}
	scanAsked(t, s)
	if asked, _ := scanTo(t, s, 50); len(asked) != 0 {
		t.Fatalf("after a scan from 0: asked %v, want none", asked)
	}
	// A key committed after a scan's snapshot: the scan does not see it,
	// and must not raise the floor over it.
	b = s.NewBatch()
	b.PutTask(newTask(42, "late", 20), 0)
	testHookScanDueIter = func() {
		testHookScanDueIter = nil
		if err := b.Commit(false); err != nil {
			t.Error(err)
		}
	}
	defer func() { testHookScanDueIter = nil }()
	if _, found := scanAsked(t, s); slices.Contains(found, dueEntry{42, "late", 20}) {
		t.Fatalf("the scan saw a commit after its snapshot")
	}
	if _, found := scanTo(t, s, 50); !slices.Equal(found, []dueEntry{{42, "late", 20}}) {
		t.Fatalf("the next scan of [0, 50) found %v, want late", found)
	}
}

// Writers and scans at once, from 0 (which learn floors) and of shorter
// windows (which skip by them): once the writers are done, every window
// finds exactly the keys below its end (run under -race).
func TestScanDueFloorConcurrent(t *testing.T) {
	s := openMem(t, Options{DisableChecksums: true})
	stop := make(chan struct{})
	var wg sync.WaitGroup
	scanning(t, s, &wg, stop, 2, func(i int) int64 {
		if i == 1 {
			return rand.Int64N(1000)
		}
		return 1 << 62
	})
	var want []dueEntry
	for i := range 400 {
		slot := uint16(rand.IntN(16))
		id := fmt.Sprintf("t%d", i)
		wake := 1 + rand.Int64N(1000) // earlier and later than the floors learnt
		put(t, s, newTask(slot, id, wake))
		want = append(want, dueEntry{slot, id, wake})
	}
	close(stop)
	wg.Wait()
	slices.SortFunc(want, func(a, b dueEntry) int {
		if a.Slot != b.Slot {
			return int(a.Slot) - int(b.Slot)
		}
		if a.Wake != b.Wake {
			return int(a.Wake - b.Wake)
		}
		return strings.Compare(a.ID, b.ID)
	})
	for _, to := range []int64{1, 50, 333, 999, 1001} {
		var below []dueEntry
		for _, e := range want {
			if e.Wake < to {
				below = append(below, e)
			}
		}
		if _, found := scanTo(t, s, to); !slices.Equal(found, below) {
			t.Fatalf("window [0, %d): found %d entries, want %d", to, len(found), len(below))
		}
	}
}

// TestWrites: every commit and slot drop counts, reads do not.
func TestWrites(t *testing.T) {
	s := openMem(t, Options{})
	w0 := s.Writes()
	put(t, s, newTask(3, "a", 10))
	if w := s.Writes(); w != w0+1 {
		t.Fatalf("after a put: %d writes, want %d", w, w0+1)
	}
	if _, err := s.Get(3, "a"); err != nil {
		t.Fatal(err)
	}
	if err := s.DropSlot(3); err != nil {
		t.Fatal(err)
	}
	if w := s.Writes(); w != w0+2 {
		t.Fatalf("after a read and a drop: %d writes, want %d", w, w0+2)
	}
}
