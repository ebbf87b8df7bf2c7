package ring

import (
	"slices"
	"strings"
)

// Table is the slot table: for every slot its owner and, with two or more
// members, its follower. It is immutable once built by Assign, so a Table
// value may be copied and shared between goroutines freely.
//
// The zero Table has no members, no slots and checksum 0.
type Table struct {
	members  []Member // sorted by Name, names unique
	numSlots int
	owner    []uint16 // index into members per slot; nil when no members
	follower []uint16 // index into members per slot; nil when < 2 members
	checksum uint64
}

// SlotCounts is how many slots one member owns and follows.
type SlotCounts struct {
	Owned     int
	Following int
}

// NumSlots returns the number of slots the table covers. O(1).
func (t Table) NumSlots() int { return t.numSlots }

// Members returns the members sorted by Name, without duplicates. The
// caller owns the returned slice. O(n).
func (t Table) Members() []Member { return slices.Clone(t.members) }

// Owner returns the member that owns slot. ok is false when the table has
// no members or slot >= NumSlots(). O(1).
func (t Table) Owner(slot uint16) (m Member, ok bool) {
	if int(slot) >= len(t.owner) {
		return Member{}, false
	}
	return t.members[t.owner[slot]], true
}

// Follower returns the member that follows slot (the second HRW choice,
// which holds the replica and takes over when the owner leaves). ok is
// false when the table has fewer than two members or slot >= NumSlots().
// O(1).
func (t Table) Follower(slot uint16) (m Member, ok bool) {
	if int(slot) >= len(t.follower) {
		return Member{}, false
	}
	return t.members[t.follower[slot]], true
}

// Checksum identifies the table among tables built with the same hash: it
// is xxhash64 over NumSlots() and the sorted member names (see Assign), so
// two nodes with equal checksums computed the same assignment. HTTPAddr is
// not part of it. O(1).
func (t Table) Checksum() uint64 { return t.checksum }

// Counts returns, for every member by Name, how many slots it owns and
// follows. Members with no slots are present with zero counts. O(numSlots).
func (t Table) Counts() map[string]SlotCounts {
	counts := make([]SlotCounts, len(t.members))
	for _, i := range t.owner {
		counts[i].Owned++
	}
	for _, i := range t.follower {
		counts[i].Following++
	}
	out := make(map[string]SlotCounts, len(t.members))
	for i, m := range t.members {
		out[m.Name] = counts[i]
	}
	return out
}

// index returns the position of name in t.members, or -1. O(log n).
func (t Table) index(name string) int {
	i, found := slices.BinarySearchFunc(t.members, name, func(m Member, name string) int {
		return strings.Compare(m.Name, name)
	})
	if !found {
		return -1
	}
	return i
}
