package wheel

import (
	"math"
	"slices"
	"strings"
)

// The ready heap holds the entries whose tick is at or before cur: the ones
// in the current tick (which may still be due after now) and ones added
// with a due in the past. It is a binary min-heap by (due, id); each
// entry's position is kept in node.prev so Cancel can remove it.

// compare orders entries by due time, then by id.
func (w *Wheel) compare(a, b int32) int {
	na, nb := &w.nodes[a], &w.nodes[b]
	if na.due != nb.due {
		if na.due < nb.due {
			return -1
		}
		return 1
	}
	if na.due == math.MinInt64 || na.due == math.MaxInt64 {
		// Both saturated the same way: their exact times decide.
		if c := w.exact[a].Compare(w.exact[b]); c != 0 {
			return c
		}
	}
	return strings.Compare(na.id, nb.id)
}

// readyPush adds node i to the heap. O(log r).
func (w *Wheel) readyPush(i int32) {
	w.nodes[i].next = nilIdx
	w.nodes[i].prev = int32(len(w.ready))
	w.ready = append(w.ready, i)
	w.readyUp(len(w.ready) - 1)
}

// readyPop removes the minimum. O(log r).
func (w *Wheel) readyPop() {
	w.readyRemove(w.ready[0])
}

// readyRemove removes node i from the heap. O(log r).
func (w *Wheel) readyRemove(i int32) {
	pos := int(w.nodes[i].prev)
	last := len(w.ready) - 1
	if pos != last {
		w.readySwap(pos, last)
	}
	w.ready = w.ready[:last]
	w.nodes[i].prev = nilIdx
	if pos < last {
		if !w.readyDown(pos) {
			w.readyUp(pos)
		}
	}
}

// drainReady appends every entry in the heap to dst in order and releases
// them. The caller knows they are all due. O(r log r).
func (w *Wheel) drainReady(dst []Entry) []Entry {
	if len(w.ready) == 0 {
		return dst
	}
	slices.SortFunc(w.ready, w.compare)
	for _, i := range w.ready {
		dst = append(dst, w.entry(i))
		w.release(i)
	}
	w.ready = w.ready[:0]
	return dst
}

func (w *Wheel) readySwap(p, q int) {
	h := w.ready
	h[p], h[q] = h[q], h[p]
	w.nodes[h[p]].prev = int32(p)
	w.nodes[h[q]].prev = int32(q)
}

func (w *Wheel) readyUp(p int) {
	for p > 0 {
		parent := (p - 1) / 2
		if w.compare(w.ready[p], w.ready[parent]) >= 0 {
			return
		}
		w.readySwap(p, parent)
		p = parent
	}
}

// readyDown sifts the element at p down and reports whether it moved.
func (w *Wheel) readyDown(p int) bool {
	start := p
	n := len(w.ready)
	for {
		c := 2*p + 1
		if c >= n {
			break
		}
		if r := c + 1; r < n && w.compare(w.ready[r], w.ready[c]) < 0 {
			c = r
		}
		if w.compare(w.ready[c], w.ready[p]) >= 0 {
			break
		}
		w.readySwap(p, c)
		p = c
	}
	return p > start
}
