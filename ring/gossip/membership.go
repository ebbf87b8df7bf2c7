package gossip

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
)

// Errors returned by Membership methods.
var (
	// ErrNotStarted is returned by Join and SetState before Start.
	ErrNotStarted = errors.New("gossip: membership not started")
	// ErrStarted is returned by a second Start.
	ErrStarted = errors.New("gossip: membership already started")
	// ErrClosed is returned by Start, Join and SetState after Leave or Close.
	ErrClosed = errors.New("gossip: membership closed")
)

// Stats is a snapshot of membership health, for metrics.
type Stats struct {
	// HealthScore is memberlist's awareness score: 0 is healthy; it grows
	// when this node misses its own soft deadlines (acks it should have
	// received, probes it answered late), up to AwarenessMaxMultiplier-1.
	HealthScore int
	// Alive, Suspect, Dead and Left count the members of the view
	// (including this node) by Status.
	Alive, Suspect, Dead, Left int
	// EventsDropped counts events dropped because Events was full.
	EventsDropped uint64
	// MetaErrors counts member metadata that could not be decoded.
	MetaErrors uint64
	// Reconnects counts push/pull attempts with dead members.
	Reconnects uint64
}

// Membership is this node's view of the cluster, kept by memberlist. See
// the package doc for the lifecycle and the event contract.
type Membership struct {
	cfg    Config
	log    *slog.Logger
	events chan Event
	resync chan struct{} // capacity 1: holds a value while a resync is due

	// local is this node's Meta and its encoding, swapped whole by SetState
	// and read by NodeMeta from memberlist's goroutines.
	local atomic.Pointer[localMeta]
	// runForgotten: a forget intent for an earlier run of this node
	// arrived (RunForgotten).
	runForgotten atomic.Bool
	// ml is set once by Start.
	ml atomic.Pointer[memberlist.Memberlist]

	// life serializes Start, Leave and Close (which block on memberlist):
	// memberlist's Leave must never run after its Shutdown.
	life struct {
		sync.Mutex
		state lifeState
	}
	stop chan struct{}  // closed to stop the reconnect loop
	wg   sync.WaitGroup // the reconnect loop

	reconnects atomic.Uint64
	// keys is the gossip keyring (keyring.go); keyMu serializes changes.
	keys  keyring
	keyMu sync.Mutex
	// bcast holds leave intents to piggyback on gossip.
	bcast *memberlist.TransmitLimitedQueue

	// mu guards the view and the counters written from callbacks. It is
	// never held across a call into memberlist or a blocking send.
	mu struct {
		sync.Mutex
		closed          bool // events is closed; callbacks are ignored
		view            map[string]*entry
		seq             uint64
		stats           Stats // EventsDropped and MetaErrors only
		droppedSinceLog uint64
		lastDropLog     time.Time
		reconnectCursor string
		// intents maps a member name to the boot id of the last leave
		// intent seen for it, to gossip each intent on only once.
		intents map[string]leaveIntent
	}
}

type lifeState uint8

const (
	lifeNew lifeState = iota
	lifeStarted
	lifeClosed
)

type localMeta struct {
	meta    Meta
	encoded []byte
}

// entry is one member of the view.
type entry struct {
	m       Member
	since   time.Time // when m.Status last changed
	leaving bool      // a leave intent for m's boot id arrived
	forgot  bool      // and it was a forget (Member.Forgotten)
	// prevBoot is the boot id of the run of this name seen before m's
	// (0: none seen): EarlierRun.
	prevBoot uint64
}

// New validates a copy of cfg and returns a Membership that has started
// nothing: no memberlist, no sockets, no goroutines until Start.
func New(cfg Config) (*Membership, error) {
	c := cfg.clone()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	logger := c.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	m := &Membership{
		cfg:    c,
		log:    logger,
		events: make(chan Event, c.EventBuffer),
		resync: make(chan struct{}, 1),
		stop:   make(chan struct{}),
	}
	keys, warn, err := newKeyring(&c)
	if err != nil {
		return nil, err
	}
	if warn != "" {
		logger.Warn(warn, "keyring_file", c.KeyringFile)
	}
	m.keys = keys
	m.mu.view = make(map[string]*entry)
	m.mu.intents = make(map[string]leaveIntent)
	m.bcast = &memberlist.TransmitLimitedQueue{NumNodes: m.numUp, RetransmitMult: c.RetransmitMult}
	return m, nil
}

