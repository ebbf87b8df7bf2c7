package ring

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/cespare/xxhash/v2"
)

// TestHRWMatchesOracle: with no bound (Tolerance +Inf) the table is plain
// rendezvous hashing, as the slow oracle ranks it.
func TestHRWMatchesOracle(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	tests := []struct {
		name     string
		members  []Member
		numSlots int
	}{
		{"n=0", nil, 64},
		{"n=1", seqMembers(1), 64},
		{"n=2", seqMembers(2), 1024},
		{"n=3", seqMembers(3), 1024},
		{"n=7/random", randMembers(r, 7), 1024},
		{"n=16", seqMembers(16), 1024},
		{"n=5/slots=0", seqMembers(5), 0},
		{"n=5/slots=1", seqMembers(5), 1},
		{"n=4/slots=max", seqMembers(4), MaxSlots},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tab := mustAssignHRW(t, tt.members, tt.numSlots)
			if got := tab.NumSlots(); got != tt.numSlots {
				t.Fatalf("NumSlots() = %d, want %d", got, tt.numSlots)
			}
			wantOwner, wantFollower := oracle(tt.members, tt.numSlots, nil)
			for s := range tt.numSlots {
				if got := ownerName(tab, s); got != wantOwner[s] {
					t.Fatalf("Owner(%d) = %q, want %q", s, got, wantOwner[s])
				}
				if got := followerName(tab, s); got != wantFollower[s] {
					t.Fatalf("Follower(%d) = %q, want %q", s, got, wantFollower[s])
				}
			}
		})
	}
}

func TestAssignOrderIndependent(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3, 4, 5} {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 0))
			ms := randMembers(r, 2+r.IntN(15))
			want := mustAssign(t, ms, NumSlots)
			for range 5 {
				in := shuffled(r, ms)
				got := mustAssign(t, in, NumSlots)
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("Assign(%v) differs from Assign(%v)", names(in), names(ms))
				}
				if got.Checksum() != want.Checksum() {
					t.Fatalf("Checksum() = %#x after shuffle, want %#x", got.Checksum(), want.Checksum())
				}
			}
		})
	}
}

func TestAssignKeepsInput(t *testing.T) {
	in := []Member{{Name: "c"}, {Name: "a"}, {Name: "b"}, {Name: "a"}}
	orig := slices.Clone(in)
	tab := mustAssign(t, in, 16)
	if !slices.Equal(in, orig) {
		t.Errorf("Assign modified its input: %v, want %v", in, orig)
	}
	got := tab.Members()
	got[0].Name = "zzz"
	if m := tab.Members()[0].Name; m != "a" {
		t.Errorf("Members()[0].Name = %q after caller wrote its copy, want %q", m, "a")
	}
}

