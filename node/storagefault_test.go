package node

import (
	"bytes"
	"errors"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// The disk under a node that owns and fires slots starts failing: a write
// of its write-ahead log errors (as EIO from a dying disk, or a full one).
// Its store fails; the node stops acknowledging writes (503 naming the
// failure), stops firing, reports not ready with the reason and
// chime_storage_failed 1, and leaves the cluster without a drain. Its
// followers take its slots over and fire every acknowledged task; only
// fires it had started may repeat.
func TestFaultStorageFails(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c := newFaultCluster(t, 3, 15)
		first := time.Now().Add(time.Second)
		c.create(ids("owned", 40, c.table(0), ownedBy("n2")), first, 150*time.Millisecond) // over 6 s
		c.create(ids("any", 20, c.table(0), nil), first, 300*time.Millisecond)
		sleepUntil(first.Add(1500 * time.Millisecond)) // n2 fires

		failedAt := time.Now()
		n2 := c.nodes[1]
		n2.mem.FailWAL(errors.New("write /data/000004.log: input/output error"))
		// Its next fire intents fail to persist; the node stops.
		for n2.n.running.Load() {
			if time.Since(failedAt) > 5*time.Second {
				t.Fatal("n2 still running 5 s after its disk failed")
			}
			time.Sleep(10 * time.Millisecond)
		}
		stopped := time.Since(failedAt)
		c.mu.Lock()
		c.faults = append(c.faults, faultWindow{"n2", failedAt.Add(-repeatLag), time.Now(), "storage failed"})
		c.mu.Unlock()

		code, body := c.request(1, http.MethodPost, "/v1/tasks", map[string]any{"id": "late", "callback_url": faultCallbackURL, "delay_ms": 1000})
		if code != http.StatusServiceUnavailable || !bytes.Contains(body, []byte("storage failed")) {
			t.Errorf("a create on the failed node = %d %s; want 503 naming the storage failure", code, body)
		}
		code, body = c.request(1, http.MethodGet, "/readyz", nil)
		if code != http.StatusServiceUnavailable || !bytes.Contains(body, []byte("storage failed")) {
			t.Errorf("/readyz of the failed node = %d %s; want 503 naming the storage failure", code, body)
		}
		if code, body := c.request(1, http.MethodGet, "/metrics", nil); code != 200 || !bytes.Contains(body, []byte("\nchime_storage_failed 1\n")) {
			t.Errorf("/metrics of the failed node = %d without chime_storage_failed 1", code)
		}
		// The others take its slots over and go on taking writes.
		c.create(ids("after", 20, c.table(0), nil), time.Now().Add(time.Second), 100*time.Millisecond)
		c.settle(first.Add(6*time.Second + faultsSettle))
		report(t, c.check(checkOpts{}))
		var firstAfter time.Time
		for _, f := range c.rcv.all() {
			if strings.HasPrefix(f.TaskID, "owned") && f.At.After(failedAt) && f.Node != "n2" && (firstAfter.IsZero() || f.At.Before(firstAfter)) {
				firstAfter = f.At
			}
		}
		t.Logf("n2 stopped %v after its disk failed; its slots fired again on a follower %v after", stopped.Round(time.Millisecond), firstAfter.Sub(failedAt).Round(time.Millisecond))
		c.close()
	})
}
