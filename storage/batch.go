package storage

import (
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// Batch collects writes that commit atomically. A Batch is not safe for
// concurrent use. Writes are invisible until Commit; after Commit or Close
// the Batch must not be used again (except Close, which is idempotent).
type Batch struct {
	s   *Store
	pb  *pebble.Batch // nil once committed or closed
	c   *codec        // reused value and key buffers, owned while pb != nil
	err error         // first error met while building, returned by Commit
	// capture, when non-nil, records every data-key mutation per slot
	// (Capture, TakeSlotOps in replica.go).
	capture map[uint16]*SlotOps
	// keepPriors: ops whose Priors Commit sets (KeepPriors).
	keepPriors []SlotOps
	// sums tracks the data keys written per slot, for the slot checksums
	// Commit writes (checksum.go).
	sums sumTracker
	// appended maps the executions AppendExecution added to their
	// execution log index keys, so a trim or DeleteTask in the same batch
	// finds them (one map lookup: a group's batch holds thousands).
	appended map[appendedExec][]byte
	// dueSlots are the slots whose due keys the batch sets, marked after
	// the commit (dueMarks).
	dueSlots []dueSet
	// probe reads the keys of slots DropSlot drops (fewKeys): one
	// iterator per batch, repositioned; it holds the store open until
	// closeProbe. probeBounds alternate, as SlotReader's do.
	probe       *pebble.Iterator
	probeBounds [2][2][slotPrefixLen]byte
	probeFlip   int
}

// appendedExec names one execution AppendExecution added to a batch.
type appendedExec struct {
	slot uint16
	id   string
	seq  uint64
}

// NewBatch returns an empty batch. Release it with Commit or Close.
func (s *Store) NewBatch() *Batch {
	return &Batch{s: s, pb: s.db.NewBatch(), c: getCodec(), sums: sumTracker{off: !s.checksums}}
}

func (b *Batch) mustOpen() {
	if b.pb == nil {
		panic("storage: use of a Batch after Commit or Close")
	}
}

func mustValidID(id string) {
	if !ValidID(id) {
		panic(fmt.Sprintf("storage: invalid task id %q (callers must check ValidID)", id))
	}
}

func mustWake(w int64) {
	if w < 0 {
		panic(fmt.Sprintf("storage: negative wake %d (wake instants are >= 0 by invariant)", w))
	}
}

// PutTask sets the task record of t (under t.Slot, t.ID) and keeps the due
// index in step with t.Wake(). prevWake is the wake of the record being
// replaced as it is stored (0 for a new task or one not in the index): its
// index entry is deleted when the wake moves. PutTask panics if t.ID is not
// a ValidID or a wake is negative.
//
// When t knows the record stored under its key (read by Get, last written
// by PutTask, or declared with Replaces; see prior.go), Commit does not
// read the keys PutTask replaces for the slot checksum; otherwise it reads
// each. Afterwards t knows the record it wrote.
func (b *Batch) PutTask(t *Task, prevWake int64) {
	b.mustOpen()
	mustValidID(t.ID)
	wake := t.Wake()
	mustWake(wake)
	mustWake(prevWake)
	known := t.knows()
	c := b.c
	c.val = appendTask(c.val[:0], t)
	c.key = appendTaskKey(c.key[:0], t.Slot, t.ID)
	h := b.setOver(c.key, c.val, known)
	if prevWake != wake && prevWake != 0 {
		c.key = appendDueKey(c.key[:0], t.Slot, prevWake, t.ID)
		b.delOver(c.key, dueKeyPrior(known, c.key, prevWake, prevWake))
	}
	if wake != 0 {
		c.key = appendDueKey(c.key[:0], t.Slot, wake, t.ID)
		b.setOver(c.key, nil, dueKeyPrior(known, c.key, wake, prevWake))
	}
	if h != 0 {
		b.teach(t, prior{priorValue, h})
	} else {
		t.setStored(unknownPrior)
	}
}

// teach makes t know the record b leaves under its key, once b is applied:
// Close forgets it again if b is not (prior.go).
func (b *Batch) teach(t *Task, p prior) {
	t.setStored(p)
	if !b.sums.off {
		b.sums.taught = append(b.sums.taught, t)
	}
}

// DeleteTask deletes t's task record, its due index entry (at t.Wake(), so
// pass the task as stored) and its whole execution history: every history
// key stored for the id, plus the ones AppendExecution added to this batch
// (seqs above the stored ones, up to t.HistSeq).
//
// History goes with point deletions found by a short bounded scan, not one
// range deletion: pebble re-fragments a memtable's range tombstones on every
// read after a write, and with thousands of them (one per deleted task) a
// delete+Get cycle was measured at ~10 ms instead of ~5 µs.
func (b *Batch) DeleteTask(t *Task) {
	b.mustOpen()
	mustValidID(t.ID)
	wake := t.Wake()
	mustWake(wake)
	known := t.knows()
	b.teach(t, nonePrior)
	c := b.c
	c.key = appendTaskKey(c.key[:0], t.Slot, t.ID)
	b.delOver(c.key, known)
	if wake != 0 {
		c.key = appendDueKey(c.key[:0], t.Slot, wake, t.ID)
		b.delOver(c.key, dueKeyPrior(known, c.key, wake, wake))
	}
	stored, err := b.deleteStoredHistory(t.Slot, t.ID)
	if err != nil {
		b.setErr(err)
		return
	}
	// Records appended in this batch are not in the store yet.
	from := max(stored, t.HistSeq-min(t.HistSeq, b.s.historyLimit)) + 1
	for seq := from; seq <= t.HistSeq; seq++ {
		c.key = appendHistKey(c.key[:0], t.Slot, t.ID, seq)
		b.del(c.key)
		if k := b.appendedKey(t.Slot, t.ID, seq); k != nil {
			b.del(k)
		}
	}
}

// appendedKey returns the index key of execution (slot, id, seq) appended
// in this batch, nil if none.
func (b *Batch) appendedKey(slot uint16, id string, seq uint64) []byte {
	return b.appended[appendedExec{slot, id, seq}]
}

// deleteStoredHistory adds a point deletion for every stored history key of
// (slot, id) and returns the highest seq it found (0 if none).
func (b *Batch) deleteStoredHistory(slot uint16, id string) (maxSeq uint64, err error) {
	if !b.s.enter() {
		return 0, ErrClosed
	}
	defer b.s.leave()
	c := b.c
	c.key = appendHistPrefix(c.key[:0], slot, id)
	c.end = appendHistEnd(c.end[:0], slot, id)
	it, err := b.s.db.NewIter(&pebble.IterOptions{LowerBound: c.key, UpperBound: c.end})
	if err != nil {
		return 0, fmt.Errorf("storage: delete history of %q: %w", id, err)
	}
	defer closeIter(it, &err)
	var e Execution
	var ik []byte
	for valid := it.First(); valid; valid = it.Next() {
		b.del(it.Key()) // the batch copies the key
		_, _, seq, ok := decodeHistKey(it.Key())
		if ok {
			maxSeq = max(maxSeq, seq)
		}
		// Its execution log index entry goes with it. A record that does
		// not decode has none this batch can name (pre-index records
		// have none at all).
		if v, verr := it.ValueAndErr(); ok && verr == nil && DecodeExecution(v, &e) == nil {
			ik = appendExecLogKey(ik[:0], slot, execOutcome(&e), e.FinishedAt, id, seq)
			b.del(ik)
		}
	}
	return maxSeq, it.Error()
}

// AppendExecution increments t.HistSeq and writes e as history record
// t.HistSeq. Once more than Options.HistoryLimit records exist, the one that
// falls out of the window is deleted in the same batch (no scan). The caller
// must then PutTask(t, …) in the same batch to persist HistSeq.
func (b *Batch) AppendExecution(t *Task, e *Execution) {
	b.mustOpen()
	mustValidID(t.ID)
	// A task that knows its stored record knows its HistSeq: the next
	// history key is not stored.
	next := unknownPrior
	if t.knows().kind != priorUnknown {
		next = nonePrior
	}
	t.HistSeq++
	c := b.c
	c.val = appendExecution(c.val[:0], e)
	c.key = appendHistKey(c.key[:0], t.Slot, t.ID, t.HistSeq)
	b.setOver(c.key, c.val, next)
	// Its execution log index entry, in the same batch (keys.go).
	ik := appendExecLogKey(nil, t.Slot, execOutcome(e), e.FinishedAt, t.ID, t.HistSeq)
	b.setOver(ik, nil, next)
	if b.appended == nil {
		b.appended = make(map[appendedExec][]byte)
	}
	b.appended[appendedExec{t.Slot, t.ID, t.HistSeq}] = ik
	if limit := b.s.historyLimit; t.HistSeq > limit {
		old := t.HistSeq - limit
		c.key = appendHistKey(c.key[:0], t.Slot, t.ID, old)
		if k := b.appendedKey(t.Slot, t.ID, old); k != nil {
			b.del(k)
		} else if k := b.s.execLogKeyOf(c.key); k != nil {
			b.del(k)
		}
		c.key = appendHistKey(c.key[:0], t.Slot, t.ID, old) // execLogKeyOf may not keep it
		b.del(c.key)
	}
}

func (b *Batch) setErr(err error) {
	if b.err == nil {
		b.err = err
	}
}

// Count returns the number of operations (sets, deletes, range deletes) in
// the batch, or 0 after Commit or Close.
func (b *Batch) Count() int {
	if b.pb == nil {
		return 0
	}
	return int(b.pb.Count())
}

// Size returns the encoded size of the batch in bytes, or 0 after Commit or
// Close; callers can use it to bound batches.
func (b *Batch) Size() int {
	if b.pb == nil {
		return 0
	}
	return b.pb.Len()
}

// Commit applies the batch atomically and releases it. With sync=false the
// writes are visible at once and durable after a later Store.Sync (or any
// later sync commit); with sync=true Commit returns after the WAL fsync,
// which also covers every commit before it (an empty batch still syncs).
// Commit returns ErrClosed after Store.Close, or the first error met while
// building the batch (DeleteTask's history read); then nothing is
// written. Commit panics if called twice.
//
// A batch that writes slot data keys also updates those slots' checksums
// (checksum.go): it reads the stored value of every key it writes that
// the writing Task did not know (prior.go; none for a slot it drops
// first) and applies under a store-wide mutex, so such
// commits apply one at a time; a sync waits for its fsync after releasing
// the mutex, so concurrent syncs still share one.
func (b *Batch) Commit(sync bool) (err error) {
	b.mustOpen()
	defer b.Close()
	b.closeProbe()
	defer b.bumpDue() // after the commit, before Close
	if b.err != nil {
		return b.err
	}
	if err := b.s.Failed(); err != nil {
		return err
	}
	if !b.s.enter() {
		return ErrClosed
	}
	defer b.s.leave()
	defer b.s.catch(&err)
	if len(b.sums.slots) > 0 {
		return b.commitWithChecksums(sync)
	}
	wo := pebble.NoSync
	if sync {
		wo = pebble.Sync
	}
	if b.pb.Empty() {
		if sync {
			err = b.s.db.LogData(nil, wo)
		}
	} else {
		err = b.pb.Commit(wo)
	}
	if err != nil {
		return fmt.Errorf("storage: commit: %w", err)
	}
	return nil
}

// commitWithChecksums is Commit for a batch that writes slot data keys.
func (b *Batch) commitWithChecksums(sync bool) error {
	s := b.s
	err := func() error {
		s.sums.Lock()
		defer s.sums.Unlock() // also when the commit panics (Store.catch)
		sums, err := b.addChecksums(nil)
		if err == nil {
			err = b.pb.Commit(pebble.NoSync)
		}
		if err == nil {
			b.sums.applied = true
			for _, ss := range sums {
				s.sums.m[ss.slot] = ss.sum
			}
		}
		return err
	}()
	if err == nil {
		for i := range b.keepPriors {
			b.keepPriors[i].Priors = b.opPriors(b.keepPriors[i])
		}
	}
	if err == nil && sync {
		// The WAL is sequential: this fsync covers the batch.
		err = s.db.LogData(nil, pebble.Sync)
	}
	if err != nil {
		return fmt.Errorf("storage: commit: %w", err)
	}
	return nil
}

// Close releases the batch without committing it. It is idempotent and a
// no-op after Commit. Tasks written to a batch that was not applied forget
// what they learnt of their stored record (prior.go).
// bumpDue marks the slots whose due keys b set as possibly holding due
// keys, after the commit (dueMarks). A failed commit marks them too.
func (b *Batch) bumpDue() {
	b.s.writes.Add(1)
	for _, d := range b.dueSlots {
		b.s.due.bump(d.slot, d.wake)
	}
	b.dueSlots = b.dueSlots[:0]
}

func (b *Batch) Close() {
	if b.pb == nil {
		return
	}
	if !b.sums.applied {
		for _, t := range b.sums.taught {
			t.setStored(unknownPrior)
		}
	}
	b.closeProbe()
	_ = b.pb.Close() // only fails on a double close, which b.pb = nil prevents
	putCodec(b.c)
	b.pb, b.c, b.sums, b.keepPriors = nil, nil, sumTracker{}, nil
}
