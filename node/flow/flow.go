// Package flow is the flow limiter (API.md "Flow keys", DESIGN.md "Flow
// keys"): the writer holds the fires of a flow key over its limits, on the
// owner of the key's slot, where every task of the key lives (its id's
// hash tag is the key). Limits are exact on one owner because one
// goroutine, the writer, starts every fire of the key and owns the
// Limiter: it is not safe for concurrent use.
//
// A held fire changes nothing in its record, exactly like a fire held by
// an open circuit (node/writer_breaker.go): no attempt counted, no retry
// spent, no intent written; its wheel entry is filed again later and its
// record stays due in the store. The Limiter remembers the held fires of
// each key in due order (bounded) and wakes the earliest ones as soon as
// the key has room again: when a callback of the key finishes
// (parallelism), when the oldest start leaves the rate window, or when a
// new owner's first period ends.
//
// The rate window slides: at most rate attempts start in any period_ms,
// each counted from the instant the dispatcher sends it (dispatch.Job.
// Started), not from when the writer started it, so a queue between the
// two cannot bunch sends. An attempt the dispatcher has not sent yet
// counts as in the window until it is.
package flow

import (
	"container/heap"
	"errors"
	"sync/atomic"

	"github.com/chime-scheduler/chime/slots"
	"github.com/chime-scheduler/chime/storage"
)

// Bounds of the limiter's memory.
const (
	// MaxStates bounds the keys the Limiter keeps state for; beyond it
	// the idle ones (nothing in flight, waiting or in the window) are
	// dropped, and read again at their next fire.
	MaxStates = 100_000
	// MaxWaiting bounds the held fires remembered across keys; one
	// beyond it is still held, but only retried at its fallback wake.
	MaxWaiting = 100_000
	// maxRelease bounds the fires one kick wakes; each start kicks again
	// while there is room.
	maxRelease = 256
	// Poll is how soon a key whose rate window is full of attempts not
	// sent yet looks again.
	Poll = 5_000_000 // 5 ms in ns
)

// Wake is a held fire to wake: its task and the instant (Unix ns) to file
// its wheel entry at.
type Wake struct {
	ID string
	At int64
}

// Live is a flow's limiter state on its owner.
type Live struct {
	InFlight, RateCount, Waiting int
	OldestWaitingDue             int64 // 0: none
}

// Config is what a Limiter reads of the node.
type Config struct {
	// Holds returns the epoch at which this node holds slot (0: it does
	// not, or standalone).
	Holds func(slot uint16) uint64
	// Load reads key's stored definition: storage.ErrNotFound when there
	// is none.
	Load func(slot uint16, key string) (*storage.Flow, error)
	// Cluster: slots change owner, so a key's state is only exact from
	// this node's first fire of its slot at an epoch; standalone, from
	// Born on.
	Cluster bool
	Born    int64 // when the writer was made (Unix ns)
}

// Limiter is the state of every limited flow key this node fires.
type Limiter struct {
	cfg     Config
	states  map[string]*State
	waitIdx map[string]*State // held task id -> its key's state
	since   *[slots.Count]slotSince
}

// New returns an empty limiter.
func New(cfg Config) *Limiter {
	return &Limiter{cfg: cfg, states: make(map[string]*State), waitIdx: make(map[string]*State)}
}

// start is one start in a key's rate window.
type start struct {
	sent *atomic.Int64 // the dispatcher's send instant; 0 while not sent
}

// wait is one held fire: its task and the wake it became due at.
type wait struct {
	id  string
	due int64
}

func earlier(a, b wait) bool { return a.due < b.due || a.due == b.due && a.id < b.id }

// waitHeap is the held fires of a key, earliest due first, with each
// one's index for removal.
type waitHeap struct {
	items []wait
	at    map[string]int
}

func (h *waitHeap) Len() int           { return len(h.items) }
func (h *waitHeap) Less(i, j int) bool { return earlier(h.items[i], h.items[j]) }
func (h *waitHeap) Swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	h.at[h.items[i].id], h.at[h.items[j].id] = i, j
}
func (h *waitHeap) Push(x any) {
	it := x.(wait)
	h.at[it.id] = len(h.items)
	h.items = append(h.items, it)
}
func (h *waitHeap) Pop() any {
	it := h.items[len(h.items)-1]
	h.items = h.items[:len(h.items)-1]
	delete(h.at, it.id)
	return it
}

