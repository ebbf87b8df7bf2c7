// Package ring decides which cluster member owns and which follows each
// slot. It is a pure function from a member list to a slot table:
//
//	t := ring.Assign(members, ring.NumSlots)
//	owner, ok := t.Owner(slot)       // serves the slot (firing also needs its epoch)
//	follower, ok := t.Follower(slot) // holds its replica
//
// Assignment is rendezvous hashing (HRW): slot s scores member m with
// xxhash64(m.Name ‖ be16(s)); the highest score owns s and the second
// highest follows it; equal scores rank the smaller Name higher.
//
// What it is not: ring does no I/O, starts no goroutines and reads no
// clock. It does not watch membership (the caller passes the eligible
// members: alive or suspect with state=active), and it does not decide
// who may fire a slot right now: that is the per-slot epoch in slots/.
// It does not hash task ids to slots (slots.Of does).
//
// # Invariants
//
//   - Same member set, same table: the result depends only on the set of
//     names, never on input order or map iteration. Duplicate names collapse
//     into one member (the smallest HTTPAddr is kept).
//   - With at least one member every slot has exactly one owner; with at
//     least two every slot has a follower distinct from its owner. With no
//     members Owner reports ok=false; with one, Follower does.
//   - Minimal movement on join: every slot whose owner changes moves to the
//     joiner, and its old owner becomes its follower (it already holds the
//     data).
//   - Minimal movement on leave: only the leaver's owned slots change owner,
//     each to its previous follower (which holds the replica).
//   - Balance: HRW's owned counts are binomial; over 16384 slots each of
//     3–16 members owns within ±10 % of 16384/N (measured: within −7.1 %
//     and +7.7 % for the name sets in TestBalance).
//   - Checksum identifies the table: it covers NumSlots and the sorted
//     names, the only inputs the assignment depends on (for a given hash).
//
// Changing the hash, the key layout name ‖ be16(slot), the tie-break or the
// checksum format changes the table every node computes: treat it as a
// protocol change. TestGolden pins them.
//
// # Concurrency
//
// A Table is immutable after Assign returns; its methods only read, so a
// Table may be copied and used from any number of goroutines without
// locking. Assign keeps no state and does not retain or modify its input.
//
// # Cost
//
// Assign is O(N·numSlots) hashes (262k for 16 members × 16384 slots, a few
// ms; see BenchmarkAssign) and allocates 4 bytes per slot. Owner and Follower are O(1) array reads;
// Counts, Ranges and String scan the slots.
package ring