func TestAssignDuplicates(t *testing.T) {
	tests := []struct {
		name string
		in   []Member
		want []Member
	}{
		{
			name: "exact",
			in:   []Member{{"b", "h:2"}, {"a", "h:1"}, {"b", "h:2"}},
			want: []Member{{"a", "h:1"}, {"b", "h:2"}},
		},
		{
			name: "different addr, smaller first",
			in:   []Member{{"a", "h:1"}, {"a", "h:9"}, {"b", "h:2"}},
			want: []Member{{"a", "h:1"}, {"b", "h:2"}},
		},
		{
			name: "different addr, smaller last",
			in:   []Member{{"a", "h:9"}, {"b", "h:2"}, {"a", "h:1"}},
			want: []Member{{"a", "h:1"}, {"b", "h:2"}},
		},
		{
			name: "all same",
			in:   []Member{{"a", "x"}, {"a", "x"}, {"a", "x"}},
			want: []Member{{"a", "x"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := mustAssign(t, tt.in, 64)
			if !slices.Equal(got.Members(), tt.want) {
				t.Errorf("Members() = %v, want %v", got.Members(), tt.want)
			}
			if want := mustAssign(t, tt.want, 64); !reflect.DeepEqual(got, want) {
				t.Errorf("Assign(%v) differs from Assign(%v)", tt.in, tt.want)
			}
		})
	}
}

// TestAssignWithHash checks ranking and the by-name tie-break with
// hand-computable hashes.
func TestAssignWithHash(t *testing.T) {
	abc := []Member{{Name: "c"}, {Name: "b"}, {Name: "a"}}
	tests := []struct {
		name     string
		members  []Member
		numSlots int
		hash     Hash
		want     string
	}{
		{
			name:     "all tie: smallest names rank first",
			members:  abc,
			numSlots: 4,
			hash:     func([]byte) uint64 { return 7 },
			want:     "a owns 0-3 follows none\nb owns none follows 0-3\nc owns none follows none\n",
		},
		{
			name:     "longest name wins, tie for second",
			members:  []Member{{Name: "bb"}, {Name: "ccc"}, {Name: "aa"}},
			numSlots: 3,
			hash:     func(d []byte) uint64 { return uint64(len(d)) },
			want:     "aa owns none follows 0-2\nbb owns none follows none\nccc owns 0-2 follows none\n",
		},
		{
			// a scores the slot number, b and c score 2:
			// slots 0-1: b=c=2 > a; slot 2: a=b=c=2; slots 3-4: a > b=c.
			name:     "slot-dependent",
			members:  abc,
			numSlots: 5,
			hash: func(d []byte) uint64 {
				if d[0] == 'a' {
					return uint64(d[len(d)-1])
				}
				return 2
			},
			want: "a owns 2-4 follows none\nb owns 0-1 follows 2-4\nc owns none follows 0-1\n",
		},
		{
			name:     "high score wins over name",
			members:  []Member{{Name: "a"}, {Name: "z"}},
			numSlots: 2,
			hash: func(d []byte) uint64 {
				return uint64(d[0]) // 'z' > 'a'
			},
			want: "a owns none follows 0-1\nz owns 0-1 follows none\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tab := AssignWith(tt.members, tt.numSlots, Options{Hash: tt.hash, Tolerance: hrw.Tolerance})
			wantOwner, wantFollower := oracle(tt.members, tt.numSlots, tt.hash)
			checkTable(t, tab, tt.want, wantOwner, wantFollower)
		})
	}
}

func TestAssignSmall(t *testing.T) {
	tests := []struct {
		name       string
		tab        Table
		wantOwner  bool
		wantFollow bool
		wantCounts map[string]SlotCounts
		wantString string
	}{
		{
			name:       "zero Table",
			tab:        Table{},
			wantCounts: map[string]SlotCounts{},
		},
		{
			name:       "no members",
			tab:        mustAssign(t, nil, 8),
			wantCounts: map[string]SlotCounts{},
		},
		{
			name:       "one member",
			tab:        mustAssign(t, []Member{{Name: "solo"}}, 8),
			wantOwner:  true,
			wantCounts: map[string]SlotCounts{"solo": {Owned: 8}},
			wantString: "solo owns 0-7 follows none\n",
		},
		{
			name:       "two members",
			tab:        mustAssign(t, []Member{{Name: "x"}, {Name: "y"}}, 8),
			wantOwner:  true,
			wantFollow: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for s := range tt.tab.NumSlots() {
				if _, ok := tt.tab.Owner(uint16(s)); ok != tt.wantOwner {
					t.Fatalf("Owner(%d) ok = %v, want %v", s, ok, tt.wantOwner)
				}
				if _, ok := tt.tab.Follower(uint16(s)); ok != tt.wantFollow {
					t.Fatalf("Follower(%d) ok = %v, want %v", s, ok, tt.wantFollow)
				}
			}
			for _, s := range []uint16{uint16(tt.tab.NumSlots()), 65535} {
				if m, ok := tt.tab.Owner(s); ok {
					t.Errorf("Owner(%d) = %v, true past NumSlots() = %d", s, m, tt.tab.NumSlots())
				}
				if m, ok := tt.tab.Follower(s); ok {
					t.Errorf("Follower(%d) = %v, true past NumSlots() = %d", s, m, tt.tab.NumSlots())
				}
			}
			if tt.wantCounts != nil {
				if got := tt.tab.Counts(); !reflect.DeepEqual(got, tt.wantCounts) {
					t.Errorf("Counts() = %v, want %v", got, tt.wantCounts)
				}
				if got := tt.tab.String(); got != tt.wantString {
					t.Errorf("String() = %q, want %q", got, tt.wantString)
				}
			}
			if o, f := tt.tab.Ranges("nobody"); o != nil || f != nil {
				t.Errorf("Ranges(%q) = %v, %v, want nil, nil", "nobody", o, f)
			}
		})
	}
}

