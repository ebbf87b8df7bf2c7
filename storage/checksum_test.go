package storage

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/cespare/xxhash/v2"
	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// checkChecksums scans every slot key of s and checks, for every slot, that
// the stored checksum (and the cached one, if any) equals the one computed
// from its data keys: a slot without data keys has no checksum key. For the
// first few slots it also checks SlotChecksum and ComputeSlotChecksum (each
// may cost a read or an iterator). It returns the checksum of every slot
// that has data.
func checkChecksums(t testing.TB, s *Store) map[uint16]Checksum {
	t.Helper()
	want := map[uint16]Checksum{}
	stored := map[uint16]Checksum{}
	it, err := s.newSlotIter()
	if err != nil {
		t.Fatal(err)
	}
	for valid := it.First(); valid; valid = it.Next() {
		slot, section, _, ok := decodeSlotKey(it.Key())
		switch {
		case !ok:
			t.Fatalf("malformed key %q", it.Key())
		case isDataSection(section):
			c := want[slot]
			c.add(keyHash(it.Key(), it.Value()))
			want[slot] = c
		case section == sectionChecksum:
			c, err := decodeChecksum(it.Value())
			if err != nil || c == (Checksum{}) {
				t.Errorf("slot %d: stored checksum %v, %v; want a non-zero one or no key", slot, c, err)
			}
			stored[slot] = c
		}
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	for slot, c := range want {
		if got := stored[slot]; got != c {
			t.Errorf("slot %d: stored checksum %v, want %v (computed from its keys)", slot, got, c)
		}
	}
	for slot, c := range stored {
		if _, ok := want[slot]; !ok {
			t.Errorf("slot %d has no data keys but a checksum key: %v", slot, c)
		}
	}
	s.sums.Lock()
	for slot, c := range s.sums.m {
		if c != want[slot] {
			t.Errorf("slot %d: cached checksum %v, want %v", slot, c, want[slot])
		}
	}
	s.sums.Unlock()
	for i, slot := range slices.Sorted(maps.Keys(want)) {
		if i == 8 {
			break
		}
		c := want[slot]
		if got, err := s.SlotChecksum(slot); err != nil || got != c {
			t.Errorf("SlotChecksum(%d) = %v, %v; want %v (computed from its keys)", slot, got, err, c)
		}
		if got, err := s.ComputeSlotChecksum(slot); err != nil || got != c {
			t.Errorf("ComputeSlotChecksum(%d) = %v, %v; want %v", slot, got, err, c)
		}
	}
	return want
}

// reopener is a store that can be closed and opened again on the same
// files: a real directory or one in-memory filesystem.
type reopener struct {
	t    *testing.T
	fs   vfs.FS
	dir  string
	opts Options
	*Store
}

func newReopener(t *testing.T, disk bool, opts Options) *reopener {
	t.Helper()
	r := &reopener{t: t, fs: vfs.NewMem(), dir: "db", opts: opts}
	if disk {
		r.fs, r.dir = vfs.Default, t.TempDir()
	}
	r.opts.Logger = testLogger(t)
	r.reopen()
	t.Cleanup(func() {
		if err := r.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return r
}

func (r *reopener) reopen() {
	r.t.Helper()
	if r.Store != nil {
		if err := r.Close(); err != nil {
			r.t.Fatalf("Close: %v", err)
		}
	}
	s, err := open(r.opts, r.fs, r.dir)
	if err != nil {
		r.t.Fatalf("open: %v", err)
	}
	r.Store = s
}

func commit(t testing.TB, b *Batch, sync bool) {
	t.Helper()
	if err := b.Commit(sync); err != nil {
		t.Fatalf("Commit: %v", err)
	}
}

// transfer rebuilds slot on dst from a snapshot of src, as a resync does:
// DropSlot and the snapshot's ops in one batch.
func transfer(t testing.TB, src, dst *Store, slot uint16) {
	t.Helper()
	snap, err := src.SnapshotSlot(slot)
	if err != nil {
		t.Fatalf("SnapshotSlot: %v", err)
	}
	b := dst.NewBatch()
	b.DropSlot(slot)
	if err := b.ApplySlotOps(snap); err != nil {
		t.Fatalf("ApplySlotOps: %v", err)
	}
	commit(t, b, false)
}

// TestChecksumRandomOps runs random batches on an owner store with capture
// on and ships the captured ops to a replica (ApplySlotOpsKnowing, with the
// ids the owner ever wrote as its id filter, mostly with the priors the
// owner's commit found: KeepPriors). Now and then a
// slot is dropped on both, dropped between writes of an owner batch (the
// replica then gets a snapshot), copied by snapshot to a third store
// that only ever receives snapshots, or all stores are closed and opened
// again. After every step each store's maintained checksums equal the ones
// computed from its keys, the replica agrees with the owner on every slot,
// and the snapshot copy agrees on the slots it received.
func TestChecksumRandomOps(t *testing.T) {
	for _, tt := range []struct {
		name   string
		disk   bool
		seed   uint64
		rounds int
	}{
		{name: "mem", seed: 1, rounds: 100},
		{name: "disk", disk: true, seed: 2, rounds: 40},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Logf("seed %d", tt.seed)
			rng := rand.New(rand.NewPCG(tt.seed, 0))
			opts := Options{HistoryLimit: 3}
			owner := newReopener(t, tt.disk, opts)
			replica := newReopener(t, tt.disk, opts)
			copies := newReopener(t, tt.disk, opts)
			slotsUsed := []uint16{0, 9, 65535}
			live := map[string]*Task{}
			// The ids the owner ever wrote: the replica's id filter
			// (ApplySlotOpsKnowing), which also answers yes at random
			// (a Bloom filter's false positives).
			ever := map[string]bool{}
			mayHold := func(id []byte) bool { return ever[string(id)] || rng.IntN(8) == 0 }
			ghost := 0
			for round := range tt.rounds {
				b := owner.NewBatch()
				b.Capture()
				var reset []uint16 // slots the owner dropped inside b
				for range 1 + rng.IntN(8) {
					slot := slotsUsed[rng.IntN(len(slotsUsed))]
					if rng.IntN(60) == 0 {
						// Dropped between writes of the same batch.
						b.DropSlot(slot)
						reset = append(reset, slot)
						for id, tk := range live {
							if tk.Slot == slot {
								delete(live, id)
							}
						}
					}
					id := fmt.Sprintf("t%d-%d", slot, rng.IntN(6))
					cur := live[id]
					if cur != nil {
						// What the writer knows of the stored record
						// (prior.go): what it last wrote (cur as is), what
						// it reads back, or nothing (Commit reads).
						switch rng.IntN(4) {
						case 0:
							forget(cur)
						case 1:
							if got, err := owner.Get(slot, id); err == nil && !writtenIn(b, cur) {
								cur = got
								live[id] = got
							}
						}
					}
					switch op := rng.IntN(10); {
					case cur == nil && op < 8:
						tk := newTask(slot, id, int64(1+rng.IntN(1000)))
						tk.Spec.Payload = fmt.Appendf(nil, `{"r":%d}`, round)
						if rng.IntN(2) == 0 {
							tk.Replaces(nil) // the writer knows the id is new
						}
						b.PutTask(tk, 0)
						live[id] = tk
						ever[id] = true
					case cur == nil:
						// Delete of keys that are not stored.
						ghost++
						b.DeleteTask(newTask(slot, fmt.Sprintf("ghost-%d", ghost), int64(1+rng.IntN(1000))))
					case op == 0:
						b.DeleteTask(cur)
						delete(live, id)
					case op == 1:
						b.AppendExecution(cur, &Execution{FireID: id, DueAt: cur.NextDue, Attempt: 1, StatusCode: 200})
						b.PutTask(cur, cur.Wake())
					case op == 2:
						// Same key, same wake, new value.
						cur.UpdatedAt++
						b.PutTask(cur, cur.Wake())
					case op == 3:
						// A wrong prevWake: deletes a due key that is not
						// stored and leaves the old one behind. Only a
						// writer that knows nothing keeps the checksum
						// right then (it reads); one that knows the record
						// trusts prevWake.
						prev := cur.Wake()
						cur.NextDue = int64(1 + rng.IntN(1000))
						forget(cur)
						b.PutTask(cur, prev+1)
					default:
						prev := cur.Wake()
						cur.NextDue = int64(1 + rng.IntN(1000))
						b.PutTask(cur, prev)
					}
				}
				ops := b.TakeSlotOps()
				keep := rng.IntN(4) != 0
				if keep {
					b.KeepPriors(ops) // the replica trusts what the owner's commit found
				}
				commit(t, b, rng.IntN(4) == 0)
				for i := range ops {
					if keep && !slices.Contains(reset, ops[i].Slot) && ops[i].Priors == nil {
						t.Fatalf("round %d: no priors kept for slot %d", round, ops[i].Slot)
					}
					if rng.IntN(4) == 0 {
						ops[i].Priors = nil // the replica reads
					}
				}

				rb := replica.NewBatch()
				for _, o := range ops {
					if slices.Contains(reset, o.Slot) {
						continue // the snapshot below replaces it
					}
					if err := rb.ApplySlotOpsKnowing(o, mayHold); err != nil {
						t.Fatalf("round %d: ApplySlotOpsKnowing(slot %d): %v", round, o.Slot, err)
					}
				}
				commit(t, rb, false)
				for _, slot := range reset {
					transfer(t, owner.Store, replica.Store, slot)
				}

				switch rng.IntN(20) {
				case 0:
					slot := slotsUsed[rng.IntN(len(slotsUsed))]
					for _, s := range []*Store{owner.Store, replica.Store} {
						if err := s.DropSlot(slot); err != nil {
							t.Fatalf("DropSlot: %v", err)
						}
					}
					for id, tk := range live {
						if tk.Slot == slot {
							delete(live, id)
						}
					}
				case 1, 2:
					slot := slotsUsed[rng.IntN(len(slotsUsed))]
					transfer(t, owner.Store, copies.Store, slot)
					checkSameSlot(t, round, slot, owner.Store, copies.Store)
				case 3:
					for _, r := range []*reopener{owner, replica, copies} {
						r.reopen()
					}
				}

				want := checkChecksums(t, owner.Store)
				got := checkChecksums(t, replica.Store)
				checkChecksums(t, copies.Store)
				for _, slot := range slotsUsed {
					if got[slot] != want[slot] {
						t.Fatalf("round %d: slot %d: replica checksum %v, owner %v", round, slot, got[slot], want[slot])
					}
				}
			}
			for _, slot := range slotsUsed {
				transfer(t, owner.Store, copies.Store, slot)
				checkSameSlot(t, tt.rounds, slot, owner.Store, copies.Store)
			}
		})
	}
}

// forget makes tk know nothing of its stored record (prior.go): its next
// write reads what it replaces.
func forget(tk *Task) { tk.stored = storedRecord{} }

// writtenIn reports whether b, not committed yet, writes tk's record: a Get
// would then read the record from before b, which b's later writes of it
// must not claim to replace.
func writtenIn(b *Batch, tk *Task) bool {
	var key [slotPrefixLen + 1 + 128]byte
	k := appendTaskKey(key[:0], tk.Slot, tk.ID)
	w := b.sums.slots[tk.Slot]
	if w == nil {
		return false
	}
	for _, kw := range w.writes {
		if string(b.sums.keys[kw.off:kw.off+kw.n]) == string(k) {
			return true
		}
	}
	return w.dropped
}

func checkSameSlot(t *testing.T, round int, slot uint16, a, b *Store) {
	t.Helper()
	ca, erra := a.SlotChecksum(slot)
	cb, errb := b.SlotChecksum(slot)
	if erra != nil || errb != nil || ca != cb {
		t.Fatalf("round %d: slot %d checksums %v, %v and %v, %v; want equal", round, slot, ca, erra, cb, errb)
	}
}

// TestChecksumOrderIndependent writes the same final content into stores
// in different orders and batchings, through different paths, and expects
// one checksum.
func TestChecksumOrderIndependent(t *testing.T) {
	const slot = 42
	tasks := make([]*Task, 20)
	for i := range tasks {
		tasks[i] = newTask(slot, fmt.Sprintf("id-%02d", i), int64(100+i))
	}
	final := func() []*Task { // the content every store ends with
		out := make([]*Task, len(tasks))
		for i, tk := range tasks {
			c := *tk
			c.UpdatedAt = 7
			forget(&c) // written with PutTask(c, 0) over whatever is stored
			out[i] = &c
		}
		return out
	}
	tests := []struct {
		name  string
		write func(t *testing.T, s *Store)
	}{
		{"one batch", func(t *testing.T, s *Store) {
			b := s.NewBatch()
			for _, tk := range final() {
				b.PutTask(tk, 0)
			}
			commit(t, b, false)
		}},
		{"reversed, one batch each", func(t *testing.T, s *Store) {
			f := final()
			for i := len(f) - 1; i >= 0; i-- {
				b := s.NewBatch()
				b.PutTask(f[i], 0)
				commit(t, b, false)
			}
		}},
		{"overwrites and deletes on the way", func(t *testing.T, s *Store) {
			b := s.NewBatch()
			for _, tk := range tasks {
				b.PutTask(tk, 0)
			}
			b.DeleteTask(tasks[3])
			commit(t, b, false)
			b = s.NewBatch()
			extra := newTask(slot, "gone", 5)
			b.PutTask(extra, 0)
			for _, tk := range final() {
				b.PutTask(tk, tk.Wake())
			}
			b.DeleteTask(extra)
			commit(t, b, true)
		}},
		{"written in another slot's batch order", func(t *testing.T, s *Store) {
			b := s.NewBatch()
			f := final()
			rng := rand.New(rand.NewPCG(3, 4))
			rng.Shuffle(len(f), func(i, j int) { f[i], f[j] = f[j], f[i] })
			for i, tk := range f {
				b.PutTask(newTask(slot+1, tk.ID, 9), 0)
				b.PutTask(tk, 0)
				if i%7 == 6 {
					commit(t, b, false)
					b = s.NewBatch()
				}
			}
			commit(t, b, false)
			if err := s.DropSlot(slot + 1); err != nil {
				t.Fatal(err)
			}
		}},
		{"written, dropped and rewritten in one batch", func(t *testing.T, s *Store) {
			b := s.NewBatch()
			for _, tk := range tasks {
				b.PutTask(tk, 0)
			}
			b.PutTask(newTask(slot, "dropped", 3), 0)
			b.DropSlot(slot)
			for _, tk := range final() {
				b.PutTask(tk, 0)
			}
			commit(t, b, false)
		}},
		{"snapshot of another store", func(t *testing.T, s *Store) {
			src := openMem(t, Options{})
			b := src.NewBatch()
			for _, tk := range final() {
				b.PutTask(tk, 0)
			}
			commit(t, b, false)
			b = s.NewBatch()
			b.PutTask(newTask(slot, "replaced", 1), 0)
			commit(t, b, false)
			transfer(t, src, s, slot)
		}},
		{"replicated ops", func(t *testing.T, s *Store) {
			src := openMem(t, Options{})
			b := src.NewBatch()
			b.Capture()
			for _, tk := range tasks {
				b.PutTask(tk, 0)
			}
			for _, tk := range final() {
				b.PutTask(tk, tk.Wake())
			}
			ops := b.TakeSlotOps()
			commit(t, b, false)
			rb := s.NewBatch()
			for _, o := range ops {
				if err := rb.ApplySlotOps(o); err != nil {
					t.Fatal(err)
				}
			}
			commit(t, rb, false)
		}},
	}
	var want Checksum
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, tk := range tasks {
				forget(tk) // it knows what it was in the last test's store
			}
			s := openMem(t, Options{})
			tt.write(t, s)
			checkChecksums(t, s)
			got, err := s.SlotChecksum(slot)
			if err != nil {
				t.Fatal(err)
			}
			if got.Count != uint64(2*len(tasks)) {
				t.Errorf("SlotChecksum(%d).Count = %d, want %d (task and due key each)", slot, got.Count, 2*len(tasks))
			}
			if i == 0 {
				want = got
			} else if got != want {
				t.Errorf("SlotChecksum(%d) = %v, want %v (as %q)", slot, got, want, tests[0].name)
			}
		})
	}
}

