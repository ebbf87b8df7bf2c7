// Package slots maps task ids to the 16384 slots that the cluster divides
// between its nodes. Every stored key carries its slot first, so a slot can be
// scanned, streamed or dropped as one contiguous key range.
//
// For now the package holds only the hash; the ownership state machine
// (epochs, handover) arrives with the replication work.
package slots
