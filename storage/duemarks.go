package storage

import (
	"encoding/binary"
	"sync"
	"sync/atomic"
)

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
//
// floor is a lower bound on the wakes of a slot's due keys (0: unknown),
// so that a scan whose window ends at or before it skips the slot without
// a seek: the overdue scan of the safety net (window [0, now-after)) and
// the loader's scans, on a node whose stored tasks are not due yet. A
// commit lowers it to the wake of every due key it set, with its bump. A
// scan from 0 learns it: it sets it to the wake of the slot's first due
// key in its snapshot, or lower: to the earliest wake a commit bumped
// since the scan began (acc, kept per slot for the epoch of the one
// learning scan at a time). A commit whose bump read an older epoch was
// applied before that bump, so before the epoch changed and before the
// scan's snapshot: the scan sees its key. One bumped with the scan's epoch
// is in acc. Deletions leave floor lower than it must be, until the next
// scan from 0. floor, acc and accEpoch of a slot change under its lock.
type dueMarks struct {
	gen      [1 << 16]atomic.Uint64
	empty    [1 << 16]atomic.Uint64
	floor    [1 << 16]atomic.Int64
	acc      [1 << 16]int64
	accEpoch [1 << 16]uint64
	mu       [256]sync.Mutex
	epoch    atomic.Uint64 // of the learning scan (the last one to start)
	learning atomic.Bool
}

func (d *dueMarks) lock(slot uint16) *sync.Mutex {
	m := &d.mu[slot%uint16(len(d.mu))]
	m.Lock()
	return m
}

// bump marks slot as possibly holding due keys, the earliest of those the
// commit set at wake.
func (d *dueMarks) bump(slot uint16, wake int64) {
	m := d.lock(slot)
	d.gen[slot].Add(1)
	if d.floor[slot].Load() > wake {
		d.floor[slot].Store(wake)
	}
	if e := d.epoch.Load(); d.accEpoch[slot] != e {
		d.accEpoch[slot], d.acc[slot] = e, wake
	} else if d.acc[slot] > wake {
		d.acc[slot] = wake
	}
	m.Unlock()
}

// learn starts a scan from 0 that learns the floors, before its snapshot:
// its epoch, and false if another scan is learning (this one learns
// nothing). learnt ends it.
func (d *dueMarks) learn() (uint64, bool) {
	if !d.learning.CompareAndSwap(false, true) {
		return 0, false
	}
	return d.epoch.Add(1), true
}

func (d *dueMarks) learnt() { d.learning.Store(false) }

// setFloor records that the learning scan of epoch e found the first due
// key of slot in its snapshot at wake.
func (d *dueMarks) setFloor(slot uint16, e uint64, wake int64) {
	m := d.lock(slot)
	if d.accEpoch[slot] == e {
		wake = min(wake, d.acc[slot])
	}
	d.floor[slot].Store(wake)
	m.Unlock()
}

// mayHoldBefore reports whether slot may hold a due key with a wake below
// to.
func (d *dueMarks) mayHoldBefore(slot uint16, to int64) bool {
	return d.mayHold(slot) && d.floor[slot].Load() < to
}

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

// dueWake returns the wake of a key isDueKey accepted (0 if it is too
// short to hold one: a floor of 0 says nothing).
func dueWake(key []byte) int64 {
	if len(key) < dueIDOffset {
		return 0
	}
	return int64(binary.BigEndian.Uint64(key[slotPrefixLen+1:]))
}

// dueSet is a slot whose due keys a batch sets, with the earliest wake.
type dueSet struct {
	slot uint16
	wake int64
}

// testHookScanDueIter, when set (tests), runs in ScanDue right after its
// iterator (its snapshot) is created.
var testHookScanDueIter func()
