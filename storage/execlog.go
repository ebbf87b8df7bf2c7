package storage

// This file is the execution log: a slot-first secondary index over every
// task's history, ordered by finish time, so a node finds its newest
// executions (or its newest failed ones) without reading every history.
//
// Each history record (slot, id, seq) has one index key
//
//	's' slot 'E' outcome finished(u64 BE) id 0x00 seq(u64 BE) -> empty
//
// with outcome 'f' (failed: Execution.Failed) or 's' (succeeded).
// AppendExecution writes it in the batch that writes the record, and the
// batch that deletes the record (the history trim, DeleteTask) deletes it.
// The keys are slot data: they replicate, snapshot, hand over and are
// checksummed with the slot like the records they index.

import (
	"container/heap"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/cockroachdb/pebble/v2"
)

// execLogKeyOf returns the index key of the stored history record at
// histKey, nil if there is none or it does not decode.
func (s *Store) execLogKeyOf(histKey []byte) []byte {
	slot, id, seq, ok := decodeHistKey(histKey)
	if !ok || !s.enter() {
		return nil
	}
	defer s.leave()
	v, closer, err := s.db.Get(histKey)
	if err != nil {
		return nil
	}
	defer func() { _ = closer.Close() }()
	var e Execution
	if DecodeExecution(v, &e) != nil {
		return nil
	}
	return appendExecLogKey(nil, slot, execOutcome(&e), e.FinishedAt, id, seq)
}

// ExecPos is a place in the execution log order: newest first, that is
// descending (FinishedAt, Slot, ID, Seq). The zero ExecPos (with
// Set false) is the very beginning.
type ExecPos struct {
	Set        bool
	FinishedAt int64
	Slot       uint16
	ID         string
	Seq        uint64
}

// Less reports whether p comes after q in the log order (is older).
func (p ExecPos) Less(q ExecPos) bool {
	switch {
	case p.FinishedAt != q.FinishedAt:
		return p.FinishedAt < q.FinishedAt
	case p.Slot != q.Slot:
		return p.Slot < q.Slot
	case p.ID != q.ID:
		return p.ID < q.ID
	}
	return p.Seq < q.Seq
}

// ExecQuery selects executions for RecentExecutions.
type ExecQuery struct {
	Failed, Succeeded bool  // which outcomes; neither means both
	Since             int64 // FinishedAt >= Since (0: no bound)
	Until             int64 // FinishedAt < Until (0: no bound)
	After             ExecPos
	Limit             int
	// ID, when set, lists only that task's executions: its history (at
	// most HistoryLimit records) is read instead of the index. IDSlot is
	// its slot.
	ID     string
	IDSlot uint16
	// Match, when set, keeps only the executions of the tasks it reports
	// true for (the flow_key filter); the others are skipped before their
	// record is read and do not count toward Limit.
	Match func(slot uint16, id string) bool
	// FlowKey, when set, keeps only the executions of the tasks whose
	// Spec.FlowKey it is (their record is read once per task and call).
	FlowKey string
}

// flowMatcher returns q's FlowKey check, reading task records from r
// (nil when q has no FlowKey).
func (q *ExecQuery) flowMatcher(get func(key []byte) ([]byte, io.Closer, error)) func(slot uint16, id string) bool {
	if q.FlowKey == "" {
		return nil
	}
	seen := map[string]bool{}
	var key []byte
	return func(slot uint16, id string) bool {
		if ok, there := seen[id]; there {
			return ok
		}
		ok := false
		key = appendTaskKey(key[:0], slot, id)
		if v, closer, err := get(key); err == nil {
			var t Task
			ok = DecodeTask(v, &t) == nil && t.Spec.FlowKey == q.FlowKey
			_ = closer.Close()
		}
		if len(seen) < 100_000 {
			seen[id] = ok
		}
		return ok
	}
}

// LoggedExecution is one execution of the log, with where it is stored.
type LoggedExecution struct {
	Pos ExecPos
	Execution
}

// execHead is the newest not yet returned index entry of one
// (slot, outcome) stream.
type execHead struct {
	pos     ExecPos
	outcome byte
}

type execHeap []execHead

