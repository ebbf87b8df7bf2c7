//go:build invariants

package storage

// checkPriors makes Commit read every key whose stored value a write
// claimed to know (prior.go) and panic if the claim is wrong. Build with
// -tags invariants in development.
const checkPriors = true
