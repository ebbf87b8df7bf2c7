package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
)

// slotDump returns every data key and value of slot, in order.
func slotDump(t *testing.T, s *Store, slot uint16) string {
	t.Helper()
	var b bytes.Buffer
	if err := s.ScanSlot(slot, func(k, v []byte) bool {
		fmt.Fprintf(&b, "%x=%x\n", k, v)
		return true
	}); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestReplicaMatchesOwner runs random writes on an owner store with capture
// on, ships the captured ops of every batch to a replica, and checks that
// both hold exactly the same keys in every slot after each batch.
func TestReplicaMatchesOwner(t *testing.T) {
	owner := openMem(t, Options{HistoryLimit: 3})
	replica := openMem(t, Options{HistoryLimit: 3})
	rng := rand.New(rand.NewPCG(1, 2))
	slotsUsed := []uint16{0, 7, 16383}
	live := map[string]*Task{}
	for round := range 200 {
		b := owner.NewBatch()
		b.Capture()
		for range 1 + rng.IntN(8) {
			slot := slotsUsed[rng.IntN(len(slotsUsed))]
			id := fmt.Sprintf("t%d-%d", slot, rng.IntN(6))
			cur := live[id]
			switch op := rng.IntN(4); {
			case cur == nil:
				tk := newTask(slot, id, int64(1+rng.IntN(1000)))
				b.PutTask(tk, 0)
				live[id] = tk
			case op == 0:
				b.DeleteTask(cur)
				delete(live, id)
			case op == 1:
				b.AppendExecution(cur, &Execution{FireID: id, DueAt: cur.NextDue, Attempt: 1, StatusCode: 200})
				prev := cur.Wake()
				b.PutTask(cur, prev)
			default:
				prev := cur.Wake()
				cur.NextDue = int64(1 + rng.IntN(1000))
				b.PutTask(cur, prev)
			}
		}
		ops := b.TakeSlotOps()
		if err := b.Commit(true); err != nil {
			t.Fatal(err)
		}
		rb := replica.NewBatch()
		for _, o := range ops {
			if err := rb.ApplySlotOps(o); err != nil {
				t.Fatalf("round %d: apply slot %d: %v", round, o.Slot, err)
			}
		}
		if err := rb.Commit(true); err != nil {
			t.Fatal(err)
		}
		for _, s := range slotsUsed {
			if a, b := slotDump(t, owner, s), slotDump(t, replica, s); a != b {
				t.Fatalf("round %d: slot %d differs:\nowner:\n%s\nreplica:\n%s", round, s, a, b)
			}
		}
	}
	if len(allDue(t, replica)) != len(allDue(t, owner)) {
		t.Error("due index sizes differ")
	}
}

func TestTakeSlotOpsWithoutCapture(t *testing.T) {
	s := openMem(t, Options{})
	b := s.NewBatch()
	b.PutTask(newTask(1, "a", 5), 0)
	if ops := b.TakeSlotOps(); ops != nil {
		t.Errorf("TakeSlotOps without Capture = %v, want nil", ops)
	}
	b.Close()
}

func TestApplySlotOpsRejects(t *testing.T) {
	src := openMem(t, Options{})
	b := src.NewBatch()
	b.Capture()
	b.PutTask(newTask(5, "a", 10), 0)
	good := b.TakeSlotOps()[0]
	b.Close()

	meta := SlotOps{Slot: 5, Count: 1, Data: append([]byte{opSet, 4}, appendMetaKey(nil, 5)...)}
	meta.Data = append(meta.Data, 0)
	sum := SlotOps{Slot: 5, Count: 1, Data: append([]byte{opSet, 4}, appendChecksumKey(nil, 5)...)}
	sum.Data = append(sum.Data, 0)
	tests := []struct {
		name string
		ops  SlotOps
	}{
		{"other slot", SlotOps{Slot: 6, Count: good.Count, Data: good.Data}},
		{"count mismatch", SlotOps{Slot: 5, Count: good.Count + 1, Data: good.Data}},
		{"truncated", SlotOps{Slot: 5, Count: good.Count, Data: good.Data[:len(good.Data)-1]}},
		{"bad kind", SlotOps{Slot: 5, Count: good.Count, Data: append([]byte{9}, good.Data[1:]...)}},
		{"meta key", meta},
		{"checksum key", sum},
		{"huge length", SlotOps{Slot: 5, Count: 1, Data: []byte{opDel, 0xff, 0xff, 0xff, 0xff, 0x0f}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dst := openMem(t, Options{})
			b := dst.NewBatch()
			err := b.ApplySlotOps(tt.ops)
			if !errors.Is(err, errBadOps) {
				t.Fatalf("ApplySlotOps = %v, want errBadOps", err)
			}
			if b.Count() != 0 {
				t.Errorf("a rejected apply left %d writes in the batch", b.Count())
			}
			b.Close()
		})
	}
}

func TestSlotMeta(t *testing.T) {
	s := openMem(t, Options{})
	put(t, s, newTask(3, "a", 10), newTask(9, "b", 10))
	b := s.NewBatch()
	b.Capture()
	b.PutSlotMeta(3, SlotMeta{Epoch: 4, Seq: 17, Role: 1, Handed: "n4", HandedSeq: 17})
	b.PutSlotMeta(200, SlotMeta{Epoch: 1})
	if ops := b.TakeSlotOps(); ops != nil {
		t.Errorf("slot meta was captured: %v", ops)
	}
	if err := b.Commit(true); err != nil {
		t.Fatal(err)
	}
	got, err := s.SlotMetas()
	if err != nil {
		t.Fatal(err)
	}
	want := map[uint16]SlotMeta{3: {Epoch: 4, Seq: 17, Role: 1, Handed: "n4", HandedSeq: 17}, 200: {Epoch: 1}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("SlotMetas = %v, want %v", got, want)
	}
	if d := slotDump(t, s, 3); bytes.Contains([]byte(d), []byte(fmt.Sprintf("%x", appendMetaKey(nil, 3)))) {
		t.Errorf("ScanSlot returned the meta key:\n%s", d)
	}
	if err := s.DropSlot(3); err != nil {
		t.Fatal(err)
	}
	got, _ = s.SlotMetas()
	if _, ok := got[3]; ok {
		t.Error("DropSlot kept the slot's meta")
	}
}

func TestSnapshotRebuildsSlot(t *testing.T) {
	owner := openMem(t, Options{})
	put(t, owner, newTask(4, "a", 10), newTask(4, "b", 20), newTask(5, "c", 30))
	b := owner.NewBatch()
	a := newTask(4, "a", 10)
	b.AppendExecution(a, &Execution{FireID: "a:1", Attempt: 1, StatusCode: 200})
	b.PutTask(a, 10)
	if err := b.Commit(true); err != nil {
		t.Fatal(err)
	}
	replica := openMem(t, Options{})
	put(t, replica, newTask(4, "stale", 5), newTask(5, "keep", 5))
	snap, err := owner.SnapshotSlot(4)
	if err != nil {
		t.Fatal(err)
	}
	if ids := snap.TaskIDs(); fmt.Sprint(ids) != "[a b]" {
		t.Errorf("TaskIDs = %v, want [a b]", ids)
	}
	rb := replica.NewBatch()
	rb.DropSlot(4)
	rb.PutSlotMeta(4, SlotMeta{Epoch: 2, Seq: 9})
	if err := rb.ApplySlotOps(snap); err != nil {
		t.Fatal(err)
	}
	if err := rb.Commit(true); err != nil {
		t.Fatal(err)
	}
	if a, b := slotDump(t, owner, 4), slotDump(t, replica, 4); a != b {
		t.Errorf("slot 4 after the snapshot:\nowner:\n%s\nreplica:\n%s", a, b)
	}
	if _, err := replica.Get(5, "keep"); err != nil {
		t.Errorf("the snapshot of slot 4 touched slot 5: %v", err)
	}
	if m, _ := replica.SlotMetas(); m[4] != (SlotMeta{Epoch: 2, Seq: 9}) {
		t.Errorf("meta after the rebuild = %v", m[4])
	}
}

// TestSlotReader: one SlotReader snapshots slot after slot, forwards,
// backwards, empty slots and the last slot included, exactly as a scan of
// each slot on its own does (ScanSlot); it reads the store as its first
// snapshot found it (or Open, on another goroutine), and a closed reader
// or store answers an error.
func TestSlotReader(t *testing.T) {
	s := openMem(t, Options{})
	put(t, s, newTask(4, "a", 10), newTask(4, "b", 20), newTask(5, "c", 30), newTask(0, "z", 1), newTask(^uint16(0), "last", 7))
	b := s.NewBatch()
	a := newTask(4, "a", 10)
	b.AppendExecution(a, &Execution{FireID: "a:1", Attempt: 1, StatusCode: 200})
	b.PutTask(a, 10)
	for _, slot := range []uint16{3, 4, 5} {
		b.PutSlotMeta(slot, SlotMeta{Epoch: 2, Seq: uint64(slot)}) // not data: left out
	}
	if err := b.Commit(true); err != nil {
		t.Fatal(err)
	}
	// want is what SnapshotSlot returned when it scanned each slot alone.
	want := func(slot uint16) SlotOps {
		o := SlotOps{Slot: slot}
		if err := s.ScanSlot(slot, func(k, v []byte) bool {
			o.Count++
			o.Data = append(o.Data, opSet)
			o.Data = binary.AppendUvarint(o.Data, uint64(len(k)))
			o.Data = append(o.Data, k...)
			o.Data = binary.AppendUvarint(o.Data, uint64(len(v)))
			o.Data = append(o.Data, v...)
			return true
		}); err != nil {
			t.Fatal(err)
		}
		return o
	}
	r := s.NewSlotReader()
	order := []uint16{4, 5, 3, ^uint16(0), 0, 4, 6, 5, 5, 1}
	for i, slot := range order {
		got, err := r.Snapshot(slot)
		if err != nil {
			t.Fatalf("snapshot %d of slot %d: %v", i, slot, err)
		}
		if w := want(slot); got.Slot != w.Slot || got.Count != w.Count || !bytes.Equal(got.Data, w.Data) {
			t.Errorf("snapshot %d of slot %d: %d keys %x, want %d keys %x", i, slot, got.Count, got.Data, w.Count, w.Data)
		}
	}
	before := want(4).Count
	if before < 5 { // a, b, their due keys, a's history
		t.Fatalf("slot 4 holds %d keys", before)
	}
	pinned := s.NewSlotReader()
	if err := pinned.Open(); err != nil {
		t.Fatal(err)
	}
	// A write committed meanwhile (a task and its due key): the open reader
	// still reads the store as it was, as does the one opened before its
	// first snapshot, read on another goroutine; a new one sees it.
	put(t, s, newTask(4, "later", 40))
	if got, _ := r.Snapshot(4); got.Count != before {
		t.Errorf("slot 4 through the open reader after a commit: %d keys, want %d", got.Count, before)
	}
	read := make(chan SlotOps)
	go func() {
		o, _ := pinned.Snapshot(4)
		read <- o
	}()
	if got := <-read; got.Count != before {
		t.Errorf("slot 4 through the reader opened before a commit: %d keys, want %d", got.Count, before)
	}
	if err := pinned.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Snapshot(4); !errors.Is(err, ErrClosed) {
		t.Errorf("Snapshot after Close: %v, want ErrClosed", err)
	}
	if got, err := s.SnapshotSlot(4); err != nil || got.Count != before+2 {
		t.Errorf("SnapshotSlot(4) after the commit: %d keys, %v; want %d", got.Count, err, before+2)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.NewSlotReader().Snapshot(4); !errors.Is(err, ErrClosed) {
		t.Errorf("Snapshot of a closed store: %v, want ErrClosed", err)
	}
}