func (h execHeap) Len() int           { return len(h) }
func (h execHeap) Less(i, j int) bool { return h[j].pos.Less(h[i].pos) } // newest on top
func (h execHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *execHeap) Push(x any)        { *h = append(*h, x.(execHead)) }
func (h *execHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// RecentExecutions returns up to q.Limit executions in the slots owned
// reports true for (nil: all), newest first, strictly after q.After in
// that order; more reports that at least one more matches. It reads a
// consistent snapshot and costs one seek per owned slot that has any key,
// plus one per such slot with an execution log and outcome asked (to find
// each stream's newest entry), then per execution returned one
// seek (the next entry of its stream) and one point read (the record):
// never more, however many executions are stored or how few match. An index
// entry whose record is gone or does not decode is skipped.
func (s *Store) RecentExecutions(owned func(uint16) bool, q ExecQuery) (out []LoggedExecution, more bool, err error) {
	if !s.enter() {
		return nil, false, ErrClosed
	}
	defer s.leave()
	if q.Limit <= 0 {
		return nil, false, nil
	}
	if q.ID != "" {
		if owned != nil && !owned(q.IDSlot) {
			return nil, false, nil
		}
		return s.taskExecutions(q)
	}
	snap := s.db.NewSnapshot()
	defer func() { _ = snap.Close() }()
	it, err := snap.NewIter(&pebble.IterOptions{LowerBound: slotKeysLower, UpperBound: slotKeysUpper})
	if err != nil {
		return nil, false, fmt.Errorf("storage: new iterator: %w", err)
	}
	defer closeIter(it, &err)
	var outcomes []byte
	if q.Failed || !q.Succeeded {
		outcomes = append(outcomes, outcomeFailed)
	}
	if q.Succeeded || !q.Failed {
		outcomes = append(outcomes, outcomeSucceeded)
	}
	var key []byte
	// next returns the newest entry of stream (slot, outcome) strictly
	// before the seek key, if it matches the query's time window.
	next := func(slot uint16, outcome byte, seek []byte) (execHead, bool, error) {
		if !it.SeekLT(seek) {
			return execHead{}, false, it.Error()
		}
		ks, ko, f, id, seq, ok := decodeExecLogKey(it.Key())
		if !ok || ks != slot || ko != outcome {
			if sl, sec, _, sok := decodeSlotKey(it.Key()); sok && sl == slot && sec == sectionExecLog && len(it.Key()) > slotPrefixLen+1 && it.Key()[slotPrefixLen+1] == outcome {
				return execHead{}, false, fmt.Errorf("storage: malformed execution log key %q", it.Key())
			}
			return execHead{}, false, nil
		}
		if f < q.Since {
			return execHead{}, false, nil
		}
		return execHead{pos: ExecPos{Set: true, FinishedAt: f, Slot: slot, ID: id, Seq: seq}, outcome: outcome}, true, nil
	}
	h := make(execHeap, 0, 64)
	for slot := 0; slot < s.slots; slot++ {
		if owned != nil && !owned(uint16(slot)) {
			continue
		}
		// One forward seek finds whether the slot has an execution log at
		// all, and skips every slot without any key.
		key = appendSection(key[:0], uint16(slot), sectionExecLog)
		if !it.SeekGE(key) {
			break
		}
		ks, sec, _, ok := decodeSlotKey(it.Key())
		if !ok {
			return nil, false, fmt.Errorf("storage: malformed key %q", it.Key())
		}
		if int(ks) > slot {
			slot = int(ks) - 1
			continue
		}
		if sec != sectionExecLog {
			continue
		}
		for _, o := range outcomes {
			key = q.seekStart(key[:0], uint16(slot), o)
			if key == nil {
				continue
			}
			hd, ok, err := next(uint16(slot), o, key)
			if err != nil {
				return nil, false, err
			}
			if ok {
				h = append(h, hd)
			}
		}
	}
	heap.Init(&h)
	flow := q.flowMatcher(snap.Get)
	c := getCodec()
	defer putCodec(c)
	for h.Len() > 0 {
		if len(out) == q.Limit {
			return out, true, nil
		}
		hd := h[0]
		p := hd.pos
		c.key = appendHistKey(c.key[:0], p.Slot, p.ID, p.Seq)
		var (
			v      []byte
			closer io.Closer
			gerr   = pebble.ErrNotFound // skipped: as if gone
		)
		if (q.Match == nil || q.Match(p.Slot, p.ID)) && (flow == nil || flow(p.Slot, p.ID)) {
			v, closer, gerr = snap.Get(c.key)
		}
		switch {
		case gerr == nil:
			var e Execution
			derr := DecodeExecution(v, &e)
			if derr == nil {
				e.Result = append([]byte(nil), e.Result...) // v is only valid until closer.Close
				out = append(out, LoggedExecution{Pos: p, Execution: e})
			} else {
				s.noteCorrupt(c.key, derr)
			}
			_ = closer.Close()
		case !errors.Is(gerr, pebble.ErrNotFound):
			return nil, false, fmt.Errorf("storage: execution %q: %w", c.key, gerr)
		}
		key = appendExecLogKey(key[:0], p.Slot, hd.outcome, p.FinishedAt, p.ID, p.Seq)
		nh, ok, err := next(p.Slot, hd.outcome, key)
		if err != nil {
			return nil, false, err
		}
		if ok {
			h[0] = nh
			heap.Fix(&h, 0)
		} else {
			heap.Pop(&h)
		}
	}
	return out, false, nil
}

// taskExecutions is RecentExecutions of one task, from its history.
func (s *Store) taskExecutions(q ExecQuery) (out []LoggedExecution, more bool, err error) {
	c := getCodec()
	defer putCodec(c)
	c.key = appendHistPrefix(c.key[:0], q.IDSlot, q.ID)
	c.end = appendHistEnd(c.end[:0], q.IDSlot, q.ID)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: c.key, UpperBound: c.end})
	if err != nil {
		return nil, false, fmt.Errorf("storage: new iterator: %w", err)
	}
	defer closeIter(it, &err)
	if flow := q.flowMatcher(s.db.Get); (q.Match != nil && !q.Match(q.IDSlot, q.ID)) || (flow != nil && !flow(q.IDSlot, q.ID)) {
		return nil, false, nil
	}
	for valid := it.First(); valid; valid = it.Next() {
		_, _, seq, ok := decodeHistKey(it.Key())
		v, verr := it.ValueAndErr()
		if verr != nil {
			return nil, false, fmt.Errorf("storage: executions of %q: %w", q.ID, verr)
		}
		var e Execution
		if !ok || DecodeExecution(v, &e) != nil {
			continue
		}
		p := ExecPos{Set: true, FinishedAt: e.FinishedAt, Slot: q.IDSlot, ID: q.ID, Seq: seq}
		f := e.Failed()
		if (q.Failed && !q.Succeeded && !f) || (q.Succeeded && !q.Failed && f) ||
			p.FinishedAt < q.Since || (q.Until > 0 && p.FinishedAt >= q.Until) ||
			(q.After.Set && !p.Less(q.After)) {
			continue
		}
		e.Result = append([]byte(nil), e.Result...)
		out = append(out, LoggedExecution{Pos: p, Execution: e})
	}
	slices.SortFunc(out, func(a, b LoggedExecution) int {
		if b.Pos.Less(a.Pos) {
			return -1
		}
		return 1
	})
	if len(out) > q.Limit {
		return out[:q.Limit], true, nil
	}
	return out, false, nil
}

