package ring

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"math"
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

// DefaultTolerance is the balance bound Assign keeps: every member owns
// within ±5 % of numSlots/N slots. Why 5 %: rendezvous hashing alone
// stays within it for the cluster sizes Chime runs today (249 of 250
// random name sets of 2–6 members over 16384 slots, ~90 % of those of
// 7–9, 16 % at 16), so those tables are plain HRW, while at 1,000
// members HRW's binomial spread (σ = 25 %; one set of names owned 6 to
// 30 slots each) would leave the busiest members with several times the
// quietest's load.
const DefaultTolerance = 0.05

// Options tune AssignWith. The zero value is what Assign uses.
type Options struct {
	// Hash scores members for slots; nil means xxhash.Sum64.
	Hash Hash
	// Tolerance bounds every member's owned count to
	// [⌈(1−Tolerance)·numSlots/N⌉, ⌊(1+Tolerance)·numSlots/N⌋], widened to
	// ⌊numSlots/N⌋ and ⌈numSlots/N⌉ where it admits no integer. Zero means
	// DefaultTolerance; math.Inf(1) bounds nothing, which is plain
	// rendezvous hashing (tests that pin HRW itself use it). Smaller
	// values move more slots on a join or leave. Negative or NaN panics.
	Tolerance float64
}

// Assign computes the slot table for members over numSlots slots:
// rendezvous hashing (HRW) with xxhash64, bounded to DefaultTolerance.
// See AssignWith.
func Assign(members []Member, numSlots int) Table {
	return AssignWith(members, numSlots, Options{})
}

// AssignWith computes the slot table with rendezvous hashing and bounded
// loads. Each slot s scores every member m with hash(m.Name ‖ be16(s));
// equal scores rank the smaller Name higher. Plain HRW gives s to the
// highest score and its follower is the second highest. If every member's
// owned count is then within the bounds of opts.Tolerance, that is the
// table, exactly. Otherwise the bounded-load pass (balance.go) moves the
// fewest slots it can to bring every member within them: a member over
// the upper bound keeps the slots it scores highest and each slot it
// gives up goes to its next-ranked member with room (slot-proposing
// deferred acceptance, whose result does not depend on the order of
// proposals); a member still under the lower bound then takes the slots
// it scores highest from members above it. A slot whose owner is not its
// HRW first choice is followed by that first choice (the highest-ranked
// member other than its owner, as everywhere).
//
// The result depends only on the set of names (plus HTTPAddr carried along),
// never on the order of members: AssignWith works on a copy sorted by Name
// and does not modify members. Duplicate names collapse into one member;
// if the duplicates differ in HTTPAddr the smallest HTTPAddr is kept, so
// the choice is order-independent too.
//
// With 0 members the table has no owners; with 1 member it has no followers.
// AssignWith panics if numSlots is outside [0, MaxSlots], there are more
// than MaxMembers distinct names, or opts.Tolerance is negative or NaN
// (programmer misuse, not runtime input).
//
// Cost: O(n log n) to sort plus numSlots·n hashes of len(name)+2 bytes
// (262k hashes for 16 members × 16384 slots; see BenchmarkAssign); the
// bounded-load pass adds n hashes per proposal and numSlots hashes per
// member under the lower bound.
func AssignWith(members []Member, numSlots int, opts Options) Table {
	if numSlots < 0 || numSlots > MaxSlots {
		panic(fmt.Sprintf("ring: numSlots %d outside [0, %d]", numSlots, MaxSlots))
	}
	if opts.Tolerance < 0 || math.IsNaN(opts.Tolerance) {
		panic(fmt.Sprintf("ring: Tolerance %v is negative or NaN", opts.Tolerance))
	}
	hash := opts.Hash
	if hash == nil {
		hash = xxhash.Sum64
	}
	tolerance := opts.Tolerance
	if tolerance == 0 {
		tolerance = DefaultTolerance
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
		r := rendezvous(ms, numSlots, hash)
		lo, hi := bounds(numSlots, len(ms), tolerance)
		r.balance(lo, hi)
		t.owner, t.follower = r.owner, r.follower
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
// and returns the top two of each with the top score.
func rendezvous(ms []Member, numSlots int, hash Hash) *ranking {
	// One buffer holds name ‖ be16(slot) for every member; only the two slot
	// bytes change from slot to slot.
	keys := make([][]byte, len(ms))
	for i, m := range ms {
		keys[i] = make([]byte, len(m.Name)+2)
		copy(keys[i], m.Name)
	}
	r := &ranking{
		keys: keys, hash: hash,
		owner: make([]uint16, numSlots), follower: make([]uint16, numSlots),
		score: make([]uint64, numSlots),
	}
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
		r.owner[s], r.follower[s], r.score[s] = uint16(first), uint16(second), firstScore
	}
	return r
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
