// Package node wires one Chime node: the Pebble store (package storage), a
// writer goroutine, the timing-wheel loop (package wheel), the callback
// dispatcher (package node/dispatch) and the HTTP API of docs/API.md
// (package node/httpapi, which reaches the node through httpapi.Backend,
// implemented in api.go), and in a cluster the
// membership (package node/membership over ring/gossip, wired in
// membership_wiring.go), the ownership machine (package slots,
// run by node/ownership), replication and anti-entropy (package
// node/replication), the live dashboard's snapshot (package
// node/dashboard, behind dashboard.Source in dashboard_wiring.go), the
// authentication of calls between nodes (package node/internalauth) and
// gossip key rotation (package node/keyring), the last two wired in
// internal_wiring.go. The writer's leaf packages: node/firing (a record's
// firing state machine), node/flow (the flow limiter), node/chain (the
// chain outbox, wired in chain.go), node/idfilter (the id Bloom filter)
// and node/metrics (the collectors); calls between nodes go through
// node/forward. The pure packages it wires (wheel, ring,
// slots) start no goroutines and read no clock; node starts the goroutines
// listed below (Pebble, ring/gossip with memberlist, and the dashboard, ui,
// start their own).
//
// # One clock
//
// The node has one clock, Config.Clock (a clock.Clock from package
// node/clock; nil means clock.Real). New hands it, at construction, to
// every part that reads the time or waits: the writer and the loop (through
// the Config they share), the cluster, the forwarder, the shipper and the
// anti-entropy checker, the ownership executor, the dispatcher, the HTTP
// API, and as its Now to internalauth and the dashboard. Only node/clock
// calls time.Now, Since, After, NewTimer or NewTicker
// (scripts/check-deps.sh fails on any other call under node/); tests fake
// time with testing/synctest, in which clock.Real is fake time too.
// Waiting for a state is done on a notification, not a poll: a held
// request on the board's change (ownership.Board.AwaitHeld), a drain on
// the view's and the board's (Board.Changed), a shipper flush on the end
// of the round that empties its queue.
//
// # Goroutines and data flow
//
//		HTTP handlers ──ops──▶ writer ──committed group──▶ syncer ──▶ replies, jobs of API groups
//		                         ▲  │                                                  │
//		                         │  ├──wake changes (at the commit)──▶ loop             ▼
//		       results (opDone)  │  └──jobs of the other groups (at the commit)──▶ dispatcher
//		dispatcher workers ──────┘        loop ──expired ids (opFire)──▶ writer
//
//	  - The writer is the only goroutine that changes task records. It applies
//	    a group of ops to one batch, commits it without waiting for the disk
//	    and hands it to the syncer, which makes every committed group durable
//	    with one fsync (group commit) and only then answers the API. The loop
//	    learns of wake times at the commit; a fire of a task whose API write
//	    is not acknowledged yet waits for it (writer_ackgate.go), so a create
//	    is never fired before it is acknowledged.
//	  - The loop owns the timing wheel. It keeps in it the tasks whose wake
//	    time is within Window, extends that window from the due index every
//	    LoadInterval, and sends expired entries to the writer, which decides
//	    from the record (entries are hints; a stale one costs a read).
//	  - The dispatcher (package node/dispatch, which knows nothing of tasks or
//	    storage) runs callbacks on a fixed pool of workers with a limit per
//	    callback host; each result goes back to the writer as an op.
//
// # Goroutines and what each owns
//
// Node.Start starts them; Node.Close (shutdown) stops them in this order:
// loop, dispatcher, anti-entropy, drain, ctl, cluster, writer and syncer,
// shipper, background watchers, then the store is closed.
//
//   - writer (writer.run, writer.go; one struct per op kind in writer_ops.go,
//     records and API ops in writer_tasks.go, fires and results in
//     writer_fire.go): the only goroutine that changes task
//     records and slot metadata; applies each group of ops (API writes,
//     fire starts, results, replicated groups, ctl's persists) to one
//     Pebble batch and commits it. Owns its record caches and its
//     replication state (writer_repl.go) and answers checksum reads
//     (writer_sums.go). Stops when shutdown
//     closes writer.stop: it applies what is queued and closes the syncq.
//   - syncer (writer.syncLoop, started by the writer): fsyncs committed
//     groups, then answers the API, sends wake changes to the loop and fire
//     jobs to the dispatcher. A group whose API writes wait for replicas
//     gets a short goroutine (writer.replWaits) that finishes it once they
//     acknowledged or failed. Stops when the writer closes the syncq
//     (closes writer.done).
//   - loop (loop.run, loop.go): owns the timing wheel and the frontier;
//     sends expired entries to the writer (opFire). Its scanner
//     (loop.scanner) reads the due index off the loop goroutine. Stops
//     first, on loop.close; the scanner ends when the loop closes scanReq.
//   - dispatcher workers (dispatcher.worker, dispatch.go; Concurrency of
//     them, 512 by default): each runs one callback attempt at a time with
//     its own scratch and HMAC state; results go to the writer as opDone.
//     dispatcher.close(ctx) returns the queued jobs and cuts running
//     callbacks when ctx ends.
//   - background watchers (n.bg): countTasks counts the stored tasks and
//     fills, later rebuilds, the id filter; the overdue scan
//     (health.Monitor.Scan, package node/health) counts overdue tasks;
//     watchStorage waits for the store to fail (Store.FailedC)
//     and then stops the node (storageFailed, on a goroutine of its own).
//     They stop when shutdown closes n.stopBG.
//
// In a cluster also:
//
//   - cluster (membership.Cluster's run, package node/membership, wired in
//     membership_wiring.go): turns membership events into views and
//     installs them in order (Node.installView). Its joinLoop joins
//     through the seeds, turns the node active and retries seeds until
//     each was seen. Both stop on Cluster.Close (leave) or Cluster.Kill.
//   - ctl (ownership.Executor.Run, package node/ownership, wired in
//     ownership.go): owns slots.Machine; feeds it views, ticks, other
//     nodes' messages and what the writer applied (all posted to its
//     ownership.Board, n.ctl), carries out its effects through the
//     interfaces it was built with and publishes on the board per slot the
//     role, epoch and firing gate, waking requests held for a moving slot
//     (awaitHeld). It sends the machine's messages to each peer on a
//     goroutine per peer in flight (POST /internal/v1/ctl), and runs the
//     stall watch (stallWatch.run, stalls.go), which only beats and hands
//     each beat to the loop as its Tick. All stop on Executor.Close (n.exec), before the node leaves the
//     gossip.
//   - shipper (replication.Shipper.Run, package node/replication, wired in
//     replication_wiring.go): sends queued replication messages (write
//     groups from the writer, slot snapshots ctl asks for) to the replicas
//     in rounds, one request per peer in parallel, through the forwarder;
//     reads snapshots through the writer. Owns its queue, backoffs and the
//     groups' replication.Wait. Stops on Shipper.Close, after the writer.
//   - anti-entropy (replication.Checker.Run, same package; unless
//     AntiEntropyInterval is 0): has the replicas of a slice of the owned
//     slots compare checksums each tick, reading its own on the writer
//     (writer_sums.go). Owns its memory of the checks. Stops on
//     Checker.Close.
//   - chain outbox (chain.Outbox.Run, package node/chain, wired in
//     chain.go): creates the children the writer hands it (parents whose
//     fire finished with a chain) through their slots' owners; owns its
//     queue and the claimed parents, and answers each parent to the writer
//     (opChainDone). Stops with the background watchers.
//
// A replica's side of both (POST /internal/v1/replicate, /antientropy)
// runs on the HTTP handler's goroutine: authenticated and bounded in
// replication_wiring.go, decoded and checked by package node/replication,
// applied by the writer (writer_repl.go, writer_sums.go).
//
// HTTP handlers (package node/httpapi) run on the server's goroutines
// (cmd/chime owns the server); a batch split over owners, a cluster-wide
// listing, the dashboard snapshot and the key fan-out start goroutines
// that end with their request.
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
