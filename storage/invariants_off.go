//go:build !invariants

package storage

// checkPriors: see invariants_on.go.
const checkPriors = false