// seekStart appends the key that stream (slot, outcome) is read backwards
// from: entries strictly before it are after q.After and before q.Until.
// It returns nil when no entry of the stream can match.
func (q *ExecQuery) seekStart(dst []byte, slot uint16, outcome byte) []byte {
	// The stream is ordered by (finished, id, seq); "before the seek key"
	// reading backwards.
	until := int64(1<<63 - 1)
	if q.Until > 0 {
		until = q.Until // finished < Until
	}
	if q.After.Set {
		a := q.After
		switch {
		case slot == a.Slot:
			if a.FinishedAt < until {
				return appendExecLogKey(dst, slot, outcome, a.FinishedAt, a.ID, a.Seq)
			}
		case slot < a.Slot:
			// Entries at a.FinishedAt come after the cursor in the log order.
			if a.FinishedAt < until {
				if a.FinishedAt == 1<<63-1 {
					return appendExecLogPrefix(dst, slot, outcome+1)
				}
				until = a.FinishedAt + 1
			}
		default:
			until = min(until, a.FinishedAt)
		}
	}
	if until <= q.Since || until <= 0 {
		return nil
	}
	if until == 1<<63-1 {
		return appendExecLogPrefix(dst, slot, outcome+1)
	}
	return appendExecLogTime(dst, slot, outcome, until)
}
