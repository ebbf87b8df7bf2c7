package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/cockroachdb/pebble/v2"
	"github.com/vmihailenco/msgpack/v5"
)

// Replication support. The owner of a slot builds its batches with capture
// on (Batch.Capture); TakeSlotOps then returns, per slot, the key mutations
// the batch made to that slot, in order, encoded compactly. The follower
// applies them with Batch.ApplySlotOps, so a replica holds exactly the keys
// the owner holds (tasks, due index, history) without recomputing anything.
// Every slot also has a SlotMeta (epoch and last applied seq) that each node
// keeps for itself: it is never captured.

// Op kinds inside SlotOps.Data.
const (
	opSet byte = 1
	opDel byte = 2
)

// SlotOps is the mutations of one slot from one batch.
type SlotOps struct {
	Slot uint16
	// Count is the number of mutations in Data.
	Count int
	// Data is Count records of: kind byte (1 set, 2 delete), uvarint key
	// length, key (a full key of the slot), and for a set a uvarint value
	// length and the value.
	Data []byte
	// Priors, when not empty, says what each record replaced, for the
	// slot checksums (prior.go), as the owner's commit found it (KeepPriors):
	// Count entries of a kind byte, 0 unknown, 1 nothing stored, 2 a
	// value, followed by its keyHash (8 bytes, big endian). A replica at
	// the same position holds what the owner held, so it need not read
	// the keys again.
	Priors []byte
}

// Kinds of a SlotOps.Priors entry.
const (
	priorByteUnknown byte = 0
	priorByteNone    byte = 1
	priorByteValue   byte = 2
)

// KeepPriors makes Commit, once it has applied b, set the Priors of each of
// ops, which b captured (TakeSlotOps), to what each op's key held before
// it as the commit found it: the value it read, or the one the writing
// Task knew (prior.go). Ops of a slot b keeps no checksum for, or drops,
// get none; an op whose key b also wrote uncaptured gets "unknown".
func (b *Batch) KeepPriors(ops []SlotOps) { b.keepPriors = ops }

// opPriors returns SlotOps.Priors for o (KeepPriors), after b's commit
// applied it.
func (b *Batch) opPriors(o SlotOps) []byte {
	t := &b.sums
	if t.off || !t.applied {
		return nil
	}
	w := t.slots[o.Slot]
	if w == nil || w.dropped || len(w.writes) == 0 {
		return nil
	}
	keyOf := func(kw keyWrite) []byte { return t.keys[kw.off : kw.off+kw.n] }
	out := make([]byte, 0, o.Count*9)
	var nth map[string]int // ops seen of keys o writes more than once
	d := o.Data
	for len(d) > 0 {
		_, key, _, rest, err := nextOp(d)
		if err != nil {
			return nil // not b's capture
		}
		d = rest
		// The run of key's writes (sorted by key, then order: Commit).
		lo, _ := slices.BinarySearchFunc(w.writes, key, func(kw keyWrite, key []byte) int { return bytes.Compare(keyOf(kw), key) })
		hi := lo
		all := true // every write of the run was captured
		for hi < len(w.writes) && bytes.Equal(keyOf(w.writes[hi]), key) {
			all = all && w.writes[hi].captured
			hi++
		}
		i := lo
		if hi-lo > 1 {
			if nth == nil {
				nth = map[string]int{}
			}
			i += nth[string(key)]
			nth[string(key)]++
		}
		switch {
		case !all || i >= hi:
			out = append(out, priorByteUnknown)
		case i > lo && w.writes[i-1].live:
			out = append(out, priorByteValue)
			out = binary.BigEndian.AppendUint64(out, w.writes[i-1].hash)
		case i > lo:
			out = append(out, priorByteNone)
		default:
			out = appendPrior(out, w.writes[i].prior)
		}
	}
	return out
}

func appendPrior(out []byte, p prior) []byte {
	switch p.kind {
	case priorNone:
		return append(out, priorByteNone)
	case priorValue:
		return binary.BigEndian.AppendUint64(append(out, priorByteValue), p.hash)
	}
	return append(out, priorByteUnknown)
}

