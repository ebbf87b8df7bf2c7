package wheel

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"math/rand"
	"slices"
	"strings"
	"testing"
	"time"
)

// at returns testStart + d.
func at(d time.Duration) time.Time { return testStart.Add(d) }

func newTestWheel(t *testing.T, tick time.Duration, slots, levels int) *Wheel {
	t.Helper()
	w, err := New(testStart, tick, slots, levels)
	if err != nil {
		t.Fatalf("New(%v, %d, %d) = %v", tick, slots, levels, err)
	}
	return w
}

// check fails the test if an invariant is broken.
func check(t *testing.T, w *Wheel) {
	t.Helper()
	if err := w.checkInvariants(); err != nil {
		t.Fatalf("checkInvariants: %v", err)
	}
}

// advance calls Advance, checks the never-early property and the
// invariants, and returns the expired entries as "id@offset" strings.
func advance(t *testing.T, w *Wheel, now time.Time) []string {
	t.Helper()
	got := w.Advance(now, nil)
	check(t, w)
	var out []string
	for _, e := range got {
		if e.Due.After(now) {
			t.Fatalf("Advance(%v) returned %s due %v: early", now.Sub(testStart), e.ID, e.Due.Sub(testStart))
		}
		out = append(out, fmt.Sprintf("%s@%v", e.ID, e.Due.Sub(testStart)))
	}
	return out
}

// drain advances the wheel the way node/ drives it, to Next() until empty,
// and returns every expiry in order.
func drain(t *testing.T, w *Wheel) []string {
	t.Helper()
	var out []string
	for steps := 0; ; steps++ {
		next, ok := w.Next()
		if !ok {
			return out
		}
		if next.Before(w.Now()) {
			t.Fatalf("Next() = %v, before Now() = %v", next.Sub(testStart), w.Now().Sub(testStart))
		}
		if steps > 1_000_000 {
			t.Fatalf("drain: no progress after %d steps, Next() = %v", steps, next.Sub(testStart))
		}
		out = append(out, advance(t, w, next)...)
	}
}

func TestNew(t *testing.T) {
	tests := []struct {
		name          string
		tick          time.Duration
		slots, levels int
		want          []error // nil: no error
	}{
		{name: "production", tick: 10 * time.Millisecond, slots: 256, levels: 4},
		{name: "smallest", tick: 1, slots: 2, levels: 1},
		{name: "full 64-bit span", tick: 1, slots: 1 << 16, levels: 4},
		{name: "2 slots 64 levels", tick: 1, slots: 2, levels: 64},
		{name: "zero tick", tick: 0, slots: 256, levels: 4, want: []error{ErrTick}},
		{name: "negative tick", tick: -time.Second, slots: 256, levels: 4, want: []error{ErrTick}},
		{name: "one slot", tick: 1, slots: 1, levels: 4, want: []error{ErrSlots}},
		{name: "zero slots", tick: 1, slots: 0, levels: 4, want: []error{ErrSlots}},
		{name: "not a power of two", tick: 1, slots: 100, levels: 4, want: []error{ErrSlots}},
		{name: "too many slots", tick: 1, slots: 1 << 17, levels: 1, want: []error{ErrSlots}},
		{name: "zero levels", tick: 1, slots: 256, levels: 0, want: []error{ErrLevels}},
		{name: "span beyond 64 bits", tick: 1, slots: 256, levels: 9, want: []error{ErrLevels}},
		{name: "all bad", tick: 0, slots: 3, levels: -1, want: []error{ErrTick, ErrSlots, ErrLevels}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, err := New(testStart, tt.tick, tt.slots, tt.levels)
			if tt.want == nil {
				if err != nil || w == nil {
					t.Fatalf("New(%v, %d, %d) = %v, %v, want a wheel", tt.tick, tt.slots, tt.levels, w, err)
				}
				check(t, w)
				if !w.Now().Equal(testStart) || w.Len() != 0 {
					t.Errorf("new wheel: Now() = %v, Len() = %d, want start, 0", w.Now(), w.Len())
				}
				if _, ok := w.Next(); ok {
					t.Errorf("new wheel: Next() ok = true, want false")
				}
				return
			}
			if w != nil {
				t.Errorf("New(%v, %d, %d) returned a wheel with error %v", tt.tick, tt.slots, tt.levels, err)
			}
			for _, want := range tt.want {
				if !errors.Is(err, want) {
					t.Errorf("New(%v, %d, %d) = %v, want errors.Is %v", tt.tick, tt.slots, tt.levels, err, want)
				}
			}
		})
	}
}

