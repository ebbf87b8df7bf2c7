package wheel

import (
	"math"
	"math/bits"
)

// Bucket placement. Ticks are numbers in base slotsPerLevel; "digit k" of a
// tick is its k-th base-slotsPerLevel digit. An entry with tick t > cur sits
// at the level of the highest digit in which t differs from cur, in the slot
// named by t's digit at that level. If that digit is at or above levels, the
// entry is in the overflow list. Entries with t <= cur are in the ready heap.
//
// So level k holds only entries whose digits above k equal cur's and whose
// digit k is greater than cur's: every slot at or below cur's digit k is
// empty. When cur reaches the start of a level-k slot, the digits of the
// slot's entries above k-1 now equal cur's and they are re-placed (cascaded)
// into lower levels or the ready heap.

// overflow returns the index in heads of the overflow list.
func (w *Wheel) overflow() int { return len(w.heads) - 1 }

// locate returns where an entry with offset due belongs: -1 for the ready
// heap, otherwise an index into heads.
func (w *Wheel) locate(due int64) int {
	t := w.tickOf(due)
	if t <= int64(w.cur) {
		return -1
	}
	ut := uint64(t)
	lvl := (bits.Len64(ut^w.cur) - 1) / int(w.bits)
	if lvl >= w.levels {
		return w.overflow()
	}
	return lvl*w.slots + int(ut>>(uint(lvl)*w.bits)&w.mask)
}

// place links node i where its due says it belongs.
func (w *Wheel) place(i int32) {
	b := w.locate(w.nodes[i].due)
	if b < 0 {
		w.readyPush(i)
		return
	}
	if b == w.overflow() {
		w.ovMin = min(w.ovMin, uint64(w.tickOf(w.nodes[i].due)))
	}
	w.listPush(b, i)
}

// unlink removes node i from wherever it is linked.
func (w *Wheel) unlink(i int32) {
	b := w.locate(w.nodes[i].due)
	if b < 0 {
		w.readyRemove(i)
		return
	}
	w.listRemove(b, i)
}

// listPush links node i at the head of list b.
func (w *Wheel) listPush(b int, i int32) {
	n := &w.nodes[i]
	n.prev = nilIdx
	n.next = w.heads[b]
	if n.next != nilIdx {
		w.nodes[n.next].prev = i
	} else if b != w.overflow() {
		w.occupied[w.bitWord(b)] |= 1 << (b % w.slots % 64)
	}
	w.heads[b] = i
}

// listRemove unlinks node i from list b.
func (w *Wheel) listRemove(b int, i int32) {
	n := &w.nodes[i]
	if n.prev != nilIdx {
		w.nodes[n.prev].next = n.next
	} else {
		w.heads[b] = n.next
	}
	if n.next != nilIdx {
		w.nodes[n.next].prev = n.prev
	}
	n.next, n.prev = nilIdx, nilIdx
	if w.heads[b] == nilIdx {
		w.clearBucket(b)
	}
}

// clearBucket records that list b is empty.
func (w *Wheel) clearBucket(b int) {
	if b == w.overflow() {
		w.ovMin = math.MaxUint64
		return
	}
	w.occupied[w.bitWord(b)] &^= 1 << (b % w.slots % 64)
}

// bitWord returns the index in occupied of level bucket b's bit.
func (w *Wheel) bitWord(b int) int {
	return b/w.slots*w.words + b%w.slots/64
}

// cascade detaches list b and re-places its entries relative to cur.
func (w *Wheel) cascade(b int) {
	i := w.heads[b]
	w.heads[b] = nilIdx
	w.clearBucket(b)
	for i != nilIdx {
		next := w.nodes[i].next
		w.place(i)
		i = next
	}
}

// nextEvent returns the next list that needs attention and the tick at
// which it does: the first non-empty slot of the lowest non-empty level, or
// else the overflow list at the start of the span holding its minimum. The
// tick is always after cur, and at or before the tick of every entry not in
// the ready heap. ok is false if there is no such list.
func (w *Wheel) nextEvent() (b int, at uint64, ok bool) {
	for lvl := range w.levels {
		words := w.occupied[lvl*w.words : (lvl+1)*w.words]
		for j, word := range words {
			if word == 0 {
				continue
			}
			s := j*64 + bits.TrailingZeros64(word)
			shift := uint(lvl) * w.bits
			hi := shift + w.bits // may be 64: the shifts below then yield 0
			return lvl*w.slots + s, w.cur>>hi<<hi | uint64(s)<<shift, true
		}
	}
	if w.heads[w.overflow()] != nilIdx {
		span := uint(w.levels) * w.bits
		return w.overflow(), w.ovMin >> span << span, true
	}
	return 0, 0, false
}
