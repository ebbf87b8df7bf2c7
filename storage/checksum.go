package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/cespare/xxhash/v2"
	"github.com/cockroachdb/pebble/v2"
)

// Anti-entropy support. Every slot has a checksum of its data keys (task
// records, due index, history: exactly the keys that are replicated), kept
// under the slot's checksum key. Commit updates it in the same Pebble batch
// as the writes it covers, so after a crash it matches whatever of the data
// survived. Owner and follower of a slot compare checksums taken at the same
// (epoch, seq); a difference means the two copies diverged.
//
// The checksum depends only on the set of (key, value) pairs: not on the
// order of the writes, on how many batches they took, or on whether the
// keys arrived as replicated ops or as a snapshot. The meta and checksum
// keys are each node's own bookkeeping and are not covered (a follower's
// meta differs from its owner's in Role).
//
// Why the due index and history count although the due index follows from
// the task records: a replica's keys are not recomputed but shipped, so a
// lost or extra due key is a divergence of its own, and the one that hurts
// most (a task without its due key never fires after a failover). Covering
// exactly the replicated keys makes equal checksums mean equal replicas,
// which is what a resync restores.
//
// Per key the cost is one hash of the new value at the write and, at
// Commit, one read of the stored value unless the write's caller knew it
// (prior.go); the checksum itself is kept in memory once read.

// ChecksumVersion identifies the checksum scheme (keyHash, the key set and
// the stored encoding). Open rebuilds every checksum when the store says it
// keeps another version, so a change of scheme must bump it. Nodes send it
// with their checksums: checksums of different versions do not compare.
const ChecksumVersion byte = 1

// Checksum is an order-independent digest of a slot's data keys. Two stores
// holding the same keys and values in a slot have equal checksums; the zero
// Checksum is an empty slot's. Compare with ==.
type Checksum struct {
	// Sum is the sum, modulo 2^64, of keyHash(key, value) over the keys.
	Sum uint64
	// Count is the number of keys.
	Count uint64
}

// String formats c as sum/count, the sum in hex.
func (c Checksum) String() string { return fmt.Sprintf("%016x/%d", c.Sum, c.Count) }

func (c *Checksum) add(h uint64)    { c.Sum += h; c.Count++ }
func (c *Checksum) remove(h uint64) { c.Sum -= h; c.Count-- }

// keyHash is one key's contribution: xxhash64 of uvarint(len(key)) key
// value. The length prefix keeps (key, value) pairs that concatenate alike
// apart (history keys contain 0x00 and due keys arbitrary bytes).
func keyHash(key, value []byte) uint64 {
	var d xxhash.Digest
	d.Reset()
	var n [binary.MaxVarintLen64]byte
	_, _ = d.Write(n[:binary.PutUvarint(n[:], uint64(len(key)))]) // Digest writes never fail
	_, _ = d.Write(key)
	_, _ = d.Write(value)
	return d.Sum64()
}

// checksumLen is the length of a stored checksum: Sum and Count, big-endian.
const checksumLen = 16

func encodeChecksum(c Checksum) []byte {
	v := make([]byte, 0, checksumLen)
	return binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(v, c.Sum), c.Count)
}

func decodeChecksum(v []byte) (Checksum, error) {
	if len(v) != checksumLen {
		return Checksum{}, fmt.Errorf("storage: malformed slot checksum %x", v)
	}
	return Checksum{Sum: binary.BigEndian.Uint64(v), Count: binary.BigEndian.Uint64(v[8:])}, nil
}

// sumTracker is what a Batch has written to each slot since NewBatch, for
// the checksums Commit writes: every write of a data key, and whether the
// slot was dropped first (then no key written before the drop survives,
// and no key's old value needs to be read).
type sumTracker struct {
	off   bool // the store keeps no checksums: track nothing
	slots map[uint16]*slotWrites
	// last caches the entry of the slot written last: batches write runs
	// of keys of one slot.
	last     *slotWrites
	lastSlot uint16
	keys     []byte // the keys of all writes, back to back
	// taught: tasks whose knowledge of their stored record was set by
	// writes of this batch (prior.go); they forget it unless the batch
	// is applied.
	taught  []*Task
	applied bool
}

type slotWrites struct {
	dropped bool
	writes  []keyWrite
}