// TestOrderAcrossLevels adds dues that land on every level, on level
// boundaries and in overflow, in scrambled order, and checks that they come
// out sorted by (due, id) whichever way time is advanced.
func TestOrderAcrossLevels(t *testing.T) {
	// 4 slots × 3 levels of 1ms: level 0 spans 4ms, level 1 16ms, level 2
	// 64ms; beyond 64ms is overflow.
	dues := []time.Duration{
		0, // due now
		1 * time.Millisecond,
		3*time.Millisecond + 999*time.Microsecond,
		4 * time.Millisecond, // first level-1 boundary
		4*time.Millisecond - 1,
		4*time.Millisecond + 1,
		15 * time.Millisecond,
		16 * time.Millisecond, // first level-2 boundary
		17 * time.Millisecond,
		63*time.Millisecond + 999*time.Microsecond,
		64 * time.Millisecond, // first overflow span
		200 * time.Millisecond,
		10 * time.Second,
		-5 * time.Millisecond, // in the past
	}
	var want []string
	type pair struct {
		id  string
		due time.Duration
	}
	var all []pair
	for i, d := range dues {
		all = append(all, pair{fmt.Sprintf("e%02d", i), d})
		all = append(all, pair{fmt.Sprintf("d%02d", i), d}) // same due: "d" sorts first
	}
	sorted := slices.Clone(all)
	slices.SortFunc(sorted, func(a, b pair) int {
		if a.due != b.due {
			return cmp.Compare(a.due, b.due)
		}
		return strings.Compare(a.id, b.id)
	})
	for _, p := range sorted {
		want = append(want, fmt.Sprintf("%s@%v", p.id, p.due))
	}

	strategies := []struct {
		name string
		run  func(t *testing.T, w *Wheel) []string
	}{
		{"to Next", drain},
		{"one jump", func(t *testing.T, w *Wheel) []string {
			t.Helper()
			return advance(t, w, at(time.Hour))
		}},
		{"every 1ms", func(t *testing.T, w *Wheel) []string {
			t.Helper()
			var out []string
			for d := time.Duration(0); d <= 11*time.Second; d += time.Millisecond {
				out = append(out, advance(t, w, at(d))...)
			}
			return out
		}},
		{"every 7us", func(t *testing.T, w *Wheel) []string {
			t.Helper()
			var out []string
			for d := time.Duration(0); d <= 300*time.Millisecond; d += 7 * time.Microsecond {
				out = append(out, advance(t, w, at(d))...)
			}
			return append(out, advance(t, w, at(time.Hour))...)
		}},
	}
	for _, s := range strategies {
		t.Run(s.name, func(t *testing.T) {
			w := newTestWheel(t, time.Millisecond, 4, 3)
			rng := rand.New(rand.NewSource(1))
			for _, i := range rng.Perm(len(all)) {
				w.Add(all[i].id, at(all[i].due))
				check(t, w)
			}
			got := s.run(t, w)
			if !slices.Equal(got, want) {
				t.Errorf("expiry order:\n got %v\nwant %v", got, want)
			}
			if w.Len() != 0 {
				t.Errorf("Len() = %d after draining, want 0", w.Len())
			}
		})
	}
}

