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
	f.Fuzz(func(t *testing.T, data []byte) {
		numSlots, ms := decodeMembers(data)
		tab := mustAssign(t, ms, numSlots)
		checkConsistent(t, tab)

		wantOwner, wantFollower := oracle(ms, numSlots, nil)
		for s := range numSlots {
			if got := ownerName(tab, s); got != wantOwner[s] {
				t.Fatalf("Owner(%d) = %q, want oracle %q", s, got, wantOwner[s])
			}
			if got := followerName(tab, s); got != wantFollower[s] {
				t.Fatalf("Follower(%d) = %q, want oracle %q", s, got, wantFollower[s])
			}
		}

		rev := slices.Clone(ms)
		slices.Reverse(rev)
		if got := mustAssign(t, rev, numSlots); !reflect.DeepEqual(got, tab) {
			t.Fatalf("Assign(reversed input) differs")
		}
		if got := strings.Count(tab.String(), "\n"); got != len(tab.Members()) {
			t.Fatalf("String() has %d lines, want %d", got, len(tab.Members()))
		}

		// Minimal movement: the first member leaves, then joins again.
		if len(tab.Members()) == 0 {
			return
		}
		name := tab.Members()[0].Name
		smaller := mustAssign(t, without(ms, name), numSlots)
		if err := checkLeave(tab, smaller, name); err != nil {
			t.Fatalf("%q leaves: %v", name, err)
		}
		if err := checkJoin(smaller, tab, name); err != nil {
			t.Fatalf("%q joins: %v", name, err)
		}
	})
}