// State is the limiter's state of one flow key on this owner.
type State struct {
	key   string
	slot  uint16
	epoch uint64 // the slot's epoch this state is of
	// The limits; 0 = none. period is in ns.
	rate, period, par int64
	inflight          map[string]uint64 // task id -> fire seq of its callback in flight
	starts            []start           // the rate window, in start order, from head on
	head              int
	blockedUntil      int64 // no start before (a new owner's first period)
	waiting           waitHeap
}

func (fs *State) limited() bool { return fs.rate > 0 || fs.par > 0 }

// Waiting reports whether fs holds fires.
func (fs *State) Waiting() bool { return fs.waiting.Len() > 0 }

// setLimits applies the definition f (nil: none).
func (fs *State) setLimits(f *storage.Flow) {
	fs.rate, fs.period, fs.par = 0, 0, 0
	if f != nil {
		fs.rate, fs.period, fs.par = f.Rate, f.PeriodMs*1_000_000, f.Parallelism
	}
}

// prune drops the starts that left the window; it stops at the first one
// not sent yet, so the count is never too low. The window's slice is
// compacted once its dropped head is the larger part.
func (fs *State) prune(now int64) {
	i := fs.head
	for i < len(fs.starts) {
		s := fs.starts[i].sent.Load()
		if s == 0 || s+fs.period > now {
			break
		}
		fs.starts[i] = start{}
		i++
	}
	fs.head = i
	if fs.head == len(fs.starts) {
		fs.starts, fs.head = fs.starts[:0], 0
	} else if fs.head > 64 && fs.head > len(fs.starts)/2 {
		n := copy(fs.starts, fs.starts[fs.head:])
		fs.starts, fs.head = fs.starts[:n], 0
	}
}

// inWindow is the number of starts in the rate window (after a prune).
func (fs *State) inWindow() int { return len(fs.starts) - fs.head }

// room returns how many fires may start now, and when there is none, when
// there may be (0: when a callback of the key finishes).
func (fs *State) room(now int64) (n int64, at int64) {
	if now < fs.blockedUntil {
		return 0, fs.blockedUntil
	}
	n = 1 << 62
	if fs.par > 0 {
		n = min(n, fs.par-int64(len(fs.inflight)))
	}
	if fs.rate > 0 {
		fs.prune(now)
		if r := fs.rate - int64(fs.inWindow()); r <= 0 {
			at = now + Poll
			if s := fs.starts[fs.head].sent.Load(); s != 0 {
				at = s + fs.period
			}
			return 0, at
		} else {
			n = min(n, r)
		}
	}
	return max(n, 0), 0
}

// Of returns the limiter's state of key (in slot) for a fire at now, or
// nil when the key has no limits. A state of an earlier epoch of the slot
// (the slot moved away and back) is started afresh. An error reading the
// definition is returned (the fire waits and tries again); a record that
// does not decode limits nothing (storage counted and logged it;
// anti-entropy repairs it from the replica) and is read again next time.
func (l *Limiter) Of(key string, slot uint16, now int64) (*State, error) {
	epoch := l.cfg.Holds(slot)
	fs := l.states[key]
	if fs != nil && fs.epoch == epoch {
		if !fs.limited() {
			return nil, nil
		}
		return fs, nil
	}
	f, err := l.cfg.Load(slot, key)
	switch {
	case errors.Is(err, storage.ErrNotFound):
		f = nil
	case errors.Is(err, storage.ErrCorrupt):
		return nil, nil
	case err != nil:
		return nil, err
	}
	fs = l.newState(key, slot, epoch, f, now)
	if !fs.limited() {
		return nil, nil
	}
	return fs, nil
}

