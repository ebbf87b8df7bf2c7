package bench

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run if any goroutine (receiver, HTTP connections,
// spawned-node waiters, fake node timers) outlives the tests.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
