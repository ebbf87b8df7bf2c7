package wheel

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Errors returned by New, joined with errors.Join when several arguments are
// bad. Match them with errors.Is.
var (
	// ErrTick means the tick was not positive.
	ErrTick = errors.New("wheel: tick must be positive")
	// ErrSlots means slotsPerLevel was not a power of two in [2, 65536].
	ErrSlots = errors.New("wheel: slotsPerLevel must be a power of two in [2, 65536]")
	// ErrLevels means levels was below 1 or slotsPerLevel^levels exceeds 2^64.
	ErrLevels = errors.New("wheel: levels must be >= 1 and slotsPerLevel^levels <= 2^64")
)

// maxSlots bounds one level's slot count: 65536 slots cost 256 KiB of bucket
// heads per level, and larger levels only make the bitmap scan slower.
const maxSlots = 1 << 16

// Entry is one expired timer, as returned by Advance.
type Entry struct {
	// ID is the id passed to Add.
	ID string
	// Due is the due time passed to Add. It is Equal to the original, but
	// may carry the wheel's start Location and monotonic reading instead of
	// the original's (see the package doc on time representation).
	Due time.Time
}

// Wheel is a hierarchical timing wheel. The zero value is not usable; call
// New. A Wheel is not safe for concurrent use: one goroutine owns it.
type Wheel struct {
	start  time.Time
	tick   int64  // resolution in nanoseconds, > 0
	bits   uint   // log2(slots per level)
	slots  int    // slots per level
	levels int    // number of levels
	mask   uint64 // slots - 1

	now int64  // current time in ns since start; never decreases, >= 0
	cur uint64 // current tick: now / tick

	arena // entries, free list and id index (arena.go)

	// Level buckets (bucket.go). heads holds levels*slots bucket heads,
	// then one more for the overflow list. occupied has one bit per level
	// bucket (not the overflow list), set iff the bucket is non-empty.
	heads    []int32
	occupied []uint64
	words    int    // bitmap words per level
	ovMin    uint64 // lower bound on every overflow tick; MaxUint64 if none

	// ready is a min-heap, by (due, id), of the entries whose tick is at or
	// before cur (ready.go). Each entry's heap position is in node.prev.
	ready []int32
}

