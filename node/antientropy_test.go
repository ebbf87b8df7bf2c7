package node

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chime-scheduler/chime/ring/gossip/memnet"
	"github.com/chime-scheduler/chime/slots"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// aeNodes starts two cluster nodes that run anti-entropy every interval
// and form a cluster together (each joins the other): the table's owner of
// every slot takes it at epoch 1, with no handover of half the slots as
// when one joins the other.
func aeNodes(t *testing.T, interval time.Duration) (*testNode, *testNode) {
	t.Helper()
	net := memnet.New(5)
	fast := func(c *Config) { c.Cluster.AntiEntropyInterval = interval }
	a := startClusterNode(t, net, "a", "127.0.0.1:7001", fast, "127.0.0.1:7002")
	b := startClusterNode(t, net, "b", "127.0.0.1:7002", fast, "127.0.0.1:7001")
	// Stop both at once without the drain (a handover of every slot to
	// the other node, which stops next anyway: 20 s of a 2-node teardown).
	// Cleanups run last-registered first, so this comes before stop.
	t.Cleanup(func() {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		var wg sync.WaitGroup
		for _, tn := range []*testNode{a, b} {
			wg.Go(func() { _ = tn.Close(ctx) })
		}
		wg.Wait()
	})
	waitReady(t, a)
	waitReady(t, b)
	// Each owner streams its follower a snapshot of each of its 8192
	// slots; under -race on two cores that takes 25-45 s, and a resync's
	// snapshot would queue behind them. Start from a calm cluster.
	start := time.Now()
	waitFor(t, 120*time.Second, "replication idle", func() bool { return a.ship.Pending() == 0 && b.ship.Pending() == 0 })
	t.Logf("replication idle after %v", time.Since(start).Round(time.Millisecond))
	return a, b
}

// createTasks creates tasks (JSON objects) through tn in one batch,
// retrying those answered 503 (slots moving) for up to 30 s as a client
// does; a 409 after a retry is an earlier attempt that was stored.
func createTasks(t *testing.T, tn *testNode, tasks []string) {
	t.Helper()
	retried := map[int]bool{}
	left := tasks
	for deadline := time.Now().Add(30 * time.Second); len(left) > 0; time.Sleep(50 * time.Millisecond) {
		var ans struct {
			Results []struct {
				Index  int `json:"index"`
				Status int `json:"status"`
			} `json:"results"`
		}
		body := `{"tasks":[` + strings.Join(left, ",") + `]}`
		if code := tn.do(t, "POST", "/v1/tasks:batch", body, &ans); code != 200 {
			t.Fatalf("batch create: %d", code)
		}
		var again []string
		for _, r := range ans.Results {
			switch {
			case r.Status == 201 || (r.Status == 409 && retried[r.Index]):
			case r.Status == 503 && time.Now().Before(deadline):
				again = append(again, left[r.Index])
			default:
				t.Fatalf("create %s: %d", left[r.Index], r.Status)
			}
		}
		left = again
		for i := range left {
			retried[i] = true
		}
	}
}

// deleteTask deletes a task through tn, retrying 503 for up to 30 s as a
// client does; a 404 after a retry is an earlier attempt that was applied.
func deleteTask(t *testing.T, tn *testNode, id string) {
	t.Helper()
	retried := false
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		code := tn.do(t, "DELETE", "/v1/tasks/"+id, nil, nil)
		if code == 204 || (code == 404 && retried) {
			return
		}
		retried = true
		if code != 503 || time.Now().After(deadline) {
			t.Fatalf("delete %s: %d", id, code)
		}
	}
}

// roles returns the owner and the follower of slot s among a and b.
func roles(t *testing.T, s uint16, a, b *testNode) (owner, follower *testNode) {
	t.Helper()
	ra, _, _ := a.ctl.State(s)
	rb, _, _ := b.ctl.State(s)
	switch {
	case ra == slots.RoleOwner && rb == slots.RoleFollower:
		return a, b
	case rb == slots.RoleOwner && ra == slots.RoleFollower:
		return b, a
	}
	t.Fatalf("slot %d: a is %v, b is %v; want an owner and a follower", s, ra, rb)
	return nil, nil
}

// slotData returns every data key of slot s in tn's store and its value.
func slotData(t *testing.T, tn *testNode, s uint16) map[string]string {
	t.Helper()
	out := map[string]string{}
	if err := tn.store.ScanSlot(s, func(k, v []byte) bool {
		out[string(k)] = string(v)
		return true
	}); err != nil {
		t.Fatalf("ScanSlot(%d): %v", s, err)
	}
	return out
}

func aeCounts(tn *testNode) (match, mismatch, resyncs float64) {
	return testutil.ToFloat64(tn.metrics.aeMatch), testutil.ToFloat64(tn.metrics.aeMismatch), testutil.ToFloat64(tn.metrics.aeResyncs)
}

// waitFor polls cond every 20 ms until it holds, or fails after d.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %v", what, d)
		}
	}
}

