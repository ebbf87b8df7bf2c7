package storage

import "testing"

// FuzzApplySlotOps feeds replicated slot ops as a hostile peer could send
// them: any slot, any count, any bytes. ApplySlotOps must refuse what is
// malformed without writing anything and without panicking (a count of -1
// made it panic in makeslice), and a batch it accepted must commit.
func FuzzApplySlotOps(f *testing.F) {
	src := openMem(f, Options{})
	b := src.NewBatch()
	b.Capture()
	b.PutTask(newTask(7, "a", 1000), 0)
	b.PutTask(newTask(7, "b", 2000), 0)
	ops := b.TakeSlotOps()
	b.KeepPriors(ops)
	if err := b.Commit(false); err != nil {
		f.Fatal(err)
	}
	for _, o := range ops {
		f.Add(o.Slot, o.Count, o.Data, o.Priors)
		f.Add(o.Slot, o.Count, o.Data, []byte(nil))
	}
	f.Add(uint16(7), -1, []byte{}, []byte{})
	f.Add(uint16(7), 1<<40, []byte{1, 2, 3}, []byte{2, 0})
	f.Add(uint16(16384), 1, []byte{1, 0}, []byte{9})
	dst := openMem(f, Options{})
	f.Fuzz(func(t *testing.T, slot uint16, count int, data, priors []byte) {
		b := dst.NewBatch()
		// Priors are taken as true (a member's word): wrong ones make the
		// checksum wrong, never the apply fail or panic.
		if err := b.ApplySlotOps(SlotOps{Slot: slot, Count: count, Data: data, Priors: priors}); err != nil {
			b.Close()
			return
		}
		if err := b.Commit(false); err != nil {
			t.Fatalf("accepted ops did not commit: %v", err)
		}
	})
}
