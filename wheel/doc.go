// Package wheel is a hierarchical timing wheel: a pure data structure that
// holds timers (an id and a due time) and hands back the ones that have come
// due, in a deterministic order, as the caller moves time forward.
//
// # What it is not
//
// It has no goroutines, no locks and no callbacks, and it never reads the
// clock: time enters only as values passed to New, Add and Advance. It does
// not run anything; Advance returns the expired entries and the caller
// decides what to do with them. In Chime, node/ owns one Wheel and one
// timer: it sets the timer to Next(), and when it fires calls Advance with
// the current time.
//
// # Concurrency
//
// A Wheel is not safe for concurrent use. One goroutine owns it (node/'s
// run loop); nothing in this package ever touches it from another goroutine.
//
// # Guarantees
//
//   - Never early: Advance(now) returns only entries with due <= now. An
//     entry in the current tick that is due after now stays in the wheel,
//     however fine or coarse the tick.
//   - Nothing is held back: Advance(now) returns every entry with
//     due <= now (within the representable range, see Time representation).
//   - Deterministic order: each Advance returns entries sorted by due time,
//     then by ID, independent of insertion order and map iteration.
//   - Next() is never before Now() and never after the earliest due, so a
//     timer set to it never sleeps past a due.
//
// # Structure and invariants
//
// The wheel counts ticks since start. Level k has slotsPerLevel buckets of
// slotsPerLevel^k ticks each. An entry whose tick t is after the current
// tick sits at the level of the highest base-slotsPerLevel digit in which t
// differs from the current tick, in the bucket named by that digit of t; if
// that digit lies above the top level, the entry is in an overflow list
// whose minimum is tracked, and which is re-examined only when time reaches
// that minimum's span. Entries whose tick is at or before the current tick
// (the current tick's entries, and dues added in the past) are in a small
// heap ordered by (due, id), from which Advance pops with nanosecond
// precision. A bitmap per level lets Advance and Next jump over empty
// buckets instead of walking tick by tick, so advancing ten years costs the
// same as advancing one tick when nothing is due in between.
//
// Invariants, checked by the unexported checkInvariants after every
// operation in tests (and after every mutating method in builds with
// -tags invariants):
//   - every entry is in exactly the bucket, overflow list or heap that its
//     due and the current tick select, with consistent links;
//   - a level's bitmap bit is set iff its bucket is non-empty;
//   - the id index holds exactly the linked entries, and Len() equals their
//     number; every other arena node is on the free list.
//
// # Memory
//
// Entries live in one slice of 32-byte nodes linked by int32 index (no
// pointer per timer besides the id string), plus one map[string]int32 entry
// for O(1) Cancel. Run BenchmarkAdd to see bytes per entry.
//
// # Time representation
//
// Dues are kept as nanoseconds since start (time.Time.Sub), so the wheel
// orders times as Sub does: by the monotonic reading if both times have
// one, otherwise by wall time. Due times handed back are start.Add(offset):
// Equal to what was passed in, but with start's Location and monotonic
// reading. A due about 292 years or more away from start (the range of
// time.Duration, for example the zero time.Time) saturates: it is stored
// with its exact time on the side and reported exactly. One that far in the
// past expires on the next Advance; one that far in the future never expires
// (the wheel's clock stops just short of start+292y, and Advance to a later
// time behaves as Advance to that limit). Advance with a now that far before
// start does nothing.
//
// # Complexity
//
// Add and Cancel are O(1), except for entries due within the current tick,
// which are in the heap: O(log r) for r such entries. Due, Len and Now are
// O(1). Next is O(levels × slotsPerLevel/64). Advance costs O(k log k) for
// the k entries it returns, O(1) per entry per cascade (at most levels
// cascades per entry), and a bitmap scan per non-empty bucket it reaches.
//
// # Usage
//
//	w, err := wheel.New(start, 10*time.Millisecond, 256, 4)
//	if err != nil { ... }
//	w.Add("task-1", start.Add(1500*time.Millisecond))
//	var fired []wheel.Entry
//	for {
//		next, ok := w.Next()
//		if !ok { break }
//		// node/ sets its timer to next and waits; here we jump.
//		fired = w.Advance(next, fired[:0])
//		for _, e := range fired { ... } // e.ID is due: e.Due <= next
//	}
package wheel
