// Package storage is Chime's durable state on one node: task records, the
// due index that says when each task next needs attention, and a bounded
// execution history per task, kept in one Pebble database.
//
// It is the only package that imports Pebble, and its surface is
// Pebble-free: a *Store, a *Batch of writes, the records in record.go and two
// sentinel errors (ErrNotFound, ErrClosed).
//
// It is not a scheduler and not a replication log: it does not hash ids to
// slots (callers pass Task.Slot), compute due times, decide ownership or
// talk to other nodes. It keeps what replication needs of it (replica.go:
// captured per-slot ops, snapshots, each slot's SlotMeta) and, for
// anti-entropy, a checksum of every slot's data (checksum.go).
//
// # Key layout
//
// Integers are big-endian so byte order is numeric order; slot is a uint16.
// Prefix and section bytes are written to disk: ONLY APPEND new ones, never
// change or reuse a value.
//
//	purpose    key                                         value
//	---------  ------------------------------------------  ------------------------
//	task       's' slot 'T' id                              msgpack Task
//	due index  's' slot 'D' wake(uint64, unix ns) id        empty; wake = Task.Wake()
//	history    's' slot 'H' id 0x00 seq(uint64)             msgpack Execution
//	exec log   's' slot 'E' outcome finished(uint64) id 0x00 seq(uint64)  empty; one per history record (execlog.go)
//	flow       's' slot 'F' key                             Flow (flow.go); slot = the key's slot
//	slot meta  's' slot 'M'                                 msgpack SlotMeta (epoch, seq, role)
//	checksum   's' slot 'C'                                 Checksum: sum(u64) count(u64)
//	node meta  'n' name                                     node-local ("checksums": scheme version; "voters"; "consents")
//
// Every key of a slot lies in ['s' slot, 's' slot+1), so a slot is scanned,
// streamed or dropped (DropSlot: one DeleteRange, or a few point deletes
// for a slot of few keys) as one contiguous range.
// The task, due index, history, execution log and flow keys are the slot's data: what is
// replicated, snapshotted and covered by the checksum. The meta and
// checksum keys are each node's own and travel with none of them.
// Ids are 1-128 characters of A-Z a-z 0-9 . _ ~ : - { } (ValidID), so they never
// contain 0x00 and the history of one id is exactly ['s' slot 'H' id 0x00,
// 's' slot 'H' id 0x01).
//
// # Invariants
//
//   - A task with Wake() == w > 0 has exactly one due index entry, at w; a
//     task with Wake() == 0 has none. Batch.PutTask keeps this given the
//     wake of the record it replaces; wakes are never negative (PutTask
//     panics otherwise). A wake is a fire time (next due, trigger, retry)
//     or, for a final task, its expiry (Task.ExpireAt): the owner deletes
//     the task when it comes, so expiry needs no scan of the tasks.
//   - History records of a task are numbered 1..Task.HistSeq; at most
//     HistoryLimit of the newest exist (while HistoryLimit is not lowered). AppendExecution trims the record
//     that falls out of the window in the same batch.
//   - A slot's checksum key holds Checksum over its data keys (the sum of
//     keyHash(key, value) and their count) and exists exactly when that
//     is not zero. Commit keeps it in the same batch as the writes it
//     covers, from the stored value of each key the batch writes: read,
//     unless the writing Task knew it (prior.go); Open
//     rebuilds all of them when the "checksums" node key does not name
//     the current scheme. Options.DisableChecksums stops all of this and
//     deletes that node key.
//   - Range deletions are used only for whole slots (DropSlot). Pebble
//     re-fragments all range tombstones of a memtable on the first read after
//     each write, so one per deleted task made reads quadratic; DeleteTask
//     deletes history key by key instead.
//   - Records are msgpack arrays: a format version, then the fields in a
//     fixed, append-only order (codec.go), with the shortest integer and
//     length forms and sorted map keys: the same record always encodes to
//     the same bytes.
//
// # Durability contract
//
// Batch.Commit(false) makes the writes visible to readers at once, but they
// are durable only after a later Store.Sync (or a later Commit(true)) has
// returned; a crash before that may lose them. Commit(true) returns after
// the write-ahead log fsync. The API acknowledges a write (2xx) only after
// one of these syncs covers it, and the node must not fire a task whose
// create is not yet acknowledged. Concurrent Commit(true) and Sync calls
// share fsyncs (group commit), so many small writers cost few fsyncs.
//
// # Memory
//
// The block cache holds Options.CacheSize bytes of blocks; memtables come on
// top (pebble charges them to the cache, so the store sizes the cache for
// both). Together they stay within Options.MemoryBytes, CacheSize +
// 3*MemTableSize (80 MiB with the defaults), give or take a block per
// cache shard: pebble evicts per shard, after an insertion. In cgo builds pebble allocates
// both with C malloc, outside the Go heap: what the process's RSS shows for
// them also depends on how much freed memory the C allocator keeps
// (chime serve tunes glibc's, see --memory-limit).
//
// # Concurrency
//
// A Store is safe for concurrent use by any number of goroutines. Scans read
// a consistent snapshot; their callbacks may call other Store methods but
// must not call Close. Close waits for operations in flight, after which
// every method returns ErrClosed. A Batch belongs to one goroutine.
// Commits that write slot data apply one at a time (they read what they
// replace and nobody knew, for the checksums); their fsyncs are still
// shared. What a Task knows of its stored record (prior.go) assumes its
// writer is the only one writing that task between reading and commit.
//
// # Usage
//
//	st, err := storage.Open(storage.Options{Dir: dir})
//	...
//	b := st.NewBatch()
//	b.PutTask(t, 0) // new task: no previous wake
//	if err := b.Commit(false); err != nil { ... }
//	if err := st.Sync(); err != nil { ... } // now acknowledge
//	err = st.ScanDue(owned, now, now+window, func(slot uint16, id string, wake int64) bool {
//		... // load into the wheel
//		return true
//	})
package storage
