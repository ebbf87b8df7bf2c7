package gossip_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any goroutine outlives the tests (the
// synctest tests are also checked by synctest itself, bubble by bubble).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
