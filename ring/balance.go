package ring

import (
	"container/heap"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
)

// ranking is the rendezvous result for one member set (sorted by Name)
// while the bounded-load pass rewrites it: owner[s] and score[s] (the
// owner's score for s) start as HRW's first choice, follower[s] as its
// second.
type ranking struct {
	keys     [][]byte // name ‖ be16(slot) per member; the slot bytes are scratch
	hash     Hash
	owner    []uint16
	follower []uint16
	score    []uint64
}

// bounds returns the owned-count bounds for n members over numSlots at
// the given tolerance: [⌈(1−tol)·m⌉, ⌊(1+tol)·m⌋] with m = numSlots/n,
// widened to include ⌊m⌋ and ⌈m⌉. 1e-9 absorbs the rounding of the
// products, so a bound that is an integer in exact arithmetic stays that
// integer. IEEE arithmetic without fused operations gives every node the
// same bounds.
func bounds(numSlots, n int, tol float64) (lo, hi int) {
	const eps = 1e-9
	mean := float64(numSlots) / float64(n)
	floor, ceil := numSlots/n, (numSlots+n-1)/n
	lo, hi = 0, numSlots
	if tol < 1 {
		lo = int(math.Ceil(float64(1-tol)*mean - eps))
	}
	if y := float64(1+tol) * mean; y < float64(numSlots) {
		hi = int(math.Floor(y + eps))
	}
	return min(lo, floor), max(hi, ceil)
}

// balance brings every member's owned count into [lo, hi] with
// N·lo <= numSlots <= N·hi. If HRW already is within them it changes
// nothing. Otherwise shed lowers the members above hi and fill raises
// those below lo; then every slot that changed owner is followed by its
// HRW first choice, the highest-ranked member other than its owner.
func (r *ranking) balance(lo, hi int) {
	count := make([]int, len(r.keys))
	for _, o := range r.owner {
		count[o]++
	}
	if slices.Min(count) >= lo && slices.Max(count) <= hi {
		return
	}
	first := slices.Clone(r.owner)
	second := slices.Clone(r.follower)
	r.shed(count, hi)
	r.fill(count, lo, second)
	for s, o := range r.owner {
		if o != first[s] {
			r.follower[s] = first[s]
		}
	}
}

// shed caps every member at hi slots by slot-proposing deferred acceptance
// (Gale–Shapley with capacities): a member over hi keeps the hi slots it
// scores highest (members prefer higher score, then the smaller slot) and
// each slot it gives up proposes to its next member in HRW rank order,
// which takes it if it has room or scores it above the worst slot it
// holds (which then proposes on). Every slot gets the best-ranked member
// it can have in a stable assignment; that result is unique, so the order
// in which proposals are handled does not matter. It ends because
// N·hi >= numSlots: a slot cannot be refused by every member.
func (r *ranking) shed(count []int, hi int) {
	// One backing array; each member's heap has room for hi slots (or its
	// HRW count, if more) and never grows past it.
	held := make([]slotHeap, len(r.keys))
	total := 0
	for _, c := range count {
		total += max(c, hi)
	}
	backing := make([]heldSlot, total)
	for i, c := range count {
		held[i], backing = backing[:0:max(c, hi)], backing[max(c, hi):]
	}
	for s, o := range r.owner {
		held[o] = append(held[o], heldSlot{score: r.score[s], slot: uint16(s)})
	}
	var free []uint16 // slots refused by r.owner[s], its score r.score[s]
	for i := range held {
		heap.Init(&held[i])
		for count[i] > hi {
			w := heap.Pop(&held[i]).(heldSlot)
			count[i]--
			free = append(free, w.slot)
		}
	}
	for len(free) > 0 {
		s := int(free[len(free)-1])
		free = free[:len(free)-1]
		j, sc := r.next(s, r.score[s], int(r.owner[s]))
		if j < 0 {
			panic(fmt.Sprintf("ring: slot %d refused by every member", s))
		}
		r.owner[s], r.score[s] = uint16(j), sc
		offer := heldSlot{score: sc, slot: uint16(s)}
		switch {
		case count[j] < hi:
			heap.Push(&held[j], offer)
			count[j]++
		case held[j][0].less(offer):
			// j prefers the offer to the worst slot it holds.
			w := held[j][0]
			held[j][0] = offer
			heap.Fix(&held[j], 0)
			free = append(free, w.slot)
		default:
			free = append(free, uint16(s))
		}
	}
}

