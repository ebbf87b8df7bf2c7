// Package ring decides which cluster member owns and which follows each
// slot. It is a pure function from a member list to a slot table:
//
//	t := ring.Assign(members, ring.NumSlots)
//	owner, ok := t.Owner(slot)       // serves the slot (firing also needs its epoch)
//	follower, ok := t.Follower(slot) // holds its replica
//
// Assignment is rendezvous hashing (HRW) with bounded loads: slot s scores
// member m with xxhash64(m.Name ‖ be16(s)); equal scores rank the smaller
// Name higher. Plain HRW gives s to the highest score and its follower is
// the second highest. Its owned counts are binomial: within ±10 % of
// 16384/N for a handful of members, but a standard deviation of 25 % at
// 1,000 (16.4 slots each): one set of 1,000 names owned 6 to 30 each.
// So Assign bounds every member to ±5 % of numSlots/N (DefaultTolerance;
// ⌊numSlots/N⌋ to ⌈numSlots/N⌉ where that admits too few integers: at
// 1,000 members every one owns 16 or 17). Where HRW already is within
// the bound the table is exactly HRW's (TestAssignIsHRWWithinBound): over
// 16384 slots, 249 of 250 random name sets of 2–6 members, ~90 % of those
// of 7–9, 16 % of those of 16. Otherwise balance.go moves what it must:
// a member over the bound keeps the slots it scores highest and gives up
// the others, each to its next-ranked member with room (deferred
// acceptance); a member still under it takes
// slots from members above it, first those it is the HRW second choice
// of (usually their follower: it holds the replica). A moved slot is followed by its HRW first
// choice: every follower is the highest-ranked member other than the
// owner. Followed counts are not bounded (4–33 at 1,000 members).
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
//   - Bounded: every member owns within the bounds of Options.Tolerance
//     (Assign: ±5 %), and the table is plain HRW's whenever that is.
//   - With plain HRW (Options.Tolerance = +Inf), minimal movement on
//     join: every slot whose owner changes moves to the joiner, and its
//     old owner becomes its follower (it already holds the data); and on
//     leave: only the leaver's owned slots change owner, each to its
//     previous follower (which holds the replica). The bounded table
//     moves more where it must rebalance: one join or leave changes the
//     owner of 1.0× HRW's share of slots at 10 members, ~1.4× at 100,
//     ~3× at 1,000 (TestBalancedMovement, docs/BENCHMARKS.md).
//   - Checksum identifies the table: it covers NumSlots and the sorted
//     names, the only inputs the assignment depends on (for a given hash
//     and tolerance, which every node takes from Assign).
//
// Changing the hash, the key layout name ‖ be16(slot), the tie-break, the
// bounded pass or its tolerance, or the checksum format changes the table
// every node computes: treat it as a protocol change. TestGolden pins them.
// (Bounding the loads was one: for member sets where HRW is out of bounds,
// from about 7 members on, nodes before and after it compute different
// tables; the epochs keep a mixed cluster from firing a slot twice, but its
// ownership moves back and forth until every node runs the same version.)
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
// ms; see BenchmarkAssign) and allocates 4 bytes per slot. The bounded pass,
// when HRW is out of bounds, adds N hashes per slot proposal and numSlots
// per member left below the bound: ~20 % more at 1,000 members (≈0.2 s).
// Owner and Follower are O(1) array reads; Counts, Ranges and String scan
// the slots.
package ring