// newState makes and keeps the state of key. This node knows every start
// of the slot's keys since knownSince (every one went through this
// writer); before that, the previous owner (or this node before a
// restart) may have started fires this node cannot see, so a state made
// within one period of that moment starts no fire before it has passed:
// the rate stays exact across a handover, a failover or a restart, at the
// cost of at most one period's pause. (A state dropped by trim had no
// start in its window, so making it again later loses nothing.)
func (l *Limiter) newState(key string, slot uint16, epoch uint64, f *storage.Flow, now int64) *State {
	if len(l.states) >= MaxStates {
		l.trim(now)
	}
	since := l.knownSince(slot, epoch, now)
	fs := &State{key: key, slot: slot, epoch: epoch, inflight: make(map[string]uint64),
		waiting: waitHeap{at: make(map[string]int)}}
	fs.setLimits(f)
	if fs.rate > 0 {
		fs.blockedUntil = since + fs.period
	}
	if old := l.states[key]; old != nil {
		for id := range old.waiting.at {
			delete(l.waitIdx, id)
		}
	} else if !fs.limited() && len(l.states) >= MaxStates {
		return fs // full of busy keys: read again at the next fire
	}
	l.states[key] = fs
	return fs
}

// slotSince is when this node first fired a slot at an epoch.
type slotSince struct {
	epoch uint64
	at    int64
}

// knownSince is the instant since which this node has started every
// fire of slot at epoch: standalone, since the writer was made (a
// restart forgets); in a cluster, since its first fire of the slot at
// that epoch (NoteSlot), or now.
func (l *Limiter) knownSince(slot uint16, epoch uint64, now int64) int64 {
	if !l.cfg.Cluster {
		return l.cfg.Born
	}
	l.NoteSlot(slot, epoch, now)
	return l.since[slot].at
}

// NoteSlot records a fire of slot (held at epoch) at now for knownSince.
func (l *Limiter) NoteSlot(slot uint16, epoch uint64, now int64) {
	if l.since == nil {
		l.since = new([slots.Count]slotSince)
	}
	if s := &l.since[slot]; s.epoch != epoch || s.at == 0 {
		s.epoch, s.at = epoch, now
	}
}

// trim drops the states that hold nothing, and those of a slot this node
// no longer holds at their epoch (with their held fires: their new owner
// fires them).
func (l *Limiter) trim(now int64) {
	for k, fs := range l.states {
		if l.cfg.Holds(fs.slot) != fs.epoch {
			l.Drop(k)
			continue
		}
		if len(fs.inflight) == 0 && fs.waiting.Len() == 0 {
			if fs.rate > 0 {
				fs.prune(now)
				if fs.inWindow() > 0 {
					continue
				}
			}
			delete(l.states, k)
		}
	}
}

// Allow decides whether the fire of task id, due at due, may start now
// under fs's limits and its due order (no earlier held fire of the key
// waits). When not, it remembers it as held: the caller files it at a
// fallback wake (the kicks wake it as soon as it may go).
func (l *Limiter) Allow(fs *State, id string, due, now int64) bool {
	// The fire is not at the dispatcher (the writer checked): an in-flight
	// mark of it is stale (the dispatcher refused its last attempt).
	delete(fs.inflight, id)
	n, _ := fs.room(now)
	if n > 0 && (fs.waiting.Len() == 0 || !earlier(fs.waiting.items[0], wait{id, due})) {
		return true
	}
	if _, there := fs.waiting.at[id]; !there && len(l.waitIdx) < MaxWaiting {
		heap.Push(&fs.waiting, wait{id, due})
		l.waitIdx[id] = fs
	}
	return false
}

// Holding reports whether any fire is held.
func (l *Limiter) Holding() bool { return len(l.waitIdx) > 0 }

// Unwait forgets id as held (its entry came up, or it changed), and
// returns its key's state to kick afterwards.
func (l *Limiter) Unwait(id string) *State {
	fs := l.waitIdx[id]
	if fs == nil {
		return nil
	}
	delete(l.waitIdx, id)
	if i, ok := fs.waiting.at[id]; ok {
		heap.Remove(&fs.waiting, i)
	}
	return fs
}

// Started counts the attempt (task id, fire seq) starting against fs. It
// returns the instant the dispatcher must store when it sends the
// attempt (dispatch.Job.Started); nil when the key has no rate.
func (l *Limiter) Started(fs *State, id string, seq uint64) *atomic.Int64 {
	fs.inflight[id] = seq
	if fs.rate == 0 {
		return nil
	}
	s := start{sent: new(atomic.Int64)}
	fs.starts = append(fs.starts, s)
	return s.sent
}

