//go:build race

package ring

// raceOn reports whether the race detector is on: it makes the hash loop
// of a 1,000-member Assign ~10× slower, so the heaviest tests go lighter
// (CI runs this package with -race; `go test ./ring` runs them whole).
const raceOn = true
