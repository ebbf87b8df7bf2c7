package wheel

import (
	"errors"
	"fmt"
	"math"
)

// checkInvariants verifies the wheel's internal structure and returns every
// violation found, joined. Tests call it after each operation; builds with
// the invariants tag call it after each mutating method (see mustCheck).
// O(n + levels × slotsPerLevel).
func (w *Wheel) checkInvariants() error {
	var errs []error
	fail := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf(format, args...))
	}
	if w.now < 0 || w.cur != uint64(w.now/w.tick) {
		fail("now=%d cur=%d tick=%d: cur != now/tick", w.now, w.cur, w.tick)
	}
	seen := make([]bool, len(w.nodes))
	live := 0
	visit := func(i int32, where string) bool {
		if i < 0 || int(i) >= len(w.nodes) {
			fail("%s: node index %d out of range", where, i)
			return false
		}
		if seen[i] {
			fail("%s: node %d reached twice", where, i)
			return false
		}
		seen[i] = true
		live++
		n := &w.nodes[i]
		if j, ok := w.index[n.id]; !ok || j != i {
			fail("%s: node %d (id %q) not indexed to itself (index has %d, %v)", where, i, n.id, j, ok)
		}
		saturated := n.due == math.MinInt64 || n.due == math.MaxInt64
		if _, ok := w.exact[i]; ok != saturated {
			fail("%s: node %d due=%d saturated=%v but exact time recorded=%v", where, i, n.due, saturated, ok)
		}
		return true
	}

	// Level buckets and the overflow list.
	for b, head := range w.heads {
		prev := nilIdx
		for i := head; i != nilIdx; i = w.nodes[i].next {
			if !visit(i, fmt.Sprintf("bucket %d", b)) {
				break
			}
			n := &w.nodes[i]
			if n.prev != prev {
				fail("bucket %d: node %d prev=%d, want %d", b, i, n.prev, prev)
			}
			if got := w.locate(n.due); got != b {
				fail("bucket %d: node %d (id %q, due %d, tick %d, cur %d) belongs in %d", b, i, n.id, n.due, w.tickOf(n.due), w.cur, got)
			}
			if b == w.overflow() && uint64(w.tickOf(n.due)) < w.ovMin {
				fail("overflow: node %d tick %d below ovMin %d", i, w.tickOf(n.due), w.ovMin)
			}
			prev = i
		}
		if b == w.overflow() {
			continue
		}
		bit := w.occupied[w.bitWord(b)]&(1<<(b%w.slots%64)) != 0
		if bit != (head != nilIdx) {
			fail("bucket %d: occupied bit %v, head %d", b, bit, head)
		}
	}
	// Bits beyond the last slot of a level must be clear.
	for lvl := range w.levels {
		for j := range w.words {
			word := w.occupied[lvl*w.words+j]
			for bit := range 64 {
				if word&(1<<bit) != 0 && j*64+bit >= w.slots {
					fail("level %d: bit %d set beyond %d slots", lvl, j*64+bit, w.slots)
				}
			}
		}
	}

	// Ready heap.
	for p, i := range w.ready {
		if !visit(i, "ready") {
			continue
		}
		n := &w.nodes[i]
		if int(n.prev) != p {
			fail("ready: node %d at %d records position %d", i, p, n.prev)
		}
		if w.locate(n.due) != -1 {
			fail("ready: node %d (due %d) has tick %d after cur %d", i, n.due, w.tickOf(n.due), w.cur)
		}
		if p > 0 && w.compare(w.ready[(p-1)/2], i) > 0 {
			fail("ready: heap order broken at %d", p)
		}
	}

	// Index and free list.
	if live != len(w.index) {
		fail("%d linked nodes, %d indexed (Len)", live, len(w.index))
	}
	for id, i := range w.index {
		if i < 0 || int(i) >= len(w.nodes) || w.nodes[i].id != id {
			fail("index: %q -> %d does not name that node", id, i)
		} else if !seen[i] {
			fail("index: %q -> %d is not linked anywhere", id, i)
		}
	}
	free := 0
	for i := w.free; i != nilIdx; i = w.nodes[i].next {
		if i < 0 || int(i) >= len(w.nodes) || seen[i] {
			fail("free list: bad or live node %d", i)
			break
		}
		seen[i] = true
		free++
	}
	if live+free != len(w.nodes) {
		fail("%d live + %d free != %d nodes", live, free, len(w.nodes))
	}
	for i := range w.exact {
		if i < 0 || int(i) >= len(w.nodes) || !w.isIndexed(i) {
			fail("exact: entry for free node %d", i)
		}
	}
	return errors.Join(errs...)
}

// isIndexed reports whether some live id maps to node i.
func (w *Wheel) isIndexed(i int32) bool {
	n := &w.nodes[i]
	j, ok := w.index[n.id]
	return ok && j == i
}

// mustCheck panics if an invariant is broken. Only builds with the
// invariants tag call it.
func (w *Wheel) mustCheck(op string) {
	if err := w.checkInvariants(); err != nil {
		panic(fmt.Sprintf("wheel: invariant broken after %s: %v", op, err))
	}
}