// decodePriors parses SlotOps.Priors of count records.
func decodePriors(b []byte, count int) ([]prior, error) {
	ps := make([]prior, 0, min(count, len(b)))
	for len(b) > 0 {
		switch b[0] {
		case priorByteUnknown:
			ps = append(ps, unknownPrior)
			b = b[1:]
		case priorByteNone:
			ps = append(ps, nonePrior)
			b = b[1:]
		case priorByteValue:
			if len(b) < 9 {
				return nil, fmt.Errorf("%w: short prior", errBadOps)
			}
			ps = append(ps, prior{priorValue, binary.BigEndian.Uint64(b[1:9])})
			b = b[9:]
		default:
			return nil, fmt.Errorf("%w: prior kind %d", errBadOps, b[0])
		}
	}
	if len(ps) != count {
		return nil, fmt.Errorf("%w: %d priors for %d records", errBadOps, len(ps), count)
	}
	return ps, nil
}

// Capture makes b record every key mutation it makes, per slot, for
// TakeSlotOps. Call it before the first write.
func (b *Batch) Capture() {
	b.mustOpen()
	if b.capture == nil {
		b.capture = map[uint16]*SlotOps{}
	}
}

// set and del are the only ways Batch methods write keys; setOver and
// delOver say what the key held before (prior.go). setOver returns the
// keyHash of the value set, 0 when checksums are off.
func (b *Batch) set(key, value []byte) { b.setOver(key, value, unknownPrior) }

func (b *Batch) setOver(key, value []byte, p prior) uint64 {
	if isDueKey(key) {
		// Commit marks the slot after the key is written (dueMarks).
		s, w := dueSlot(key), dueWake(key)
		if n := len(b.dueSlots); n > 0 && b.dueSlots[n-1].slot == s {
			b.dueSlots[n-1].wake = min(b.dueSlots[n-1].wake, w)
		} else {
			b.dueSlots = append(b.dueSlots, dueSet{s, w})
		}
	}
	_ = b.pb.Set(key, value, nil) // pebble copies; batch writes only fail on a closed batch
	h := b.sums.track(key, value, true, b.capture != nil, p)
	if b.capture != nil {
		b.record(opSet, key, value)
	}
	return h
}

func (b *Batch) del(key []byte) { b.delOver(key, unknownPrior) }

func (b *Batch) delOver(key []byte, p prior) {
	_ = b.pb.Delete(key, nil)
	b.sums.track(key, nil, false, b.capture != nil, p)
	if b.capture != nil {
		b.record(opDel, key, nil)
	}
}

func (b *Batch) record(kind byte, key, value []byte) {
	slot, _, _, ok := decodeSlotKey(key)
	if !ok {
		return // node-local keys are never replicated
	}
	o := b.capture[slot]
	if o == nil {
		o = &SlotOps{Slot: slot}
		b.capture[slot] = o
	}
	o.Count++
	o.Data = append(o.Data, kind)
	o.Data = binary.AppendUvarint(o.Data, uint64(len(key)))
	o.Data = append(o.Data, key...)
	if kind == opSet {
		o.Data = binary.AppendUvarint(o.Data, uint64(len(value)))
		o.Data = append(o.Data, value...)
	}
}

// TakeSlotOps returns the captured mutations per slot, in slot order, and
// starts a new capture. Without Capture it returns nil.
func (b *Batch) TakeSlotOps() []SlotOps {
	if len(b.capture) == 0 {
		return nil
	}
	out := make([]SlotOps, 0, len(b.capture))
	for _, o := range b.capture {
		out = append(out, *o)
	}
	slices.SortFunc(out, func(x, y SlotOps) int { return int(x.Slot) - int(y.Slot) })
	clear(b.capture)
	return out
}

// errBadOps reports malformed replicated ops.
var errBadOps = errors.New("storage: malformed slot ops")

// ApplySlotOps adds o's mutations to b. It checks every record and every
// key (it must be a data key of o.Slot: not its meta or checksum) and
// o.Priors before writing any, so a malformed o writes nothing.
//
// It takes what o.Priors says each record replaced as true: a replica
// applies ops only at the position they were made from, where it holds
// what the owner held, so its checksum moves exactly as the owner's did.
// A difference between the two copies' data still shows: the same ops add
// the same amounts to both sums, which keep differing by what differed
// before (or was changed outside the ops). What it no longer catches is a
// wrong claim of the owner's writer (prior.go), which leaves both sums
// equally wrong over equal data until a snapshot's read-based sum meets
// the owner's (anti-entropy then repairs the owner's).
func (b *Batch) ApplySlotOps(o SlotOps) error { return b.ApplySlotOpsKnowing(o, nil) }