// keyWrite is one write of a key.
type keyWrite struct {
	off, n uint32 // the key is sumTracker.keys[off : off+n]
	seq    uint32 // the write's position among the slot's writes
	live   bool   // set (true) or deleted
	// captured: the write is among the batch's captured ops (Capture),
	// so opPriors can say what it replaced (KeepPriors).
	captured bool
	hash     uint64 // keyHash of the value set; 0 for a delete
	// prior is what the caller knows the key held before the write
	// (prior.go). Only the first write of a key in a batch says what
	// the store held; Commit reads it when that one is unknown.
	prior prior
}

func (t *sumTracker) slot(slot uint16) *slotWrites {
	if t.last != nil && t.lastSlot == slot {
		return t.last
	}
	if t.slots == nil {
		t.slots = map[uint16]*slotWrites{}
	}
	w := t.slots[slot]
	if w == nil {
		w = &slotWrites{}
		t.slots[slot] = w
	}
	t.last, t.lastSlot = w, slot
	return w
}

// track records a set (live) or delete of key, which held p before, and
// returns the keyHash of the value set (0 for a delete, or when nothing is
// tracked). Keys other than data keys are not covered by checksums.
func (t *sumTracker) track(key, value []byte, live, captured bool, p prior) uint64 {
	if t.off {
		return 0
	}
	slot, section, _, ok := decodeSlotKey(key)
	if !ok || !isDataSection(section) {
		return 0
	}
	sw := t.slot(slot)
	w := keyWrite{off: uint32(len(t.keys)), n: uint32(len(key)), seq: uint32(len(sw.writes)), live: live, captured: captured, prior: p}
	if live {
		w.hash = keyHash(key, value)
	}
	t.keys = append(t.keys, key...)
	sw.writes = append(sw.writes, w)
	return w.hash
}

// drop records that every key of slot was deleted: writes tracked before
// are void.
func (t *sumTracker) drop(slot uint16) {
	if t.off {
		return
	}
	w := t.slot(slot)
	w.dropped = true
	w.writes = w.writes[:0]
}

// sortWrites sorts ws by key, and the writes of one key in the order made,
// so that the last write of each key is the last of its run. Writes that
// are in key order already (a snapshot, a batch of one task) are not
// sorted again.
func (t *sumTracker) sortWrites(ws []keyWrite) {
	cmp := func(x, y keyWrite) int {
		if c := bytes.Compare(t.keys[x.off:x.off+x.n], t.keys[y.off:y.off+y.n]); c != 0 {
			return c
		}
		return int(x.seq) - int(y.seq)
	}
	if !slices.IsSortedFunc(ws, cmp) {
		slices.SortFunc(ws, cmp)
	}
}

// slotSum is a slot's checksum as a commit leaves it.
type slotSum struct {
	slot uint16
	sum  Checksum
}

// addChecksums adds to b the new checksum of every slot b writes: the
// stored one (zero for a dropped slot), minus the stored value of every
// key b writes, plus the value b leaves it with. It returns the new
// checksums for the cache. The caller holds s.sums from before this call
// until b is committed, so what it reads is exactly what b replaces.
//
// It reads through one iterator, slot by slot and key by key in ascending
// order, with prefix seeks: pebble turns such seeks into short nexts where
// it can, and a prefix seek consults bloom filters (most new keys are in
// no table) as a Get does. Measured on a disk store of 100000 tasks, with
// the blocks mostly not cached: ~1 us a key, against ~2.5 us for a Get per
// key.
func (b *Batch) addChecksums(dst []slotSum) (_ []slotSum, err error) {
	t := &b.sums
	slots := make([]uint16, 0, len(t.slots))
	for s := range t.slots {
		slots = append(slots, s)
	}
	slices.Sort(slots)
	var it *pebble.Iterator
	defer func() {
		if it != nil {
			closeIter(it, &err)
		}
	}()
	// stored looks key up: its value and whether it is stored.
	stored := func(key []byte) ([]byte, bool, error) {
		b.s.sums.reads++
		if it == nil {
			var err error
			if it, err = b.s.newSlotIter(); err != nil {
				return nil, false, err
			}
		}
		if !it.SeekPrefixGE(key) || !bytes.Equal(it.Key(), key) {
			return nil, false, it.Error()
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return nil, false, fmt.Errorf("storage: read %q for its checksum: %w", key, err)
		}
		return v, true, nil
	}
	var ckey [slotPrefixLen + 1]byte
	for _, slot := range slots {
		w := t.slots[slot]
		key := appendChecksumKey(ckey[:0], slot)
		var old Checksum
		if !w.dropped {
			var ok bool
			if old, ok = b.s.sums.m[slot]; !ok {
				v, ok, err := stored(key)
				if err != nil {
					return nil, err
				}
				if ok {
					if old, err = decodeChecksum(v); err != nil {
						return nil, fmt.Errorf("storage: slot %d: %w", slot, err)
					}
				}
			}
		}
		sum := old
		t.sortWrites(w.writes)
		keyOf := func(kw keyWrite) []byte { return t.keys[kw.off : kw.off+kw.n] }
		// Per run of writes of one key: the first says what the store
		// held (or it is read), the last what the batch leaves.
		for i := 0; i < len(w.writes); {
			first := w.writes[i]
			k := keyOf(first)
			j := i + 1
			for j < len(w.writes) && bytes.Equal(k, keyOf(w.writes[j])) {
				j++
			}
			last := w.writes[j-1]
			i0 := i
			i = j
			if !w.dropped {
				p := first.prior
				if p.kind == priorUnknown || checkPriors {
					v, ok, err := stored(k)
					if err != nil {
						return nil, err
					}
					if checkPriors {
						checkPrior(k, p, v, ok)
					}
					p = nonePrior
					if ok {
						p = prior{priorValue, keyHash(k, v)}
					}
				}
				w.writes[i0].prior = p // what the store held: OpPriors
				if p.kind == priorValue {
					sum.remove(p.hash)
				}
			}
			if last.live {
				sum.add(last.hash)
			}
		}
		// A slot has a checksum key exactly when its checksum is not zero
		// (after DropSlot there is none).
		switch {
		case sum == old: // nothing to write (a dropped slot left empty has no key already)
		case sum != Checksum{}:
			_ = b.pb.Set(key, encodeChecksum(sum), nil)
		case old != Checksum{}:
			_ = b.pb.Delete(key, nil)
		}
		dst = append(dst, slotSum{slot, sum})
	}
	return dst, nil
}