// TestChecksumGolden pins the checksum of fixed keys and values. Owner and
// follower may run different builds: if this changes, the scheme changed,
// and ChecksumVersion must be bumped (Open then rebuilds every checksum).
// Record encodings do not matter here: a replica holds its owner's bytes.
func TestChecksumGolden(t *testing.T) {
	if got, want := keyHash([]byte("k"), []byte("v")), xxhash.Sum64([]byte("\x01kv")); got != want {
		t.Errorf("keyHash(k, v) = %#x, want xxhash64(uvarint(1) k v) = %#x", got, want)
	}
	s := openMem(t, Options{})
	b := s.NewBatch()
	b.set(appendTaskKey(nil, 3, "golden"), []byte("record"))
	b.set(appendDueKey(nil, 3, 1_700_000_000_000_000_000, "golden"), nil)
	b.set(appendHistKey(nil, 3, "golden", 1), []byte("execution"))
	commit(t, b, false)
	got, err := s.SlotChecksum(3)
	want := Checksum{Sum: 0x944a9d29e81cd2bc, Count: 3}
	if err != nil || got != want {
		t.Errorf("SlotChecksum(3) = %#v, %v; want %#v", got, err, want)
	}
}

func TestSlotChecksumEmpty(t *testing.T) {
	s := openMem(t, Options{})
	if c, err := s.SlotChecksum(5); err != nil || c != (Checksum{}) {
		t.Errorf("SlotChecksum of an empty store = %v, %v; want zero", c, err)
	}
	tk := newTask(5, "a", 10)
	put(t, s, tk)
	if c, err := s.SlotChecksum(5); err != nil || c.Count != 2 {
		t.Errorf("SlotChecksum(5) = %v, %v; want 2 keys", c, err)
	}
	b := s.NewBatch()
	b.DeleteTask(tk)
	commit(t, b, false)
	if c, err := s.SlotChecksum(5); err != nil || c != (Checksum{}) {
		t.Errorf("SlotChecksum(5) after deleting everything = %v, %v; want zero", c, err)
	}
	if n := countKeys(t, s, appendSlotPrefix(nil, 5)); n != 0 {
		t.Errorf("slot 5 keeps %d keys after deleting everything, want 0 (no checksum key)", n)
	}
}