// ApplySlotOpsKnowing is ApplySlotOps for a caller that knows which task
// ids the store does not hold: mayHold(id) false says no record of id is
// stored, so a task key or due index entry of id that o writes replaces
// nothing and Commit need not read it for the slot checksum (prior.go).
// mayHold may answer true for any id (that only costs the read) but must
// never answer false for a stored one; the node's id filter is such a
// function. It relies on the due index's invariant: an entry exists only
// beside its task's record. nil: every key is read.
//
// A follower applying a create is the common case: without it every
// replicated create cost two point reads of keys that do not exist.
func (b *Batch) ApplySlotOpsKnowing(o SlotOps, mayHold func(id []byte) bool) error {
	b.mustOpen()
	type rec struct {
		kind       byte
		key, value []byte
	}
	if o.Count < 0 || o.Count > len(o.Data) {
		// Every record takes bytes: a count beyond them is a lie, and
		// must not size an allocation (issue 11: a count of -1 panicked
		// in makeslice).
		return fmt.Errorf("%w: %d records in %d bytes", errBadOps, o.Count, len(o.Data))
	}
	recs := make([]rec, 0, min(o.Count, 1024))
	d := o.Data
	for len(d) > 0 {
		kind, key, value, rest, err := nextOp(d)
		if err != nil {
			return err
		}
		d = rest
		slot, section, _, ok := decodeSlotKey(key)
		if !ok || slot != o.Slot || !isDataSection(section) {
			return fmt.Errorf("%w: key %q is not a data key of slot %d", errBadOps, key, o.Slot)
		}
		recs = append(recs, rec{kind: kind, key: key, value: value})
	}
	if len(recs) != o.Count {
		return fmt.Errorf("%w: %d records, header says %d", errBadOps, len(recs), o.Count)
	}
	var priors []prior
	if len(o.Priors) > 0 {
		var err error
		if priors, err = decodePriors(o.Priors, len(recs)); err != nil {
			return err
		}
	}
	for i, r := range recs {
		p := unknownPrior
		if priors != nil {
			p = priors[i]
		}
		if p.kind == priorUnknown && mayHold != nil {
			if id := keyTaskID(r.key); id != nil && !mayHold(id) {
				p = nonePrior
			}
		}
		if r.kind == opSet {
			b.setOver(r.key, r.value, p)
		} else {
			b.delOver(r.key, p)
		}
	}
	return nil
}

// keyTaskID returns the task id of a task key or a due index key (nil for
// any other key).
func keyTaskID(k []byte) []byte {
	_, section, rest, ok := decodeSlotKey(k)
	switch {
	case !ok:
		return nil
	case section == sectionTask && len(rest) > 0:
		return rest
	case section == sectionDue && len(rest) > 8:
		return rest[8:]
	}
	return nil
}

// SlotMeta is one node's replication state of a slot: where its data is
// (Epoch, Seq) and what the ownership state machine persisted (Role,
// OwnEpoch, OwnSeq, Grantee, Handed, HandedSeq, WasOwner, HandedBare,
// HandedTook; opaque to storage).
// Fields added later are omitted when empty, so a meta written before they
// existed decodes with them empty, which is what they meant then.
type SlotMeta struct {
	// Epoch is the epoch of the slot's data on this node: the owner that
	// wrote the last group applied (or, on the owner, sent).
	Epoch uint64 `msgpack:"e"`
	// Seq is the last replicated group applied (or sent). It only grows
	// along one slot's history, across epochs.
	Seq uint64 `msgpack:"s"`
	// Role is the node's role for the slot.
	Role uint8 `msgpack:"r"`
	// OwnEpoch is the highest epoch of the slot this node knows of; it
	// never goes down. OwnSeq is the state machine's seq at OwnEpoch.
	OwnEpoch uint64 `msgpack:"me,omitempty"`
	OwnSeq   uint64 `msgpack:"mq,omitempty"`
	// Grantee is the node that may hold this owner's lease grant.
	Grantee string `msgpack:"g,omitempty"`
	// Handed is the importer this node handed the slot over to, keeping
	// the final copy (up to HandedSeq) for it (slots.SlotState.Handed).
	Handed    string `msgpack:"h,omitempty"`
	HandedSeq uint64 `msgpack:"hq,omitempty"`
	// HandedDropped are the dead nodes that handover carries
	// (slots.SlotState.HandedDropped: names, comma-separated).
	HandedDropped string `msgpack:"hd,omitempty"`
	// WasOwner is slots.SlotState.WasOwner: this node holds the one
	// complete copy of OwnEpoch, not as owner.
	WasOwner bool `msgpack:"w,omitempty"`
	// HandedBare is slots.SlotState.HandedBare: the handover to Handed
	// kept no copy.
	HandedBare bool `msgpack:"hb,omitempty"`
	// HandedTook is slots.SlotState.HandedTook: the importer that took
	// OwnEpoch from this node's handover, the record of it ended.
	HandedTook string `msgpack:"ht,omitempty"`
	// FinalOf is slots.SlotState.FinalOf: this node owned that epoch and
	// its data (at Epoch, which equals it) is still that epoch's complete
	// copy.
	FinalOf uint64 `msgpack:"fo,omitempty"`
}

