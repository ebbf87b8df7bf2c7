package storage

import (
	"encoding/binary"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// Iterator bounds covering every per-slot key. Pebble only reads bounds.
var (
	slotKeysLower = []byte{prefixSlot}
	slotKeysUpper = []byte{prefixSlot + 1}
)

func (s *Store) newSlotIter() (*pebble.Iterator, error) {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: slotKeysLower, UpperBound: slotKeysUpper})
	if err != nil {
		return nil, fmt.Errorf("storage: new iterator: %w", err)
	}
	return it, nil
}

func closeIter(it *pebble.Iterator, err *error) {
	if cerr := it.Close(); cerr != nil && *err == nil {
		*err = fmt.Errorf("storage: iterate: %w", cerr)
	}
}

// ScanDue calls fn for every due index entry with from <= wake < to in the
// slots for which owned returns true (nil owned means every slot): slot by
// slot in ascending order, within a slot in (wake, id) order. fn returns
// false to stop. It reads a consistent snapshot through one iterator, one
// SeekGE per owned slot that may hold due keys: the store keeps in memory a
// superset of those (duemarks.go), and the others are skipped without a
// seek, as are slots found to hold no key at all and slots whose earliest
// due key is known to wake at or after to (a scan from 0 learns it); no key beyond a slot's
// [from, to) window is read except the one that ends it. It sees every
// commit that returned before it was called; one that returns meanwhile
// may or may not be seen. A scan from 0 that finds no due key in a slot
// marks it as holding none. A from below 0 counts as 0. fn may call other
// Store methods but not Close.
func (s *Store) ScanDue(owned func(slot uint16) bool, from, to int64, fn func(slot uint16, id string, wake int64) bool) (err error) {
	if !s.enter() {
		return ErrClosed
	}
	defer s.leave()
	from = max(from, 0)
	if to <= from {
		return nil
	}
	// The slots to seek, with their marks' generations read before the
	// snapshot (dueMarks): a slot is marked empty only with those.
	type cand struct {
		slot uint16
		gen  uint64
	}
	var cands []cand
	var epoch uint64 // learning the floors (dueMarks); 0: not
	if from == 0 {
		if e, ok := s.due.learn(); ok {
			epoch = e
			defer s.due.learnt()
		}
	}
	for slot := range s.slots {
		sl := uint16(slot)
		if !s.due.mayHoldBefore(sl, to) || (owned != nil && !owned(sl)) {
			continue
		}
		cands = append(cands, cand{sl, s.due.gen[sl].Load()})
	}
	if len(cands) == 0 {
		return nil
	}
	it, err := s.newSlotIter()
	if err != nil {
		return err
	}
	defer closeIter(it, &err)
	if testHookScanDueIter != nil {
		testHookScanDueIter()
	}
	var key [slotPrefixLen + 1 + 8]byte
	valid, past := true, -1 // the iterator's position: the slot of its key, when valid
	for _, c := range cands {
		if !valid || past > int(c.slot) {
			// The last seek, in an earlier slot, found no key before a
			// later slot: this one holds no key at all.
			s.due.empty[c.slot].Store(c.gen + 1)
			continue
		}
		valid = it.SeekGE(appendDueKey(key[:0], c.slot, from, ""))
		if !valid {
			if err := it.Error(); err != nil {
				return err
			}
			if from == 0 {
				s.due.empty[c.slot].Store(c.gen + 1)
			}
			continue
		}
		ks, section, _, ok := decodeSlotKey(it.Key())
		if !ok {
			return fmt.Errorf("storage: malformed key %q", it.Key())
		}
		past = int(ks)
		if ks != c.slot || section != sectionDue {
			if from == 0 {
				s.due.empty[c.slot].Store(c.gen + 1)
			}
			continue
		}
		if epoch != 0 {
			s.due.setFloor(c.slot, epoch, dueWake(it.Key()))
		}
		for ok && ks == c.slot && section == sectionDue {
			k := it.Key()
			// Check the wake before decoding the id: the key that ends the
			// window costs no allocation.
			if len(k) > dueIDOffset && int64(binary.BigEndian.Uint64(k[slotPrefixLen+1:])) >= to {
				break
			}
			_, wake, id, dok := decodeDueKey(k)
			if !dok {
				return fmt.Errorf("storage: malformed due key %q", k)
			}
			if !fn(c.slot, id, wake) {
				return nil
			}
			if !it.Next() {
				return it.Error()
			}
			ks, section, _, ok = decodeSlotKey(it.Key())
		}
	}
	return it.Error()
}

