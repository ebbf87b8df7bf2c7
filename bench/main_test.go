package bench

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run if any goroutine (receiver, HTTP connections,
// spawned-node waiters, fake node timers) outlives the tests. The one
// exception is fasthttp's per-HostClient idle-connection cleaner, which
// apiClient.close cannot stop: it sleeps out MaxIdleConnDuration and then
// exits on its own, holding no connection.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*HostClient).connsCleaner"))
}
