//go:build !race

package node

// raceOn reports whether the race detector is on (see newFaultHarness).
const raceOn = false