// TestCascadeLevels checks single entries that must cascade through every
// level of the production shape before they expire, at their exact due.
func TestCascadeLevels(t *testing.T) {
	tests := []struct {
		name string
		due  time.Duration
	}{
		{"level 0", 2550 * time.Millisecond},
		{"level 1 boundary", 2560 * time.Millisecond},
		{"level 1", 600 * time.Second},
		{"level 2", 40 * time.Hour},
		{"level 3", 400 * 24 * time.Hour},
		{"overflow, 10 years", 10 * 365 * 24 * time.Hour},
		{"not on a tick", 40*time.Hour + 3*time.Millisecond + 7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newTestWheel(t, 10*time.Millisecond, 256, 4)
			w.Add("x", at(tt.due))
			check(t, w)
			if got := advance(t, w, at(tt.due-1)); len(got) != 0 {
				t.Fatalf("Advance(due-1ns) = %v, want nothing", got)
			}
			if next, ok := w.Next(); !ok || next.After(at(tt.due)) || next.Before(w.Now()) {
				t.Fatalf("Next() = %v, %v, want in [Now(), %v]", next.Sub(testStart), ok, tt.due)
			}
			want := []string{fmt.Sprintf("x@%v", tt.due)}
			if got := advance(t, w, at(tt.due)); !slices.Equal(got, want) {
				t.Fatalf("Advance(due) = %v, want %v", got, want)
			}
		})
	}
}

func TestCancel(t *testing.T) {
	tests := []struct {
		name string
		due  time.Duration // of "x", relative to Now() after a 5ms advance
	}{
		{"past due", -time.Second},
		{"current tick", 0},
		{"level 0", 2 * time.Millisecond},
		{"level 1", 9 * time.Millisecond},
		{"level 2", 40 * time.Millisecond},
		{"overflow", time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newTestWheel(t, time.Millisecond, 4, 3)
			advance(t, w, at(5*time.Millisecond))
			now := w.Now()
			w.Add("a", now.Add(tt.due))
			w.Add("x", now.Add(tt.due))
			w.Add("z", now.Add(tt.due))
			check(t, w)
			if !w.Cancel("x") {
				t.Fatalf("Cancel(x) = false, want true")
			}
			check(t, w)
			if w.Cancel("x") {
				t.Errorf("second Cancel(x) = true, want false")
			}
			if w.Cancel("missing") {
				t.Errorf("Cancel(missing) = true, want false")
			}
			if _, ok := w.Due("x"); ok {
				t.Errorf("Due(x) ok after Cancel")
			}
			if w.Len() != 2 {
				t.Errorf("Len() = %d, want 2", w.Len())
			}
			got := drain(t, w)
			want := []string{
				fmt.Sprintf("a@%v", now.Add(tt.due).Sub(testStart)),
				fmt.Sprintf("z@%v", now.Add(tt.due).Sub(testStart)),
			}
			if !slices.Equal(got, want) {
				t.Errorf("expired %v, want %v", got, want)
			}
		})
	}
}

// TestReplace re-adds an existing id: it must move, not duplicate.
func TestReplace(t *testing.T) {
	tests := []struct {
		name        string
		first, then time.Duration
	}{
		{"later", 3 * time.Millisecond, 50 * time.Millisecond},
		{"earlier", 50 * time.Millisecond, 3 * time.Millisecond},
		{"into the past", time.Hour, -time.Hour},
		{"out of overflow", 10 * time.Hour, 7 * time.Millisecond},
		{"into overflow", 7 * time.Millisecond, 10 * time.Hour},
		{"same due", 9 * time.Millisecond, 9 * time.Millisecond},
		{"within the current tick", 100 * time.Microsecond, 900 * time.Microsecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newTestWheel(t, time.Millisecond, 4, 3)
			w.Add("x", at(tt.first))
			check(t, w)
			w.Add("x", at(tt.then))
			check(t, w)
			if w.Len() != 1 {
				t.Fatalf("Len() = %d, want 1", w.Len())
			}
			if due, ok := w.Due("x"); !ok || !due.Equal(at(tt.then)) {
				t.Fatalf("Due(x) = %v, %v, want %v", due.Sub(testStart), ok, tt.then)
			}
			got := drain(t, w)
			want := []string{fmt.Sprintf("x@%v", tt.then)}
			if !slices.Equal(got, want) {
				t.Errorf("expired %v, want %v", got, want)
			}
		})
	}
}