// New returns a wheel whose current time is start.
//
// tick is the resolution (10ms is the intended default); slotsPerLevel (a
// power of two, e.g. 256) and levels (e.g. 4) bound the span that the levels
// cover: slotsPerLevel^levels ticks, about 497 days for 256×4 at 10ms.
// Entries due beyond the span wait in an overflow list that is re-examined as
// time advances, so any due within the representable range works.
//
// Bad arguments return an error wrapping ErrTick, ErrSlots or ErrLevels
// (several joined with errors.Join); New never panics.
func New(start time.Time, tick time.Duration, slotsPerLevel, levels int) (*Wheel, error) {
	var errs []error
	if tick <= 0 {
		errs = append(errs, fmt.Errorf("%w: got %v", ErrTick, tick))
	}
	b := 0
	if slotsPerLevel < 2 || slotsPerLevel > maxSlots || slotsPerLevel&(slotsPerLevel-1) != 0 {
		errs = append(errs, fmt.Errorf("%w: got %d", ErrSlots, slotsPerLevel))
	} else {
		for 1<<b < slotsPerLevel {
			b++
		}
	}
	if levels < 1 || (b > 0 && levels > 64/b) {
		errs = append(errs, fmt.Errorf("%w: got %d levels of %d slots", ErrLevels, levels, slotsPerLevel))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	words := (slotsPerLevel + 63) / 64
	w := &Wheel{
		start:    start,
		tick:     int64(tick),
		bits:     uint(b),
		slots:    slotsPerLevel,
		levels:   levels,
		mask:     uint64(slotsPerLevel - 1),
		arena:    newArena(),
		heads:    make([]int32, levels*slotsPerLevel+1),
		occupied: make([]uint64, levels*words),
		words:    words,
		ovMin:    math.MaxUint64,
	}
	for i := range w.heads {
		w.heads[i] = nilIdx
	}
	return w, nil
}

// Add schedules id at due. If id is already present it is moved to the new
// due (replace). A due at or before the current time expires on the next
// Advance.
//
// O(1), except that an entry due within the current tick goes into a small
// heap: O(log r) for r such entries.
func (w *Wheel) Add(id string, due time.Time) {
	off, saturated := w.offset(due)
	i, ok := w.index[id]
	if ok {
		w.unlink(i)
		w.forgetExact(i)
	} else {
		i = w.alloc(id)
	}
	w.nodes[i].due = off
	if saturated {
		w.rememberExact(i, due)
	}
	w.place(i)
	if invariantsEnabled {
		w.mustCheck("Add")
	}
}

// Cancel removes id and reports whether it was present. O(1) (O(log r) for
// an entry due within the current tick, see Add).
func (w *Wheel) Cancel(id string) bool {
	i, ok := w.index[id]
	if !ok {
		return false
	}
	w.unlink(i)
	w.release(i)
	if invariantsEnabled {
		w.mustCheck("Cancel")
	}
	return true
}

// Due returns the due time of id and whether it is present. O(1).
func (w *Wheel) Due(id string) (time.Time, bool) {
	i, ok := w.index[id]
	if !ok {
		return time.Time{}, false
	}
	return w.dueTime(i), true
}

// Advance moves the wheel's current time to now and appends to dst every
// entry with due <= now, removing them. The appended entries are ordered by
// due time, then by ID.
//
// Advance never returns an entry whose due is after now, even though
// buckets are tick-sized: an entry in the current tick that is due after now
// stays in the wheel.
//
// If now is before the current time, the current time does not move back,
// but entries due at or before now (ones added in the past) are still
// returned. If now is so far before the wheel's start that it cannot be
// represented (see the package doc), Advance returns dst unchanged.
//
// Cost: O(k log k) for k expired entries, plus O(1) per entry for each
// cascade between levels, plus O(levels × slotsPerLevel/64) bitmap words per
// non-empty bucket reached. Empty stretches of time are skipped, not walked.
func (w *Wheel) Advance(now time.Time, dst []Entry) []Entry {
	d := now.Sub(w.start)
	if d == math.MinInt64 {
		return dst
	}
	limit := int64(d)
	if limit == math.MaxInt64 {
		// Saturated: keep it below the "never" offset so that entries whose
		// due saturated high never expire early.
		limit = math.MaxInt64 - 1
	}
	if limit > w.now {
		target := uint64(limit / w.tick)
		if target > w.cur {
			// Everything ready has tick <= cur < target: all of it is due.
			dst = w.drainReady(dst)
			for {
				b, at, ok := w.nextEvent()
				if !ok || at > target {
					break
				}
				w.cur = at
				w.cascade(b)
				if at < target {
					dst = w.drainReady(dst)
				}
			}
			w.cur = target
		}
		w.now = limit
	}
	for len(w.ready) > 0 {
		i := w.ready[0]
		if w.nodes[i].due > limit {
			break
		}
		w.readyPop()
		dst = append(dst, w.entry(i))
		w.release(i)
	}
	if invariantsEnabled {
		w.mustCheck("Advance")
	}
	return dst
}

// Next returns a time at or before the earliest due in the wheel, and false
// if the wheel is empty. The time is never before Now(), so a driver can
// set its timer to it; it may be earlier than the earliest due (a bucket's
// start rather than an entry's exact due), in which case Advance at that
// time returns nothing and the driver asks Next again. Each entry causes at
// most levels+1 such wake-ups.
//
// O(levels × slotsPerLevel/64) in the worst case; O(1) when an entry is due
// within the current tick.
func (w *Wheel) Next() (time.Time, bool) {
	if len(w.ready) > 0 {
		d := max(w.nodes[w.ready[0]].due, w.now)
		return w.start.Add(time.Duration(d)), true
	}
	_, at, ok := w.nextEvent()
	if !ok {
		return time.Time{}, false
	}
	return w.start.Add(time.Duration(int64(at) * w.tick)), true
}

// Len returns the number of entries in the wheel. O(1).
func (w *Wheel) Len() int { return len(w.index) }

// Now returns the wheel's current time: start, or the latest time passed to
// Advance (capped as the package doc describes).
func (w *Wheel) Now() time.Time { return w.start.Add(time.Duration(w.now)) }

// offset converts t to nanoseconds since start. saturated reports that the
// offset was clamped to the int64 range (t is about 292 years or more from
// start); such an entry keeps its exact time on the side (arena.go).
func (w *Wheel) offset(t time.Time) (off int64, saturated bool) {
	d := t.Sub(w.start)
	return int64(d), d == math.MinInt64 || d == math.MaxInt64
}

// entry returns entry i in the form Advance reports it.
func (w *Wheel) entry(i int32) Entry {
	return Entry{ID: w.nodes[i].id, Due: w.dueTime(i)}
}

// dueTime returns the due time of entry i.
func (w *Wheel) dueTime(i int32) time.Time {
	d := w.nodes[i].due
	if d == math.MinInt64 || d == math.MaxInt64 {
		return w.exact[i]
	}
	return w.start.Add(time.Duration(d))
}

// tickOf returns the tick containing offset d, rounding toward minus
// infinity so that offsets before start land in earlier ticks.
func (w *Wheel) tickOf(d int64) int64 {
	t := d / w.tick
	if d%w.tick != 0 && d < 0 {
		t--
	}
	return t
}