// maxMetaDropped bounds SlotMeta.HandedDropped (a few names in
// practice) as the ownership wire bounds the list.
const maxMetaDropped = 1024 * (maxMetaName + 1)

// maxMetaName bounds the node names in a stored SlotMeta, as the ownership
// wire bounds them: a longer one is corruption, not a name.
const maxMetaName = 1024

func appendMetaKey(dst []byte, slot uint16) []byte { return appendSection(dst, slot, sectionMeta) }

// PutSlotMeta sets slot's meta in b. It is never captured.
func (b *Batch) PutSlotMeta(slot uint16, m SlotMeta) {
	b.mustOpen()
	// Encoded by hand as msgpack encodes it (slotmeta_enc.go): no
	// reflection for a write that every slot state change makes.
	var buf [96]byte
	var key [slotPrefixLen + 1]byte
	_ = b.pb.Set(appendMetaKey(key[:0], slot), appendSlotMeta(buf[:0], &m), nil)
}

// DecodeSlotMeta decodes a stored slot meta (the value PutSlotMeta wrote).
// It rejects a node name over 1 KiB.
func DecodeSlotMeta(b []byte) (SlotMeta, error) {
	var m SlotMeta
	if err := msgpack.Unmarshal(b, &m); err != nil {
		return SlotMeta{}, err
	}
	if len(m.HandedDropped) > maxMetaDropped {
		return SlotMeta{}, fmt.Errorf("storage: slot meta hands over %d bytes of dropped nodes, over %d", len(m.HandedDropped), maxMetaDropped)
	}
	if l := max(len(m.Grantee), len(m.Handed), len(m.HandedTook)); l > maxMetaName {
		return SlotMeta{}, fmt.Errorf("storage: slot meta names a node of %d bytes, over %d", l, maxMetaName)
	}
	return m, nil
}

// SlotMetas returns every slot's stored meta.
func (s *Store) SlotMetas() (_ map[uint16]SlotMeta, err error) {
	if !s.enter() {
		return nil, ErrClosed
	}
	defer s.leave()
	out := map[uint16]SlotMeta{}
	it, err := s.newSlotIter()
	if err != nil {
		return nil, err
	}
	defer closeIter(it, &err)
	var key [slotPrefixLen + 1]byte
	for slot := 0; slot <= int(^uint16(0)); slot++ {
		k := appendMetaKey(key[:0], uint16(slot))
		if !it.SeekGE(k) {
			break
		}
		got, _, _, ok := decodeSlotKey(it.Key())
		if !ok {
			break
		}
		if int(got) > slot {
			slot = int(got) - 1 // skip slots without keys
			continue
		}
		if string(it.Key()) == string(k) {
			m, err := DecodeSlotMeta(it.Value())
			if err != nil {
				return nil, fmt.Errorf("storage: slot %d meta: %w", slot, err)
			}
			out[uint16(slot)] = m
		}
	}
	return out, nil
}

// ScanSlot calls fn with every data key of slot and its value (tasks, due
// index, history; not the meta or checksum), in key order, from one
// consistent snapshot: the stream a new replica is built from. fn must not
// keep key or value after it returns. fn returns false to stop.
func (s *Store) ScanSlot(slot uint16, fn func(key, value []byte) bool) (err error) {
	if !s.enter() {
		return ErrClosed
	}
	defer s.leave()
	var lo, hi [slotPrefixLen + 1]byte
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: appendSlotPrefix(lo[:0], slot), UpperBound: appendSlotEnd(hi[:0], slot)})
	if err != nil {
		return fmt.Errorf("storage: scan slot %d: %w", slot, err)
	}
	defer closeIter(it, &err)
	for valid := it.First(); valid; valid = it.Next() {
		if _, section, _, _ := decodeSlotKey(it.Key()); !isDataSection(section) {
			continue
		}
		if !fn(it.Key(), it.Value()) {
			break
		}
	}
	return nil
}

