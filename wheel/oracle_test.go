package wheel

import (
	"container/heap"
	"fmt"
	"math/rand"
	"reflect"
	"strings"
	"testing"
	"testing/quick"
	"time"
)

// oracle is the deliberately naive reference scheduler the wheel is checked
// against: a container/heap of exact time.Time dues ordered by (due, id),
// plus a map for Cancel. It has no ticks, levels or overflow.
type oracle struct {
	now   time.Time
	items oracleHeap
	byID  map[string]*oracleItem
}

type oracleItem struct {
	id    string
	due   time.Time
	index int
}

type oracleHeap []*oracleItem

func (h oracleHeap) Len() int { return len(h) }
func (h oracleHeap) Less(i, j int) bool {
	if c := h[i].due.Compare(h[j].due); c != 0 {
		return c < 0
	}
	return h[i].id < h[j].id
}
func (h oracleHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *oracleHeap) Push(x any) {
	it := x.(*oracleItem)
	it.index = len(*h)
	*h = append(*h, it)
}
func (h *oracleHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	*h = old[:len(old)-1]
	return it
}

func newOracle(start time.Time) *oracle {
	return &oracle{now: start, byID: make(map[string]*oracleItem)}
}

func (o *oracle) Add(id string, due time.Time) {
	if it, ok := o.byID[id]; ok {
		it.due = due
		heap.Fix(&o.items, it.index)
		return
	}
	it := &oracleItem{id: id, due: due}
	o.byID[id] = it
	heap.Push(&o.items, it)
}

func (o *oracle) Cancel(id string) bool {
	it, ok := o.byID[id]
	if !ok {
		return false
	}
	heap.Remove(&o.items, it.index)
	delete(o.byID, id)
	return true
}

func (o *oracle) Due(id string) (time.Time, bool) {
	it, ok := o.byID[id]
	if !ok {
		return time.Time{}, false
	}
	return it.due, true
}

// Advance implements the documented contract directly: time never moves
// back, and every entry due at or before now comes out in (due, id) order.
func (o *oracle) Advance(now time.Time, dst []Entry) []Entry {
	if now.After(o.now) {
		o.now = now
	}
	for len(o.items) > 0 && !o.items[0].due.After(now) {
		it := heap.Pop(&o.items).(*oracleItem)
		delete(o.byID, it.id)
		dst = append(dst, Entry{ID: it.id, Due: it.due})
	}
	return dst
}

// Min returns the earliest due.
func (o *oracle) Min() (time.Time, bool) {
	if len(o.items) == 0 {
		return time.Time{}, false
	}
	return o.items[0].due, true
}

func (o *oracle) Len() int { return len(o.items) }

// opKind is one step of a test script.
type opKind int

const (
	opAdd         opKind = 1 + iota // Add(id, Now()+delta)
	opCancel                        // Cancel(id)
	opAdvance                       // Advance(Now()+delta); delta may be negative
	opAdvanceNext                   // Advance(Next())
)

func (k opKind) String() string {
	switch k {
	case opAdd:
		return "add"
	case opCancel:
		return "cancel"
	case opAdvance:
		return "advance"
	case opAdvanceNext:
		return "advance-next"
	}
	return fmt.Sprintf("opKind(%d)", int(k))
}

type op struct {
	kind  opKind
	id    string
	delta time.Duration
}

func (o op) String() string {
	switch o.kind {
	case opAdd:
		return fmt.Sprintf("add %s now%+v", o.id, o.delta)
	case opCancel:
		return "cancel " + o.id
	case opAdvance:
		return fmt.Sprintf("advance now%+v", o.delta)
	}
	return o.kind.String()
}

// geometry is the shape of a wheel under test.
type geometry struct {
	tick   time.Duration
	slots  int
	levels int
}

func (g geometry) String() string {
	return fmt.Sprintf("tick=%v,slots=%d,levels=%d", g.tick, g.slots, g.levels)
}

// testStart is the start time of every test wheel: a fixed wall time, no
// monotonic reading, so that tests are reproducible.
var testStart = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// runScript applies ops to a wheel and to the oracle and fails on the first
// difference: expiry sequences, Cancel results, Due, Len, the Next bound,
// or a broken invariant.
func runScript(t *testing.T, g geometry, ops []op) {
	t.Helper()
	if err := compareScript(g, ops); err != nil {
		t.Fatal(err)
	}
}