// next returns the member ranked right below member after (whose score
// for slot s is afterScore) in s's HRW order, with its score, or -1 when
// after is the last. O(n) hashes.
func (r *ranking) next(s int, afterScore uint64, after int) (int, uint64) {
	best, bestScore := -1, uint64(0)
	for i := range r.keys {
		sc := r.scoreOf(i, s)
		if sc > afterScore || (sc == afterScore && i <= after) {
			continue // ranked at or above after
		}
		if best < 0 || sc > bestScore {
			best, bestScore = i, sc
		}
	}
	return best, bestScore
}

// fill raises every member below lo to lo, in Name order: the member
// takes, one at a time, a slot whose owner holds more than lo: one it
// is the HRW second choice of if there is such a slot, the one it scores
// highest (then the smallest) among them. Such an owner exists while any
// member is below lo, because N·lo <= numSlots. The slots a member is
// second of come first, so it hashes the others (numSlots hashes) only
// if those do not suffice; it scans its candidates once per slot it takes
// (few: a heap cost more at 1,000 members, where each needs one or two).
func (r *ranking) fill(count []int, lo int, second []uint16) {
	var cands []cand // reused: one member's candidates at a time
	for d := range r.keys {
		if count[d] >= lo {
			continue
		}
		if cands == nil {
			cands = make([]cand, 0, len(r.owner))
		}
		for _, seconds := range []bool{true, false} {
			cands = cands[:0]
			for s, o := range r.owner {
				if int(o) != d && count[o] > lo && (int(second[s]) == d) == seconds {
					cands = append(cands, cand{second: seconds, score: r.scoreOf(d, s), slot: uint16(s)})
				}
			}
			r.take(d, count, lo, cands)
			if count[d] >= lo {
				break
			}
		}
		if count[d] < lo {
			panic(fmt.Sprintf("ring: member %d below %d with no member above it", d, lo))
		}
	}
}

// take moves to member d, while it holds fewer than lo, the best of cands
// whose owner holds more than lo, one at a time.
func (r *ranking) take(d int, count []int, lo int, cands []cand) {
	for count[d] < lo {
		best := -1
		for i, c := range cands {
			o := r.owner[c.slot]
			if int(o) != d && count[o] > lo && (best < 0 || c.before(cands[best])) {
				best = i
			}
		}
		if best < 0 {
			return
		}
		c := cands[best]
		count[r.owner[c.slot]]--
		count[d]++
		r.owner[c.slot], r.score[c.slot] = uint16(d), c.score
	}
}

// cand is a slot a member below lo may take, with its score for it and
// whether it is the slot's HRW second choice.
type cand struct {
	second bool
	score  uint64
	slot   uint16
}

// before reports whether the member takes a before b: HRW second choice
// first, then the higher score, then the smaller slot.
func (a cand) before(b cand) bool {
	switch {
	case a.second != b.second:
		return a.second
	case a.score != b.score:
		return a.score > b.score
	}
	return a.slot < b.slot
}

// scoreOf returns member i's score for slot s.
func (r *ranking) scoreOf(i, s int) uint64 {
	k := r.keys[i]
	binary.BigEndian.PutUint16(k[len(k)-2:], uint16(s))
	return r.hash(k)
}

// heldSlot is a slot a member holds, with the member's score for it.
type heldSlot struct {
	score uint64
	slot  uint16
}

// less reports whether the member holding both prefers b to a: a higher
// score, or an equal score and a smaller slot.
func (a heldSlot) less(b heldSlot) bool {
	return a.score < b.score || (a.score == b.score && a.slot > b.slot)
}

// slotHeap is a min-heap of held slots, the one its member likes least on
// top (container/heap).
type slotHeap []heldSlot

func (h slotHeap) Len() int           { return len(h) }
func (h slotHeap) Less(i, j int) bool { return h[i].less(h[j]) }
func (h slotHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *slotHeap) Push(x any)        { *h = append(*h, x.(heldSlot)) }
func (h *slotHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