// DropSlot deletes every key of slot in b, meta and checksum included,
// before a replica is rebuilt from a snapshot in the same batch. It is
// never captured. The slot's checksum then covers exactly the keys b
// writes after the drop.
//
// A slot of at most dropByKeys keys (an empty one: a new follower's) is
// deleted key by key, the rest with one range deletion. A memtable's
// range deletions are fragmented again by every read after a write, so a
// failover's thousands of snapshots, one range deletion each, made every
// fire's read of its task redo thousands of fragments while they lasted.
// The keys are read where b is built: the caller must be the slot's only
// writer (the node's writer goroutine is).
func (b *Batch) DropSlot(slot uint16) {
	b.mustOpen()
	if keys, ok := b.fewKeys(slot); ok {
		for _, k := range keys {
			_ = b.pb.Delete(k, nil)
		}
		// The meta and checksum keys b itself may have set (untracked).
		var mk, ck [slotPrefixLen + 1]byte
		_ = b.pb.Delete(appendMetaKey(mk[:0], slot), nil)
		_ = b.pb.Delete(appendChecksumKey(ck[:0], slot), nil)
	} else {
		var lo, hi [slotPrefixLen]byte
		_ = b.pb.DeleteRange(appendSlotPrefix(lo[:0], slot), appendSlotEnd(hi[:0], slot), nil)
	}
	b.sums.drop(slot)
}

// dropByKeys is the most keys DropSlot deletes one by one.
const dropByKeys = 16

// fewKeys returns the committed keys of slot if there are at most
// dropByKeys of them and b wrote none of its data keys (those are tracked
// only with checksums on); ok false otherwise.
func (b *Batch) fewKeys(slot uint16) (keys [][]byte, ok bool) {
	if b.sums.off {
		return nil, false
	}
	if w := b.sums.slots[slot]; w != nil && (w.dropped || len(w.writes) > 0) {
		return nil, false
	}
	if b.s.manyKeys(slot) {
		return nil, false // no need to look: a slot handed away is often large
	}
	// Pebble may use the bounds until the next SetBounds returns: the two
	// sets alternate.
	bd := &b.probeBounds[b.probeFlip]
	b.probeFlip ^= 1
	lower, upper := appendSlotPrefix(bd[0][:0], slot), appendSlotEnd(bd[1][:0], slot)
	if b.probe == nil {
		if !b.s.enter() {
			return nil, false // closed: the batch will not commit anyway
		}
		it, err := b.s.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
		if err != nil {
			b.s.leave()
			return nil, false
		}
		b.probe = it
	} else {
		b.probe.SetBounds(lower, upper)
	}
	it := b.probe
	for valid := it.First(); valid; valid = it.Next() {
		if len(keys) == dropByKeys {
			return nil, false
		}
		keys = append(keys, slices.Clone(it.Key()))
	}
	return keys, it.Error() == nil
}

// manyKeys reports whether slot's maintained checksum, if the store holds
// it in memory, counts more than dropByKeys data keys. It only spares
// fewKeys a read: a count that is wrong costs a range deletion or a probe,
// never a key left behind.
func (s *Store) manyKeys(slot uint16) bool {
	s.sums.Lock()
	defer s.sums.Unlock()
	c, ok := s.sums.m[slot]
	return ok && c.Count > dropByKeys
}

// closeProbe closes fewKeys' iterator, if open, and lets the store close.
func (b *Batch) closeProbe() {
	if b.probe != nil {
		_ = b.probe.Close()
		b.probe = nil
		b.s.leave()
	}
}

// SnapshotSlot returns every data key of slot as set ops: applied after
// DropSlot, it rebuilds the slot exactly.
func (s *Store) SnapshotSlot(slot uint16) (_ SlotOps, err error) {
	r := s.NewSlotReader()
	defer func() {
		if cerr := r.Close(); err == nil {
			err = cerr
		}
	}()
	return r.Snapshot(slot)
}

// SlotReader takes snapshots of slots (SnapshotSlot) through one Pebble
// iterator, repositioned from slot to slot, instead of one new iterator per
// slot: a burst of snapshots (a bootstrap or a failover streams one per
// slot a follower lacks) costs one iterator's setup, not thousands. It
// reads the store as Open (or else the first Snapshot) found it, whatever
// is committed after: open it where the slots' positions are known to
// match the data (the node's writer goroutine, between two commits), then
// read it anywhere, one goroutine at a time. It holds the store open
// (Close waits for it) until its Close.
type SlotReader struct {
	s      *Store
	it     *pebble.Iterator
	err    error // the store was closed, or the iterator failed to open
	bounds [2][2][slotPrefixLen]byte
	flip   int
}