// Start creates the memberlist with meta as this node's metadata: it binds
// the transport (or adopts Config.Transport), adds this node to its own
// view (the first Event is its EventJoin) and starts probing and gossip,
// and the reconnect loop. It does not contact anyone; call Join. It first
// waits for the next multiple of GossipInterval since the Unix epoch (at
// most one interval), so that the probe and gossip rounds fall on that
// beat, within the time Create takes (UntilBeat).
//
// It returns ErrMeta (wrapped) if meta cannot be encoded, ErrStarted or
// ErrClosed if called twice or after Close, or memberlist's error (a bind
// failure, say); after an error Start may be retried.
func (m *Membership) Start(meta Meta) error {
	m.life.Lock()
	defer m.life.Unlock()
	switch m.life.state {
	case lifeStarted:
		return ErrStarted
	case lifeClosed:
		return ErrClosed
	}
	enc, err := EncodeMeta(meta)
	if err != nil {
		return fmt.Errorf("gossip: start: %w", err)
	}
	m.local.Store(&localMeta{meta: meta, encoded: enc})
	// memberlist starts its probe and gossip tickers as Create returns:
	// started just after a multiple of GossipInterval since the Unix
	// epoch, their rounds fall within Create's time (a few milliseconds
	// at most) of that beat, on which the node's ticks and the other
	// nodes' fall too (UntilBeat).
	time.Sleep(UntilBeat(time.Now(), m.cfg.GossipInterval))
	ml, err := memberlist.Create(m.cfg.memberlistConfig(&delegate{m: m}, m.keys.ring, m.log))
	if err != nil {
		return fmt.Errorf("gossip: start %s: %w", m.cfg.Name, err)
	}
	m.ml.Store(ml)
	m.life.state = lifeStarted
	if m.cfg.ReconnectInterval > 0 {
		m.wg.Add(1)
		go m.reconnectLoop(ml)
	}
	return nil
}

// UntilBeat returns how long from now until the next multiple of every
// since the Unix epoch (0 when every is not positive). Periodic work on
// those instants, with every a multiple of GossipInterval, runs with the
// membership's gossip rounds and probes (Start) and with the other nodes'
// (their clocks agree to within milliseconds): an idle process wakes up
// once for all of it, and waking up is most of what an idle node spends
// (issue 17).
func UntilBeat(now time.Time, every time.Duration) time.Duration {
	if every <= 0 {
		return 0
	}
	return every - time.Duration(now.UnixNano()%int64(every))
}

// Join contacts every address in addrs (host:port gossip addresses) with a
// full state exchange (push/pull), one after another, and returns how many
// answered. Joining through all known addresses, not one seed, makes
// convergence independent of gossip luck: a single-seed join was measured
// to wait 20+ s for a periodic sync (DESIGN §3). Each unreachable address
// can cost up to TCPTimeout.
//
// Empty entries and this node's own gossip address are skipped, so every
// node may be given the same list; if nothing remains Join returns 0, nil
// (this node starts the cluster). Otherwise it returns an error only when
// no address answered; failures next to a success are logged by
// memberlist at debug level.
func (m *Membership) Join(addrs []string) (int, error) {
	ml, err := m.running()
	if err != nil {
		return 0, err
	}
	self, _ := m.Local()
	var seeds []string
	for _, a := range addrs {
		a = strings.TrimSpace(a)
		if a != "" && a != self.Addr {
			seeds = append(seeds, a)
		}
	}
	if len(seeds) == 0 {
		return 0, nil
	}
	n, err := ml.Join(seeds)
	if err != nil {
		return n, fmt.Errorf("gossip: join %v: %w", seeds, err)
	}
	return n, nil
}

