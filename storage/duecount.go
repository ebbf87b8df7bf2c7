package storage

import (
	"encoding/binary"
	"fmt"
	"time"
)

// DueCountQuery asks CountDue for the fires due in [From, From+Hours h).
type DueCountQuery struct {
	// From is the start of the window (Unix ns), usually now.
	From int64
	// Hours is the number of one-hour buckets, at least 1.
	Hours int
	// MaxKeys bounds the keys the scan visits (at least 1): when it is
	// reached, the answer is cut short (DueCounts.Truncated).
	MaxKeys int
	// PerSlot counts each slot's fires in the window too (DueCounts.Slots).
	PerSlot bool
}

// DueCounts is CountDue's answer. Counts cover only the slots owned
// passed, and only wakes below CompleteUntil: a cut-short scan leaves the
// buckets at and after CompleteUntil at zero rather than half counted.
type DueCounts struct {
	// Hours[i] counts the due index entries with wake in
	// [From+i h, From+(i+1) h).
	Hours []int64
	// Minutes[i] counts those in [From+i min, From+(i+1) min): the first
	// hour by minute.
	Minutes []int64
	// Slots counts each slot's entries in the window (PerSlot only; slots
	// without any are absent).
	Slots map[uint16]int64
	// Overdue counts the entries with wake before From: fires that are late
	// (the due index holds a task until it has fired). They are in no
	// bucket. OverdueComplete is false when the budget ran out first (then
	// Overdue is a lower bound).
	Overdue         int64
	OverdueComplete bool
	// Truncated reports that the key budget ran out before the window was
	// counted; the counts are exact for wakes below CompleteUntil
	// (From+Hours h when not truncated).
	Truncated     bool
	CompleteUntil int64
	// Keys is the number of keys visited.
	Keys int
}

