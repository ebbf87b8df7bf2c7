package node

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/chime-scheduler/chime/node/clock"
	"github.com/chime-scheduler/chime/node/idfilter"
	"github.com/chime-scheduler/chime/node/metrics"
	"github.com/chime-scheduler/chime/node/ownership"
	"github.com/chime-scheduler/chime/node/replication"
	"github.com/chime-scheduler/chime/slots"
	"github.com/chime-scheduler/chime/storage"
)

// TestReplicaApplyInParts: a replication request holding more data than
// one write group applies (replicaGroupBytes) is applied in parts, an op
// queued behind it runs between two parts instead of after the whole
// request, and the request is answered once, with every message applied.
func TestReplicaApplyInParts(t *testing.T) {
	// Snapshots of 32 slots, ~64 KiB each: 2 MiB, eight groups' worth.
	var msgs []replication.Msg
	b := openTestStore(t).NewBatch()
	b.Capture()
	payload := []byte(`"` + string(bytes.Repeat([]byte("x"), 4000)) + `"`)
	for i := 0; len(msgs) == 0 && i < 1<<20; i++ {
		id := fmt.Sprintf("task-%d", i)
		s := uint16(slots.Of(id))
		if s >= 32 {
			continue
		}
		b.PutTask(&storage.Task{ID: id, Slot: s, Status: storage.StatusScheduled, Spec: storage.Spec{Payload: payload}}, 0)
		if i%64 == 0 && b.Size() >= 2<<20 {
			for _, o := range b.TakeSlotOps() {
				msgs = append(msgs, replication.Msg{Slot: o.Slot, Epoch: 1, Seq: 1, Reset: true, Snap: true, SnapEpoch: 1, Count: o.Count, Data: o.Data})
			}
		}
	}
	b.Close()
	total := 0
	for _, m := range msgs {
		total += len(m.Data)
	}
	if len(msgs) != 32 || total < 4*replicaGroupBytes {
		t.Fatalf("%d messages of %d bytes: the test needs 32 and more than 4 groups' worth", len(msgs), total)
	}

	st := openTestStore(t)
	cfg := DefaultConfig()
	cfg.Clock = clock.Real
	w := newWriter(&cfg, writerDeps{
		store:      st,
		notify:     func([]wakeChange) {},
		metrics:    metrics.New(metrics.Gauges{}),
		ids:        idfilter.New(1024),
		rebuildIDs: func() {},
		counted:    func(int64) {},
		ctl:        ownership.NewBoard(),
		log:        slog.New(slog.NewTextHandler(io.Discard, nil)),
		now:        time.Now,
	}, 1)
	// Both ops queue before the writer starts, the request first: the
	// order the writer meets them in is fixed.
	rep := &replicaOp{writeOp: writeOp{kind: opReplica, reply: make(chan struct{})}, msgs: msgs, from: "n1"}
	all := make([]uint16, 32)
	for i := range all {
		all[i] = uint16(i)
	}
	sums := &sumsOp{writeOp: writeOp{kind: opSums, reply: make(chan struct{})}, slots: all}
	w.internal <- rep
	w.internal <- sums
	go w.run()
	defer func() {
		close(w.stop)
		<-w.done
	}()
	for _, op := range []*writeOp{&sums.writeOp, &rep.writeOp} {
		select {
		case <-op.reply:
		case <-time.After(30 * time.Second):
			t.Fatalf("op %d not answered", op.kind)
		}
		if op.err != nil {
			t.Fatalf("op %d: %v", op.kind, op.err)
		}
	}

	// The sums read ran after the first part and before the last.
	applied := 0
	for _, it := range sums.items {
		if it.Epoch == 1 && it.Seq == 1 {
			applied++
		}
	}
	if applied == 0 || applied == len(msgs) {
		t.Errorf("an op queued behind the request saw %d of its %d slots applied: want some, not all", applied, len(msgs))
	}
	for i, r := range rep.applied.Results {
		if r != replication.OK || rep.applied.Held[i] != 1 || rep.applied.Gens[i] != 1 {
			t.Errorf("message %d (slot %d): result %d, held %d, gen %d; want OK at seq 1, gen 1", i, msgs[i].Slot, r, rep.applied.Held[i], rep.applied.Gens[i])
		}
	}
	for _, m := range msgs {
		if p := w.repl.position(m.Slot); p.Epoch != 1 || p.Seq != 1 {
			t.Errorf("slot %d at %d#%d after the request, want 1#1", m.Slot, p.Epoch, p.Seq)
		}
		got, err := st.SnapshotSlot(m.Slot)
		if err != nil {
			t.Fatal(err)
		}
		if got.Count != m.Count {
			t.Errorf("slot %d holds %d records, the snapshot had %d", m.Slot, got.Count, m.Count)
		}
	}
	if len(w.pend) != 0 {
		t.Errorf("%d replica ops pending after the request was answered", len(w.pend))
	}
}

// openTestStore opens a store in a directory of its own, closed when the
// test ends.
func openTestStore(t *testing.T) *storage.Store {
	t.Helper()
	st, err := storage.Open(storage.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}
