package ring

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"
)

func BenchmarkAssign(b *testing.B) {
	for _, n := range []int{3, 16, 100, 1000} {
		ms := seqMembers(n)
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				Assign(ms, NumSlots)
			}
		})
	}
}

// BenchmarkMovement reports the share of slots whose owner changes when
// one member joins or leaves (the mean of 3 of each), bounded (Assign) and
// with plain HRW: join-%, join-hrw-%, leave-%, leave-hrw-%. It is a
// measurement, not a timing: one iteration is enough (-benchtime=1x).
func BenchmarkMovement(b *testing.B) {
	for _, n := range []int{10, 100, 1000} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			var m movement
			for b.Loop() {
				m = measureMovement(b, n, 3)
			}
			b.ReportMetric(m.join, "join-%")
			b.ReportMetric(m.joinHRW, "join-hrw-%")
			b.ReportMetric(m.leave, "leave-%")
			b.ReportMetric(m.leaveHRW, "leave-hrw-%")
		})
	}
}

// BenchmarkOwner compares Table.Owner (one index per slot) with the
// baseline a Redis-style range list needs: binary search over the sorted
// range starts.
func BenchmarkOwner(b *testing.B) {
	tab := Assign(seqMembers(16), NumSlots)
	type start struct {
		from  uint16
		owner int
	}
	var starts []start
	for i, m := range tab.Members() {
		owned, _ := tab.Ranges(m.Name)
		for _, r := range owned {
			starts = append(starts, start{r.From, i})
		}
	}
	slices.SortFunc(starts, func(x, y start) int { return int(x.from) - int(y.from) })
	members := tab.Members()

	r := rand.New(rand.NewPCG(1, 1))
	lookups := make([]uint16, 4096)
	for i := range lookups {
		lookups[i] = uint16(r.IntN(NumSlots))
	}
	b.Run("impl=table", func(b *testing.B) {
		var sink Member
		i := 0
		for b.Loop() {
			sink, _ = tab.Owner(lookups[i%len(lookups)])
			i++
		}
		_ = sink
	})
	b.Run(fmt.Sprintf("impl=sortsearch/ranges=%d", len(starts)), func(b *testing.B) {
		var sink Member
		i := 0
		for b.Loop() {
			s := lookups[i%len(lookups)]
			j := sort.Search(len(starts), func(k int) bool { return starts[k].from > s }) - 1
			sink = members[starts[j].owner]
			i++
		}
		_ = sink
	})
}