// compareScript is runScript returning the first difference as an error,
// for testing/quick.
func compareScript(g geometry, ops []op) error {
	w, err := New(testStart, g.tick, g.slots, g.levels)
	if err != nil {
		return fmt.Errorf("New(%v) = %v", g, err)
	}
	o := newOracle(testStart)
	var got, want []Entry
	var trace strings.Builder
	for n, step := range ops {
		fmt.Fprintf(&trace, "  %d: %v\n", n, step)
		fail := func(format string, args ...any) error {
			return fmt.Errorf("%v, after op %d (%v): %s\nops so far:\n%s", g, n, step, fmt.Sprintf(format, args...), trace.String())
		}
		switch step.kind {
		case opAdd:
			due := w.Now().Add(step.delta)
			w.Add(step.id, due)
			o.Add(step.id, due)
		case opCancel:
			if gotOK, wantOK := w.Cancel(step.id), o.Cancel(step.id); gotOK != wantOK {
				return fail("Cancel(%q) = %v, want %v", step.id, gotOK, wantOK)
			}
		case opAdvance, opAdvanceNext:
			now := w.Now().Add(step.delta)
			if step.kind == opAdvanceNext {
				next, ok := w.Next()
				if !ok {
					continue
				}
				now = next
			}
			fmt.Fprintf(&trace, "     now=%v\n", now.Sub(testStart))
			got = w.Advance(now, got[:0])
			want = o.Advance(now, want[:0])
			if !sameEntries(got, want) {
				return fail("Advance(%v) = %v, want %v", now.Sub(testStart), fmtEntries(got), fmtEntries(want))
			}
			for _, e := range got {
				if e.Due.After(now) {
					return fail("Advance(%v) returned %s due %v: early", now.Sub(testStart), e.ID, e.Due.Sub(testStart))
				}
			}
			if !w.Now().Equal(o.now) {
				return fail("Now() = %v, want %v", w.Now().Sub(testStart), o.now.Sub(testStart))
			}
		}
		if err := w.checkInvariants(); err != nil {
			return fail("checkInvariants: %v", err)
		}
		if w.Len() != o.Len() {
			return fail("Len() = %d, want %d", w.Len(), o.Len())
		}
		if step.id != "" {
			gd, gok := w.Due(step.id)
			wd, wok := o.Due(step.id)
			if gok != wok || !gd.Equal(wd) {
				return fail("Due(%q) = %v, %v, want %v, %v", step.id, gd, gok, wd, wok)
			}
		}
		next, ok := w.Next()
		least, wok := o.Min()
		switch {
		case ok != wok:
			return fail("Next() ok = %v, want %v", ok, wok)
		case ok && next.Before(w.Now()):
			return fail("Next() = %v, before Now() = %v", next.Sub(testStart), w.Now().Sub(testStart))
		case ok && next.After(least) && next.After(w.Now()):
			// A due in the past makes Now() the answer.
			return fail("Next() = %v, after earliest due %v and Now() %v", next.Sub(testStart), least.Sub(testStart), w.Now().Sub(testStart))
		}
	}
	return nil
}

func sameEntries(a, b []Entry) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].ID != b[i].ID || !a[i].Due.Equal(b[i].Due) {
			return false
		}
	}
	return true
}

func fmtEntries(es []Entry) string {
	var b strings.Builder
	b.WriteString("[")
	for i, e := range es {
		if i > 0 {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "%s@%v", e.ID, e.Due.Sub(testStart))
	}
	b.WriteString("]")
	return b.String()
}

// TestWheelMatchesOracle runs seeded random scripts on a range of wheel
// shapes, from degenerate (2 slots, 1 level: almost everything overflows)
// to the production shape.
func TestWheelMatchesOracle(t *testing.T) {
	geometries := []geometry{
		{tick: 1, slots: 2, levels: 1},
		{tick: 3, slots: 2, levels: 3},
		{tick: 7, slots: 4, levels: 2},
		{tick: time.Millisecond, slots: 8, levels: 3},
		{tick: 10 * time.Millisecond, slots: 64, levels: 2},
		{tick: 10 * time.Millisecond, slots: 256, levels: 4},
		{tick: time.Nanosecond, slots: 1024, levels: 3},
	}
	const seed = 20250101
	for gi, g := range geometries {
		t.Run(g.String(), func(t *testing.T) {
			rng := rand.New(rand.NewSource(seed + int64(gi)))
			ops := decodeOps(randomBytes(rng, 4*1500))
			if err := compareScript(g, ops); err != nil {
				t.Fatalf("seed %d: %v", seed+int64(gi), err)
			}
		})
	}
}

// script is a random encoded test script for testing/quick.
type script []byte

// Generate implements quick.Generator: 2 geometry bytes and 200 ops.
func (script) Generate(rng *rand.Rand, _ int) reflect.Value {
	return reflect.ValueOf(script(randomBytes(rng, 2+4*200)))
}

// TestQuickWheelMatchesOracle is the testing/quick form of FuzzWheel: 20
// random geometries × 200 ops from a fixed seed.
func TestQuickWheelMatchesOracle(t *testing.T) {
	const seed = 42
	cfg := &quick.Config{MaxCount: 20, Rand: rand.New(rand.NewSource(seed))}
	var lastErr error
	prop := func(s script) bool {
		g, ops := decodeScript(s)
		lastErr = compareScript(g, ops)
		return lastErr == nil
	}
	if err := quick.Check(prop, cfg); err != nil {
		t.Fatalf("seed %d: %v\n%v", seed, err, lastErr)
	}
}

func randomBytes(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	rng.Read(b)
	return b
}
