package node

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/chime-scheduler/chime/slots"
	"github.com/chime-scheduler/chime/storage"
)

// aeRoles returns the indexes of the owner and the follower of slot s in
// the two-node cluster c.
func aeRoles(t *testing.T, c *faultCluster, s uint16) (owner, follower int) {
	t.Helper()
	ra, _, _ := c.nodes[0].n.ctl.State(s)
	rb, _, _ := c.nodes[1].n.ctl.State(s)
	switch {
	case ra == slots.RoleOwner && rb == slots.RoleFollower:
		return 0, 1
	case rb == slots.RoleOwner && ra == slots.RoleFollower:
		return 1, 0
	}
	t.Fatalf("slot %d: n1 is %v, n2 is %v; want an owner and a follower", s, ra, rb)
	return 0, 0
}

// slotData returns every data key of slot s in st and its value.
func slotData(t *testing.T, st *storage.Store, s uint16) map[string]string {
	t.Helper()
	out := map[string]string{}
	if err := st.ScanSlot(s, func(k, v []byte) bool {
		out[string(k)] = string(v)
		return true
	}); err != nil {
		t.Fatalf("ScanSlot(%d): %v", s, err)
	}
	return out
}

func aeCounts(n *Node) (match, mismatch, resyncs float64) {
	return testutil.ToFloat64(n.metrics.AeMatch), testutil.ToFloat64(n.metrics.AeMismatch), testutil.ToFloat64(n.metrics.AeResyncs)
}

// TestAntiEntropy runs two nodes of the fault harness (fake time, lossy
// links) that check every slot twice a second, in two phases on one
// cluster:
//
//   - consistent: both nodes write while the checks run (creates through
//     both, periodic tasks firing every 200 ms, whose intents and results
//     replicate too). Comparisons meet writes in flight, and none may
//     mismatch.
//   - corrupted: a follower's copy of two idle slots is changed directly in
//     its store, bypassing the writer and replication: one task deleted,
//     another task's record altered. The owners' checks find both at an
//     unchanged position (the re-check of verified slots), the machine
//     streams the follower a snapshot of each, and its data of both slots
//     equals the owner's again; the resync counters went up, and each
//     node's dashboard row shows its count.
//
// The fires of both phases pass the fault checker (none early, none
// repeated, one owner per slot and epoch; no deleted periodic task fires
// after its delete).
func TestAntiEntropy(t *testing.T) {
	const interval = 500 * time.Millisecond
	t.Parallel() // fake time: it runs beside the fault tests without timing out
	synctest.Test(t, func(t *testing.T) {
		c := newFaultCluster(t, 2, 21, func(cfg *Config) { cfg.Cluster.AntiEntropyInterval = interval })
		// Each owner streams its follower a snapshot of each of its 8192
		// slots at the bootstrap; start from a calm cluster.
		waitFor(t, 30*time.Second, "replication idle", func() bool {
			return c.nodes[0].n.ship.Pending() == 0 && c.nodes[1].n.ship.Pending() == 0
		})
		t.Logf("%v: replication idle", fakeClock{})
		consistent(t, c, interval)
		if !t.Failed() {
			corrupted(t, c, interval)
		}
		report(t, c.check(checkOpts{}))
		c.close()
	})
}

