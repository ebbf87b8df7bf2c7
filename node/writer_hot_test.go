package node

import (
	"fmt"
	"testing"

	"github.com/chime-scheduler/chime/slots"
	"github.com/chime-scheduler/chime/storage"
)

// TestHotCachePurge: purging a slot drops its cached records and only
// those, whatever slot a record names, and keeps the byte count exact
// through puts, rewrites, drops and purges.
func TestHotCachePurge(t *testing.T) {
	h := hotCache{m: map[string]hotEntry{}, bySlot: map[uint16]map[string]struct{}{}}
	bySlot := map[uint16][]string{}
	for i := range 400 {
		id := fmt.Sprintf("task-%d", i)
		s := uint16(slots.Of(id))
		// A record whose Slot field lies: the index follows the id.
		h.put(&storage.Task{ID: id, Slot: s + 1, Status: storage.StatusScheduled})
		bySlot[s] = append(bySlot[s], id)
	}
	h.put(&storage.Task{ID: "task-0", Slot: uint16(slots.Of("task-0")), Status: storage.StatusScheduled, FireSeq: 3, NextDue: 1 << 40}) // a rewrite
	h.drop("task-1")
	var purged uint16
	for s, ids := range bySlot {
		if len(ids) > 1 {
			purged = s
			break
		}
	}
	h.purge(purged)
	sum := 0
	for id, e := range h.m {
		sum += len(e.enc)
		if uint16(slots.Of(id)) == purged {
			t.Errorf("%s of purged slot %d still cached", id, purged)
		}
		if _, ok := h.bySlot[e.slot][id]; !ok || e.slot != uint16(slots.Of(id)) {
			t.Errorf("%s cached under slot %d, indexed %v", id, e.slot, ok)
		}
	}
	want := 400 - 1 - len(bySlot[purged])
	if slotOf1 := uint16(slots.Of("task-1")); slotOf1 == purged {
		want++ // dropped before the purge: not counted twice
	}
	if len(h.m) != want || h.bytes != sum {
		t.Errorf("after a drop and a purge of %d records: %d cached (want %d), bytes %d (want %d)", len(bySlot[purged]), len(h.m), want, h.bytes, sum)
	}
	n := 0
	for _, ids := range h.bySlot {
		n += len(ids)
	}
	if n != len(h.m) {
		t.Errorf("index holds %d ids, cache %d", n, len(h.m))
	}
	for s := range bySlot {
		h.purge(s)
	}
	if len(h.m) != 0 || len(h.bySlot) != 0 || h.bytes != 0 {
		t.Errorf("after purging every slot: %d cached, %d slots indexed, %d bytes", len(h.m), len(h.bySlot), h.bytes)
	}
}
