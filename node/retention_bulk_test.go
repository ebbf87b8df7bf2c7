package node

import (
	"context"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/chime-scheduler/chime/slots"
	"github.com/chime-scheduler/chime/storage"
)

// TestRetentionBulk: 100,000 done tasks, each with one execution, in a
// real Pebble store on disk (10,000 under the race detector, 2,000 with
// -tags invariants). A node
// started on it expires every one at its expiry through the due index (no
// task scan): afterwards no task record, due entry or execution is left,
// and once compacted the store's disk space is a small part of what it
// was. It logs the sizes and how long the expiry took.
func TestRetentionBulk(t *testing.T) {
	n := 100_000
	if raceOn {
		n = 10_000
		if !raceDetector {
			n = 2_000 // -tags invariants: the wheel's checks are linear in its size
		}
	}
	synctest.Test(t, func(t *testing.T) {
		began := wallClock()
		cfg := testConfig(t, "bulk")
		fill := time.Now()
		expireAt := fill.Add(5 * time.Second).UnixNano()
		st, err := storage.Open(storage.Options{Dir: cfg.DataDir})
		if err != nil {
			t.Fatal(err)
		}
		payload := []byte(`{"order":"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}`)
		b := st.NewBatch()
		for i := range n {
			id := "bulk-" + strconv.Itoa(i)
			now := fill.UnixNano()
			task := &storage.Task{
				ID: id, Slot: slots.Of(id), Status: storage.StatusDone, FireSeq: 1,
				Spec:      storage.Spec{CallbackURL: "http://127.0.0.1:1/cb", Kind: storage.KindOnce, DueAt: now, Payload: payload, TimeoutMs: 5000, MaxRetries: 1, Misfire: storage.MisfireFireOnce},
				CreatedAt: now, UpdatedAt: now, FinishedAt: now, ExpireAt: expireAt + int64(i%1000)*int64(time.Millisecond),
			}
			task.Replaces(nil)
			b.AppendExecution(task, &storage.Execution{FireID: id + ":1", DueAt: now, StartedAt: now, FinishedAt: now, Attempt: 1, StatusCode: 200, Result: payload})
			task.Replaces(nil) // new: the checksum needs no read
			b.PutTask(task, 0)
			if b.Count() >= 20_000 {
				if err := b.Commit(false); err != nil {
					t.Fatal(err)
				}
				b = st.NewBatch()
			}
		}
		if err := b.Commit(true); err != nil {
			t.Fatal(err)
		}
		filled := wallClock()
		if err := st.Compact(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
		beforeSST, beforeAll := dirBytes(t, cfg.DataDir)

		compacted := wallClock()
		tn := restartNode(t, cfg)
		started := wallClock()
		if got := countTasks(t, tn.store); got != n {
			t.Fatalf("%d tasks stored before the expiry, want %d", got, n)
		}
		time.Sleep(time.Until(time.Unix(0, expireAt-int64(time.Second))))
		if got := testutil.ToFloat64(tn.metrics.Expired); got != 0 {
			t.Fatalf("%v tasks expired a second before the first expiry", got)
		}
		start := time.Now()
		for testutil.ToFloat64(tn.metrics.Expired) < float64(n) {
			if time.Since(start) > time.Minute {
				t.Fatalf("%v of %d tasks expired after a minute", testutil.ToFloat64(tn.metrics.Expired), n)
			}
			time.Sleep(100 * time.Millisecond)
		}
		took, expired := time.Since(start), wallClock()
		if got := countTasks(t, tn.store); got != 0 {
			t.Errorf("%d tasks left after the expiry", got)
		}
		due := 0
		if err := tn.store.ScanDue(nil, 0, 1<<62, func(uint16, string, int64) bool { due++; return true }); err != nil || due != 0 {
			t.Errorf("%d due index entries left (%v)", due, err)
		}
		for _, i := range []int{0, n / 2, n - 1} {
			id := "bulk-" + strconv.Itoa(i)
			if ex, err := tn.store.Executions(slots.Of(id), id, 0); err != nil || len(ex) != 0 {
				t.Errorf("%s: %d executions left (%v)", id, len(ex), err)
			}
		}
		if err := tn.store.Compact(context.Background()); err != nil {
			t.Fatal(err)
		}
		// Pebble deletes the obsolete tables in the background.
		afterSST, afterAll := dirBytes(t, cfg.DataDir)
		for i := 0; i < 100 && afterSST > beforeSST/100; i++ {
			time.Sleep(10 * time.Millisecond)
			afterSST, afterAll = dirBytes(t, cfg.DataDir)
		}
		t.Logf("%d finished tasks (one execution each): sstables %d bytes (whole dir %d) compacted before, %d (whole dir %d) after expiry and compaction; all expired %v (fake time) after the first expiry; real time: fill %v, compact %v, node start %v, expire %v, compact %v",
			n, beforeSST, beforeAll, afterSST, afterAll, took, filled.Sub(began), compacted.Sub(filled), started.Sub(compacted), expired.Sub(started), wallClock().Sub(expired))
		if afterSST > beforeSST/100 {
			t.Errorf("sstables %d bytes after expiry and compaction, %d before: want at most a hundredth", afterSST, beforeSST)
		}
	})
}

// dirBytes sums the sizes of dir's sstables, and of all its files.
func dirBytes(t *testing.T, dir string) (sst, all int64) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		fi, err := e.Info()
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		all += fi.Size()
		if strings.HasSuffix(e.Name(), ".sst") {
			sst += fi.Size()
		}
	}
	return sst, all
}

// wallClock is the real time, which a synctest bubble's time.Now is not.
func wallClock() time.Time {
	var tv syscall.Timeval
	_ = syscall.Gettimeofday(&tv)
	return time.Unix(tv.Unix())
}

func countTasks(t *testing.T, st *storage.Store) int {
	t.Helper()
	n := 0
	if err := st.ScanTasks(storage.Position{}, func(*storage.Task) bool { n++; return true }); err != nil {
		t.Fatal(err)
	}
	return n
}