// TestChecksumConcurrentCommits commits overlapping writes to two slots
// from several goroutines, some with sync, while slots are dropped: each
// commit's reads must see every earlier commit's writes.
func TestChecksumConcurrentCommits(t *testing.T) {
	s := openMem(t, Options{HistoryLimit: 2})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 9))
			for i := range 60 {
				b := s.NewBatch()
				for range 3 {
					tk := newTask(uint16(rng.IntN(2)), fmt.Sprintf("k%d", rng.IntN(8)), int64(1+rng.IntN(50)))
					tk.UpdatedAt = int64(w*1000 + i)
					if rng.IntN(3) == 0 {
						b.DeleteTask(tk)
					} else {
						b.AppendExecution(tk, &Execution{Attempt: w})
						b.PutTask(tk, int64(1+rng.IntN(50)))
					}
				}
				if err := b.Commit(i%5 == 0); err != nil {
					t.Errorf("Commit: %v", err)
					return
				}
				if w == 0 && i%20 == 19 {
					if err := s.DropSlot(uint16(rng.IntN(2))); err != nil {
						t.Errorf("DropSlot: %v", err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	checkChecksums(t, s)
}

// TestChecksumRebuiltOnOpen opens stores whose checksums are missing (a
// store written before checksums existed), of another scheme version, or
// left on a slot that has no data: Open rebuilds them all.
func TestChecksumRebuiltOnOpen(t *testing.T) {
	tests := []struct {
		name   string
		damage func(t *testing.T, db *pebble.DB)
	}{
		{"no checksums", func(t *testing.T, db *pebble.DB) {
			for _, slot := range []uint16{1, 2, 65535} {
				mustPebble(t, db.Delete(appendChecksumKey(nil, slot), pebble.Sync))
			}
			mustPebble(t, db.Delete(nodeKeyChecksums, pebble.Sync))
		}},
		{"other version", func(t *testing.T, db *pebble.DB) {
			mustPebble(t, db.Set(appendChecksumKey(nil, 2), encodeChecksum(Checksum{Sum: 1, Count: 1}), pebble.Sync))
			mustPebble(t, db.Set(appendChecksumKey(nil, 7), encodeChecksum(Checksum{Sum: 1, Count: 1}), pebble.Sync))
			mustPebble(t, db.Set(nodeKeyChecksums, []byte{ChecksumVersion + 1}, pebble.Sync))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newReopener(t, false, Options{})
			b := r.NewBatch()
			for i, slot := range []uint16{1, 2, 2, 65535} {
				tk := newTask(slot, fmt.Sprintf("t%d", i), int64(10+i))
				b.AppendExecution(tk, &Execution{Attempt: 1})
				b.PutTask(tk, 0)
			}
			commit(t, b, true)
			want := checkChecksums(t, r.Store)
			tt.damage(t, r.db)
			r.reopen()
			if got := checkChecksums(t, r.Store); !maps.Equal(got, want) {
				t.Errorf("checksums after reopen = %v, want %v", got, want)
			}
		})
	}
}

func mustPebble(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestRepairSlotChecksum(t *testing.T) {
	s := openMem(t, Options{})
	put(t, s, newTask(4, "a", 10), newTask(4, "b", 11))
	good, err := s.SlotChecksum(4)
	if err != nil {
		t.Fatal(err)
	}
	if was, now, err := s.RepairSlotChecksum(4); err != nil || was != good || now != good {
		t.Errorf("RepairSlotChecksum of a right checksum = %v, %v, %v; want %v twice", was, now, err, good)
	}
	bad := Checksum{Sum: good.Sum + 1, Count: good.Count}
	mustPebble(t, s.db.Set(appendChecksumKey(nil, 4), encodeChecksum(bad), pebble.NoSync))
	mustPebble(t, s.db.Set(appendChecksumKey(nil, 8), encodeChecksum(bad), pebble.NoSync)) // slot 8 is empty
	if was, now, err := s.RepairSlotChecksum(4); err != nil || was != bad || now != good {
		t.Errorf("RepairSlotChecksum(4) = %v, %v, %v; want %v, %v", was, now, err, bad, good)
	}
	if was, now, err := s.RepairSlotChecksum(8); err != nil || was != bad || now != (Checksum{}) {
		t.Errorf("RepairSlotChecksum(8) = %v, %v, %v; want %v, zero", was, now, err, bad)
	}
	checkChecksums(t, s)
}

func TestChecksumClosed(t *testing.T) {
	s, err := Open(Options{InMemory: true, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SlotChecksum(1); !errors.Is(err, ErrClosed) {
		t.Errorf("SlotChecksum after Close = %v, want ErrClosed", err)
	}
	if _, err := s.ComputeSlotChecksum(1); !errors.Is(err, ErrClosed) {
		t.Errorf("ComputeSlotChecksum after Close = %v, want ErrClosed", err)
	}
	if _, _, err := s.RepairSlotChecksum(1); !errors.Is(err, ErrClosed) {
		t.Errorf("RepairSlotChecksum after Close = %v, want ErrClosed", err)
	}
}

// TestDisableChecksums writes with checksums off (stale from the first
// commit on), then opens the same store with them on: they are rebuilt.
func TestDisableChecksums(t *testing.T) {
	r := newReopener(t, false, Options{})
	put(t, r.Store, newTask(1, "a", 10), newTask(3, "d", 13))
	r.opts.DisableChecksums = true
	r.reopen()
	if _, err := r.SlotChecksum(1); !errors.Is(err, ErrNoChecksums) {
		t.Errorf("SlotChecksum with checksums off = %v, want ErrNoChecksums", err)
	}
	if _, _, err := r.RepairSlotChecksum(1); !errors.Is(err, ErrNoChecksums) {
		t.Errorf("RepairSlotChecksum with checksums off = %v, want ErrNoChecksums", err)
	}
	b := r.NewBatch()
	b.PutTask(newTask(1, "b", 11), 0)
	b.PutTask(newTask(2, "c", 12), 0)
	b.DropSlot(3)
	commit(t, b, false)
	if c, err := r.ComputeSlotChecksum(1); err != nil || c.Count != 4 {
		t.Errorf("ComputeSlotChecksum(1) with checksums off = %v, %v; want 4 keys", c, err)
	}
	// Slot 1's stored checksum covers only "a", slot 2 has none: reopen
	// with checksums on.
	r.opts.DisableChecksums = false
	r.reopen()
	checkChecksums(t, r.Store)
}