// storedChecksum reads the checksum stored under key; had reports whether
// there was one.
func (s *Store) storedChecksum(key []byte) (c Checksum, had bool, err error) {
	v, closer, err := s.db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return Checksum{}, false, nil
	}
	if err != nil {
		return Checksum{}, false, fmt.Errorf("storage: read checksum: %w", err)
	}
	c, err = decodeChecksum(v)
	_ = closer.Close() // never fails for Get's closer
	return c, true, err
}

// ErrNoChecksums is returned by SlotChecksum and RepairSlotChecksum of a
// store opened with Options.DisableChecksums.
var ErrNoChecksums = errors.New("storage: slot checksums are disabled")

// SlotChecksum returns slot's maintained checksum: from memory, or one
// point read the first time. Read it where no write to the slot can
// interleave (the node's writer goroutine) to pair it with the slot's seq.
func (s *Store) SlotChecksum(slot uint16) (Checksum, error) {
	if !s.enter() {
		return Checksum{}, ErrClosed
	}
	defer s.leave()
	if !s.checksums {
		return Checksum{}, ErrNoChecksums
	}
	s.sums.Lock()
	defer s.sums.Unlock()
	if c, ok := s.sums.m[slot]; ok {
		return c, nil
	}
	var key [slotPrefixLen + 1]byte
	c, _, err := s.storedChecksum(appendChecksumKey(key[:0], slot))
	if err != nil {
		return Checksum{}, fmt.Errorf("storage: slot %d: %w", slot, err)
	}
	s.sums.m[slot] = c
	return c, nil
}

// ComputeSlotChecksum computes slot's checksum from its keys, reading a
// consistent snapshot: a scan of the whole slot, for verification and
// tests. It equals SlotChecksum unless a write is committed in between, or
// the maintained checksum is wrong. It works with DisableChecksums too.
func (s *Store) ComputeSlotChecksum(slot uint16) (c Checksum, err error) {
	if !s.enter() {
		return Checksum{}, ErrClosed
	}
	defer s.leave()
	return s.computeSlotChecksum(slot)
}

func (s *Store) computeSlotChecksum(slot uint16) (c Checksum, err error) {
	var lo, hi [slotPrefixLen]byte
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: appendSlotPrefix(lo[:0], slot), UpperBound: appendSlotEnd(hi[:0], slot)})
	if err != nil {
		return Checksum{}, fmt.Errorf("storage: checksum slot %d: %w", slot, err)
	}
	defer closeIter(it, &err)
	for valid := it.First(); valid; valid = it.Next() {
		if _, section, _, _ := decodeSlotKey(it.Key()); !isDataSection(section) {
			continue
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return Checksum{}, fmt.Errorf("storage: checksum slot %d: %w", slot, err)
		}
		c.add(keyHash(it.Key(), v))
	}
	return c, it.Error()
}

