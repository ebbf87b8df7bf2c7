package node

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/chime-scheduler/chime/node/clock"
	"github.com/chime-scheduler/chime/node/metrics"
	"github.com/chime-scheduler/chime/node/ownership"
)

// TestLoopLateLane: expired entries due more than the late threshold ago
// go to the writer in ops of lateChunk, the next only once the writer
// applied the last, while entries still on time go at once, ahead of the
// backlog. The writer here does not run: the test takes the loop's ops
// from its queue and plays its part.
func TestLoopLateLane(t *testing.T) {
	st := openTestStore(t)
	cfg := DefaultConfig()
	cfg.Clock = clock.Real
	cfg.Dispatch.LateAfter = time.Second
	m := metrics.New(metrics.Gauges{})
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	w := newWriterOnly(&cfg, writerDeps{store: st, metrics: m, ctl: ownership.NewBoard(), log: log, now: time.Now}, 1)
	l, err := newLoop(&cfg, st, w, m, log, time.Now, func() *view { return nil })
	if err != nil {
		t.Fatal(err)
	}
	go l.run()
	defer l.close()
	<-l.loaded // the first scan (of an empty store) set the frontier

	next := func() *fireOp { t.Helper(); return nextFireOp(t, w) }
	// late: an op of the late lane (its entries all "late-"), not of the
	// ready lane (entries on time).
	late := func(op *fireOp) bool {
		for _, e := range op.fires {
			if !strings.HasPrefix(e.ID, "late-") {
				return false
			}
		}
		return op.applied != nil
	}
	quiet := func() {
		t.Helper()
		select {
		case r := <-w.internal:
			t.Fatalf("an op of %d entries while the late lane's last was not applied", len(r.(*fireOp).fires))
		case <-time.After(50 * time.Millisecond):
		}
	}

	now := time.Now().UnixNano()
	var wakes []wakeChange
	for i := range 300 {
		wakes = append(wakes, wakeChange{ID: fmt.Sprintf("late-%d", i), At: now - int64(5*time.Second)})
	}
	for i := range 10 {
		wakes = append(wakes, wakeChange{ID: fmt.Sprintf("due-%d", i), At: now - int64(time.Millisecond)})
	}
	l.notify(wakes)

	if op := next(); len(op.fires) != 10 || late(op) {
		t.Fatalf("first op: %d entries (late lane %v), want the 10 on time", len(op.fires), late(op))
	}
	got := 0
	for _, want := range []int{lateChunk, lateChunk, 300 - 2*lateChunk} {
		op := next()
		if len(op.fires) != want || !late(op) {
			t.Fatalf("late lane op: %d entries (late lane %v), want %d of it", len(op.fires), late(op), want)
		}
		got += len(op.fires)
		quiet()
		if got == lateChunk {
			// An entry on time passes the backlog still waiting.
			l.notify([]wakeChange{{ID: "due-x", At: time.Now().UnixNano()}})
			if op := next(); len(op.fires) != 1 || op.fires[0].ID != "due-x" || late(op) {
				t.Fatalf("op of %d entries (late lane %v) while the late lane waits, want due-x alone", len(op.fires), late(op))
			}
		}
		op.applied()
	}
	quiet()
	if v := testutil.ToFloat64(m.LateLane); v != 0 {
		t.Errorf("chime_late_lane_tasks = %v after the backlog went, want 0", v)
	}
}

// TestLoopReadyLane: entries on time go to the writer only as far as the
// dispatcher has room for their fires; the rest wait, and go when the
// writer applied what it had (ops that start nothing leave room) or when a
// result frees room, and, held a probeEvery with nothing at the writer,
// a few go all the same. The writer here does not run: the test takes
// the loop's ops from its queue and plays its part.
func TestLoopReadyLane(t *testing.T) {
	st := openTestStore(t)
	cfg := DefaultConfig()
	cfg.Clock = clock.Real
	cfg.Dispatch.MaxQueued = 10
	cfg.Dispatch.Concurrency = 2 // room for 12 fires
	m := metrics.New(metrics.Gauges{})
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	var l *loop
	w := newWriterOnly(&cfg, writerDeps{store: st, metrics: m, ctl: ownership.NewBoard(), log: log, now: time.Now,
		roomOpened: func() { l.wake() }}, 1)
	l, err := newLoop(&cfg, st, w, m, log, time.Now, func() *view { return nil })
	if err != nil {
		t.Fatal(err)
	}
	go l.run()
	defer l.close()
	<-l.loaded

	next := func() *fireOp { t.Helper(); return nextFireOp(t, w) }
	quiet := func(d time.Duration) {
		t.Helper()
		select {
		case r := <-w.internal:
			t.Fatalf("an op of %d entries with no room at the dispatcher", len(r.(*fireOp).fires))
		case <-time.After(d):
		}
	}

	now := time.Now().UnixNano()
	var wakes []wakeChange
	for i := range 40 {
		wakes = append(wakes, wakeChange{ID: fmt.Sprintf("w-%02d", i), At: now - int64(time.Millisecond) + int64(i)})
	}
	l.notify(wakes)
	op := next()
	if len(op.fires) != 12 || op.fires[0].ID != "w-00" || op.fires[11].ID != "w-11" {
		t.Fatalf("first op: %d entries from %s, want w-00..w-11", len(op.fires), op.fires[0].ID)
	}
	quiet(100 * time.Millisecond)
	if v := testutil.ToFloat64(m.ReadyLane); v != 28 {
		t.Errorf("chime_ready_lane_tasks = %v, want 28 waiting", v)
	}

	// The writer applied them and started none (stale entries): the next
	// 12 go.
	op.applied()
	if op = next(); len(op.fires) != 12 || op.fires[0].ID != "w-12" {
		t.Fatalf("second op: %d entries from %s, want 12 from w-12", len(op.fires), op.fires[0].ID)
	}

	// started plays the writer starting every fire of op.
	started := func(op *fireOp) {
		for _, e := range op.fires {
			w.running[e.ID] = runningFire{seq: 1}
		}
		w.busy.Store(int64(len(w.running)))
		op.applied()
	}
	// The writer started all 12: no room until a result frees some.
	started(op)
	quiet(200 * time.Millisecond)
	w.stopRunning("w-12")
	w.stopRunning("w-13")
	quiet(100 * time.Millisecond) // 2 free: below a chunk's worth (3)
	w.stopRunning("w-14")
	if op = next(); len(op.fires) != 3 || op.fires[0].ID != "w-24" {
		t.Fatalf("op after 3 results: %d entries from %s, want 3 from w-24", len(op.fires), op.fires[0].ID)
	}
	started(op)

	// Full, and nothing at the writer: after probeEvery a few go anyway.
	start := time.Now()
	op = next()
	if d := time.Since(start); d < probeEvery/2 || len(op.fires) != w.roomKickAt() || op.fires[0].ID != "w-27" {
		t.Fatalf("probe: %d entries from %s after %v, want %d from w-27 after about %v", len(op.fires), op.fires[0].ID, d, w.roomKickAt(), probeEvery)
	}
}

// nextFireOp takes the loop's next op from the writer's queue (the tests'
// writer does not run).
func nextFireOp(t *testing.T, w *writer) *fireOp {
	t.Helper()
	select {
	case r := <-w.internal:
		return r.(*fireOp)
	case <-time.After(30 * time.Second):
		t.Fatal("no op from the loop")
		return nil
	}
}
