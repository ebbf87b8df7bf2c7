package storage

import "sync/atomic"

// dueMarks is the store's in-memory superset of the slots that may hold due
// index keys, so that ScanDue seeks only those (an idle node's scans of its
// owned slots cost no seek at all: every slot holds meta and checksum keys,
// so without the marks each owned slot costs one seek; issue 17).
//
// Per slot, gen counts the committed batches that set a due key of the
// slot: Commit bumps it after the batch is applied. empty is 1 + the gen a
// scan from 0 read before taking the snapshot in which it found no due key
// of the slot at all. The slot may hold due keys unless empty == gen+1.
// Zero values mean "may hold keys": a fresh store's first scan looks at
// every slot.
//
// Why that is safe: gen only grows. A scan clears a slot with the gen g it
// read before its snapshot. A batch applied before the snapshot is in it, so
// the scan saw its key and clears nothing. A batch applied after the
// snapshot bumps gen after that, so after the scan read g: gen > g from
// then on, and the mark says "may hold keys". Deletions never bump: they
// only leave the superset larger than it must be, until the next scan from
// 0. A scan sees every commit that returned before it began (it collects
// its slots first); the ones still in flight are free to be seen or not.
type dueMarks struct {
	gen   [1 << 16]atomic.Uint64
	empty [1 << 16]atomic.Uint64
}

// bump marks slot as possibly holding due keys.
func (d *dueMarks) bump(slot uint16) { d.gen[slot].Add(1) }

// mayHold reports whether slot may hold due keys.
func (d *dueMarks) mayHold(slot uint16) bool {
	return d.empty[slot].Load() != d.gen[slot].Load()+1
}

// isDueKey reports whether key is a due index key (of any slot).
func isDueKey(key []byte) bool {
	return len(key) > slotPrefixLen && key[0] == prefixSlot && key[slotPrefixLen] == sectionDue
}

// dueSlot returns the slot of a key isDueKey accepted.
func dueSlot(key []byte) uint16 { return uint16(key[1])<<8 | uint16(key[2]) }

// testHookScanDueIter, when set (tests), runs in ScanDue right after its
// iterator (its snapshot) is created.
var testHookScanDueIter func()
