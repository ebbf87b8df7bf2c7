package storage

import "fmt"

// What a write replaces, for the slot checksums. Commit must subtract the
// contribution of every key a batch overwrites or deletes, and by default
// it reads each such key's stored value (checksum.go). The writer of a
// task usually knows that value already: it read the record (Get) or wrote
// it (PutTask) itself, and a new task has nothing stored. A Task carries
// that knowledge (storedRecord) from Get to the PutTask or DeleteTask of
// the same record, so that Commit reads only what nobody knew:
//
//   - the task key: the record's stored encoding (its keyHash), or none;
//   - its due index entries: the one at the record's stored wake (the
//     prevWake PutTask is given, the Wake DeleteTask sees) exists and is
//     empty; the key at any other wake does not exist (the due index holds
//     exactly one entry per task with a wake);
//   - the next history key (AppendExecution) does not exist.
//
// History keys a DeleteTask finds in the store are still read at Commit:
// storage read them itself, at build time, and cannot vouch that nothing
// changed them before the commit.
//
// The knowledge is only as good as the caller's contract: it must be the
// only writer of the task's keys from the read to the commit (the node's
// writer goroutine is), and prevWake must be the stored record's wake. A
// record changed behind the Task's back (another writer, a replica apply
// the caller did not account for) or a wrong prevWake makes the maintained
// checksum wrong, and the replicas' too: they take what the owner's commit
// found (SlotOps.Priors). A snapshot's checksum is read-based, so
// anti-entropy finds the slot differing once a replica is resynced, and
// the owner repairs its own (RepairSlotChecksum); a build with -tags
// invariants reads every known value anyway, on owners and replicas, and
// panics on a difference.

// priorKind is what a write's caller knows the key held before the batch.
type priorKind uint8

const (
	priorUnknown priorKind = iota // Commit reads the stored value
	priorNone                     // the key is not stored
	priorValue                    // the key is stored; prior.hash is keyHash(key, value)
)

// prior is what a key held before a write, as far as the caller knows.
type prior struct {
	kind priorKind
	hash uint64
}

var (
	unknownPrior = prior{}
	nonePrior    = prior{kind: priorNone}
)

// emptyPrior is the prior of an existing key with an empty value (a due
// index entry).
func emptyPrior(key []byte) prior { return prior{priorValue, keyHash(key, nil)} }

// storedRecord is a Task's knowledge of the record stored under its task
// key. It holds for that key only: a copy whose ID or Slot was changed
// knows nothing. It does not name the store: a Task read from one store
// and written to another must be told with Replaces what it replaces there
// (the node's writer has one store).
type storedRecord struct {
	id    string
	slot  uint16
	prior prior
}

// knows returns what t knows of its stored record: unknownPrior when it
// knows nothing, or its knowledge is of another key.
func (t *Task) knows() prior {
	if t.stored.id != t.ID || t.stored.slot != t.Slot {
		return unknownPrior
	}
	return t.stored.prior
}

func (t *Task) setStored(p prior) { t.stored = storedRecord{id: t.ID, slot: t.Slot, prior: p} }

// Replaces tells the next PutTask (or DeleteTask) of t what the store holds
// under t's key: old, the record stored there as Get returned it (or as
// the caller last passed it to PutTask), or nil when no record is stored
// under t's (Slot, ID). The caller vouches for it (see prior.go); a record
// built by the caller knows nothing until then, and its write costs Commit
// a read of each key it replaces.
func (t *Task) Replaces(old *Task) {
	switch {
	case old == nil:
		t.setStored(nonePrior)
	case old.ID == t.ID && old.Slot == t.Slot:
		t.setStored(old.knows())
	default:
		t.setStored(unknownPrior)
	}
}

// DecodeStoredTask is DecodeTask for b that is exactly what s holds under
// the task's key, for example a copy of EncodeTask's encoding of the record
// last passed to PutTask (a cache of written records): t then knows its
// stored record, as after Get. The caller vouches for it (prior.go).
func (s *Store) DecodeStoredTask(b []byte, t *Task) error {
	if err := DecodeTask(b, t); err != nil {
		return err
	}
	if s.checksums {
		c := getCodec()
		c.key = appendTaskKey(c.key[:0], t.Slot, t.ID)
		t.setStored(prior{priorValue, keyHash(c.key, b)})
		putCodec(c)
	}
	return nil
}

// dueKeyPrior is what the due index held at the key of wake, for a task
// whose record the caller knows to be r with stored wake storedWake: the
// entry at storedWake exists, no other does (none when no record is
// stored).
func dueKeyPrior(r prior, key []byte, wake, storedWake int64) prior {
	switch {
	case r.kind == priorUnknown:
		return unknownPrior
	case r.kind == priorValue && wake == storedWake:
		return emptyPrior(key)
	}
	return nonePrior
}

// checkPrior panics if p is known and the stored value of key (v, ok as
// read) contradicts it: a build with -tags invariants checks every claim.
func checkPrior(key []byte, p prior, v []byte, ok bool) {
	switch {
	case p.kind == priorNone && ok:
		panic(fmt.Sprintf("storage: a write claimed %q was not stored, but it is", key))
	case p.kind == priorValue && !ok:
		panic(fmt.Sprintf("storage: a write claimed %q was stored, but it is not", key))
	case p.kind == priorValue && keyHash(key, v) != p.hash:
		panic(fmt.Sprintf("storage: a write's claim about the stored value of %q is wrong", key))
	}
}
