package ring

import (
	"strconv"
	"strings"
)

// Range is an inclusive run of slots, From <= To, as in Redis CLUSTER SLOTS.
type Range struct {
	From, To uint16
}

// String renders the range as "0-5460", or "7" when From == To.
func (r Range) String() string {
	if r.From == r.To {
		return strconv.Itoa(int(r.From))
	}
	return strconv.Itoa(int(r.From)) + "-" + strconv.Itoa(int(r.To))
}

// Ranges returns the slots the named member owns and follows as ascending,
// non-adjacent ranges. Both are nil when name is not a member or holds no
// such slots. O(numSlots).
func (t Table) Ranges(name string) (owned, following []Range) {
	i := t.index(name)
	if i < 0 {
		return nil, nil
	}
	return rangesOf(t.owner, uint16(i)), rangesOf(t.follower, uint16(i))
}

// rangesOf returns the runs of slots s with idx[s] == want.
func rangesOf(idx []uint16, want uint16) []Range {
	var rs []Range
	for s, i := range idx {
		if i != want {
			continue
		}
		if n := len(rs); n > 0 && int(rs[n-1].To)+1 == s {
			rs[n-1].To = uint16(s)
			continue
		}
		rs = append(rs, Range{From: uint16(s), To: uint16(s)})
	}
	return rs
}

// String renders the table one line per member in Name order:
//
//	n1 owns 0-3,7,9-12 follows 4-6,8
//
// with "none" for an empty list. Names are written verbatim. Each line ends
// in a newline; a table with no members renders as "". The output is
// deterministic. O(n·numSlots).
func (t Table) String() string {
	var b strings.Builder
	for i, m := range t.members {
		b.WriteString(m.Name)
		b.WriteString(" owns ")
		writeRanges(&b, rangesOf(t.owner, uint16(i)))
		b.WriteString(" follows ")
		writeRanges(&b, rangesOf(t.follower, uint16(i)))
		b.WriteByte('\n')
	}
	return b.String()
}

// writeRanges writes rs comma-separated, or "none" when empty.
func writeRanges(b *strings.Builder, rs []Range) {
	if len(rs) == 0 {
		b.WriteString("none")
		return
	}
	for j, r := range rs {
		if j > 0 {
			b.WriteByte(',')
		}
		b.WriteString(r.String())
	}
}
