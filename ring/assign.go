package ring

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/cespare/xxhash/v2"
)

// NumSlots is the number of slots the cluster divides between its members.
// It equals slots.Count; ring does not import slots so that slots can import
// ring.
const NumSlots = 16384

// MaxSlots is the largest slot count Assign accepts: slots are uint16.
const MaxSlots = 1 << 16

// MaxMembers is the largest number of distinct members Assign accepts:
// the table stores member indexes as uint16.
const MaxMembers = 1 << 16

// Member is one eligible cluster member. The caller filters the membership
// list (alive or suspect, state=active) before calling Assign.
type Member struct {
	// Name is the member's identity: it alone decides which slots the member
	// gets, so a restarted node with the same Name gets the same slots.
	Name string
	// HTTPAddr is where the member serves the API (host:port). It is carried
	// along for routing and plays no part in the assignment.
	HTTPAddr string
}

// Hash scores a member for a slot. It receives name ‖ be16(slot), must be
// deterministic and identical on every node, and must not retain data.
// The default is xxhash.Sum64; tests inject hand-computable ones.
type Hash func(data []byte) uint64

// Assign computes the slot table for members over numSlots slots with
// rendezvous hashing (HRW) and xxhash64. See AssignWith.
func Assign(members []Member, numSlots int) Table {
	return AssignWith(members, numSlots, nil)
}

// AssignWith computes the slot table with rendezvous hashing: each slot s
// scores every member m with hash(m.Name ‖ be16(s)); the highest score owns s
// and the second highest follows it. Equal scores rank the smaller Name
// higher. A nil hash means xxhash.Sum64.
//
// The result depends only on the set of names (plus HTTPAddr carried along),
// never on the order of members: AssignWith works on a copy sorted by Name
// and does not modify members. Duplicate names collapse into one member;
// if the duplicates differ in HTTPAddr the smallest HTTPAddr is kept, so
// the choice is order-independent too.
//
// With 0 members the table has no owners; with 1 member it has no followers.
// AssignWith panics if numSlots is outside [0, MaxSlots] or there are more
// than MaxMembers distinct names (programmer misuse, not runtime input).
//
// Cost: O(n log n) to sort plus numSlots·n hashes of len(name)+2 bytes
// (262k hashes for 16 members × 16384 slots; see BenchmarkAssign).
func AssignWith(members []Member, numSlots int, hash Hash) Table {
	if numSlots < 0 || numSlots > MaxSlots {
		panic(fmt.Sprintf("ring: numSlots %d outside [0, %d]", numSlots, MaxSlots))
	}
	if hash == nil {
		hash = xxhash.Sum64
	}
	ms := sortedMembers(members)
	if len(ms) > MaxMembers {
		panic(fmt.Sprintf("ring: %d members exceed MaxMembers (%d)", len(ms), MaxMembers))
	}
	t := Table{members: ms, numSlots: numSlots, checksum: checksum(ms, numSlots)}
	switch len(ms) {
	case 0:
		// No owners, no followers.
	case 1:
		t.owner = make([]uint16, numSlots) // every slot is member 0's
	default:
		t.owner, t.follower = rendezvous(ms, numSlots, hash)
	}
	if invariants {
		if err := t.checkInvariants(); err != nil {
			panic(err)
		}
	}
	return t
}

// sortedMembers returns a copy of members sorted by Name with duplicate
// names removed, keeping the smallest HTTPAddr of each name.
func sortedMembers(members []Member) []Member {
	ms := slices.Clone(members)
	slices.SortFunc(ms, func(a, b Member) int {
		return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.HTTPAddr, b.HTTPAddr))
	})
	return slices.CompactFunc(ms, func(a, b Member) bool { return a.Name == b.Name })
}

// rendezvous ranks the members (sorted by Name, at least two) for every slot
// and returns the index of the top two for each.
func rendezvous(ms []Member, numSlots int, hash Hash) (owner, follower []uint16) {
	// One buffer holds name ‖ be16(slot) for every member; only the two slot
	// bytes change from slot to slot.
	keys := make([][]byte, len(ms))
	for i, m := range ms {
		keys[i] = make([]byte, len(m.Name)+2)
		copy(keys[i], m.Name)
	}
	owner = make([]uint16, numSlots)
	follower = make([]uint16, numSlots)
	for s := range numSlots {
		var first, second int
		var firstScore, secondScore uint64
		for i, k := range keys {
			binary.BigEndian.PutUint16(k[len(k)-2:], uint16(s))
			score := hash(k)
			// Members come in Name order, so strict comparisons rank the
			// smaller name higher on equal scores.
			switch {
			case i == 0:
				first, firstScore = i, score
			case score > firstScore:
				second, secondScore = first, firstScore
				first, firstScore = i, score
			case i == 1 || score > secondScore:
				second, secondScore = i, score
			}
		}
		owner[s], follower[s] = uint16(first), uint16(second)
	}
	return owner, follower
}

// checksum hashes numSlots and the sorted names: xxhash64 of be32(numSlots)
// followed by uvarint(len(name)) ‖ name for each member in Name order.
func checksum(ms []Member, numSlots int) uint64 {
	d := xxhash.New()
	var buf [binary.MaxVarintLen64]byte
	binary.BigEndian.PutUint32(buf[:4], uint32(numSlots))
	_, _ = d.Write(buf[:4])
	for _, m := range ms {
		n := binary.PutUvarint(buf[:], uint64(len(m.Name)))
		_, _ = d.Write(buf[:n])
		_, _ = d.WriteString(m.Name)
	}
	return d.Sum64()
}
