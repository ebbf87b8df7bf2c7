//go:build race || invariants

package node

// raceOn reports whether the race detector or the invariant checks
// (-tags invariants: the wheel checks itself whole at every change) are
// on: heavy tests go lighter.
const raceOn = true
