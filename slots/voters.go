package slots

import "slices"

// Voters decides which members a node counts its majority among: node
// passes its result to the machine as TableChanged's Sees and StableSize.
//
// Counting among the members of the current view alone is unsafe when the
// membership grows during a partition. Say n1 | n2 n3 split; n2 and n3 are
// a majority of three and take n1's slots over. Then n4 and n5 join
// through n1: n1's view now holds five members and n1 sees three of them,
// a majority of five, and takes the slots back: two owners. So the set of
// voters follows the view only while the view holds a majority of the
// current voters (the members it had until then): n1 sees one of its three
// voters and stays a minority whatever joins it, n2 sees two of three and
// takes in the joiners (learning of them as dead, it counts two of five).
// A change that a majority of the old voters cannot see is not adopted,
// like a joint majority of the old and the new configuration; without
// consensus on membership, it is the conservative choice: a cluster of
// three whose other two nodes died stays a minority until one returns,
// whoever joins it.
//
// The zero value adopts the first view it counts (a new node). A node
// restarts with the voters it had (NewVoters with what it persisted), or a
// restart on the small side of a partition that grew by joins would adopt
// the small side's view. Not safe for concurrent use.
type Voters struct {
	ref []string // sorted; nil before the first view
}

// NewVoters returns Voters that start from the given voters (nil: adopt
// the first view).
func NewVoters(voters []string) *Voters {
	if voters == nil {
		return &Voters{}
	}
	ref := slices.Clone(voters)
	slices.Sort(ref)
	return &Voters{ref: slices.Compact(ref)}
}

// Count returns Sees and StableSize for a view: members are the nodes it
// knows that count (alive, suspect or dead; not left), alive those it
// sees alive (a subset, this node included). Voters not among members
// left the cluster and are voters no more. If alive holds a majority of
// the remaining voters, or none remains, members become the voters and
// the counts are the view's; else the voters stay and so does the
// minority: alive among them.
func (v *Voters) Count(members, alive []string) (sees, stable int) {
	up := make(map[string]bool, len(alive))
	for _, n := range alive {
		up[n] = true
	}
	if v.ref != nil {
		// A voter that left is none: it said so (only a dead one may be
		// on the other side of a partition).
		known := make(map[string]bool, len(members))
		for _, n := range members {
			known[n] = true
		}
		v.ref = slices.DeleteFunc(v.ref, func(n string) bool { return !known[n] })
		if len(v.ref) == 0 {
			// Every voter left: there is no old majority to respect, and
			// counting among nobody would leave this node a minority for
			// good (a joiner whose voters were the dead nodes an operator
			// forgot: node TestFaultForgetLostNodes). Adopt the view.
			v.ref = nil
		}
	}
	if v.ref != nil {
		seen := 0
		for _, n := range v.ref {
			if up[n] {
				seen++
			}
		}
		if 2*seen <= len(v.ref) {
			return seen, len(v.ref)
		}
	}
	v.ref = slices.Clone(members)
	slices.Sort(v.ref)
	v.ref = slices.Compact(v.ref)
	for _, n := range v.ref {
		if up[n] {
			sees++
		}
	}
	return sees, len(v.ref)
}

// Members returns the current voters, sorted (nil before the first view).
func (v *Voters) Members() []string { return slices.Clone(v.ref) }

// Is reports whether the voters are exactly names (sorted).
func (v *Voters) Is(names []string) bool { return v.ref != nil && slices.Equal(v.ref, names) }