// TestAntiEntropy runs two nodes that check every slot twice a second, in
// two phases on one cluster (forming one costs half a minute under -race):
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
//     equals the owner's again; the resync counters went up.
func TestAntiEntropy(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two nodes for tens of seconds")
	}
	const interval = 500 * time.Millisecond
	a, b := aeNodes(t, interval)
	nodes := []*testNode{a, b}
	rcv := newReceiver(t)

	ok := t.Run("consistent", func(t *testing.T) {
		var tasks []string
		for i := range 20 {
			tasks = append(tasks, fmt.Sprintf(`{"id":"p-%d","callback_url":%q,"every_ms":200}`, i, rcv.url("/p")))
		}
		createTasks(t, a, tasks)
		t.Logf("periodic tasks created")
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for w, tn := range nodes {
			wg.Go(func() {
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					body := fmt.Sprintf(`{"id":"c-%d-%d","callback_url":%q,"delay_ms":%d}`, w, i, rcv.url("/c"), 200+i%500)
					switch code := tn.do(t, "POST", "/v1/tasks", body, nil); code {
					case 201, 503, 429: // 503, 429: not acknowledged; stored or not, the copies agree
					default:
						t.Errorf("create %s: %d", body, code)
						return
					}
					time.Sleep(10 * time.Millisecond)
				}
			})
		}
		time.Sleep(4 * time.Second)
		close(stop)
		wg.Wait()
		// The periodic tasks stop; two more passes compare every slot at rest.
		t.Logf("load done")
		for i := range 20 {
			deleteTask(t, a, fmt.Sprintf("p-%d", i))
		}
		t.Logf("periodic tasks deleted")
		time.Sleep(2 * interval)
		var matches float64
		for _, tn := range nodes {
			m, mm, rs := aeCounts(tn)
			t.Logf("%s: %v matches, %v mismatches, %v resyncs, %v not comparable", tn.cfg.Name, m, mm, rs,
				testutil.ToFloat64(tn.metrics.aeNotComparable))
			matches += m
			if mm != 0 || rs != 0 {
				t.Errorf("%s: %v mismatches and %v resyncs between consistent copies", tn.cfg.Name, mm, rs)
			}
		}
		if matches < 100 {
			t.Errorf("only %v matching checks; the checks did not run", matches)
		}
		if len(rcv.hits()) == 0 {
			t.Error("no periodic fire during the test")
		}
	})
	if !ok {
		return
	}

	t.Run("corrupted", func(t *testing.T) {
		// Tasks due in an hour: nothing fires, so their slots are idle once
		// created.
		var tasks []string
		for i := range 60 {
			tasks = append(tasks, fmt.Sprintf(`{"id":"ae-%d","callback_url":"http://127.0.0.1:1/x","delay_ms":3600000}`, i))
		}
		createTasks(t, a, tasks)
		victims := []string{"ae-1", "ae-2"}
		if slots.Of(victims[0]) == slots.Of(victims[1]) {
			t.Fatalf("the victims share slot %d", slots.Of(victims[0]))
		}
		type pair struct{ owner, follower *testNode }
		ps := make([]pair, len(victims))
		for i, id := range victims {
			s := slots.Of(id)
			o, f := roles(t, s, a, b)
			ps[i] = pair{o, f}
			waitFor(t, 10*time.Second, "the follower holds "+id, func() bool {
				_, err := f.store.Get(s, id)
				return err == nil
			})
		}
		// Three passes: every slot is verified at its resting position, so
		// the corruption must be found by the re-check of unmoved slots.
		time.Sleep(3 * interval)

		// The fault: writes to the followers' stores that no replication made.
		del := ps[0].follower.store.NewBatch()
		tk, err := ps[0].follower.store.Get(slots.Of(victims[0]), victims[0])
		if err != nil {
			t.Fatal(err)
		}
		del.DeleteTask(tk)
		if err := del.Commit(true); err != nil {
			t.Fatal(err)
		}
		alt := ps[1].follower.store.NewBatch()
		tk, err = ps[1].follower.store.Get(slots.Of(victims[1]), victims[1])
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
			waitFor(t, 30*time.Second, fmt.Sprintf("slot %d resynced on %s", s, p.follower.cfg.Name), func() bool {
				return maps.Equal(slotData(t, p.owner, s), slotData(t, p.follower, s))
			})
			fs, err := p.follower.store.SlotChecksum(s)
			if err != nil {
				t.Fatal(err)
			}
			os, err := p.owner.store.ComputeSlotChecksum(s)
			if err != nil {
				t.Fatal(err)
			}
			if fs != os {
				t.Errorf("slot %d: the follower's checksum %v, the owner's data %v", s, fs, os)
			}
		}
		t.Logf("both slots resynced %v after the corruption", time.Since(start).Round(time.Millisecond))
		var resyncs, mismatches float64
		for _, tn := range nodes {
			_, mm, rs := aeCounts(tn)
			resyncs += rs
			mismatches += mm
		}
		if resyncs < 2 || mismatches < 2 {
			t.Errorf("%v resyncs after %v mismatches, want at least 2 of each", resyncs, mismatches)
		}
		// Each node's count is in its own dashboard row.
		for _, tn := range nodes {
			snap, err := tn.dash.Snapshot(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			_, _, rs := aeCounts(tn)
			for _, m := range snap.Members {
				if m.Name == tn.cfg.Name && float64(m.AntiEntropyResyncs) != rs {
					t.Errorf("%s's row shows %d resyncs, its counter %v", m.Name, m.AntiEntropyResyncs, rs)
				}
			}
		}
	})
}
