package ring

import "fmt"

// checkInvariants reports the first broken invariant of t, or nil:
//   - members are sorted by Name with unique names;
//   - with members, every slot has exactly one owner, a valid index;
//   - with two or more members, every slot has a valid follower distinct
//     from its owner; with fewer there are no followers;
//   - the checksum matches the member names.
//
// Tests call it after every Assign; builds with -tags invariants call it
// inside Assign too. O(numSlots + n).
func (t Table) checkInvariants() error {
	for i := 1; i < len(t.members); i++ {
		if t.members[i-1].Name >= t.members[i].Name {
			return fmt.Errorf("ring: members not sorted and unique at %d: %q >= %q",
				i, t.members[i-1].Name, t.members[i].Name)
		}
	}
	n := len(t.members)
	wantOwners, wantFollowers := t.numSlots, t.numSlots
	if n == 0 {
		wantOwners = 0
	}
	if n < 2 {
		wantFollowers = 0
	}
	if len(t.owner) != wantOwners {
		return fmt.Errorf("ring: %d owner entries for %d slots and %d members", len(t.owner), t.numSlots, n)
	}
	if len(t.follower) != wantFollowers {
		return fmt.Errorf("ring: %d follower entries for %d slots and %d members", len(t.follower), t.numSlots, n)
	}
	for s, o := range t.owner {
		if int(o) >= n {
			return fmt.Errorf("ring: slot %d owner index %d out of range [0, %d)", s, o, n)
		}
	}
	for s, f := range t.follower {
		if int(f) >= n {
			return fmt.Errorf("ring: slot %d follower index %d out of range [0, %d)", s, f, n)
		}
		if f == t.owner[s] {
			return fmt.Errorf("ring: slot %d follower %q is also its owner", s, t.members[f].Name)
		}
	}
	if want := checksum(t.members, t.numSlots); t.checksum != want {
		return fmt.Errorf("ring: checksum %#x, want %#x", t.checksum, want)
	}
	return nil
}