// TestPastDue: a due at or before the current time expires on the next
// Advance, even one that does not move time.
func TestPastDue(t *testing.T) {
	w := newTestWheel(t, 10*time.Millisecond, 256, 4)
	advance(t, w, at(time.Hour))
	w.Add("now", at(time.Hour))
	w.Add("old", at(-time.Hour))
	w.Add("before start", testStart.Add(-24*time.Hour))
	w.Add("future", at(time.Hour+time.Millisecond))
	check(t, w)
	if next, ok := w.Next(); !ok || !next.Equal(w.Now()) {
		t.Fatalf("Next() = %v, %v, want Now() = %v", next.Sub(testStart), ok, w.Now().Sub(testStart))
	}
	got := advance(t, w, w.Now())
	want := []string{"before start@-24h0m0s", "old@-1h0m0s", "now@1h0m0s"}
	if !slices.Equal(got, want) {
		t.Fatalf("Advance(Now()) = %v, want %v", got, want)
	}
	if w.Len() != 1 {
		t.Errorf("Len() = %d, want 1", w.Len())
	}
}

// TestWithinTick: buckets are tick-sized but expiry is exact: an entry in
// the current tick that is due after now stays.
func TestWithinTick(t *testing.T) {
	w := newTestWheel(t, 10*time.Millisecond, 256, 4)
	w.Add("b", at(15*time.Millisecond))
	w.Add("a", at(11*time.Millisecond))
	steps := []struct {
		now  time.Duration
		want []string
	}{
		{10 * time.Millisecond, nil},
		{11*time.Millisecond - 1, nil},
		{11 * time.Millisecond, []string{"a@11ms"}},
		{14*time.Millisecond + 999999, nil},
		{15 * time.Millisecond, []string{"b@15ms"}},
	}
	for _, s := range steps {
		if got := advance(t, w, at(s.now)); !slices.Equal(got, s.want) {
			t.Fatalf("Advance(%v) = %v, want %v", s.now, got, s.want)
		}
		if next, ok := w.Next(); ok && next.Before(at(s.now)) {
			t.Fatalf("after Advance(%v): Next() = %v, before now", s.now, next.Sub(testStart))
		}
	}
}

// TestAdvanceBackwards: a now before the current time does not move the
// clock back, but entries due by that now are still returned.
func TestAdvanceBackwards(t *testing.T) {
	w := newTestWheel(t, time.Millisecond, 4, 3)
	advance(t, w, at(time.Second))
	w.Add("past", at(500*time.Millisecond))
	w.Add("recent", at(900*time.Millisecond))
	w.Add("future", at(2*time.Second))
	tests := []struct {
		name string
		now  time.Duration
		want []string
	}{
		{"before every due", 100 * time.Millisecond, nil},
		{"after one past due", 600 * time.Millisecond, []string{"past@500ms"}},
		{"far before start", -10 * time.Hour, nil},
		{"current time", time.Second, []string{"recent@900ms"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := advance(t, w, at(tt.now)); !slices.Equal(got, tt.want) {
				t.Errorf("Advance(%v) = %v, want %v", tt.now, got, tt.want)
			}
			if !w.Now().Equal(at(time.Second)) {
				t.Errorf("Now() = %v, want 1s (time must not move back)", w.Now().Sub(testStart))
			}
		})
	}
	if w.Len() != 1 {
		t.Errorf("Len() = %d, want 1", w.Len())
	}
}

