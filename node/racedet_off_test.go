//go:build !race

package node

// raceDetector reports whether the race detector is on.
const raceDetector = false
