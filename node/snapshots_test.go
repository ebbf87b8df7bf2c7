package node

import (
	"bytes"
	"slices"
	"testing"
	"testing/synctest"

	"github.com/chime-scheduler/chime/slots"
)

// TestWriterSnapshots: one request to the writer reads the snapshots of
// several slots (the shipper's, at a bootstrap or a failover) through one
// iterator: each is what a read of its slot alone returns, at the slot's
// position; the byte budget stops the reads once reached (the first is
// always read), and the rest are left for the next request.
func TestWriterSnapshots(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rcv := newReceiver(t)
		tn := startNode(t, nil)
		var full []uint16
		for _, id := range []string{"snap-a", "snap-b", "snap-c"} {
			body := `{"id":"` + id + `","callback_url":"` + rcv.url("/cb") + `","delay_ms":3600000}`
			if code := tn.do(t, "POST", "/v1/tasks", body, nil); code != 201 {
				t.Fatalf("create %s: %d", id, code)
			}
			full = append(full, slots.Of(id))
		}
		empty := uint16(0)
		for slices.Contains(full, empty) {
			empty++
		}
		// Forwards, an empty slot, backwards, the same slot twice.
		ss := []uint16{full[0], full[1], empty, full[2], full[0], full[0]}
		got := tn.writer.snapshots(ss, 1<<20)
		if len(got) != len(ss) {
			t.Fatalf("%d snapshots of %d slots", len(got), len(ss))
		}
		for i, s := range ss {
			want, err := tn.store.SnapshotSlot(s)
			if err != nil {
				t.Fatal(err)
			}
			m, pos := got[i].Msg, tn.writer.repl.position(s)
			if got[i].Err != nil || m.Slot != s || !m.Reset || m.Count != want.Count || !bytes.Equal(m.Data, want.Data) ||
				m.Epoch != pos.Epoch || m.Seq != pos.Seq {
				t.Errorf("snapshot %d of slot %d: %+v, %v; want %d keys %x at %d/%d", i, s, m, got[i].Err, want.Count, want.Data, pos.Epoch, pos.Seq)
			}
			if s != empty && m.Count == 0 {
				t.Errorf("snapshot %d of slot %d holds nothing", i, s)
			}
		}
		// The budget: reached by the first, or by the second.
		if got := tn.writer.snapshots(ss, 1); len(got) != 1 || got[0].Msg.Slot != ss[0] {
			t.Errorf("a 1-byte budget: %d snapshots, want the first", len(got))
		}
		first, _ := tn.store.SnapshotSlot(ss[0])
		if got := tn.writer.snapshots(ss, len(first.Data)+1); len(got) != 2 {
			t.Errorf("a budget just over the first slot's data: %d snapshots, want 2", len(got))
		}
		// A stopped writer answers every slot with an error.
		tn.stop(t)
		for i, r := range tn.writer.snapshots(ss[:3], 1<<20) {
			if r.Err == nil || r.Msg.Slot != ss[i] {
				t.Errorf("after the stop, slot %d: %+v, %v; want an error", ss[i], r.Msg, r.Err)
			}
		}
	})
}