func TestNext(t *testing.T) {
	tests := []struct {
		name string
		dues []time.Duration // added after advancing to 1s
		// want bounds Next(): lo <= Next() <= hi. The lower bound is
		// always Now() = 1s.
		hi time.Duration
	}{
		{"past due is Now", []time.Duration{time.Millisecond, time.Hour}, time.Second},
		{"current tick is exact", []time.Duration{time.Second + 300*time.Microsecond}, time.Second + 300*time.Microsecond},
		{"level 0 is its tick", []time.Duration{time.Second + 2*time.Millisecond + 5}, time.Second + 2*time.Millisecond + 5},
		{"higher level is a lower bound", []time.Duration{time.Second + 30*time.Millisecond + 5}, time.Second + 30*time.Millisecond + 5},
		{"overflow is a lower bound", []time.Duration{24 * time.Hour}, 24 * time.Hour},
		{"earliest wins", []time.Duration{24 * time.Hour, time.Second + 30*time.Millisecond, time.Second + 2*time.Millisecond}, time.Second + 2*time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newTestWheel(t, time.Millisecond, 4, 3)
			advance(t, w, at(time.Second))
			for i, d := range tt.dues {
				w.Add(fmt.Sprint(i), at(d))
			}
			next, ok := w.Next()
			if !ok || next.Before(w.Now()) || next.After(at(tt.hi)) {
				t.Fatalf("Next() = %v, %v, want in [1s, %v]", next.Sub(testStart), ok, tt.hi)
			}
			// Following Next() reaches the earliest due with no early fire
			// and at most levels+1 empty wake-ups before the expiry.
			const maxWakeups = 3 + 2
			for range maxWakeups {
				if got := advance(t, w, next); len(got) > 0 {
					return
				}
				next, _ = w.Next()
			}
			t.Fatalf("no expiry after %d wake-ups at Next()", maxWakeups)
		})
	}
	t.Run("empty", func(t *testing.T) {
		w := newTestWheel(t, time.Millisecond, 4, 3)
		w.Add("x", at(time.Hour))
		w.Cancel("x")
		if next, ok := w.Next(); ok {
			t.Errorf("Next() = %v, true on an empty wheel", next)
		}
	})
}

// TestNeverEarly drives seeded random workloads, advancing to random times
// and to Next(), and checks after each step that nothing expired early and
// that nothing due was left behind.
func TestNeverEarly(t *testing.T) {
	const seed = 7
	rng := rand.New(rand.NewSource(seed))
	w := newTestWheel(t, 10*time.Millisecond, 16, 3) // small span: overflow is common
	dues := make(map[string]time.Time)
	for step := range 5000 {
		switch rng.Intn(4) {
		case 0, 1:
			id := fmt.Sprint("t", rng.Intn(200))
			due := w.Now().Add(time.Duration(rng.Int63n(int64(3*time.Minute))) - 10*time.Second)
			w.Add(id, due)
			dues[id] = due
		case 2:
			now := w.Now().Add(time.Duration(rng.Int63n(int64(2 * time.Second))))
			if rng.Intn(2) == 0 {
				if next, ok := w.Next(); ok {
					now = next
				}
			}
			for _, e := range w.Advance(now, nil) {
				if e.Due.After(now) {
					t.Fatalf("seed %d step %d: %s due %v returned at %v", seed, step, e.ID, e.Due, now)
				}
				if !e.Due.Equal(dues[e.ID]) {
					t.Fatalf("seed %d step %d: %s due %v, added with %v", seed, step, e.ID, e.Due, dues[e.ID])
				}
				delete(dues, e.ID)
			}
			for id, due := range dues {
				if !due.After(now) {
					t.Fatalf("seed %d step %d: %s due %v still pending at %v", seed, step, id, due, now)
				}
			}
		case 3:
			id := fmt.Sprint("t", rng.Intn(200))
			_, had := dues[id]
			if got := w.Cancel(id); got != had {
				t.Fatalf("seed %d step %d: Cancel(%s) = %v, want %v", seed, step, id, got, had)
			}
			delete(dues, id)
		}
		check(t, w)
		if w.Len() != len(dues) {
			t.Fatalf("seed %d step %d: Len() = %d, want %d", seed, step, w.Len(), len(dues))
		}
	}
}

