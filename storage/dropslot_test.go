package storage

import (
	"fmt"
	"testing"
)

// TestDropSlotKeyByKey: DropSlot deletes a slot of few keys (an empty one,
// one of a task or two) key by key and a larger one, or one the batch
// wrote data keys to, with a range deletion; either way the slot is empty
// afterwards, the meta the batch set before the drop included, and the
// checksums hold.
func TestDropSlotKeyByKey(t *testing.T) {
	s := openMem(t, Options{})
	b := s.NewBatch()
	for slot, n := range map[uint16]int{3: 2, 4: 20, 6: 2} {
		for i := range n {
			tk := newTask(slot, fmt.Sprintf("t%d-%d", slot, i), 100)
			tk.Replaces(nil)
			b.PutTask(tk, 0)
		}
		b.PutSlotMeta(slot, SlotMeta{Epoch: 2, Seq: 7})
	}
	commit(t, b, false)

	few := func(b *Batch, slot uint16) bool {
		_, ok := b.fewKeys(slot)
		return ok
	}
	b = s.NewBatch()
	b.PutSlotMeta(5, SlotMeta{Epoch: 1, Seq: 1}) // untracked: no data key
	tk := newTask(6, "new", 100)
	tk.Replaces(nil)
	b.PutTask(tk, 0) // a data key of slot 6 in this batch
	for slot, want := range map[uint16]bool{3: true, 4: false, 5: true, 6: false, 7: true} {
		if got := few(b, slot); got != want {
			t.Errorf("slot %d: dropped key by key %v, want %v", slot, got, want)
		}
	}
	// Slot 4's count of keys is known (its checksum in memory): no read.
	// Without it, the read finds more than dropByKeys.
	s.sums.Lock()
	c4 := s.sums.m[4]
	delete(s.sums.m, 4)
	s.sums.Unlock()
	if few(b, 4) {
		t.Error("slot 4 read: dropped key by key, want a range deletion")
	}
	s.sums.Lock()
	s.sums.m[4] = c4
	s.sums.Unlock()
	for _, slot := range []uint16{3, 4, 5, 6, 7} {
		b.DropSlot(slot)
	}
	// A snapshot applied after the drop of an empty slot.
	tk = newTask(7, "snap", 100)
	tk.Replaces(nil)
	b.PutTask(tk, 0)
	commit(t, b, false)

	it, err := s.newSlotIter()
	if err != nil {
		t.Fatal(err)
	}
	for valid := it.First(); valid; valid = it.Next() {
		if slot, section, _, _ := decodeSlotKey(it.Key()); slot != 7 {
			t.Errorf("key %q (slot %d, section %c) left after the drop", it.Key(), slot, section)
		}
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	sums := checkChecksums(t, s)
	if len(sums) != 1 || sums[7] == (Checksum{}) {
		t.Errorf("checksums after the drops: %v, want slot 7's only", sums)
	}
}

// BenchmarkDropSlotThenGet is a failover's new follower: each op applies a
// snapshot of a slot it held nothing of (DropSlot and a task, one batch)
// and reads a task, as the writer reads each fire's. "range" drops the
// slot with one range deletion, as DropSlot did for every slot: pebble
// fragments the memtable's range deletions again at each read after a
// write, so the read slows with every drop the memtable holds. "keys" is
// DropSlot now (an empty slot's meta and checksum keys, point deletes).
func BenchmarkDropSlotThenGet(b *testing.B) {
	for _, mode := range []string{"range", "keys"} {
		b.Run(mode, func(b *testing.B) {
			s, err := Open(Options{Dir: b.TempDir(), Logger: testLogger(b)})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			const stored = 4096 // in slots 0..4095, read back
			bt := s.NewBatch()
			for i := range stored {
				tk := newTask(uint16(i), fmt.Sprintf("t%d", i), 100)
				tk.Replaces(nil)
				bt.PutTask(tk, 0)
			}
			if err := bt.Commit(false); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				slot := uint16(stored + i%(1<<14-stored))
				bt := s.NewBatch()
				if mode == "range" {
					var lo, hi [slotPrefixLen]byte
					_ = bt.pb.DeleteRange(appendSlotPrefix(lo[:0], slot), appendSlotEnd(hi[:0], slot), nil)
					bt.sums.drop(slot)
				} else {
					bt.DropSlot(slot)
				}
				tk := newTask(slot, fmt.Sprintf("s%d", i), 100)
				tk.Replaces(nil)
				bt.PutTask(tk, 0)
				if err := bt.Commit(false); err != nil {
					b.Fatal(err)
				}
				if _, err := s.Get(uint16(i%stored), fmt.Sprintf("t%d", i%stored)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
