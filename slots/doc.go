// Package slots maps task ids to the 16384 slots that the cluster divides
// between its nodes (Of), and decides, per slot, which node may fire it:
// the ownership state machine of DESIGN §4.
//
// Machine is a pure state machine in the style of etcd raft: node feeds it
// Events (membership changes, ticks, messages from other nodes) through
// Step and carries out the Effects it returns (persist, send, start or stop
// firing, drop data). It reads no clock, does no I/O and starts no
// goroutine; it is not safe for concurrent use. It does not store or move
// task data either: SendSnapshot, the live tail and replicated writes are
// node's, tagged with (slot, epoch, seq) as Leader and Replicas direct.
//
// # Invariants
//
// Per slot:
//   - Epochs: each owner holds an epoch; a new owner takes a higher one,
//     persisted before anyone hears of it. A message with a lower epoch is
//     rejected; a higher one makes the receiver stop firing at once and
//     resync. Every epoch has at most one owner, ever.
//   - Firing: a node fires a slot only as its owner, with a valid replica,
//     seeing a majority, and while no other node can have taken the slot:
//     every node that may hold its lease grant is still covered by the
//     lease (see lease.go). So no two nodes fire a slot at once, even when
//     one of them does not know yet that it was cut off or paused.
//   - Never own from nothing: a node owns a slot only by bootstrap of a new
//     cluster, promotion as the grantor holding the replica, handover from
//     the previous holder, or as the restarted owner whose grantee handed
//     the epoch back, or after a census of the live members' copies
//     once an operator forgot the epoch's owner (census.go). Otherwise the
//     slot is reported unavailable.
//   - Nothing acknowledged lost: node acknowledges a write only once every
//     node in Replicas holds it, and each node that can become the next
//     owner is such a replica, or receives the final (epoch, seq) from the
//     holder and fetches what it lacks before taking over.
//
// The guarantees assume what DESIGN §1 assumes: a node cut off into a
// minority learns it within the detection time; views stay stable for
// Config.Settle before the machine acts on them alone; and clock rates
// differ by less than Config.Margin over a lease. checkInvariants (tests)
// checks the per-node invariants after every Step; the simulation in
// sim_test.go checks the cluster-wide ones.
//
// # Usage
//
//	m, err := slots.New(slots.DefaultConfig("n1"), persisted)
//	...
//	for ev := range events { // node's run loop, the only caller
//		for _, e := range m.Step(ev) {
//			execute(e) // in order; Persist durably before what follows
//		}
//	}
//
// node sends Tick{Now} at least every Lease/8, and before any other event
// after a pause; it fires slot s exactly while Firing(s).
package slots
