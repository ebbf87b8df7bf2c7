package storage

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestRecentExecutions appends executions to tasks in several slots
// (some in one batch, some trimmed by the history limit, one task
// deleted) and checks that paging through the log returns every stored
// execution exactly once, newest first, with the outcome and time filters.
func TestRecentExecutions(t *testing.T) {
	s := openMem(t, Options{HistoryLimit: 5})
	rnd := rand.New(rand.NewPCG(1, 2))
	type want struct {
		pos    ExecPos
		failed bool
	}
	stored := map[ExecPos]bool{} // pos -> failed
	var tasks []*Task
	for i := range 12 {
		tk := newTask(uint16(i%4*1000), fmt.Sprintf("t%d", i), 0)
		b := s.NewBatch()
		b.PutTask(tk, 0)
		if err := b.Commit(false); err != nil {
			t.Fatal(err)
		}
		tasks = append(tasks, tk)
	}
	for round := range 9 {
		b := s.NewBatch()
		for _, tk := range tasks {
			// Two executions of one task in one batch sometimes, and
			// equal finish times across tasks.
			for range 1 + rnd.IntN(2) {
				code := 200
				if rnd.IntN(3) == 0 {
					code = 500
				}
				f := int64(100 + round*10 + rnd.IntN(3))
				b.AppendExecution(tk, &Execution{FireID: tk.ID, FinishedAt: f, StatusCode: code})
				p := ExecPos{Set: true, FinishedAt: f, Slot: tk.Slot, ID: tk.ID, Seq: tk.HistSeq}
				stored[p] = code != 200
				if tk.HistSeq > 5 {
					for q := range stored {
						if q.ID == tk.ID && q.Seq == tk.HistSeq-5 {
							delete(stored, q)
						}
					}
				}
			}
			b.PutTask(tk, 0)
		}
		if err := b.Commit(false); err != nil {
			t.Fatal(err)
		}
	}
	// Delete one task with an execution appended in the same batch.
	b := s.NewBatch()
	b.AppendExecution(tasks[3], &Execution{FinishedAt: 1000, StatusCode: 500})
	b.DeleteTask(tasks[3])
	if err := b.Commit(false); err != nil {
		t.Fatal(err)
	}
	for q := range stored {
		if q.ID == tasks[3].ID {
			delete(stored, q)
		}
	}
	var all []want
	for p, f := range stored {
		all = append(all, want{p, f})
	}
	slices.SortFunc(all, func(a, b want) int {
		if b.pos.Less(a.pos) {
			return -1
		}
		return 1
	})
	for _, tc := range []struct {
		name         string
		failed, succ bool
		since, until int64
	}{
		{"all", false, false, 0, 0},
		{"failed", true, false, 0, 0},
		{"succeeded", false, true, 0, 0},
		{"window", false, false, 121, 151},
		{"failed window", true, false, 131, 171},
		{"one task", false, false, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var exp []ExecPos
			for _, w := range all {
				if tc.name == "one task" && w.pos.ID != "t5" {
					continue
				}
				if (tc.failed && !w.failed) || (tc.succ && w.failed) ||
					w.pos.FinishedAt < tc.since || (tc.until != 0 && w.pos.FinishedAt >= tc.until) {
					continue
				}
				exp = append(exp, w.pos)
			}
			for _, limit := range []int{1, 3, 7, 1000} {
				var got []ExecPos
				q := ExecQuery{Failed: tc.failed, Succeeded: tc.succ, Since: tc.since, Until: tc.until, Limit: limit}
				if tc.name == "one task" {
					q.ID, q.IDSlot = "t5", tasks[5].Slot
				}
				for page := 0; ; page++ {
					out, more, err := s.RecentExecutions(nil, q)
					if err != nil {
						t.Fatal(err)
					}
					for _, e := range out {
						if e.Failed() != stored[e.Pos] {
							t.Fatalf("%+v: failed %v, stored %v", e.Pos, e.Failed(), stored[e.Pos])
						}
						got = append(got, e.Pos)
					}
					if !more {
						break
					}
					if len(out) != limit || page > 1000 {
						t.Fatalf("page %d: %d executions with more", page, len(out))
					}
					q.After = out[len(out)-1].Pos
				}
				if !slices.Equal(got, exp) {
					t.Fatalf("limit %d:\n got %v\nwant %v", limit, got, exp)
				}
			}
		})
	}
	// Only owned slots.
	out, _, err := s.RecentExecutions(func(sl uint16) bool { return sl == 1000 }, ExecQuery{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range out {
		if e.Pos.Slot != 1000 {
			t.Fatalf("slot %d listed", e.Pos.Slot)
		}
	}
	if len(out) == 0 {
		t.Fatal("nothing in slot 1000")
	}
	// No index entry is left without its record.
	n := 0
	for sl := range 4 {
		it, _ := s.db.NewIter(nil)
		lo := appendSection(nil, uint16(sl*1000), sectionExecLog)
		for v := it.SeekGE(lo); v && string(it.Key()[:4]) == string(lo); v = it.Next() {
			n++
		}
		it.Close()
	}
	if n != len(stored) {
		t.Fatalf("%d index entries, %d records", n, len(stored))
	}
}

// BenchmarkRecentExecutions is one page of the execution log on a store
// whose 16384 slots each hold 4 tasks with 20 executions each (1.3 M
// executions, a quarter failed), flushed to sstables.
func BenchmarkRecentExecutions(b *testing.B) {
	s := openBenchDisk(b)
	for i := 0; i < 16384*4; {
		bt := s.NewBatch()
		for j := 0; j < 256 && i < 16384*4; j, i = j+1, i+1 {
			tk := newTask(uint16(i%16384), fmt.Sprintf("t%d", i), 0)
			for e := range 20 {
				code := 200
				if e%4 == 0 {
					code = 500
				}
				bt.AppendExecution(tk, &Execution{FireID: tk.ID, FinishedAt: int64(1 + e*100000 + i), StatusCode: code, Result: []byte("ok")})
			}
			bt.PutTask(tk, 0)
		}
		if err := bt.Commit(false); err != nil {
			b.Fatal(err)
		}
	}
	if err := s.db.Flush(); err != nil {
		b.Fatal(err)
	}
	for _, q := range []struct {
		name string
		q    ExecQuery
	}{{"all", ExecQuery{Limit: 100}}, {"failed", ExecQuery{Failed: true, Limit: 100}}, {"failed-1000", ExecQuery{Failed: true, Limit: 1000}}} {
		b.Run(q.name, func(b *testing.B) {
			for b.Loop() {
				out, _, err := s.RecentExecutions(func(sl uint16) bool { return sl < 16384 }, q.q)
				if err != nil || len(out) != q.q.Limit {
					b.Fatal(err, len(out))
				}
			}
		})
	}
}