// consistent is TestAntiEntropy's first phase.
func consistent(t *testing.T, c *faultCluster, interval time.Duration) {
	// Through n1 (n2's part forwarded), retried as a client does.
	for i := range 20 {
		id, body := fmt.Sprintf("p-%d", i), map[string]any{"callback_url": faultCallbackURL, "every_ms": 200}
		if code, _ := c.send(0, http.MethodPut, "/v1/tasks/"+id, body, http.StatusCreated, http.StatusOK); code != http.StatusCreated && code != http.StatusOK {
			t.Fatalf("create %s: %d", id, code)
		}
	}
	t.Logf("%v: periodic tasks created", fakeClock{})
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				body := map[string]any{"id": fmt.Sprintf("c-%d-%d", w, i), "callback_url": faultCallbackURL, "delay_ms": 200 + i%500}
				switch code, ans := c.request(w, http.MethodPost, "/v1/tasks", body); code {
				case 201, 503, 429: // 503, 429: not acknowledged; stored or not, the copies agree
				default:
					t.Errorf("create %v: %d %s", body, code, ans)
					return
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
	time.Sleep(2 * time.Second) // four passes
	close(stop)
	wg.Wait()
	// The periodic tasks stop; two more passes compare every slot at rest.
	t.Logf("%v: load done", fakeClock{})
	for i := range 20 {
		id := fmt.Sprintf("p-%d", i)
		// A 404 after a retry: an earlier try that got no answer did it.
		if code, n := c.send(0, http.MethodDelete, "/v1/tasks/"+id, nil, http.StatusNoContent, http.StatusNotFound); code != http.StatusNoContent && (code != http.StatusNotFound || n == 1) {
			t.Errorf("delete %s: %d at try %d", id, code, n)
		}
		c.mu.Lock()
		c.gone[id] = time.Now()
		c.mu.Unlock()
	}
	t.Logf("%v: periodic tasks deleted", fakeClock{})
	time.Sleep(2 * interval)
	var matches float64
	for _, fn := range c.nodes {
		m, mm, rs := aeCounts(fn.n)
		t.Logf("%s: %v matches, %v mismatches, %v resyncs, %v not comparable", fn.name, m, mm, rs,
			testutil.ToFloat64(fn.n.metrics.AeNotComparable))
		matches += m
		if mm != 0 || rs != 0 {
			t.Errorf("%s: %v mismatches and %v resyncs between consistent copies", fn.name, mm, rs)
		}
	}
	if matches < 100 {
		t.Errorf("only %v matching checks; the checks did not run", matches)
	}
	periodic := 0
	for _, f := range c.rcv.all() {
		if f.TaskID[0] == 'p' {
			periodic++
		}
	}
	if periodic == 0 {
		t.Error("no periodic fire during the test")
	}
}

// corrupted is TestAntiEntropy's second phase.
func corrupted(t *testing.T, c *faultCluster, interval time.Duration) {
	// Tasks due in an hour: nothing fires, so their slots are idle once
	// created.
	victims := []string{"ae-1", "ae-2"}
	if ok := c.createVia(0, ids("ae", 60, c.table(0), nil), time.Now().Add(time.Hour), 0); ok != 60 {
		t.Fatalf("%d of 60 creates acknowledged", ok)
	}
	c.mu.Lock()
	for _, id := range ids("ae", 60, c.table(0), nil) {
		delete(c.acked, id) // not due before the end: not checked
	}
	c.mu.Unlock()
	if slots.Of(victims[0]) == slots.Of(victims[1]) {
		t.Fatalf("the victims share slot %d", slots.Of(victims[0]))
	}
	type pair struct{ owner, follower *storage.Store }
	ps := make([]pair, len(victims))
	name := map[*storage.Store]string{}
	for i, id := range victims {
		s := slots.Of(id)
		o, f := aeRoles(t, c, s)
		ps[i] = pair{c.nodes[o].n.store, c.nodes[f].n.store}
		name[ps[i].follower] = c.nodes[f].name
		waitFor(t, 10*time.Second, "the follower holds "+id, func() bool {
			_, err := ps[i].follower.Get(s, id)
			return err == nil
		})
	}
	// Three passes: every slot is verified at its resting position, so
	// the corruption must be found by the re-check of unmoved slots.
	time.Sleep(3 * interval)

	// The fault: writes to the followers' stores that no replication made.
	del := ps[0].follower.NewBatch()
	tk, err := ps[0].follower.Get(slots.Of(victims[0]), victims[0])
	if err != nil {
		t.Fatal(err)
	}
	del.DeleteTask(tk)
	if err := del.Commit(true); err != nil {
		t.Fatal(err)
	}
	alt := ps[1].follower.NewBatch()
	tk, err = ps[1].follower.Get(slots.Of(victims[1]), victims[1])
	if err != nil {
		t.Fatal(err)
	}
	tk.Spec.CallbackURL = "http://127.0.0.1:1/tampered"
	alt.PutTask(tk, tk.Wake())
	if err := alt.Commit(true); err != nil {
		t.Fatal(err)
	}
	for i, id := range victims {
		s := slots.Of(id)
		if maps.Equal(slotData(t, ps[i].owner, s), slotData(t, ps[i].follower, s)) {
			t.Fatalf("slot %d: the corruption did not change the follower's copy", s)
		}
	}

	start := time.Now()
	for i, id := range victims {
		s := slots.Of(id)
		p := ps[i]
		waitFor(t, 30*time.Second, fmt.Sprintf("slot %d resynced on %s", s, name[p.follower]), func() bool {
			return maps.Equal(slotData(t, p.owner, s), slotData(t, p.follower, s))
		})
		fs, err := p.follower.SlotChecksum(s)
		if err != nil {
			t.Fatal(err)
		}
		os, err := p.owner.ComputeSlotChecksum(s)
		if err != nil {
			t.Fatal(err)
		}
		if fs != os {
			t.Errorf("slot %d: the follower's checksum %v, the owner's data %v", s, fs, os)
		}
	}
	t.Logf("%v: both slots resynced %v after the corruption", fakeClock{}, time.Since(start))
	var resyncs, mismatches float64
	for _, fn := range c.nodes {
		_, mm, rs := aeCounts(fn.n)
		resyncs += rs
		mismatches += mm
	}
	if resyncs < 2 || mismatches < 2 {
		t.Errorf("%v resyncs after %v mismatches, want at least 2 of each", resyncs, mismatches)
	}
	// Each node's count is in its own dashboard row.
	for _, fn := range c.nodes {
		snap, err := fn.n.dash.Snapshot(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		_, _, rs := aeCounts(fn.n)
		rows := 0
		for _, m := range snap.Members {
			if m.Name == fn.name {
				rows++
				if float64(m.AntiEntropyResyncs) != rs {
					t.Errorf("%s's row shows %d resyncs, its counter %v", m.Name, m.AntiEntropyResyncs, rs)
				}
			}
		}
		if rows != 1 {
			t.Errorf("%s's snapshot has %d rows of its own, want 1", fn.name, rows)
		}
	}
}