// RepairSlotChecksum recomputes slot's checksum from its keys and stores it
// if the maintained one differs, which it only does after a bug or a
// corruption. It returns both; writes to the slot wait meanwhile. A node
// that keeps resyncing a follower to no avail checks its own copy with it.
func (s *Store) RepairSlotChecksum(slot uint16) (was, now Checksum, err error) {
	if err := s.Failed(); err != nil {
		return Checksum{}, Checksum{}, err
	}
	if !s.enter() {
		return Checksum{}, Checksum{}, ErrClosed
	}
	defer s.leave()
	defer s.catch(&err)
	if !s.checksums {
		return Checksum{}, Checksum{}, ErrNoChecksums
	}
	s.sums.Lock()
	defer s.sums.Unlock()
	var key [slotPrefixLen + 1]byte
	k := appendChecksumKey(key[:0], slot)
	was, had, err := s.storedChecksum(k)
	if err != nil {
		return Checksum{}, Checksum{}, fmt.Errorf("storage: slot %d: %w", slot, err)
	}
	if now, err = s.computeSlotChecksum(slot); err != nil {
		return Checksum{}, Checksum{}, err
	}
	switch {
	case now == was:
	case now != Checksum{}:
		err = s.db.Set(k, encodeChecksum(now), pebble.Sync)
	case had:
		err = s.db.Delete(k, pebble.Sync)
	}
	if err != nil {
		return Checksum{}, Checksum{}, fmt.Errorf("storage: repair checksum of slot %d: %w", slot, err)
	}
	s.sums.m[slot] = now
	return was, now, nil
}

// forgetChecksums deletes the checksum version from the store, for a store
// opened with DisableChecksums: its checksum keys go stale from the first
// commit, and the next Open that keeps checksums must rebuild them.
func forgetChecksums(db *pebble.DB) error {
	_, closer, err := db.Get(nodeKeyChecksums)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("storage: read checksum version: %w", err)
	}
	_ = closer.Close()
	if err := db.Delete(nodeKeyChecksums, pebble.Sync); err != nil {
		return fmt.Errorf("storage: forget checksums: %w", err)
	}
	return nil
}

// ensureChecksums makes the stored checksums those of ChecksumVersion:
// when the store says it keeps another version (or none: a store written
// before checksums existed, or a new one), it computes every slot's
// checksum in one scan and writes them, with the version, in one batch.
func ensureChecksums(db *pebble.DB) (err error) {
	v, closer, err := db.Get(nodeKeyChecksums)
	switch {
	case err == nil:
		ok := len(v) == 1 && v[0] == ChecksumVersion
		_ = closer.Close()
		if ok {
			return nil
		}
	case !errors.Is(err, pebble.ErrNotFound):
		return fmt.Errorf("storage: read checksum version: %w", err)
	}
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: slotKeysLower, UpperBound: slotKeysUpper})
	if err != nil {
		return fmt.Errorf("storage: rebuild checksums: %w", err)
	}
	defer closeIter(it, &err)
	b := db.NewBatch()
	defer b.Close()
	var (
		slot uint16
		sum  Checksum
		had  bool // slot has a checksum key
		key  []byte
	)
	flush := func() {
		key = appendChecksumKey(key[:0], slot)
		switch {
		case sum != Checksum{}:
			_ = b.Set(key, encodeChecksum(sum), nil)
		case had:
			_ = b.Delete(key, nil)
		}
	}
	for valid := it.First(); valid; valid = it.Next() {
		ks, section, _, ok := decodeSlotKey(it.Key())
		if !ok {
			return fmt.Errorf("storage: rebuild checksums: malformed key %q", it.Key())
		}
		if ks != slot {
			flush()
			slot, sum, had = ks, Checksum{}, false
		}
		switch {
		case isDataSection(section):
			v, err := it.ValueAndErr()
			if err != nil {
				return fmt.Errorf("storage: rebuild checksums: %w", err)
			}
			sum.add(keyHash(it.Key(), v))
		case section == sectionChecksum:
			had = true
		}
	}
	if err := it.Error(); err != nil {
		return fmt.Errorf("storage: rebuild checksums: %w", err)
	}
	flush()
	_ = b.Set(nodeKeyChecksums, []byte{ChecksumVersion}, nil)
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("storage: rebuild checksums: %w", err)
	}
	return nil
}
