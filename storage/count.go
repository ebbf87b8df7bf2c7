package storage

// CountTasks counts the task records of every slot for which owned returns
// true (nil = all) without decoding them: one bounded key-only range per
// slot. It reads a consistent snapshot; it costs about a microsecond per
// task, so callers run it once (at start) and keep the count up to date.
func (s *Store) CountTasks(owned func(slot uint16) bool) (n int64, err error) {
	if !s.enter() {
		return 0, ErrClosed
	}
	defer s.leave()
	it, err := s.newSlotIter()
	if err != nil {
		return 0, err
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
			n++
		}
	}
	return n, nil
}
