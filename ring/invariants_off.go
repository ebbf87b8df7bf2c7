//go:build !invariants

package ring

// invariants makes Assign check the table it built (see checkInvariants).
// Enable with -tags invariants.
const invariants = false
