//go:build !race

package node

// raceOn reports whether the race detector is on: heavy tests go lighter.
const raceOn = false
