package node

import (
	"fmt"
	"io"
	"log/slog"
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

	next := func() *fireOp {
		t.Helper()
		select {
		case r := <-w.internal:
			return r.(*fireOp)
		case <-time.After(30 * time.Second):
			t.Fatal("no op from the loop")
			return nil
		}
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

	if op := next(); len(op.fires) != 10 || op.applied != nil {
		t.Fatalf("first op: %d entries (late lane %v), want the 10 on time", len(op.fires), op.applied != nil)
	}
	got := 0
	for _, want := range []int{lateChunk, lateChunk, 300 - 2*lateChunk} {
		op := next()
		if len(op.fires) != want || op.applied == nil {
			t.Fatalf("late lane op: %d entries (late lane %v), want %d of it", len(op.fires), op.applied != nil, want)
		}
		got += len(op.fires)
		quiet()
		if got == lateChunk {
			// An entry on time passes the backlog still waiting.
			l.notify([]wakeChange{{ID: "due-x", At: time.Now().UnixNano()}})
			if op := next(); len(op.fires) != 1 || op.fires[0].ID != "due-x" || op.applied != nil {
				t.Fatalf("op of %d entries (late lane %v) while the late lane waits, want due-x alone", len(op.fires), op.applied != nil)
			}
		}
		op.applied()
	}
	quiet()
	if v := testutil.ToFloat64(m.LateLane); v != 0 {
		t.Errorf("chime_late_lane_tasks = %v after the backlog went, want 0", v)
	}
}
