//go:build !invariants

package wheel

// invariantsEnabled is false in normal builds; see invariants_on.go.
const invariantsEnabled = false