// NewSlotReader returns a SlotReader; it opens its iterator at Open or the
// first Snapshot.
func (s *Store) NewSlotReader() *SlotReader { return &SlotReader{s: s} }

// Open pins the store's committed state now: every later Snapshot reads
// it. A second Open does nothing.
func (r *SlotReader) Open() error {
	if r.it != nil || r.err != nil {
		return r.err
	}
	if !r.s.enter() {
		r.err = ErrClosed
		return r.err
	}
	it, err := r.s.db.NewIter(&pebble.IterOptions{})
	if err != nil {
		r.s.leave()
		r.err = fmt.Errorf("storage: open a slot reader: %w", err)
		return r.err
	}
	r.it = it
	return nil
}

// Snapshot returns every data key of slot as set ops, as SnapshotSlot.
func (r *SlotReader) Snapshot(slot uint16) (SlotOps, error) {
	o := SlotOps{Slot: slot}
	if err := r.Open(); err != nil {
		return o, err
	}
	// Pebble may use the bounds until the next SetBounds returns: the two
	// buffers alternate.
	b := &r.bounds[r.flip]
	r.flip ^= 1
	r.it.SetBounds(appendSlotPrefix(b[0][:0], slot), appendSlotEnd(b[1][:0], slot))
	for valid := r.it.First(); valid; valid = r.it.Next() {
		k := r.it.Key()
		if _, section, _, _ := decodeSlotKey(k); !isDataSection(section) {
			continue
		}
		v, err := r.it.ValueAndErr()
		if err != nil {
			return SlotOps{Slot: slot}, fmt.Errorf("storage: snapshot slot %d: %w", slot, err)
		}
		o.Count++
		o.Data = append(o.Data, opSet)
		o.Data = binary.AppendUvarint(o.Data, uint64(len(k)))
		o.Data = append(o.Data, k...)
		o.Data = binary.AppendUvarint(o.Data, uint64(len(v)))
		o.Data = append(o.Data, v...)
	}
	if err := r.it.Error(); err != nil {
		return SlotOps{Slot: slot}, fmt.Errorf("storage: snapshot slot %d: %w", slot, err)
	}
	return o, nil
}

// Close closes the iterator, if one was opened, and lets the store close.
func (r *SlotReader) Close() error {
	if r.it == nil {
		return nil
	}
	err := r.it.Close()
	r.it = nil
	r.err = ErrClosed
	r.s.leave()
	if err != nil {
		return fmt.Errorf("storage: iterate: %w", err)
	}
	return nil
}

// TaskIDs returns the ids whose task record o sets or deletes, in order
// (an id may repeat). Malformed data ends the list early; ApplySlotOps
// reports it.
func (o SlotOps) TaskIDs() []string {
	var ids []string
	d := o.Data
	for len(d) > 0 {
		_, key, _, rest, err := nextOp(d)
		if err != nil {
			return ids
		}
		d = rest
		if _, id, ok := decodeTaskKey(key); ok {
			ids = append(ids, id)
		}
	}
	return ids
}

// nextOp splits the first record off SlotOps.Data d: its kind, key and
// (for a set) value, and the records after it.
func nextOp(d []byte) (kind byte, key, value, rest []byte, err error) {
	kind, d = d[0], d[1:]
	if kind != opSet && kind != opDel {
		return 0, nil, nil, nil, fmt.Errorf("%w: kind %d", errBadOps, kind)
	}
	n, k := binary.Uvarint(d)
	if k <= 0 || uint64(len(d)-k) < n {
		return 0, nil, nil, nil, fmt.Errorf("%w: key length", errBadOps)
	}
	key, d = d[k:k+int(n)], d[k+int(n):]
	if kind == opSet {
		n, k := binary.Uvarint(d)
		if k <= 0 || uint64(len(d)-k) < n {
			return 0, nil, nil, nil, fmt.Errorf("%w: value length", errBadOps)
		}
		value, d = d[k:k+int(n)], d[k+int(n):]
	}
	return kind, key, value, d, nil
}

// WithoutCapture runs fn with capture off: what fn writes (a replica's
// apply, a pulled snapshot) is not returned by TakeSlotOps.
func (b *Batch) WithoutCapture(fn func()) {
	c := b.capture
	b.capture = nil
	defer func() { b.capture = c }()
	fn()
}
