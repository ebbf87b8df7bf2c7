// Package node wires one Chime node: the Pebble store (package storage), a
// writer goroutine, the timing-wheel loop (package wheel), the callback
// dispatcher and the HTTP API of API.md. It is the only package that starts
// goroutines, reads the clock or talks to the network.
//
// # Goroutines and data flow
//
//		HTTP handlers ──ops──▶ writer ──committed group──▶ syncer ──▶ replies, wake changes, jobs
//		                         ▲                                        │            │
//		       results (opDone)  │                        loop ◀──────────┘            ▼
//		dispatcher workers ──────┘        loop ──expired ids (opFire)──▶ writer   dispatcher
//
//	  - The writer is the only goroutine that changes task records. It applies
//	    a group of ops to one batch, commits it without waiting for the disk
//	    and hands it to the syncer, which makes every committed group durable
//	    with one fsync (group commit) and only then answers the API, tells the
//	    loop about new wake times and hands fire jobs to the dispatcher. A
//	    create is thus never fired before it is acknowledged, and a fire's
//	    intent is on disk before its callback is sent.
//	  - The loop owns the timing wheel. It keeps in it the tasks whose wake
//	    time is within Window, extends that window from the due index every
//	    LoadInterval, and sends expired entries to the writer, which decides
//	    from the record (entries are hints; a stale one costs a read).
//	  - The dispatcher (package node/dispatch, which knows nothing of tasks or
//	    storage) runs callbacks on a fixed pool of workers with a limit per
//	    callback host; each result goes back to the writer as an op.
//
// # Guarantees
//
//   - A 2xx on a write means it is fsynced.
//   - A fire is never sent before its due time: the wheel returns only
//     entries with due <= now and the writer re-checks the record.
//   - Every fire is persisted as in flight before its callback and as done
//     after it, in batches; after a crash an in-flight fire is repeated with
//     the same X-Chime-Fire-Id, a finished one never.
//   - Fires of one task never overlap; periodic schedules advance from the
//     fire's logical due time, so they do not drift.
//   - Overload answers 429: the API write queue and the dispatcher backlog
//     are bounded, and fires beyond the backlog wait in the store.
package node
