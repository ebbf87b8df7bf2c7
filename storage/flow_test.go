package storage

import (
	"errors"
	"strings"
	"testing"
)

// TestFlowRoundTrip: a flow record decodes to what was encoded, its
// encoding is canonical, and hostile bytes are an error, never a panic.
func TestFlowRoundTrip(t *testing.T) {
	for _, f := range []Flow{
		{Key: "k"},
		{Key: strings.Repeat("a", MaxFlowKeyLen), Rate: 10, PeriodMs: 1000, Parallelism: 2, CreatedAt: 1, UpdatedAt: 2, Version: 3},
		{Key: "tenant-7:mail", Rate: 1 << 40, PeriodMs: 86_400_000, CreatedAt: -1, Version: 1<<64 - 1},
	} {
		enc := EncodeFlow(&f)
		var got Flow
		if err := DecodeFlow(enc, &got); err != nil {
			t.Fatalf("DecodeFlow(%x): %v", enc, err)
		}
		if got != f {
			t.Errorf("round trip = %+v, want %+v", got, f)
		}
		if again := EncodeFlow(&got); string(again) != string(enc) {
			t.Errorf("re-encoding differs: %x vs %x", again, enc)
		}
		for i := range enc {
			if err := DecodeFlow(enc[:i], &got); err == nil {
				t.Errorf("DecodeFlow of %d of %d bytes: no error", i, len(enc))
			}
		}
	}
	// An older writer's shorter record reads with the missing fields zero;
	// an unknown version is refused.
	short := appendArrayHeader(nil, 3)
	short = appendUint(short, flowFormat)
	short = appendStr(short, "k")
	short = appendInt(short, 5)
	var f Flow
	if err := DecodeFlow(short, &f); err != nil || f != (Flow{Key: "k", Rate: 5}) {
		t.Errorf("short record = %+v, %v", f, err)
	}
	bad := appendArrayHeader(nil, 2)
	bad = appendUint(bad, 2)
	bad = appendStr(bad, "k")
	if err := DecodeFlow(bad, &f); err == nil {
		t.Error("version 2 decoded")
	}
}

// TestSpecFlowKeyRoundTrip: a task's FlowKey survives the store.
func TestSpecFlowKeyRoundTrip(t *testing.T) {
	s := openMem(t, Options{})
	tk := newTask(5, "{k}x", 100)
	tk.Spec.FlowKey = "k"
	b := s.NewBatch()
	b.PutTask(tk, 0)
	if err := b.Commit(true); err != nil {
		t.Fatal(err)
	}
	b.Close()
	got, err := s.Get(5, "{k}x")
	if err != nil || got.Spec.FlowKey != "k" {
		t.Fatalf("Get = %+v, %v; want FlowKey k", got, err)
	}
}

func TestValidFlowKey(t *testing.T) {
	for k, want := range map[string]bool{
		"a": true, "tenant-7.mail_x~y:z": true, strings.Repeat("z", 128): true,
		"": false, strings.Repeat("z", 129): false, "a{b": false, "a}b": false, "a b": false, "a/b": false, "é": false, "a\x00": false,
	} {
		if ValidFlowKey(k) != want {
			t.Errorf("ValidFlowKey(%q) = %v, want %v", k, !want, want)
		}
	}
}

// TestFlowsStoredReplicatedScanned: flows are slot data: put, get, scan in
// (slot, key) order with the owned filter and a start position, captured
// and applied on a replica (which then has the same slot checksum), and
// deleted.
func TestFlowsStoredReplicatedScanned(t *testing.T) {
	owner := openMem(t, Options{})
	replica := openMem(t, Options{})
	b := owner.NewBatch()
	b.Capture()
	flows := []struct {
		slot uint16
		key  string
	}{{7, "b"}, {7, "a"}, {3, "z"}, {16383, "last"}}
	for i, f := range flows {
		b.PutFlow(f.slot, &Flow{Key: f.key, Rate: int64(i + 1), PeriodMs: 1000})
	}
	tk := newTask(7, "t", 10) // a task in the same slot: not a flow
	b.PutTask(tk, 0)
	ops := b.TakeSlotOps()
	if err := b.Commit(true); err != nil {
		t.Fatal(err)
	}
	b.Close()
	rb := replica.NewBatch()
	for _, o := range ops {
		if err := rb.ApplySlotOps(o); err != nil {
			t.Fatalf("ApplySlotOps: %v", err)
		}
	}
	if err := rb.Commit(true); err != nil {
		t.Fatal(err)
	}
	rb.Close()
	for _, slot := range []uint16{3, 7, 16383} {
		if slotDump(t, owner, slot) != slotDump(t, replica, slot) {
			t.Errorf("slot %d differs on the replica", slot)
		}
		a, _ := owner.SlotChecksum(slot)
		c, _ := replica.SlotChecksum(slot)
		r, _ := owner.ComputeSlotChecksum(slot)
		if a != c || a != r || a == (Checksum{}) {
			t.Errorf("slot %d checksums: owner %v, replica %v, recomputed %v", slot, a, c, r)
		}
	}
	scan := func(s *Store, from Position, owned func(uint16) bool) string {
		var out []string
		if err := s.ScanFlows(from, owned, func(f *Flow) bool {
			out = append(out, f.Key)
			return true
		}); err != nil {
			t.Fatal(err)
		}
		return strings.Join(out, ",")
	}
	if got := scan(replica, Position{}, nil); got != "z,a,b,last" {
		t.Errorf("scan = %q, want z,a,b,last", got)
	}
	if got := scan(owner, Position{Slot: 7, ID: "a", Exclusive: true}, nil); got != "b,last" {
		t.Errorf("scan after 7/a = %q", got)
	}
	if got := scan(owner, Position{}, func(s uint16) bool { return s != 7 }); got != "z,last" {
		t.Errorf("scan without slot 7 = %q", got)
	}
	f, err := replica.GetFlow(7, "b")
	if err != nil || f.Rate != 1 || f.Slot != 7 {
		t.Errorf("GetFlow = %+v, %v", f, err)
	}
	b = owner.NewBatch()
	b.DeleteFlow(7, "b")
	if err := b.Commit(true); err != nil {
		t.Fatal(err)
	}
	b.Close()
	if _, err := owner.GetFlow(7, "b"); !errors.Is(err, ErrNotFound) {
		t.Errorf("GetFlow after delete: %v", err)
	}
	if a, _ := owner.SlotChecksum(7); a != mustCompute(t, owner, 7) {
		t.Error("checksum after delete differs from a recompute")
	}
}

func mustCompute(t *testing.T, s *Store, slot uint16) Checksum {
	t.Helper()
	c, err := s.ComputeSlotChecksum(slot)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
