//go:build !race

package ring

// raceOn reports whether the race detector is on (see race_on_test.go).
const raceOn = false
