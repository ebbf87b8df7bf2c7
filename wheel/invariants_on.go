//go:build invariants

package wheel

// invariantsEnabled makes every mutating method check the wheel's
// invariants (O(n) each time). Build with -tags invariants in development.
const invariantsEnabled = true
