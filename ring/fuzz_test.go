package ring

import (
	"encoding/binary"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// decodeMembers turns fuzz bytes into a slot count and a member list:
// the first two bytes (big-endian) mod 2049 are the slot count, the rest
// is split on '\n' into at most 64 members, each "name" or "name@addr".
// Duplicates, empty names and arbitrary bytes are all allowed.
func decodeMembers(data []byte) (numSlots int, ms []Member) {
	if len(data) < 2 {
		return len(data), nil
	}
	numSlots = int(binary.BigEndian.Uint16(data)) % 2049
	if len(data) == 2 {
		return numSlots, nil
	}
	for line := range strings.SplitSeq(string(data[2:]), "\n") {
		if len(ms) == 64 {
			break
		}
		name, addr, _ := strings.Cut(line, "@")
		ms = append(ms, Member{Name: name, HTTPAddr: addr})
	}
	return numSlots, ms
}

func FuzzAssign(f *testing.F) {
	f.Add([]byte{0, 16, 'a', '\n', 'b', '\n', 'c'})
	f.Add([]byte{0x08, 0x00, 'n', '1', '@', 'h', ':', '1', '\n', 'n', '2'})
	f.Add([]byte{0, 0})
	f.Add([]byte{})
	f.Add([]byte{0, 5, 'x'})
	f.Add([]byte{0, 64, 'a', '@', '2', '\n', 'a', '@', '1', '\n', 'a'})
	f.Add([]byte{0xff, 0xff, '\n', '\n', 0, 0xff})
	f.Add(append([]byte{0x04, 0x00}, strings.Join(names(seqMembers(16)), "\n")...))
	f.Add(append([]byte{0x01, 0x00}, strings.Join(names(seqMembers(40)), "\n")...))
	f.Add(append([]byte{0x00, 0x40}, strings.Join(names(seqMembers(7)), "\n")...))
	f.Fuzz(func(t *testing.T, data []byte) {
		numSlots, ms := decodeMembers(data)

		// Plain HRW: the oracle's ranking, and minimal movement.
		plain := mustAssignHRW(t, ms, numSlots)
		checkConsistent(t, plain)
		wantOwner, wantFollower := oracle(ms, numSlots, nil)
		for s := range numSlots {
			if got := ownerName(plain, s); got != wantOwner[s] {
				t.Fatalf("HRW Owner(%d) = %q, want oracle %q", s, got, wantOwner[s])
			}
			if got := followerName(plain, s); got != wantFollower[s] {
				t.Fatalf("HRW Follower(%d) = %q, want oracle %q", s, got, wantFollower[s])
			}
		}

		// Bounded (Assign): the slow oracle's table, within the bounds,
		// and HRW's whenever HRW is within them.
		tab := mustAssign(t, ms, numSlots)
		checkConsistent(t, tab)
		checkBounds(t, tab)
		checkOracle(t, tab, ms, numSlots)
		if withinBounds(plain) && !reflect.DeepEqual(tab, plain) {
			t.Fatalf("HRW is within bounds but Assign's table differs")
		}

		rev := slices.Clone(ms)
		slices.Reverse(rev)
		if got := mustAssign(t, rev, numSlots); !reflect.DeepEqual(got, tab) {
			t.Fatalf("Assign(reversed input) differs")
		}
		if got := mustAssignHRW(t, rev, numSlots); !reflect.DeepEqual(got, plain) {
			t.Fatalf("HRW(reversed input) differs")
		}
		if got := strings.Count(tab.String(), "\n"); got != len(tab.Members()) {
			t.Fatalf("String() has %d lines, want %d", got, len(tab.Members()))
		}

		// Minimal movement of plain HRW: the first member leaves, then
		// joins again.
		if len(plain.Members()) == 0 {
			return
		}
		name := plain.Members()[0].Name
		smaller := mustAssignHRW(t, without(ms, name), numSlots)
		if err := checkLeave(plain, smaller, name); err != nil {
			t.Fatalf("%q leaves: %v", name, err)
		}
		if err := checkJoin(smaller, plain, name); err != nil {
			t.Fatalf("%q joins: %v", name, err)
		}
	})
}
