package ownership

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chime-scheduler/chime/slots"
)

// Board is what the executor shares with the rest of the node: the inbox
// where any goroutine posts events for the machine (never blocking), and
// what the executor publishes after every step for the data path to read
// without locks: per slot the role, the epoch and whether this node fires
// it, the nodes an owner replicates to, the slots flagged
// under-replicated or unavailable, and the machine's counts. It exists
// before the executor, so that the writer, which the executor persists
// through, can be built with it.
type Board struct {
	mu    sync.Mutex
	queue []any // slots.Event or an executor-internal event
	kick  chan struct{}

	// pub packs each slot's published state: epoch<<8 | firing<<7 | role.
	pub [slots.Count]atomic.Uint64
	// changed is closed, and replaced, whenever some slot's pub or the
	// counts change.
	changed atomic.Pointer[chan struct{}]

	repMu sync.RWMutex
	reps  [slots.Count]replicaSet

	flagMu   sync.Mutex
	underRep map[uint16]bool
	unavail  map[uint16]bool

	counts atomic.Pointer[slots.Counts]
	tabled atomic.Bool // the machine has had a table
	// tableSum is the checksum of the table counts are for: the last one
	// the machine was given (0: none yet). Stored after counts.
	tableSum atomic.Uint64

	// The firing slots' bounds (slots.Machine.Horizon and Near), in Unix
	// ns: horizon 0 until the first Tick (nothing fires); near 0 for none.
	horizon atomic.Int64
	near    [slots.Count]atomic.Int64
}

// NewBoard returns an empty board: every slot unowned, nothing posted.
func NewBoard() *Board {
	b := &Board{kick: make(chan struct{}, 1), underRep: map[uint16]bool{}, unavail: map[uint16]bool{}}
	b.counts.Store(&slots.Counts{})
	ch := make(chan struct{})
	b.changed.Store(&ch)
	return b
}

// Internal events.
type (
	viewEvent struct{ old, cur View }
	sentEvent struct {
		to string
		ok bool
	}
	// debugEvent asks for the machine's description of a slot.
	debugEvent struct {
		slot uint16
		out  chan string
	}
	// ownedReportEvent asks which slots this node still owns or seals,
	// with the machine's description of a few (drain diagnostics).
	ownedReportEvent struct{ out chan string }
	// snapEvent: a snapshot was applied (durably) as data generation gen.
	snapEvent struct {
		ev  slots.SnapshotComplete
		gen uint64
	}
	gapEvent struct {
		slot  uint16
		epoch uint64
		from  string
	}
)

func (b *Board) post(evs ...any) {
	b.mu.Lock()
	b.queue = append(b.queue, evs...)
	b.mu.Unlock()
	select {
	case b.kick <- struct{}{}:
	default:
	}
}

// postQuiet queues evs without waking the loop: the next step takes them.
func (b *Board) postQuiet(evs ...any) {
	b.mu.Lock()
	b.queue = append(b.queue, evs...)
	b.mu.Unlock()
}

// take returns the queued events and empties the queue.
func (b *Board) take() []any {
	b.mu.Lock()
	defer b.mu.Unlock()
	q := b.queue
	b.queue = nil
	return q
}

// Post queues machine events (what the writer applied, epochs it saw).
// It never blocks.
func (b *Board) Post(evs ...slots.Event) {
	anys := make([]any, len(evs))
	for i, e := range evs {
		anys[i] = e
	}
	b.post(anys...)
}

// ViewChanged tells the machine the node went from view old to cur.
func (b *Board) ViewChanged(old, cur View) { b.post(viewEvent{old: old, cur: cur}) }

// GapSeen reports that replica from of slot answered a gap (or differs):
// the machine streams it a snapshot, at most one per Lease.
func (b *Board) GapSeen(slot uint16, epoch uint64, from string) {
	b.post(gapEvent{slot: slot, epoch: epoch, from: from})
}

// SnapshotApplied reports that a snapshot was applied durably, replacing
// the slot's data as generation gen (a drop decided before it keeps it).
func (b *Board) SnapshotApplied(ev slots.SnapshotComplete, gen uint64) {
	b.post(snapEvent{ev: ev, gen: gen})
}

// ErrSender is the error of Receive when the batch names another sender
// than the signature.
var ErrSender = errors.New("ctl: the body names another sender than the signature")

// Receive decodes a batch another node sent and posts its messages, after
// a sign of life of their sender. signer is the name the request's
// signature carries ("" when calls are not signed).
func (b *Board) Receive(signer string, body []byte) error {
	bt, err := DecodeBatch(body)
	if err != nil {
		return err
	}
	if bt.From == "" || (signer != "" && bt.From != signer) {
		return fmt.Errorf("%w: sender %q, signature %q", ErrSender, bt.From, signer)
	}
	evs := make([]any, 0, len(bt.Msgs)+1)
	evs = append(evs, slots.MemberAlive{Name: bt.From})
	for _, m := range bt.Msgs {
		evs = append(evs, m.event(bt.From))
	}
	b.post(evs...)
	return nil
}

// ask posts ev, which answers on out, and waits for the answer or ctx.
func (b *Board) ask(ctx context.Context, ev any, out chan string) (string, bool) {
	b.post(ev)
	select {
	case s := <-out:
		return s, true
	case <-ctx.Done():
		return "", false
	}
}

// Debug returns the machine's description of slot s (false if ctx ended
// first).
func (b *Board) Debug(ctx context.Context, s uint16) (string, bool) {
	ch := make(chan string, 1)
	return b.ask(ctx, debugEvent{slot: s, out: ch}, ch)
}

