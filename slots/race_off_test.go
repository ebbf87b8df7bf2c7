//go:build !race

package slots

// raceOn reports whether the race detector is on (see TestScale).
const raceOn = false