func TestAssignPanicsOnBadNumSlots(t *testing.T) {
	for _, n := range []int{-1, MaxSlots + 1} {
		t.Run(fmt.Sprintf("numSlots=%d", n), func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Errorf("Assign(_, %d) did not panic", n)
				}
			}()
			Assign(seqMembers(2), n)
		})
	}
}

// TestAssignInvariants: every slot has exactly one owner and, with two or
// more members, a follower distinct from it; counts and ranges agree.
func TestAssignInvariants(t *testing.T) {
	const seed = 42
	r := rand.New(rand.NewPCG(seed, 0))
	for n := range 21 {
		t.Run(fmt.Sprintf("n=%d", n), func(t *testing.T) {
			ms := randMembers(r, n)
			numSlots := 1 + r.IntN(2048)
			if n%5 == 0 {
				numSlots = NumSlots
			}
			tab := mustAssign(t, ms, numSlots)
			checkConsistent(t, tab)
		})
	}
}

// checkConsistent checks Owner, Follower, Counts and Ranges against each
// other.
func checkConsistent(t testing.TB, tab Table) {
	t.Helper()
	n, numSlots := len(tab.Members()), tab.NumSlots()
	owned := make(map[string]int)
	following := make(map[string]int)
	for s := range numSlots {
		o, ok := tab.Owner(uint16(s))
		if ok != (n > 0) {
			t.Fatalf("Owner(%d) ok = %v with %d members", s, ok, n)
		}
		f, fok := tab.Follower(uint16(s))
		if fok != (n > 1) {
			t.Fatalf("Follower(%d) ok = %v with %d members", s, fok, n)
		}
		if fok && f.Name == o.Name {
			t.Fatalf("Follower(%d) = Owner(%d) = %q", s, s, o.Name)
		}
		if ok {
			owned[o.Name]++
		}
		if fok {
			following[f.Name]++
		}
	}
	counts := tab.Counts()
	if len(counts) != n {
		t.Fatalf("len(Counts()) = %d, want %d", len(counts), n)
	}
	var sumOwned, sumFollowing int
	for _, m := range tab.Members() {
		want := SlotCounts{Owned: owned[m.Name], Following: following[m.Name]}
		if counts[m.Name] != want {
			t.Fatalf("Counts()[%q] = %+v, want %+v", m.Name, counts[m.Name], want)
		}
		sumOwned += want.Owned
		sumFollowing += want.Following
		o, f := tab.Ranges(m.Name)
		checkRanges(t, tab, m.Name, o, want.Owned, ownerName)
		checkRanges(t, tab, m.Name, f, want.Following, followerName)
	}
	if n > 0 && sumOwned != numSlots {
		t.Fatalf("owned slots sum to %d, want %d", sumOwned, numSlots)
	}
	if n > 1 && sumFollowing != numSlots {
		t.Fatalf("followed slots sum to %d, want %d", sumFollowing, numSlots)
	}
}

// checkRanges checks that rs are ascending, non-adjacent, cover want slots
// and that of(tab, s) == name for each.
func checkRanges(t testing.TB, tab Table, name string, rs []Range, want int, of func(Table, int) string) {
	t.Helper()
	total := 0
	for i, r := range rs {
		if r.From > r.To {
			t.Fatalf("%q: range %v has From > To", name, r)
		}
		if i > 0 && int(rs[i-1].To)+1 >= int(r.From) {
			t.Fatalf("%q: ranges %v and %v overlap or touch", name, rs[i-1], r)
		}
		for s := int(r.From); s <= int(r.To); s++ {
			if got := of(tab, s); got != name {
				t.Fatalf("%q: range %v includes slot %d held by %q", name, r, s, got)
			}
		}
		total += int(r.To) - int(r.From) + 1
	}
	if total != want {
		t.Fatalf("%q: ranges %v cover %d slots, want %d", name, rs, total, want)
	}
}

