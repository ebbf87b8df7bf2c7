package storage

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"
)

func TestCountDueBuckets(t *testing.T) {
	const h, m = int64(time.Hour), int64(time.Minute)
	from := 1000 * h
	s := openMem(t, Options{})
	// slot 1 and 3 are owned; slot 2's copy is a replica another node counts.
	put(t, s,
		newTask(1, "now", from),               // exactly now: hour 0, minute 0
		newTask(1, "m59", from+h-1),           // last ns of hour 0: minute 59
		newTask(3, "h1", from+h),              // hour 1
		newTask(3, "h1b", from+h+30*m),        // hour 1
		newTask(1, "last", from+3*h-1),        // last ns of the window: hour 2
		newTask(1, "end", from+3*h),           // now+hours: outside
		newTask(3, "late", from+10*h),         // far outside
		newTask(1, "overdue", from-1),         // overdue
		newTask(3, "overdue2", 5),             // long overdue
		newTask(2, "replica", from+m),         // not owned
		newTask(2, "replica-overdue", from-h), // not owned
		newTask(1, "m30", from+30*m+1),        // minute 30
	)
	owned := func(s uint16) bool { return s != 2 }

	hoursOnly := func(hs ...int64) []int64 { return hs }
	mins := func(at ...int) []int64 {
		out := make([]int64, 60)
		for _, i := range at {
			out[i]++
		}
		return out
	}
	for _, tc := range []struct {
		name          string
		owned         func(uint16) bool
		q             DueCountQuery
		hours         []int64
		minutes       []int64
		slots         map[uint16]int64
		overdue       int64
		overdueDone   bool
		truncated     bool
		completeUntil int64
	}{
		{name: "owned", owned: owned, q: DueCountQuery{From: from, Hours: 3, MaxKeys: 1000, PerSlot: true},
			hours: hoursOnly(3, 2, 1), minutes: mins(0, 30, 59), slots: map[uint16]int64{1: 4, 3: 2},
			overdue: 2, overdueDone: true, completeUntil: from + 3*h},
		{name: "all slots", owned: nil, q: DueCountQuery{From: from, Hours: 3, MaxKeys: 1000},
			hours: hoursOnly(4, 2, 1), minutes: mins(0, 1, 30, 59), overdue: 3, overdueDone: true, completeUntil: from + 3*h},
		{name: "one hour", owned: owned, q: DueCountQuery{From: from, Hours: 1, MaxKeys: 1000},
			hours: hoursOnly(3), minutes: mins(0, 30, 59), overdue: 2, overdueDone: true, completeUntil: from + h},
		{name: "window from hour 1", owned: owned, q: DueCountQuery{From: from + h, Hours: 1, MaxKeys: 1000, PerSlot: true},
			hours: hoursOnly(2), minutes: mins(0, 30), slots: map[uint16]int64{3: 2}, overdue: 5, overdueDone: true, completeUntil: from + 2*h},
		{name: "168 hours", owned: owned, q: DueCountQuery{From: from, Hours: 168, MaxKeys: 1000},
			hours: append(hoursOnly(3, 2, 1, 1, 0, 0, 0, 0, 0, 0, 1), make([]int64, 157)...), minutes: mins(0, 30, 59),
			overdue: 2, overdueDone: true, completeUntil: from + 168*h},
		// Budget: 2 seeks for the active slots, then hour 0 in slot 1 takes
		// 1 seek + 3 keys + the key that ends it: the budget of 6 runs out in
		// the second pass (hour 1), which is dropped.
		{name: "truncated in hour 1", owned: owned, q: DueCountQuery{From: from, Hours: 3, MaxKeys: 7, PerSlot: true},
			hours: hoursOnly(3, 0, 0), minutes: mins(0, 30, 59), slots: map[uint16]int64{1: 3},
			truncated: true, completeUntil: from + h},
		{name: "truncated at once", owned: owned, q: DueCountQuery{From: from, Hours: 3, MaxKeys: 1},
			hours: hoursOnly(0, 0, 0), minutes: mins(), truncated: true, completeUntil: from},
		// Enough for the window (13 keys) but not all the overdue ones.
		{name: "overdue cut", owned: owned, q: DueCountQuery{From: from, Hours: 3, MaxKeys: 15},
			hours: hoursOnly(3, 2, 1), minutes: mins(0, 30, 59), overdue: 1, completeUntil: from + 3*h},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.CountDue(tc.owned, tc.q)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got.Hours, tc.hours) || !slices.Equal(got.Minutes, tc.minutes) {
				t.Errorf("hours %v minutes %v, want %v %v", got.Hours, got.Minutes, tc.hours, tc.minutes)
			}
			if fmt.Sprint(got.Slots) != fmt.Sprint(tc.slots) && !(len(got.Slots) == 0 && len(tc.slots) == 0) {
				t.Errorf("slots %v, want %v", got.Slots, tc.slots)
			}
			if got.Overdue != tc.overdue || got.OverdueComplete != tc.overdueDone {
				t.Errorf("overdue %d complete %v, want %d %v", got.Overdue, got.OverdueComplete, tc.overdue, tc.overdueDone)
			}
			if got.Truncated != tc.truncated || got.CompleteUntil != tc.completeUntil {
				t.Errorf("truncated %v until %d, want %v %d", got.Truncated, got.CompleteUntil, tc.truncated, tc.completeUntil)
			}
			if got.Keys > tc.q.MaxKeys {
				t.Errorf("visited %d keys, budget %d", got.Keys, tc.q.MaxKeys)
			}
		})
	}
	for _, q := range []DueCountQuery{{From: from, Hours: 0, MaxKeys: 1}, {From: from, Hours: 1}, {From: -1, Hours: 1, MaxKeys: 1}, {From: 1<<63 - 1, Hours: 1, MaxKeys: 1}} {
		if _, err := s.CountDue(nil, q); err == nil {
			t.Errorf("CountDue(%+v): no error", q)
		}
	}
}

