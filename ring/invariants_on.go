//go:build invariants

package ring

// invariants makes Assign check the table it built (see checkInvariants).
const invariants = true