// TestHRWBalance: with plain HRW every member owns within ±10 % of the
// mean, 16384/N, for 3–16 members (the bounded pass is what keeps ±5 %:
// TestBalance).
func TestHRWBalance(t *testing.T) {
	const tolerance = 0.10
	const seed = 7
	r := rand.New(rand.NewPCG(seed, 0))
	for n := 3; n <= 16; n++ {
		for _, kind := range []string{"seq", "random"} {
			ms := seqMembers(n)
			if kind == "random" {
				ms = randMembers(r, n)
			}
			t.Run(fmt.Sprintf("n=%d/names=%s", n, kind), func(t *testing.T) {
				tab := mustAssignHRW(t, ms, NumSlots)
				mean := float64(NumSlots) / float64(n)
				lo, hi := NumSlots, 0
				for _, c := range tab.Counts() {
					lo, hi = min(lo, c.Owned), max(hi, c.Owned)
				}
				t.Logf("owned min %d (%+.1f%%) max %d (%+.1f%%) mean %.0f",
					lo, 100*(float64(lo)/mean-1), hi, 100*(float64(hi)/mean-1), mean)
				if float64(lo) < mean*(1-tolerance) || float64(hi) > mean*(1+tolerance) {
					t.Errorf("owned counts %d..%d outside mean %.0f ±%.0f%% (names %v, seed %d)",
						lo, hi, mean, 100*tolerance, names(ms), seed)
				}
			})
		}
	}
}

// TestJoinMovesOnlyToJoiner: with plain HRW, when one member joins, every slot whose owner
// changes moves to the joiner and its old owner becomes its follower; a
// slot whose owner stays keeps its follower unless the joiner takes that
// place.
func TestJoinMovesOnlyToJoiner(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3, 4, 5, 6, 7, 8} {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 99))
			for range 10 {
				all := randMembers(r, 1+r.IntN(12))
				joiner := all[r.IntN(len(all))]
				before := mustAssignHRW(t, without(all, joiner.Name), 2048)
				after := mustAssignHRW(t, shuffled(r, all), 2048)
				if err := checkJoin(before, after, joiner.Name); err != nil {
					t.Fatalf("join %q to %v (seed %d): %v", joiner.Name, names(all), seed, err)
				}
			}
		})
	}
}

// TestLeaveMovesOnlyLeaversSlots: with plain HRW, when one member leaves, only its owned
// slots change owner, each to its previous follower; the follower of a
// slot changes only if the leaver was its owner or follower.
func TestLeaveMovesOnlyLeaversSlots(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3, 4, 5, 6, 7, 8} {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 98))
			for range 10 {
				all := randMembers(r, 1+r.IntN(12))
				leaver := all[r.IntN(len(all))]
				before := mustAssignHRW(t, all, 2048)
				after := mustAssignHRW(t, shuffled(r, without(all, leaver.Name)), 2048)
				if err := checkLeave(before, after, leaver.Name); err != nil {
					t.Fatalf("%q leaves %v (seed %d): %v", leaver.Name, names(all), seed, err)
				}
			}
		})
	}
}

// checkJoin reports the first slot that breaks the join property.
func checkJoin(before, after Table, joiner string) error {
	for s := range after.NumSlots() {
		ob, oa := ownerName(before, s), ownerName(after, s)
		fb, fa := followerName(before, s), followerName(after, s)
		switch {
		case oa != ob && oa != joiner:
			return fmt.Errorf("slot %d owner %q -> %q, not to the joiner", s, ob, oa)
		case oa != ob && fa != ob:
			return fmt.Errorf("slot %d moved to joiner but follower is %q, want old owner %q", s, fa, ob)
		case oa == ob && fa != fb && fa != joiner:
			return fmt.Errorf("slot %d kept owner %q but follower %q -> %q", s, oa, fb, fa)
		}
	}
	return nil
}

// checkLeave reports the first slot that breaks the leave property.
func checkLeave(before, after Table, leaver string) error {
	for s := range before.NumSlots() {
		ob, oa := ownerName(before, s), ownerName(after, s)
		fb, fa := followerName(before, s), followerName(after, s)
		switch {
		case ob == leaver && oa != fb:
			return fmt.Errorf("slot %d of leaver went to %q, want its follower %q", s, oa, fb)
		case ob != leaver && oa != ob:
			return fmt.Errorf("slot %d owner %q -> %q though %q left", s, ob, oa, leaver)
		case ob != leaver && fb != leaver && fa != fb:
			return fmt.Errorf("slot %d follower %q -> %q though %q left", s, fb, fa, leaver)
		}
	}
	return nil
}

