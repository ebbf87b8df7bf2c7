package storage

// CountTasks counts the task records of every slot for which owned returns
// true (nil = all) without decoding them: one bounded key-only range per
// slot. It reads a consistent snapshot; it costs about a microsecond per
// task, so callers run it once (at start) and keep the count up to date.
func (s *Store) CountTasks(owned func(slot uint16) bool) (n int64, err error) {
	err = s.ScanTaskIDs(owned, func(uint16, []byte) bool { n++; return true })
	return n, err
}

// ScanTaskIDs calls fn with the slot and id of every task record in the
// slots for which owned returns true (nil = all), in (slot, id) order,
// without decoding records. The id bytes are only valid during the call.
// fn returns false to stop.
func (s *Store) ScanTaskIDs(owned func(slot uint16) bool, fn func(slot uint16, id []byte) bool) (err error) {
	if !s.enter() {
		return ErrClosed
	}
	defer s.leave()
	it, err := s.newSlotIter()
	if err != nil {
		return err
	}
	defer closeIter(it, &err)
	var lo, hi [slotPrefixLen + 1]byte
	for slot := 0; slot <= int(^uint16(0)); slot++ {
		if owned != nil && !owned(uint16(slot)) {
			continue
		}
		start := appendSection(lo[:0], uint16(slot), sectionTask)
		end := appendSection(hi[:0], uint16(slot), sectionTask+1)
		if !it.SeekGE(start) {
			break // no key at or after this slot
		}
		for ; it.Valid(); it.Next() {
			k := it.Key()
			if string(k) >= string(end) {
				break
			}
			if !fn(uint16(slot), k[slotPrefixLen+1:]) {
				return nil
			}
		}
	}
	return nil
}