// SetState changes this node's Meta.State and re-advertises its Meta,
// waiting up to UpdateTimeout until the update was sent to at least one
// member, and pushes it to every member alive in the view over TCP in the
// background (tellUp). The local view changes at once (an EventUpdate for
// this node); on a timeout error the update is still queued for gossip and
// push/pull spreads it later. It returns ErrMeta for an invalid state, and
// ErrNotStarted or ErrClosed outside the running phase.
func (m *Membership) SetState(s State) error {
	if !s.Valid() {
		return fmt.Errorf("gossip: set state: %w: state %v", ErrMeta, s)
	}
	if err := m.UpdateMeta(func(meta *Meta) { meta.State = s }); err != nil {
		return fmt.Errorf("gossip: set state %v: %w", s, err)
	}
	return nil
}

// UpdateMeta changes this node's Meta with f and re-advertises it, like
// SetState (which it generalises). f may run more than once.
func (m *Membership) UpdateMeta(f func(*Meta)) error {
	ml, err := m.running()
	if err != nil {
		return err
	}
	for {
		old := m.local.Load()
		meta := old.meta
		f(&meta)
		enc, err := EncodeMeta(meta)
		if err != nil {
			return err
		}
		if m.local.CompareAndSwap(old, &localMeta{meta: meta, encoded: enc}) {
			break
		}
	}
	err = ml.UpdateNode(m.cfg.UpdateTimeout)
	m.tellUp(ml)
	return err
}

// aliveAddrsLocked returns the gossip addresses of the members alive in
// the view but this node and except. The caller holds mu.
func (m *Membership) aliveAddrsLocked(except string) []string {
	var up []string
	for n, e := range m.mu.view {
		if n != m.cfg.Name && n != except && e.m.Status == StatusAlive && e.m.Addr != "" {
			up = append(up, e.m.Addr)
		}
	}
	return up
}

// tellUpWorkers bounds the push/pulls tellUp runs at once, and tellUpMax
// the members it tells: a push/pull carries the whole member list, and in
// a large cluster gossip sends more copies (its retransmissions grow with
// log10 N) to more members, so losing every one is a small cluster's risk.
const (
	tellUpWorkers = 4
	tellUpMax     = 32
)

// tellUp pushes this node's state (its new Meta) to every other member
// alive in the view (tellUpMax of them at random in a larger cluster), a
// push/pull with each over TCP, in the background.
// Gossip sends an update a bounded number of times (RetransmitMult ×
// log10 N transmissions in all: two copies to each peer of a 3-node
// cluster), and a member that missed them all learned it only at the next
// periodic push/pull (PushPullInterval, 30 s): a drainer stayed in its
// tables, so it never took the drainer's slots. A member that does not
// answer (a stopped process holds a dial up to TCPTimeout) delays only its
// own worker; the rest learn from gossip and push/pull as before.
func (m *Membership) tellUp(ml *memberlist.Memberlist) {
	m.mu.Lock()
	up := m.aliveAddrsLocked("")
	m.mu.Unlock()
	if len(up) == 0 {
		return
	}
	if len(up) > tellUpMax {
		rand.Shuffle(len(up), func(i, j int) { up[i], up[j] = up[j], up[i] })
		up = up[:tellUpMax]
	}
	addrs := make(chan string, len(up))
	for _, a := range up {
		addrs <- a
	}
	close(addrs)
	for range min(len(up), tellUpWorkers) {
		go func() {
			for a := range addrs {
				if _, err := ml.Join([]string{a}); err != nil {
					m.log.Debug("gossip: a member was not told of our update; gossip and push/pull will", "addr", a, "err", err)
				}
			}
		}()
	}
}

// Events returns the channel of membership changes, buffered to
// Config.EventBuffer. memberlist's callbacks never block on it: when it is
// full the event is dropped and Resync is signalled. It is closed when
// Leave or Close returns.
func (m *Membership) Events() <-chan Event { return m.events }

// Resync returns a channel that holds a value while the consumer must
// rebuild its view from Snapshot because at least one event was dropped.
// Receiving clears the signal. Select on it next to Events; after a
// resync, skip events whose Seq is at most the Snapshot's seq.
func (m *Membership) Resync() <-chan struct{} { return m.resync }

// Snapshot returns the view, sorted by name, and the Seq of the last event
// applied to it. It includes this node and members that are dead or left
// (until they rejoin). O(n log n).
func (m *Membership) Snapshot() ([]Member, uint64) {
	m.mu.Lock()
	out := make([]Member, 0, len(m.mu.view))
	for _, e := range m.mu.view {
		out = append(out, e.m)
	}
	seq := m.mu.seq
	m.mu.Unlock()
	slices.SortFunc(out, func(a, b Member) int { return cmp.Compare(a.Name, b.Name) })
	return out, seq
}