func TestChecksum(t *testing.T) {
	sum := func(numSlots int, ms ...Member) uint64 { return Assign(ms, numSlots).Checksum() }
	a, b, c := Member{Name: "a"}, Member{Name: "b"}, Member{Name: "c"}
	tests := []struct {
		name string
		x, y uint64
		same bool
	}{
		{"order", sum(16, a, b, c), sum(16, c, a, b), true},
		{"duplicates", sum(16, a, b), sum(16, b, a, b), true},
		{"HTTPAddr ignored", sum(16, Member{"a", "h:1"}), sum(16, Member{"a", "h:2"}), true},
		{"member added", sum(16, a, b), sum(16, a, b, c), false},
		{"member renamed", sum(16, a, b), sum(16, a, c), false},
		{"name boundaries", sum(16, Member{Name: "ab"}, c), sum(16, a, Member{Name: "bc"}), false},
		{"empty name", sum(16, a), sum(16, a, Member{}), false},
		{"numSlots", sum(16, a, b), sum(32, a, b), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if (tt.x == tt.y) != tt.same {
				t.Errorf("checksums %#x and %#x: equal = %v, want %v", tt.x, tt.y, tt.x == tt.y, tt.same)
			}
		})
	}
}

func TestRangeString(t *testing.T) {
	tests := []struct {
		r    Range
		want string
	}{
		{Range{0, 5460}, "0-5460"},
		{Range{7, 7}, "7"},
		{Range{0, 0}, "0"},
		{Range{65534, 65535}, "65534-65535"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := tt.r.String(); got != tt.want {
				t.Errorf("Range%v.String() = %q, want %q", [2]uint16{tt.r.From, tt.r.To}, got, tt.want)
			}
		})
	}
}

// TestGolden pins the xxhash assignment and checksum: every node of a
// cluster must compute exactly this, so a change here breaks mixed-version
// clusters and needs a protocol version bump.
func TestGolden(t *testing.T) {
	ms := []Member{{Name: "n3"}, {Name: "n1"}, {Name: "n2"}}
	tab := mustAssignHRW(t, ms, 24)
	const want = "" +
		"n1 owns 0-3,5,10-11,15,18-19,22-23 follows 7,13,16-17\n" +
		"n2 owns 4,7,12,16-17,20-21 follows 0-2,6,8-9,11,14,19,22\n" +
		"n3 owns 6,8-9,13-14 follows 3-5,10,12,15,18,20-21,23\n"
	if got := tab.String(); got != want {
		t.Errorf("String() =\n%s\nwant\n%s", got, want)
	}
	const wantSum = 0x65e4deeba1a141e8
	if got := tab.Checksum(); got != wantSum {
		t.Errorf("Checksum() = %#x, want %#x", got, uint64(wantSum))
	}
	o, f := tab.Ranges("n1")
	wantO := []Range{{0, 3}, {5, 5}, {10, 11}, {15, 15}, {18, 19}, {22, 23}}
	wantF := []Range{{7, 7}, {13, 13}, {16, 17}}
	if !slices.Equal(o, wantO) || !slices.Equal(f, wantF) {
		t.Errorf("Ranges(%q) = %v, %v, want %v, %v", "n1", o, f, wantO, wantF)
	}
}

// TestGoldenBalanced pins the bounded table the same way: over 24 slots
// plain HRW gives n1 12 slots (TestGolden); the bound, 8 ± 0.4, admits
// only 8 each. n1 keeps the 8 it scores highest and gives up 2, 11, 15
// and 22. n2, the next choice of 2, 11 and 22, takes 2 and 22 and gives
// up the slot it scores lowest, 7, and 11; those go to their next
// choice, n3, with 15. Every moved slot is followed by its HRW owner.
func TestGoldenBalanced(t *testing.T) {
	ms := []Member{{Name: "n3"}, {Name: "n1"}, {Name: "n2"}}
	tab := mustAssign(t, ms, 24)
	const want = "" +
		"n1 owns 0-1,3,5,10,18-19,23 follows 2,11,13,15-17,22\n" +
		"n2 owns 2,4,12,16-17,20-22 follows 0-1,6-9,14,19\n" +
		"n3 owns 6-9,11,13-15 follows 3-5,10,12,18,20-21,23\n"
	if got := tab.String(); got != want {
		t.Errorf("String() =\n%s\nwant\n%s", got, want)
	}
	if got, want := tab.Checksum(), mustAssignHRW(t, ms, 24).Checksum(); got != want {
		t.Errorf("Checksum() = %#x, want HRW's %#x", got, want)
	}
}

func names(ms []Member) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Name
	}
	return out
}

// seqMembers returns node-1..node-n.
func seqMembers(n int) []Member {
	ms := make([]Member, n)
	for i := range ms {
		ms[i] = Member{Name: fmt.Sprintf("node-%d", i+1), HTTPAddr: fmt.Sprintf("127.0.0.1:%d", 8000+i)}
	}
	return ms
}

