package flow

import (
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chime-scheduler/chime/storage"
)

// TestFlowStateRoom: the limiter's arithmetic. An attempt not sent yet
// fills the rate window until it is (polled); a sent one leaves it a
// period after it was sent; starts sent out of order keep the count high
// rather than low; parallelism counts the marks in flight; a new owner's
// first period holds everything.
func TestFlowStateRoom(t *testing.T) {
	sec := int64(time.Second)
	fs := &State{inflight: map[string]uint64{}}
	fs.setLimits(&storage.Flow{Rate: 2, PeriodMs: 1000, Parallelism: 3})
	start := func(sent int64) *atomic.Int64 {
		s := start{sent: new(atomic.Int64)}
		s.sent.Store(sent)
		fs.starts = append(fs.starts, s)
		return s.sent
	}
	if n, _ := fs.room(0); n != 2 {
		t.Fatalf("empty: room %d, want 2 (rate)", n)
	}
	a := start(0) // not sent yet
	start(10 * sec)
	if n, at := fs.room(20 * sec); n != 0 || at != 20*sec+Poll {
		t.Errorf("window full, oldest unsent: room %d at %d, want 0 at now+poll", n, at)
	}
	a.Store(11 * sec) // sent after the second one
	if n, at := fs.room(11*sec + sec - 1); n != 0 || at != 11*sec+sec {
		t.Errorf("oldest sent at 11s: room %d at %d, want 0 until 12s", n, at)
	}
	// At 11.5 s the second start (10 s) has left the window, but it is
	// behind the first one (11 s): still counted until 12 s, never less.
	if n, _ := fs.room(11*sec + sec/2); n != 0 {
		t.Errorf("out-of-order sends: room %d, want 0 (counted high)", n)
	}
	if n, _ := fs.room(12 * sec); n != 2 || fs.inWindow() != 0 {
		t.Errorf("at 12 s: room %d, %d starts left; want 2, 0", n, fs.inWindow())
	}
	// A long window: pruning keeps the count exact as its head moves.
	fs.setLimits(&storage.Flow{Rate: 1000, PeriodMs: 1000})
	for i := range 500 {
		start(1 + int64(i)*sec/500) // 0 would be "not sent"
	}
	for i := range 500 {
		now := 1 + sec + int64(i)*sec/500
		if n, _ := fs.room(now); n != 1000-int64(500-i-1) {
			t.Fatalf("at %d: room %d, want %d", now, n, 1000-(500-i-1))
		}
	}
	fs.setLimits(&storage.Flow{Rate: 2, PeriodMs: 1000, Parallelism: 3})
	fs.starts, fs.head = nil, 0
	fs.inflight["x"], fs.inflight["y"] = 1, 1
	if n, _ := fs.room(12 * sec); n != 1 {
		t.Errorf("2 of 3 in flight, rate free: room %d, want 1", n)
	}
	fs.inflight["z"] = 1
	if n, at := fs.room(12 * sec); n != 0 || at != 0 {
		t.Errorf("3 of 3 in flight: room %d at %d, want 0 until a result (0)", n, at)
	}
	fs.blockedUntil = 20 * sec
	delete(fs.inflight, "z")
	if n, at := fs.room(19 * sec); n != 0 || at != 20*sec {
		t.Errorf("blocked: room %d at %d, want 0 until 20s", n, at)
	}
}

// TestFlowHeldOrder: on a standalone limiter, fires over a key's
// parallelism are held and remembered in due order; a result wakes the
// earliest; a held fire whose task changes is forgotten and the next one
// woken; a fire with room waits behind an earlier held one; trim drops
// idle states and keeps busy ones; a deleted flow releases its held
// fires.
func TestFlowHeldOrder(t *testing.T) {
	l := New(Config{Holds: func(uint16) uint64 { return 0 },
		Load: func(uint16, string) (*storage.Flow, error) { return nil, storage.ErrNotFound }})
	fs := l.newState("k", 5, 0, &storage.Flow{Key: "k", Parallelism: 1}, 0)
	if !fs.limited() || fs.blockedUntil != 0 {
		t.Fatalf("state %+v", fs)
	}
	const now = int64(1000)
	if !l.Allow(fs, "a", 10, now) {
		t.Fatal("first fire held")
	}
	fs.inflight["a"] = 1
	for _, c := range []struct {
		id  string
		due int64
	}{{"c", 30}, {"b", 20}, {"d", 20}} {
		if l.Allow(fs, c.id, c.due, now) {
			t.Fatalf("%s allowed over parallelism 1", c.id)
		}
	}
	if fs.waiting.Len() != 3 || fs.waiting.items[0].id != "b" {
		t.Fatalf("held %v, want b first (due 20, then d by id)", fs.waiting.items)
	}
	wakes := l.Done(nil, fs, "a", 1, now)
	if len(wakes) != 1 || wakes[0] != (Wake{"b", now + 1}) {
		t.Fatalf("after a's result: wakes %v, want b now", wakes)
	}
	// e comes up with room, but b (earlier) waits: e is held, b woken.
	if l.Allow(fs, "e", 5000, now) {
		t.Fatal("e went before the earlier held b")
	}
	wakes = l.Kick(nil, fs, now)
	if len(wakes) != 1 || wakes[0].ID != "b" {
		t.Fatalf("kick woke %v, want b", wakes)
	}
	// b is replaced meanwhile: forgotten, and d (next) woken.
	wakes = l.Rewait(nil, "b", now)
	if _, held := fs.waiting.at["b"]; held || len(wakes) != 1 || wakes[0].ID != "d" {
		t.Fatalf("after b changed: held %v, wakes %v; want d woken", fs.waiting.items, wakes)
	}
	// d comes up: unwaited at the entry, allowed (room, nothing earlier).
	if l.Unwait("d") != fs {
		t.Fatal("d was not held")
	}
	if !l.Allow(fs, "d", 20, now) {
		t.Fatal("d held with room and nothing earlier")
	}
	l.newState("idle", 6, 0, &storage.Flow{Key: "idle", Parallelism: 1}, 0)
	l.trim(now)
	if l.states["idle"] != nil || l.states["k"] != fs {
		t.Errorf("trim: %v, want the idle state dropped, k kept (it holds fires)", l.states)
	}
	ids := l.Drop("k")
	slices.Sort(ids)
	if !slices.Equal(ids, []string{"c", "e"}) || l.Holding() {
		t.Errorf("Drop released %v (index %v), want c and e", ids, l.waitIdx)
	}
}
