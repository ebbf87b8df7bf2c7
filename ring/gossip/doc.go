// Package gossip is Chime's cluster membership: which nodes exist, whether
// they are alive, and each node's small metadata (HTTP address, boot id,
// lifecycle state, protocol version). It wraps hashicorp/memberlist (SWIM
// gossip) behind a Membership that copies everything memberlist reports
// into its own view and hands changes to one consumer as Events.
//
// It lives beside ring, not in it: ring is a pure function from members to
// a slot table, and this package does the I/O that feeds it.
//
//	cfg := gossip.DefaultLocalConfig()
//	cfg.Name, cfg.BindPort = "n1", 7946
//	m, err := gossip.New(cfg)              // starts nothing
//	err = m.Start(gossip.Meta{HTTPAddr: "127.0.0.1:7070", BootID: boot, State: gossip.StateJoining, Proto: 1})
//	n, err := m.Join(seeds)                // push/pull with every seed
//	for {
//		select {
//		case ev, ok := <-m.Events():         // copied, numbered changes
//			...
//		case <-m.Resync():                   // an event was dropped
//			members, seq := m.Snapshot()     // rebuild; skip events with Seq <= seq
//		}
//	}
//	err = m.SetState(gossip.StateActive)   // gossiped to everyone
//	err = m.Leave(time.Second)             // peers see "left", not "dead"
//
// What it is not: it does not compute slots (ring.Assign does, from the
// members that are Up and StateActive), it does not carry bulk data (nodes
// talk HTTP for forwarding and replication); the only message it gossips
// itself is a node's leave intent. node/cluster.go runs it: its events
// become the node's views.
//
// # Event contract
//
// memberlist calls back under its internal node lock. The callbacks copy
// the member (the *memberlist.Node is rewritten in place afterwards),
// update the view, number the change (Event.Seq, from 1, no gaps) and do a
// non-blocking send into Events, buffered to Config.EventBuffer. On
// overflow the event is dropped, counted (Stats.EventsDropped), logged at
// WARN at most once per DropLogInterval, and Resync is signalled. A
// consumer that handles Resync by re-reading Snapshot and skipping events
// with Seq <= the snapshot's seq is never left with a wrong view by a
// dropped event. The view is the only place member data is read from:
// memberlist's own Members() returns pointers that race with its updates.
//
// # Lifecycle
//
// New validates and copies the Config and starts nothing. Start creates the
// memberlist (binding sockets unless Config.Transport is set) and starts
// the reconnect loop, the only goroutine this package starts; memberlist
// starts its own. Join pushes and pulls state with every given address.
// Leave broadcasts a leave, waits LeaveWait, and shuts down; Close shuts
// down without a leave. Both are idempotent, wait for the reconnect loop
// and close Events. memberlist's Shutdown does not wait for memberlist's
// goroutines: they exit at their next wakeup (suspicion timers, handlers
// blocked on a stream deadline), so tests in a synctest bubble sleep ~30 s
// of fake time after the last Close.
//
// # Invariants
//
//   - Encoded Meta is [version byte][msgpack body], at most MetaMaxSize
//     (512) bytes; Start and SetState refuse a Meta that does not fit, so
//     NodeMeta always fits memberlist's limit. Undecodable meta from a peer
//     is never a panic: that member's Meta is zero (StateUnknown, not
//     eligible).
//   - Members, Snapshot and Events are sorted or numbered deterministically:
//     Snapshot by name, Events by Seq.
//   - A member is StatusSuspect never today (memberlist v0.7.0 has no
//     suspicion callback), so a suspect member reads as alive until declared
//     dead; dead and left members stay in the view until they rejoin.
//   - Left versus dead: memberlist's NotifyLeave is the same for both and
//     it does not maintain Node.State, so Leave first gossips a leave intent
//     (Serf's approach, intent.go). A death after the intent, or an intent
//     after the death, reads as StatusLeft; a death without one as
//     StatusDead. Intents are scoped to the leaver's BootID.
//   - A dead member is retried every ReconnectInterval (one per tick, round
//     robin) for ReconnectTimeout, so a healed partition re-merges; memberlist
//     alone never would.
//
// # Concurrency
//
// All Membership methods are safe for concurrent use. Start, Leave and
// Close are serialized with each other (memberlist's Leave must not follow
// its Shutdown); Leave blocks up to 2 × timeout + LeaveWait, Join up to
// TCPTimeout per unreachable address, SetState up to UpdateTimeout. No
// method holds the view's lock while calling memberlist, and the callbacks
// never call memberlist, so there is no lock-order cycle with memberlist's
// node lock.
//
// # Testing
//
// Multi-node tests use package memnet, a lossy in-memory Transport, inside
// testing/synctest so that probe intervals and suspicion timeouts run in
// fake time: a 3-node join, crash detection and partition heal take
// milliseconds of real time.
package gossip