// Members returns the view sorted by name (Snapshot without the seq).
func (m *Membership) Members() []Member {
	ms, _ := m.Snapshot()
	return ms
}

// Local returns this node as its own view holds it; ok is false before
// Start. Its Addr is the advertised gossip address (useful with BindPort 0).
func (m *Membership) Local() (Member, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.mu.view[m.cfg.Name]
	if e == nil {
		return Member{}, false
	}
	return e.m, true
}

// Stats returns the health score and member counts for metrics.
func (m *Membership) Stats() Stats {
	m.mu.Lock()
	s := m.mu.stats
	for _, e := range m.mu.view {
		switch e.m.Status {
		case StatusAlive:
			s.Alive++
		case StatusSuspect:
			s.Suspect++
		case StatusDead:
			s.Dead++
		case StatusLeft:
			s.Left++
		}
	}
	m.mu.Unlock()
	if ml := m.ml.Load(); ml != nil {
		s.HealthScore = ml.GetHealthScore()
	}
	s.Reconnects = m.reconnects.Load()
	return s
}

// Leave leaves the cluster gracefully: it stops the reconnect loop,
// gossips a leave intent and broadcasts memberlist's leave, waiting up to
// timeout for each to go out, waits LeaveWait more so gossip spreads them,
// then shuts memberlist down and closes Events. Other members see this
// node as StatusLeft at once rather than dead after the detection time. It
// returns a broadcast timeout, if any; the node is shut down either way.
// Before Start it is Close; after Leave or Close it is a no-op.
func (m *Membership) Leave(timeout time.Duration) error {
	m.life.Lock()
	defer m.life.Unlock()
	if m.life.state != lifeStarted {
		m.closeLocked()
		return nil
	}
	close(m.stop)
	m.wg.Wait()
	ml := m.ml.Load()

	var errs []error
	if err := m.sendLeaveIntent(timeout); err != nil {
		errs = append(errs, err)
	}
	if err := ml.Leave(timeout); err != nil {
		errs = append(errs, err)
	}
	// Our state now says we left, and it carries our leave intent: pushed
	// to every member up, each sees us left at once even if it missed
	// every gossiped copy (else it saw us dead, a voter still, after the
	// detection time). LeaveWait covers the push/pulls.
	m.tellUp(ml)
	if m.cfg.LeaveWait > 0 {
		time.Sleep(m.cfg.LeaveWait)
	}
	if err := ml.Shutdown(); err != nil {
		errs = append(errs, fmt.Errorf("shutdown: %w", err))
	}
	m.closeLocked()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("gossip: leave: %w", err)
	}
	return nil
}

// RunForgotten reports whether an operator forgot an earlier run of this
// node (Forget, on another member): a member's push/pull state, as the
// join exchanges it, carried a forget intent naming this node with
// another boot id. The cluster took that run's slots without it; its data
// may hold claims that no longer stand (node: slots.Disowned).
func (m *Membership) RunForgotten() bool { return m.runForgotten.Load() }

// EarlierRun reports whether this node saw a run of member name other
// than the one with boot id boot: an earlier one, or a later one it has
// not yet seen replaced. A node that starts with an empty data dir asks its
// peers so (node: GET /internal/v1/run): if its name had an earlier run,
// that run's claims and consents were lost with its data (slots.Disowned).
// A name this node never saw gives false.
func (m *Membership) EarlierRun(name string, boot uint64) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.mu.view[name]
	if e == nil {
		return false
	}
	return e.m.Meta.BootID != boot || e.prevBoot != 0 && e.prevBoot != boot
}

// ErrNotDead is returned by Forget for a member that is not dead.
var ErrNotDead = errors.New("gossip: only a dead or left member can be forgotten")