// BenchmarkCountDue counts a day of 1M due tasks spread over every slot,
// the store compacted (op=count), next to ScanDue over the same window
// (op=scan, the floor: one seek per slot, then every key).
func BenchmarkCountDue(b *testing.B) {
	s := openBenchDisk(b)
	const n = 1_000_000
	from := int64(1_700_000_000_000_000_000)
	for i := 0; i < n; {
		bt := s.NewBatch()
		for j := 0; j < 1000 && i < n; j, i = j+1, i+1 {
			tk := newTask(uint16(i%16384), fmt.Sprintf("task-%d", i), from+int64(i)*(int64(24*time.Hour)/n))
			bt.PutTask(tk, 0)
		}
		if err := bt.Commit(false); err != nil {
			b.Fatal(err)
		}
	}
	if err := s.db.Flush(); err != nil {
		b.Fatal(err)
	}
	if err := s.db.Compact(context.Background(), []byte{prefixSlot}, []byte{prefixSlot + 1}, true); err != nil {
		b.Fatal(err)
	}
	b.Run("op=count", func(b *testing.B) {
		for b.Loop() {
			c, err := s.CountDue(nil, DueCountQuery{From: from, Hours: 24, MaxKeys: 4 << 20})
			if err != nil || c.Truncated {
				b.Fatalf("%v truncated=%v", err, c.Truncated)
			}
			var sum int64
			for _, v := range c.Hours {
				sum += v
			}
			if sum != n {
				b.Fatalf("counted %d of %d", sum, n)
			}
			b.ReportMetric(float64(c.Keys), "keys/op")
		}
	})
	b.Run("op=scan", func(b *testing.B) {
		for b.Loop() {
			got := 0
			if err := s.ScanDue(nil, from, from+int64(24*time.Hour), func(uint16, string, int64) bool { got++; return true }); err != nil || got != n {
				b.Fatalf("ScanDue = %d, %v", got, err)
			}
		}
	})
}
