package node

import (
	"os"
	"strconv"
	"syscall"
	"testing"
	"testing/synctest"
	"time"
)

// TestIdleClusterCPU measures what an idle in-process 3-node cluster costs
// per fake second (issue 17: the fault tests' clusters spend most of their
// life idle): CHIME_IDLE_SECONDS=30 go test -race -count=1 -run
// TestIdleClusterCPU -v ./node. It logs the process's CPU seconds over the
// window after a 10 s settle. Without the variable it is skipped: it is a
// measurement, not a check.
func TestIdleClusterCPU(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("CHIME_IDLE_SECONDS"))
	if n <= 0 {
		t.Skip("set CHIME_IDLE_SECONDS to measure")
	}
	cpu := func() time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			t.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	synctest.Test(t, func(t *testing.T) {
		c := newFaultCluster(t, 3, 1)
		defer c.close()
		time.Sleep(10 * time.Second)
		c0 := cpu()
		time.Sleep(time.Duration(n) * time.Second)
		used := cpu() - c0
		t.Logf("idle 3-node cluster: %.2f CPU-s over %d fake s: %.3f CPU-s per node per fake second",
			used.Seconds(), n, used.Seconds()/float64(3*n))
	})
}