// Forget declares that member name, which this node sees dead, is gone
// for good: it gossips a leave intent on the member's behalf (for the run
// it last saw) and pushes it to every member alive now (a push/pull with
// each, which can take up to TCPTimeout for one that does not answer), so
// every member counts it as left instead of dead, now or once it declares
// it dead. An operator's override for a node that will not
// come back (its machine is lost): a node that left counts towards no
// majority. Forgetting a node that is alive on the far side of a partition
// breaks that guarantee; hence a member that is alive or suspect here is
// refused. The node comes back if it restarts (a new run).
func (m *Membership) Forget(name string) error {
	m.mu.Lock()
	e := m.mu.view[name]
	if e == nil || name == m.cfg.Name {
		m.mu.Unlock()
		return fmt.Errorf("gossip: forget %q: not a member", name)
	}
	switch {
	case e.m.Status == StatusLeft && e.m.Forgotten:
		m.mu.Unlock()
		return nil
	case e.m.Status == StatusDead, e.m.Status == StatusLeft:
		// A node that left by itself may be forgotten too: its drain may
		// have given up, and its slots nobody holds a grant of wait for
		// it until then (slots, census.go).
	default:
		m.mu.Unlock()
		return fmt.Errorf("%w: %s is %s", ErrNotDead, name, e.m.Status)
	}
	li := leaveIntent{Name: name, BootID: e.m.Meta.BootID, Forgot: true}
	up := m.aliveAddrsLocked(name)
	m.mu.Unlock()
	m.leaveIntent(li) // marks it left here and gossips the intent on
	// And a push/pull with every member alive now, which carries the intent
	// (delegate.LocalState) over TCP: gossip sends a bounded number of
	// copies, partly to members that are dead, and a member that missed
	// them all would otherwise learn it only from the next periodic
	// push/pull (PushPullInterval). A suspect one (a dial could take
	// TCPTimeout) learns it from gossip, or from that push/pull.
	if ml, err := m.running(); err == nil && len(up) > 0 {
		if n, err := ml.Join(up); err != nil {
			m.log.Warn("gossip: forget: not every member was told at once; push/pull will", "member", name, "told", n, "of", len(up), "err", err)
		}
	}
	return nil
}

// sendLeaveIntent marks this node leaving in its own view and queues its
// leave intent, waiting up to timeout (0: no limit) until it has been
// retransmitted enough, unless no other member is up to receive it.
func (m *Membership) sendLeaveIntent(timeout time.Duration) error {
	li := leaveIntent{Name: m.cfg.Name, BootID: m.local.Load().meta.BootID}
	others := false
	m.mu.Lock()
	for name, e := range m.mu.view {
		if name == m.cfg.Name {
			e.leaving = true
			m.mu.intents[name] = li // push/pull carries it (intentState)
		} else if e.m.Up() {
			others = true
		}
	}
	m.mu.Unlock()
	done := make(chan struct{})
	m.bcast.QueueBroadcast(newIntentBroadcast(li, done))
	if !others {
		return nil
	}
	var expired <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		expired = t.C
	}
	select {
	case <-done:
		return nil
	case <-expired:
		return errors.New("timeout waiting for leave intent broadcast")
	}
}

// Close shuts memberlist down without a leave (peers detect the node as
// dead), waits for the reconnect loop and closes Events. It is idempotent.
// memberlist does not wait for its own goroutines in Shutdown; they exit at
// their next wakeup (in a synctest bubble, sleep a while of fake time).
func (m *Membership) Close() error {
	m.life.Lock()
	defer m.life.Unlock()
	if m.life.state != lifeStarted {
		m.closeLocked()
		return nil
	}
	close(m.stop)
	err := m.ml.Load().Shutdown()
	m.wg.Wait()
	m.closeLocked()
	if err != nil {
		return fmt.Errorf("gossip: close: %w", err)
	}
	return nil
}

// closeLocked marks the Membership closed and closes Events once. The
// caller holds life.
func (m *Membership) closeLocked() {
	if m.life.state == lifeClosed {
		return
	}
	m.life.state = lifeClosed
	m.mu.Lock()
	m.mu.closed = true
	close(m.events)
	m.mu.Unlock()
}

// running returns the memberlist while the Membership is started and not
// closed.
func (m *Membership) running() (*memberlist.Memberlist, error) {
	m.mu.Lock()
	closed := m.mu.closed
	m.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	ml := m.ml.Load()
	if ml == nil {
		return nil, ErrNotStarted
	}
	return ml, nil
}