// randMembers returns n members with distinct random names of 1..16 bytes
// drawn from a small alphabet, so shared prefixes are common.
func randMembers(r *rand.Rand, n int) []Member {
	const alphabet = "abc-xyz019"
	seen := make(map[string]bool, n)
	ms := make([]Member, 0, n)
	for len(ms) < n {
		b := make([]byte, 1+r.IntN(16))
		for i := range b {
			b[i] = alphabet[r.IntN(len(alphabet))]
		}
		if seen[string(b)] {
			continue
		}
		seen[string(b)] = true
		ms = append(ms, Member{Name: string(b), HTTPAddr: fmt.Sprintf("127.0.0.1:%d", 9000+len(ms))})
	}
	return ms
}

// shuffled returns a shuffled copy of ms.
func shuffled(r *rand.Rand, ms []Member) []Member {
	c := slices.Clone(ms)
	r.Shuffle(len(c), func(i, j int) { c[i], c[j] = c[j], c[i] })
	return c
}

// without returns a copy of ms without the member called name.
func without(ms []Member, name string) []Member {
	return slices.DeleteFunc(slices.Clone(ms), func(m Member) bool { return m.Name == name })
}

// hrw bounds nothing: plain rendezvous hashing.
var hrw = Options{Tolerance: math.Inf(1)}

// mustAssign is Assign plus the invariant check.
func mustAssign(t testing.TB, ms []Member, numSlots int) Table {
	t.Helper()
	return mustAssignWith(t, ms, numSlots, Options{})
}

// mustAssignHRW is plain rendezvous hashing plus the invariant check.
func mustAssignHRW(t testing.TB, ms []Member, numSlots int) Table {
	t.Helper()
	return mustAssignWith(t, ms, numSlots, hrw)
}

func mustAssignWith(t testing.TB, ms []Member, numSlots int, opts Options) Table {
	t.Helper()
	tab := AssignWith(ms, numSlots, opts)
	if err := tab.checkInvariants(); err != nil {
		t.Fatalf("AssignWith(%d members, %d slots, %+v): %v", len(ms), numSlots, opts, err)
	}
	return tab
}

// ownerName and followerName return "" for no member.
func ownerName(t Table, s int) string {
	m, _ := t.Owner(uint16(s))
	return m.Name
}

func followerName(t Table, s int) string {
	m, _ := t.Follower(uint16(s))
	return m.Name
}

// oracle ranks every distinct name for every slot the slow, obvious way:
// score all, sort by (score desc, name asc), take the first two.
func oracle(ms []Member, numSlots int, hash Hash) (owner, follower []string) {
	if hash == nil {
		hash = xxhash.Sum64
	}
	seen := map[string]bool{}
	var names []string
	for _, m := range ms {
		if !seen[m.Name] {
			seen[m.Name] = true
			names = append(names, m.Name)
		}
	}
	owner = make([]string, numSlots)
	follower = make([]string, numSlots)
	type scored struct {
		name  string
		score uint64
	}
	for s := range numSlots {
		var all []scored
		for _, n := range names {
			key := binary.BigEndian.AppendUint16([]byte(n), uint16(s))
			all = append(all, scored{n, hash(key)})
		}
		slices.SortFunc(all, func(a, b scored) int {
			return cmp.Or(cmp.Compare(b.score, a.score), cmp.Compare(a.name, b.name))
		})
		if len(all) > 0 {
			owner[s] = all[0].name
		}
		if len(all) > 1 {
			follower[s] = all[1].name
		}
	}
	return owner, follower
}

// checkTable checks tab's invariants, its String against want and every
// slot's owner and follower against an oracle's.
func checkTable(t *testing.T, tab Table, want string, wantOwner, wantFollower []string) {
	t.Helper()
	if err := tab.checkInvariants(); err != nil {
		t.Fatal(err)
	}
	if got := tab.String(); got != want {
		t.Errorf("String() =\n%s\nwant\n%s", got, want)
	}
	for s := range wantOwner {
		if got := ownerName(tab, s); got != wantOwner[s] {
			t.Errorf("Owner(%d) = %q, want oracle %q", s, got, wantOwner[s])
		}
		if got := followerName(tab, s); got != wantFollower[s] {
			t.Errorf("Follower(%d) = %q, want oracle %q", s, got, wantFollower[s])
		}
	}
}