// OwnedReport counts the slots this node still owns or seals and
// describes a few (false if ctx ended first).
func (b *Board) OwnedReport(ctx context.Context) (string, bool) {
	ch := make(chan string, 1)
	return b.ask(ctx, ownedReportEvent{out: ch}, ch)
}

// State returns slot s's published role, epoch and whether it fires.
func (b *Board) State(s uint16) (role slots.Role, epoch uint64, firing bool) {
	if int(s) >= slots.Count {
		return 0, 0, false
	}
	v := b.pub[s].Load()
	return slots.Role(v & 0x7f), v >> 8, v&(1<<7) != 0
}

// Fires reports whether this node may fire (and write) slot s at now: the
// machine fires it (State) and now is before the slot's bound, which the
// machine keeps at or before the end of its right to fire (its leases,
// the evidence of a majority; slots/horizon.go). held: the machine fires
// it but the bound has passed, so the executor's run loop is late: the
// slot resumes when it catches up (or stops for good if its right ended).
func (b *Board) Fires(s uint16, now time.Time) (ok, held bool) {
	if _, _, firing := b.State(s); !firing {
		return false, false
	}
	t := now.UnixNano()
	if n := b.near[s].Load(); t >= b.horizon.Load() || n != 0 && t >= n {
		return false, true
	}
	return true, false
}

// Holds reports the epoch at which this node holds slot s as its owner
// (owner or sealing), 0 if it does not.
func (b *Board) Holds(s uint16) uint64 {
	r, e, _ := b.State(s)
	if r == slots.RoleOwner || r == slots.RoleSealing {
		return e
	}
	return 0
}

// AwaitHeld waits until this node holds every slot of ss as its owner, or
// until ctx ends, and reports whether it does. It wakes on each change of
// the published state, not on a timer.
func (b *Board) AwaitHeld(ctx context.Context, ss ...uint16) bool {
	for {
		changed := *b.changed.Load() // before the check: a change after it closes this one
		if b.holdsAll(ss) {
			return true
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return b.holdsAll(ss)
		}
	}
}

// Changed returns a channel that is closed at the next change of the
// published state or of Counts. Take it before reading the state it
// guards: a change after the read then closes it.
func (b *Board) Changed() <-chan struct{} { return *b.changed.Load() }

func (b *Board) holdsAll(ss []uint16) bool {
	for _, s := range ss {
		if b.Holds(s) == 0 {
			return false
		}
	}
	return true
}

// setPub publishes slot s's packed state and reports whether it changed.
// Only the executor writes pub, so a load tells; a store only on a change.
// publish runs for every slot now and then, and under the race detector
// every Swap is a release: the race runtime resets its shadow memory after
// a few million of those, and node's tests paid for the faults after.
func (b *Board) setPub(s uint16, v uint64) bool {
	if b.pub[s].Load() == v {
		return false
	}
	b.pub[s].Store(v)
	return true
}

// notify wakes the waiters on the published state.
func (b *Board) notify() {
	ch := make(chan struct{})
	close(*b.changed.Swap(&ch))
}

// replicaSet is what the board publishes of a slot's replicas.
type replicaSet struct {
	nodes   []string
	pending bool // slots.Machine.FollowerPending
}

// Replicas returns the nodes slot s's writes go to, and whether a write
// that all of them acknowledged is safe: false while none of them could
// take the slot over (slots.Machine.FollowerPending); the write then waits.
// One consistent reading of both.
func (b *Board) Replicas(s uint16) (nodes []string, safe bool) {
	if int(s) >= slots.Count {
		return nil, false
	}
	b.repMu.RLock()
	defer b.repMu.RUnlock()
	r := b.reps[s]
	return r.nodes, !r.pending
}

// setReplicas publishes the nodes slot s's writes go to and whether its
// follower is pending (the executor calls it only when they changed).
func (b *Board) setReplicas(s uint16, reps []string, pending bool) {
	b.repMu.Lock()
	b.reps[s] = replicaSet{reps, pending}
	b.repMu.Unlock()
}

// Flagged returns the slots flagged under-replicated and unavailable,
// ascending.
func (b *Board) Flagged() (under, unavail []uint16) {
	b.flagMu.Lock()
	for s := range b.underRep {
		under = append(under, s)
	}
	for s := range b.unavail {
		unavail = append(unavail, s)
	}
	b.flagMu.Unlock()
	slices.Sort(under)
	slices.Sort(unavail)
	return under, unavail
}

func (b *Board) setFlag(m map[uint16]bool, s uint16, on bool) {
	b.flagMu.Lock()
	defer b.flagMu.Unlock()
	if on {
		m[s] = true
	} else {
		delete(m, s)
	}
}

// flagCounts returns how many slots are flagged under-replicated and
// unavailable.
func (b *Board) flagCounts() (underRep, unavail int) {
	b.flagMu.Lock()
	defer b.flagMu.Unlock()
	return len(b.underRep), len(b.unavail)
}

// Counts returns the machine's last counts (owned, firing, importing…).
func (b *Board) Counts() slots.Counts { return *b.counts.Load() }

// Tabled reports whether the machine has had a slot table.
func (b *Board) Tabled() bool { return b.tabled.Load() }

// TableSum returns the checksum of the slot table the machine was last
// given, whose slots Counts counts (0: none yet). Load it before Counts:
// the counts are then at least as new as that table.
func (b *Board) TableSum() uint64 { return b.tableSum.Load() }

// String describes the machine's counts (logs).
func (b *Board) String() string {
	k := b.counts.Load()
	return fmt.Sprintf("owned=%d firing=%d following=%d importing=%d under=%d unavailable=%d",
		k.Owned, k.Firing, k.Following, k.Importing, k.UnderReplicated, k.Unavailable)
}