// TestManyTimers drains 100k timers spread over an hour, driven by Next().
func TestManyTimers(t *testing.T) {
	n := 100_000
	if invariantsEnabled {
		n = 2_000 // every Add checks all n entries: keep it linear-ish
	}
	rng := rand.New(rand.NewSource(3))
	w := newTestWheel(t, 10*time.Millisecond, 256, 4)
	for i := range n {
		w.Add(fmt.Sprintf("t%06d", i), at(time.Duration(rng.Int63n(int64(time.Hour)))))
	}
	check(t, w)
	if w.Len() != n {
		t.Fatalf("Len() = %d, want %d", w.Len(), n)
	}
	var (
		count, wakeups int
		last           Entry
		buf            []Entry
	)
	for {
		next, ok := w.Next()
		if !ok {
			break
		}
		wakeups++
		buf = w.Advance(next, buf[:0])
		for _, e := range buf {
			if e.Due.After(next) {
				t.Fatalf("%s due %v returned at %v: early", e.ID, e.Due, next)
			}
			if count > 0 && (e.Due.Before(last.Due) || e.Due.Equal(last.Due) && e.ID <= last.ID) {
				t.Fatalf("%s@%v returned after %s@%v: out of order", e.ID, e.Due, last.ID, last.Due)
			}
			last = e
			count++
		}
	}
	check(t, w)
	if count != n || w.Len() != 0 {
		t.Fatalf("expired %d, Len() = %d, want %d, 0", count, w.Len(), n)
	}
	// Every entry costs at most levels+1 wake-ups; most share them.
	if wakeups > 5*n {
		t.Errorf("%d wake-ups for %d timers, want at most %d", wakeups, n, 5*n)
	}
}

// TestSaturatedDues covers dues outside time.Duration's range from start.
func TestSaturatedDues(t *testing.T) {
	w := newTestWheel(t, 10*time.Millisecond, 256, 4)
	ancient := time.Time{} // year 1: about 2024 years before start
	ancient2 := ancient.Add(time.Hour)
	distant := testStart.AddDate(300, 0, 0)
	w.Add("b", ancient2)
	w.Add("a", ancient2)
	w.Add("z", ancient)
	w.Add("never", distant)
	check(t, w)
	for id, want := range map[string]time.Time{"z": ancient, "a": ancient2, "never": distant} {
		if got, ok := w.Due(id); !ok || !got.Equal(want) {
			t.Errorf("Due(%s) = %v, %v, want %v exactly", id, got, ok, want)
		}
	}
	if got := w.Advance(time.Time{}, nil); len(got) != 0 {
		t.Errorf("Advance(zero time) = %v, want nothing (now not representable)", got)
	}
	got := w.Advance(w.Now(), nil)
	check(t, w)
	wantIDs := []string{"z", "a", "b"} // exact times first, then ids
	var gotIDs []string
	for _, e := range got {
		gotIDs = append(gotIDs, e.ID)
	}
	if !slices.Equal(gotIDs, wantIDs) || !got[0].Due.Equal(ancient) {
		t.Errorf("Advance(Now()) = %v, want ids %v, first due %v", got, wantIDs, ancient)
	}
	// The wheel's clock saturates short of start+292y: the 300-year due
	// never expires, even when asked about a later time.
	if got := w.Advance(testStart.AddDate(400, 0, 0), nil); len(got) != 0 {
		t.Errorf("Advance(+400y) = %v, want nothing", got)
	}
	check(t, w)
	if next, ok := w.Next(); !ok || next.After(distant) || next.Before(w.Now()) {
		t.Errorf("Next() = %v, %v, want in [Now(), %v]", next, ok, distant)
	}
	if !w.Cancel("never") || w.Len() != 0 {
		t.Errorf("Cancel(never) failed or Len() = %d", w.Len())
	}
	check(t, w)
}

