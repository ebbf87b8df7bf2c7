package ownership

import (
	"math/bits"

	"github.com/chime-scheduler/chime/slots"
)

// slotSet is a set of slots, one bit each: 2 KB for all 16,384.
type slotSet [slots.Count / 64]uint64

func (o *slotSet) has(s uint16) bool { return o[s/64]&(1<<(s%64)) != 0 }

// put adds s to the set if on, else removes it.
func (o *slotSet) put(s uint16, on bool) {
	if on {
		o[s/64] |= 1 << (s % 64)
	} else {
		o[s/64] &^= 1 << (s % 64)
	}
}

func (o *slotSet) count() int {
	n := 0
	for _, w := range o {
		n += bits.OnesCount64(w)
	}
	return n
}

// each calls f with every slot in the word-wise combination op(i) of
// sets, ascending: op returns word i of the set to walk.
func each(op func(i int) uint64, f func(s uint16)) {
	for i := range slots.Count / 64 {
		for w := op(i); w != 0; w &= w - 1 {
			f(uint16(i*64 + bits.TrailingZeros64(w)))
		}
	}
}

// slotSets is what the executor's passes over every slot read: the
// machine's role, firing and replica of each slot as publish last saw
// them, and the slots the table gives this node, as bits. The machine's
// record of a slot is ~650 bytes, and a pass that reads one field of each
// of 16,384 of them misses the cache on every one: the counts, the stall
// check and the stuck-slot log were 11 % of an idle node's CPU (issue 17
// item 1, docs/BENCHMARKS.md). These are 12 KB.
type slotSets struct {
	owner     slotSet // role owner or sealing
	firing    slotSet
	following slotSet // role follower with a valid replica
	follower  slotSet // role follower, valid replica or not
	importing slotSet
	stuck     slotSet // role importing or unavailable
	tabled    slotSet // the current view's table gives the slot to this node
	pending   slotSet // owned, follower pending (slots.Machine.FollowerPending)
}

// note records slot s's role, firing and replica.
func (t *slotSets) note(s uint16, role slots.Role, firing, synced bool) {
	t.owner.put(s, role == slots.RoleOwner || role == slots.RoleSealing)
	t.firing.put(s, firing)
	t.following.put(s, role == slots.RoleFollower && synced)
	t.follower.put(s, role == slots.RoleFollower)
	t.importing.put(s, role == slots.RoleImporting)
	t.stuck.put(s, role == slots.RoleImporting || role == slots.RoleUnavailable)
}

// counts is slots.Machine.Counts from the sets, with the flags' counts
// given (the board's maps of them).
func (t *slotSets) counts(underRep, unavail int) slots.Counts {
	return slots.Counts{Owned: t.owner.count(), Firing: t.firing.count(), Following: t.following.count(),
		Importing: t.importing.count(), UnderReplicated: underRep, FollowerPending: t.pending.count(), Unavailable: unavail}
}