// Position is a place in the (slot, id) order of task records, for paging
// through ScanTasks. The zero Position is the very beginning.
type Position struct {
	Slot uint16
	ID   string
	// Exclusive starts strictly after (Slot, ID) instead of at it. To resume
	// after the last task t a page returned, pass
	// Position{Slot: t.Slot, ID: t.ID, Exclusive: true}.
	Exclusive bool
}

// ScanTasks calls fn for each task record from start on, in (slot, id)
// order, until fn returns false or the records end. A record that does not
// decode is skipped (noteCorrupt). Each *Task passed to fn
// is freshly decoded and belongs to fn. It reads a consistent snapshot; the
// due index and history keys between task records are skipped with one seek
// per slot.
func (s *Store) ScanTasks(start Position, fn func(t *Task) bool) (err error) {
	if !s.enter() {
		return ErrClosed
	}
	defer s.leave()
	it, err := s.newSlotIter()
	if err != nil {
		return err
	}
	defer closeIter(it, &err)
	c := getCodec()
	defer putCodec(c)

	c.key = appendTaskKey(c.key[:0], start.Slot, start.ID)
	valid := it.SeekGE(c.key)
	if valid && start.Exclusive && string(it.Key()) == string(c.key) {
		valid = it.Next()
	}
	for valid {
		slot, section, _, ok := decodeSlotKey(it.Key())
		if !ok {
			return fmt.Errorf("storage: malformed key %q", it.Key())
		}
		switch {
		case section < sectionTask:
			valid = it.SeekGE(appendTaskKey(c.key[:0], slot, ""))
		case section > sectionTask:
			if slot == ^uint16(0) {
				return it.Error()
			}
			valid = it.SeekGE(appendTaskKey(c.key[:0], slot+1, ""))
		default:
			v, verr := it.ValueAndErr()
			if verr != nil {
				return fmt.Errorf("storage: scan tasks: %w", verr)
			}
			t := new(Task)
			if err := c.decodeTask(v, t); err != nil {
				// One bad record must not make every listing that reaches
				// it fail: it is counted, logged once and skipped.
				s.noteCorrupt(it.Key(), err)
				valid = it.Next()
				continue
			}
			if !fn(t) {
				return nil
			}
			valid = it.Next()
		}
	}
	return it.Error()
}

// Executions returns up to limit execution records of the task (slot, id),
// newest first; limit <= 0 means all stored. A task without history (or
// without a record) yields an empty slice and no error.
func (s *Store) Executions(slot uint16, id string, limit int) (out []Execution, err error) {
	if !s.enter() {
		return nil, ErrClosed
	}
	defer s.leave()
	c := getCodec()
	defer putCodec(c)
	c.key = appendHistPrefix(c.key[:0], slot, id)
	c.end = appendHistEnd(c.end[:0], slot, id)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: c.key, UpperBound: c.end})
	if err != nil {
		return nil, fmt.Errorf("storage: new iterator: %w", err)
	}
	defer closeIter(it, &err)
	n := int(s.historyLimit)
	if limit > 0 {
		n = min(limit, n)
	}
	out = make([]Execution, 0, n)
	for valid := it.Last(); valid && (limit <= 0 || len(out) < limit); valid = it.Prev() {
		v, verr := it.ValueAndErr()
		if verr != nil {
			return nil, fmt.Errorf("storage: executions of %q: %w", id, verr)
		}
		var e Execution
		if err := c.decodeExecution(v, &e); err != nil {
			return nil, fmt.Errorf("storage: executions of %q at %q: %w", id, it.Key(), err)
		}
		out = append(out, e)
	}
	if err := it.Error(); err != nil {
		return nil, fmt.Errorf("storage: executions of %q: %w", id, err)
	}
	return out, nil
}
