package wheel

import (
	"container/heap"
	"fmt"
	"math/rand"
	"runtime"
	"testing"
	"time"
)

// Benchmarks compare the wheel (10ms tick, 256 slots, 4 levels) with a
// container/heap baseline offering the same operations (index-tracking heap
// plus a map for Cancel by id). Each b.Loop iteration handles a whole batch
// of n timers, so ns/op is per batch; the per-timer figures are the custom
// metrics ns/add, ns/cancel and ns/expire, and B/entry is the heap growth
// per timer after GC (ids excluded: they exist before the structure).
//
//	go test -run='^$' -bench=. -benchmem ./wheel

// timers is what the benchmarks need from either implementation.
type timers interface {
	Add(id string, due time.Time)
	Cancel(id string) bool
	Advance(now time.Time, dst []Entry) []Entry
	Next() (time.Time, bool)
	Len() int
}

var (
	_ timers = (*Wheel)(nil)
	_ timers = (*heapTimers)(nil)
)

// heapTimers is the baseline: a container/heap of (due, id) with each item
// tracking its index so Cancel is O(log n).
type heapTimers struct {
	start time.Time
	now   int64
	h     timerHeap
	byID  map[string]*timerItem
}

type timerItem struct {
	id    string
	due   int64 // ns since start
	index int
}

type timerHeap []*timerItem

func (h timerHeap) Len() int { return len(h) }
func (h timerHeap) Less(i, j int) bool {
	if h[i].due != h[j].due {
		return h[i].due < h[j].due
	}
	return h[i].id < h[j].id
}
func (h timerHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *timerHeap) Push(x any) {
	it := x.(*timerItem)
	it.index = len(*h)
	*h = append(*h, it)
}
func (h *timerHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return it
}

func newHeapTimers(start time.Time) *heapTimers {
	return &heapTimers{start: start, byID: make(map[string]*timerItem)}
}

func (t *heapTimers) Add(id string, due time.Time) {
	d := int64(due.Sub(t.start))
	if it, ok := t.byID[id]; ok {
		it.due = d
		heap.Fix(&t.h, it.index)
		return
	}
	it := &timerItem{id: id, due: d}
	t.byID[id] = it
	heap.Push(&t.h, it)
}

func (t *heapTimers) Cancel(id string) bool {
	it, ok := t.byID[id]
	if !ok {
		return false
	}
	heap.Remove(&t.h, it.index)
	delete(t.byID, id)
	return true
}

func (t *heapTimers) Advance(now time.Time, dst []Entry) []Entry {
	limit := int64(now.Sub(t.start))
	t.now = max(t.now, limit)
	for len(t.h) > 0 && t.h[0].due <= limit {
		it := heap.Pop(&t.h).(*timerItem)
		delete(t.byID, it.id)
		dst = append(dst, Entry{ID: it.id, Due: t.start.Add(time.Duration(it.due))})
	}
	return dst
}

func (t *heapTimers) Next() (time.Time, bool) {
	if len(t.h) == 0 {
		return time.Time{}, false
	}
	return t.start.Add(time.Duration(max(t.h[0].due, t.now))), true
}

func (t *heapTimers) Len() int { return len(t.h) }

// benchImpls are the implementations under comparison.
var benchImpls = []struct {
	name string
	make func() timers
}{
	{"wheel", func() timers {
		w, err := New(testStart, 10*time.Millisecond, 256, 4)
		if err != nil {
			panic(err)
		}
		return w
	}},
	{"heap", func() timers { return newHeapTimers(testStart) }},
}

var benchSizes = []int{1_000, 100_000, 1_000_000}

// workload returns n ids and dues uniform over one hour from testStart.
func workload(n int) ([]string, []time.Time) {
	rng := rand.New(rand.NewSource(int64(n)))
	ids := make([]string, n)
	dues := make([]time.Time, n)
	for i := range n {
		ids[i] = fmt.Sprintf("task-%07d", i)
		dues[i] = testStart.Add(time.Duration(rng.Int63n(int64(time.Hour))))
	}
	return ids, dues
}

func fill(t timers, ids []string, dues []time.Time) {
	for i, id := range ids {
		t.Add(id, dues[i])
	}
}

// perTimer reports the loop's measured time per timer under unit.
func perTimer(b *testing.B, n int, unit string) {
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), unit)
}

// bytesPerEntry returns the heap growth, after GC, of one structure
// holding every timer, per timer.
func bytesPerEntry(mk func() timers, ids []string, dues []time.Time) float64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	t := mk()
	fill(t, ids, dues)
	runtime.GC()
	runtime.ReadMemStats(&after)
	// Keep the inputs alive too: if dues died here, the GC would free
	// 24 B per timer and the figure would come out too low.
	runtime.KeepAlive(t)
	runtime.KeepAlive(ids)
	runtime.KeepAlive(dues)
	return float64(after.HeapAlloc-before.HeapAlloc) / float64(len(ids))
}

// BenchmarkAdd inserts n timers into an empty structure.
func BenchmarkAdd(b *testing.B) {
	for _, impl := range benchImpls {
		for _, n := range benchSizes {
			b.Run(fmt.Sprintf("impl=%s/n=%d", impl.name, n), func(b *testing.B) {
				ids, dues := workload(n)
				b.ReportAllocs()
				for b.Loop() {
					fill(impl.make(), ids, dues)
				}
				perTimer(b, n, "ns/add")
				b.ReportMetric(bytesPerEntry(impl.make, ids, dues), "B/entry")
			})
		}
	}
}

// BenchmarkCancel cancels all n timers, in random order, from a full
// structure (built with the timer stopped).
func BenchmarkCancel(b *testing.B) {
	for _, impl := range benchImpls {
		for _, n := range benchSizes {
			b.Run(fmt.Sprintf("impl=%s/n=%d", impl.name, n), func(b *testing.B) {
				ids, dues := workload(n)
				order := rand.New(rand.NewSource(1)).Perm(n)
				b.ReportAllocs()
				for b.Loop() {
					b.StopTimer()
					t := impl.make()
					fill(t, ids, dues)
					b.StartTimer()
					for _, i := range order {
						t.Cancel(ids[i])
					}
				}
				perTimer(b, n, "ns/cancel")
			})
		}
	}
}

// BenchmarkAdvance expires all n timers (spread over an hour) the way
// node/ drives the structure: Advance to Next() until empty. It measures
// processing cost, not waiting.
func BenchmarkAdvance(b *testing.B) {
	for _, impl := range benchImpls {
		for _, n := range benchSizes {
			b.Run(fmt.Sprintf("impl=%s/n=%d", impl.name, n), func(b *testing.B) {
				ids, dues := workload(n)
				var dst []Entry
				b.ReportAllocs()
				for b.Loop() {
					b.StopTimer()
					t := impl.make()
					fill(t, ids, dues)
					b.StartTimer()
					for {
						next, ok := t.Next()
						if !ok {
							break
						}
						dst = t.Advance(next, dst[:0])
					}
				}
				perTimer(b, n, "ns/expire")
			})
		}
	}
}