// CountDue counts the due index entries of the slots for which owned
// returns true (nil: every slot) per hour over [q.From, q.From+q.Hours h),
// per minute over the first hour, and before q.From (overdue), visiting at
// most q.MaxKeys keys. It reads one consistent snapshot.
//
// The window is counted in passes of growing length (1 h, 1 h, 2 h, 4 h,
// …): one seek per slot that has a key in the pass, so a slot's keys are
// never visited twice, and a budget that runs out mid-pass drops that pass
// and answers the instant the previous one ended as CompleteUntil.
func (s *Store) CountDue(owned func(slot uint16) bool, q DueCountQuery) (out DueCounts, err error) {
	if q.Hours < 1 || q.MaxKeys < 1 || q.From < 0 || q.From > 1<<63-1-int64(q.Hours+1)*int64(time.Hour) {
		return out, fmt.Errorf("storage: count due: bad query %+v", q)
	}
	if !s.enter() {
		return out, ErrClosed
	}
	defer s.leave()
	it, err := s.newSlotIter()
	if err != nil {
		return out, err
	}
	defer closeIter(it, &err)

	const hour, minute = int64(time.Hour), int64(time.Minute)
	end := q.From + int64(q.Hours)*hour
	out = DueCounts{Hours: make([]int64, q.Hours), Minutes: make([]int64, 60), CompleteUntil: q.From}
	if q.PerSlot {
		out.Slots = map[uint16]int64{}
	}
	var key [dueIDOffset]byte
	// wakeOf returns the wake of the iterator's key if it is a due key of
	// slot.
	wakeOf := func(slot uint16) (int64, bool) {
		k := it.Key()
		ks, section, _, ok := decodeSlotKey(k)
		if !ok || ks != slot || section != sectionDue || len(k) <= dueIDOffset {
			return 0, false
		}
		w := binary.BigEndian.Uint64(k[slotPrefixLen+1:])
		return int64(w), w <= 1<<63-1
	}

	// The owned slots with a due key at or after From, and that key's wake.
	type next struct {
		slot uint16
		wake int64
	}
	var active []next
	for slot := 0; slot <= int(^uint16(0)); {
		if owned != nil && !owned(uint16(slot)) {
			slot++
			continue
		}
		if out.Keys >= q.MaxKeys {
			out.Truncated = true
			return out, it.Error()
		}
		if !it.SeekGE(appendDueKey(key[:0], uint16(slot), q.From, "")) {
			break
		}
		out.Keys++
		ks, _, _, ok := decodeSlotKey(it.Key())
		if !ok {
			return out, fmt.Errorf("storage: malformed key %q", it.Key())
		}
		if int(ks) > slot {
			slot = int(ks) // the slots in between hold no key at all
			continue
		}
		if w, ok := wakeOf(uint16(slot)); ok && w < end {
			active = append(active, next{uint16(slot), w})
		}
		slot++
	}

	type slotN struct {
		slot uint16
		n    int64
	}
	var hours [][2]int64 // pass-local (bucket, count) deltas
	var mins [60]int64
	var perSlot []slotN
	for lo := q.From; lo < end; {
		// Each pass is as long as the window counted so far (1 h at first).
		hi := min(lo+max(hour, lo-q.From), end)
		hours, perSlot, mins = hours[:0], perSlot[:0], [60]int64{}
		cut := false
		kept := active[:0]
	slots:
		for _, a := range active {
			if a.wake >= hi {
				kept = append(kept, a)
				continue
			}
			if out.Keys >= q.MaxKeys {
				cut = true
				break
			}
			valid := it.SeekGE(appendDueKey(key[:0], a.slot, lo, ""))
			out.Keys++
			var n int64
			for valid {
				w, ok := wakeOf(a.slot)
				if !ok {
					break // the slot has no more due keys
				}
				if w >= hi {
					if w < end {
						kept = append(kept, next{a.slot, w})
					}
					break
				}
				n++
				b := (w - q.From) / hour
				if len(hours) > 0 && hours[len(hours)-1][0] == b {
					hours[len(hours)-1][1]++
				} else {
					hours = append(hours, [2]int64{b, 1})
				}
				if b == 0 {
					mins[(w-q.From)/minute]++
				}
				if out.Keys >= q.MaxKeys {
					cut = true
					break slots
				}
				valid = it.Next()
				out.Keys++
			}
			if n > 0 && q.PerSlot {
				perSlot = append(perSlot, slotN{a.slot, n})
			}
		}
		if err := it.Error(); err != nil {
			return out, err
		}
		if cut {
			out.Truncated = true
			return out, nil
		}
		active = kept
		for _, h := range hours {
			out.Hours[h[0]] += h[1]
		}
		for i, m := range mins {
			out.Minutes[i] += m
		}
		for _, p := range perSlot {
			out.Slots[p.slot] += p.n
		}
		out.CompleteUntil, lo = hi, hi
	}

	// Overdue: [0, From) in every owned slot, with what is left.
	out.OverdueComplete = true
	for slot := 0; slot <= int(^uint16(0)) && q.From > 0; {
		if owned != nil && !owned(uint16(slot)) {
			slot++
			continue
		}
		if out.Keys >= q.MaxKeys {
			out.OverdueComplete = false
			break
		}
		valid := it.SeekGE(appendDueKey(key[:0], uint16(slot), 0, ""))
		if !valid {
			break
		}
		out.Keys++
		ks, _, _, ok := decodeSlotKey(it.Key())
		if !ok {
			return out, fmt.Errorf("storage: malformed key %q", it.Key())
		}
		if int(ks) > slot {
			slot = int(ks)
			continue
		}
		for valid {
			w, ok := wakeOf(uint16(slot))
			if !ok || w >= q.From {
				break
			}
			out.Overdue++
			if out.Keys >= q.MaxKeys {
				out.OverdueComplete = false
				return out, it.Error()
			}
			valid = it.Next()
			out.Keys++
		}
		slot++
	}
	return out, it.Error()
}