// TestDueAndLen checks the accessors through a life cycle.
func TestDueAndLen(t *testing.T) {
	w := newTestWheel(t, time.Millisecond, 8, 2)
	steps := []struct {
		name    string
		do      func()
		wantLen int
		id      string
		wantDue time.Duration
		wantOK  bool
	}{
		{"add", func() { w.Add("x", at(5*time.Millisecond)) }, 1, "x", 5 * time.Millisecond, true},
		{"add another", func() { w.Add("y", at(time.Hour)) }, 2, "y", time.Hour, true},
		{"replace", func() { w.Add("x", at(7*time.Millisecond)) }, 2, "x", 7 * time.Millisecond, true},
		{"expire", func() { w.Advance(at(7*time.Millisecond), nil) }, 1, "x", 0, false},
		{"cancel", func() { w.Cancel("y") }, 0, "y", 0, false},
		{"reuse id", func() { w.Add("x", at(9*time.Millisecond)) }, 1, "x", 9 * time.Millisecond, true},
	}
	for _, s := range steps {
		s.do()
		check(t, w)
		if w.Len() != s.wantLen {
			t.Errorf("%s: Len() = %d, want %d", s.name, w.Len(), s.wantLen)
		}
		due, ok := w.Due(s.id)
		if ok != s.wantOK || ok && !due.Equal(at(s.wantDue)) {
			t.Errorf("%s: Due(%s) = %v, %v, want %v, %v", s.name, s.id, due.Sub(testStart), ok, s.wantDue, s.wantOK)
		}
	}
}

// TestCheckInvariantsCatchesCorruption makes sure the checker the other
// tests rely on actually fails on broken structures.
func TestCheckInvariantsCatchesCorruption(t *testing.T) {
	tests := []struct {
		name    string
		corrupt func(w *Wheel)
	}{
		{"due moved to another bucket", func(w *Wheel) { w.nodes[w.index["level1"]].due += int64(20 * time.Millisecond) }},
		{"bitmap bit cleared", func(w *Wheel) { clear(w.occupied) }},
		{"bitmap bit set on empty bucket", func(w *Wheel) { w.occupied[0] |= 1 << 3 }},
		{"index points elsewhere", func(w *Wheel) { w.index["level1"] = w.index["overflow"] }},
		{"stale index entry", func(w *Wheel) { w.index["ghost"] = 0 }},
		{"ready heap out of order", func(w *Wheel) { w.ready[0], w.ready[1] = w.ready[1], w.ready[0] }},
		{"broken prev link", func(w *Wheel) { w.nodes[w.index["level0a"]].prev = nilIdx }},
		{"ovMin above an overflow entry", func(w *Wheel) { w.ovMin = math.MaxUint64 }},
		{"cur out of step with now", func(w *Wheel) { w.cur++ }},
		{"node lost", func(w *Wheel) { w.heads[w.overflow()] = nilIdx }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newTestWheel(t, time.Millisecond, 4, 2)
			advance(t, w, at(100*time.Millisecond))
			w.Add("ready1", at(100*time.Millisecond+5))
			w.Add("ready2", at(100*time.Millisecond+7))
			w.Add("level0a", at(102*time.Millisecond))
			w.Add("level0b", at(102*time.Millisecond))
			w.Add("level1", at(107*time.Millisecond))
			w.Add("overflow", at(time.Second))
			check(t, w)
			tt.corrupt(w)
			if err := w.checkInvariants(); err == nil {
				t.Errorf("checkInvariants() = nil after corruption, want an error")
			}
		})
	}
}