// Done ends the in-flight attempt (task id, fire seq) of fs, and appends
// the held fires that may go now to wakes.
func (l *Limiter) Done(wakes []Wake, fs *State, id string, seq uint64, now int64) []Wake {
	if s, ok := fs.inflight[id]; ok && s == seq {
		delete(fs.inflight, id)
	}
	return l.Kick(wakes, fs, now)
}

// Kick appends to wakes fs's earliest held fires that may go now, or the
// earliest one at the time the key may have room again.
func (l *Limiter) Kick(wakes []Wake, fs *State, now int64) []Wake {
	if fs.waiting.Len() == 0 || l.states[fs.key] != fs {
		return wakes
	}
	n, at := fs.room(now)
	if n == 0 {
		if at != 0 {
			wakes = append(wakes, Wake{fs.waiting.items[0].id, max(at, now+1)})
		}
		return wakes
	}
	n = min(n, int64(fs.waiting.Len()), maxRelease)
	if n == 1 {
		return append(wakes, Wake{fs.waiting.items[0].id, now + 1})
	}
	// The n earliest: popped in order, then put back (they stay held
	// until their entry comes up).
	first := make([]wait, 0, n)
	for range n {
		first = append(first, heap.Pop(&fs.waiting).(wait))
	}
	for _, it := range first {
		wakes = append(wakes, Wake{it.id, now + 1})
		heap.Push(&fs.waiting, it)
	}
	return wakes
}

// Put applies a flow definition written on this owner to its state: the
// limits apply from now, a new definition with an empty window.
func (l *Limiter) Put(wakes []Wake, f *storage.Flow, created bool, now int64) []Wake {
	epoch := l.cfg.Holds(f.Slot)
	fs := l.states[f.Key]
	if fs == nil || fs.epoch != epoch {
		if !created {
			// Not known here: made at its next fire, as after a handover.
			if fs != nil {
				l.Drop(f.Key)
			}
			return wakes
		}
		fs = l.newState(f.Key, f.Slot, epoch, f, now)
		fs.blockedUntil = 0
		return wakes
	}
	fs.setLimits(f)
	if fs.rate == 0 {
		fs.starts, fs.head = nil, 0
	}
	return l.Kick(wakes, fs, now)
}

// Drop forgets key's state (its definition was deleted) and returns its
// held fires: they go at once, unlimited.
func (l *Limiter) Drop(key string) []string {
	fs := l.states[key]
	if fs == nil {
		return nil
	}
	delete(l.states, key)
	ids := make([]string, 0, fs.waiting.Len())
	for _, it := range fs.waiting.items {
		delete(l.waitIdx, it.id)
		ids = append(ids, it.id)
	}
	return ids
}

// Rewait forgets id as held when its record changes (paused, replaced,
// deleted, ...): the change re-files it, and the next held fire of its
// key may go in its place.
func (l *Limiter) Rewait(wakes []Wake, id string, now int64) []Wake {
	if !l.Holding() {
		return wakes
	}
	if fs := l.Unwait(id); fs != nil {
		wakes = l.Kick(wakes, fs, now)
	}
	return wakes
}

// Deleted drops the stale in-flight mark a deleted task id of key may
// have left (an attempt the dispatcher refused; the caller checked that
// none is running: a running attempt's result drops its own).
func (l *Limiter) Deleted(wakes []Wake, key, id string, now int64) []Wake {
	if fs := l.states[key]; fs != nil {
		if _, ok := fs.inflight[id]; ok {
			delete(fs.inflight, id)
			wakes = l.Kick(wakes, fs, now)
		}
	}
	return wakes
}

// Live returns key's state in slot at now, if this node keeps one at the
// epoch it holds slot at.
func (l *Limiter) Live(key string, slot uint16, now int64) (Live, bool) {
	fs := l.states[key]
	if fs == nil || fs.epoch != l.cfg.Holds(slot) {
		return Live{}, false
	}
	if fs.rate > 0 {
		fs.prune(now)
	}
	live := Live{InFlight: len(fs.inflight), RateCount: fs.inWindow(), Waiting: fs.waiting.Len()}
	if fs.waiting.Len() > 0 {
		live.OldestWaitingDue = fs.waiting.items[0].due
	}
	return live, true
}
