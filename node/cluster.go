package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chime-scheduler/chime/node/clock"
	"github.com/chime-scheduler/chime/ring/gossip"
	"github.com/chime-scheduler/chime/slots"
)

// ClusterConfig makes a node a cluster member. Without it (Config.Cluster
// nil) the node is standalone and owns every slot.
type ClusterConfig struct {
	// Gossip configures memberlist. Name is set from Config.Name.
	Gossip gossip.Config
	// Join lists gossip addresses of other members. The node pushes and
	// pulls state with all of them (one seed alone was measured to take
	// 20+ s to converge in some runs), and keeps retrying the ones it has
	// not seen yet every JoinRetry, so nodes may start in any order.
	Join []string
	// JoinRetry is the interval between join attempts to seeds not seen yet.
	JoinRetry time.Duration
	// Secret authenticates calls between nodes (HMAC-SHA256 of the request
	// with a timestamp): forwarded requests and the internal endpoints.
	// Empty leaves them unauthenticated, like an API without a token.
	Secret []byte
	// Insecure runs the cluster without Secret (--insecure-cluster):
	// internal calls are not authenticated. Without it, Validate refuses a
	// cluster with no Secret. /v1/cluster and the dashboard show it.
	Insecure bool
	// SettleTime is how long the membership must stay unchanged before the
	// node reports ready: 1 s lets a burst of joins land first.
	SettleTime time.Duration
	// ForwardTimeout bounds one forwarded request; past it the client gets
	// 503 with Retry-After instead of waiting on a dead owner.
	ForwardTimeout time.Duration
	// LeaveTimeout bounds the graceful leave on Close.
	LeaveTimeout time.Duration
	// BootstrapWait is how long a node with seeds keeps trying to reach
	// one before it starts a cluster of its own.
	BootstrapWait time.Duration
	// Lease, LeaseMargin and OwnershipSettle time the slot ownership
	// machine (slots.Config: Lease, Margin, Settle). An owner fires a slot
	// only within Lease of its follower's last ack; a follower promotes
	// after the owner is declared dead and Lease+LeaseMargin passed. Keep
	// Lease below the failure detection time, and OwnershipSettle a few
	// probe intervals.
	Lease, LeaseMargin, OwnershipSettle time.Duration
	// AntiEntropyInterval is how long one pass of anti-entropy over all
	// slots takes (package node/replication): the owner of each slot has
	// each replica compare the slot's checksum with its own copy's at the
	// same position, and resyncs a copy that differs. A pass is spread over 16
	// ticks; a slot verified at an unchanged position is skipped for 10
	// passes. 30 s finds a diverged copy of a slot being written within a
	// pass or two and of an idle one within 5 minutes, for at most ~550
	// slot checks a second across the cluster per replica of a slot
	// (every slot written) and ~55 when idle, each a few dozen bytes.
	// 0 turns it off.
	AntiEntropyInterval time.Duration
	// MaxMoves bounds the slots this node takes over by a planned move at
	// once (slots.Config.MaxMoves): the offers that make owners seal a slot,
	// hold its fires and writes and hand it over. 0 means
	// slots.DefaultMaxMoves.
	MaxMoves int
	// TraceSlots, when k > 0, logs the ownership events and effects of
	// every k-th slot at info level (a debugging aid; chime serve
	// --trace-slots, CHIME_TRACE_SLOTS). 0 traces nothing.
	TraceSlots int
}

// ownershipConfig is the slots.Config of node self.
func (c *ClusterConfig) ownershipConfig(self string) slots.Config {
	sc := slots.DefaultLocalConfig(self)
	if c.Lease > 0 {
		sc.Lease = c.Lease
	}
	if c.LeaseMargin > 0 {
		sc.Margin = c.LeaseMargin
	}
	if c.OwnershipSettle > 0 {
		sc.Settle = c.OwnershipSettle
	}
	sc.Pause = sc.Settle * 2 / 5
	// memberlist declares a silent member dead no sooner than its minimum
	// suspicion timeout, SuspicionMult × max(1, log10 N) probe intervals
	// (local profile: 1.5 s; LAN: 4 s), counted from the first failed probe.
	sc.DeadAfter = max(sc.Settle, time.Duration(c.Gossip.SuspicionMult)*c.Gossip.ProbeInterval)
	if c.MaxMoves > 0 {
		sc.MaxMoves = c.MaxMoves
	}
	return sc
}

// DefaultClusterConfig returns a cluster config with gossip profile g.
func DefaultClusterConfig(g gossip.Config) ClusterConfig {
	return ClusterConfig{Gossip: g, JoinRetry: time.Second, SettleTime: time.Second,
		ForwardTimeout: 10 * time.Second, LeaveTimeout: 2 * time.Second, BootstrapWait: 3 * time.Second,
		AntiEntropyInterval: 30 * time.Second}
}

func (c *ClusterConfig) validate() error {
	var errs []error
	if c.JoinRetry <= 0 {
		errs = append(errs, errors.New("node: Cluster.JoinRetry must be positive"))
	}
	if c.SettleTime < 0 {
		errs = append(errs, errors.New("node: Cluster.SettleTime is negative"))
	}
	if c.ForwardTimeout <= 0 {
		errs = append(errs, errors.New("node: Cluster.ForwardTimeout must be positive"))
	}
	if len(c.Secret) == 0 && !c.Insecure {
		errs = append(errs, errors.New("node: Cluster.Secret is empty: calls between nodes would not be authenticated (set Insecure to run so on purpose)"))
	}
	if c.AntiEntropyInterval < 0 {
		errs = append(errs, errors.New("node: Cluster.AntiEntropyInterval is negative"))
	}
	return errors.Join(errs...)
}

// protoVersion is the inter-node HTTP protocol this node speaks (Meta.Proto).
const protoVersion = 1

// cluster runs the node's membership: it joins, and turns membership
// changes into views that it hands to install (the node stores the view and
// tells the loop which slots it gained). It knows nothing else of the node,
// so tests run several in one process on memnet.
type cluster struct {
	name, httpAddr string
	meta           clusterMeta
	clock          clock.Clock
	now            func() time.Time // clock.Now
	log            *slog.Logger
	// install receives every new view with the one it replaces, in order,
	// never concurrently.
	install func(old, v *view)

	cfg    ClusterConfig
	mem    *gossip.Membership
	joined atomic.Bool // the first join round is over (success or not)
	stop   chan struct{}
	wg     sync.WaitGroup
	mu     sync.Mutex // serializes rebuild
	cur    *view      // guarded by mu
	seq    uint64     // views built; guarded by mu
	// changed is closed, and replaced, when cur is; guarded by mu.
	changed chan struct{}
}

// clusterMeta is what a node advertises of itself from the start.
type clusterMeta struct {
	// fresh: the node holds no slot state (Meta.Fresh); see setGenesis.
	fresh bool
	tls   bool // HTTPAddr serves HTTPS (Meta.TLS)
}

func newCluster(name, httpAddr string, cfg ClusterConfig, meta clusterMeta, clk clock.Clock, log *slog.Logger, install func(old, v *view)) (*cluster, error) {
	g := cfg.Gossip
	g.Name = name
	if g.Logger == nil {
		g.Logger = log
	}
	mem, err := gossip.New(g)
	if err != nil {
		return nil, fmt.Errorf("node: cluster: %w", err)
	}
	return &cluster{name: name, httpAddr: httpAddr, meta: meta, clock: clk, now: clk.Now, log: log, install: install, changed: make(chan struct{}),
		cfg: cfg, mem: mem, stop: make(chan struct{}), cur: newView(name, nil, time.Time{}, 0)}, nil
}

// view returns the current view.
func (c *cluster) view() *view {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cur
}

// ready reports whether the first join round is over and no membership
// change happened within SettleTime.
func (c *cluster) ready() bool {
	return c.joined.Load() && c.view().settled(c.now(), c.cfg.SettleTime)
}

// start starts gossip as a joining member (owning nothing), joins the
// seeds, then turns active. Views are built from then on.
func (c *cluster) start() error {
	meta := gossip.Meta{HTTPAddr: c.httpAddr, BootID: rand.Uint64(), State: gossip.StateJoining, Proto: protoVersion, Fresh: c.meta.fresh, TLS: c.meta.tls}
	if err := c.mem.Start(meta); err != nil {
		return fmt.Errorf("node: cluster: %w", err)
	}
	c.rebuild(c.now())
	c.wg.Add(2)
	go c.run()
	go c.joinLoop()
	return nil
}

// run turns membership events into views until stop.
func (c *cluster) run() {
	defer c.wg.Done()
	for {
		select {
		case <-c.stop:
			return
		case _, ok := <-c.mem.Events():
			if !ok {
				return
			}
			// Coalesce a burst (a join reports every member at once).
			for drained := false; !drained; {
				select {
				case _, ok := <-c.mem.Events():
					if !ok {
						return
					}
				default:
					drained = true
				}
			}
			c.rebuild(c.now())
		case <-c.mem.Resync():
			c.rebuild(c.now())
		}
	}
}

// rebuild computes a new view from the membership and installs it if the
// members changed. Slots gained go to the loop for loading; slots lost stop
// firing at once, because the writer checks the view before every fire.
func (c *cluster) rebuild(now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	members, _ := c.mem.Snapshot()
	old := c.cur
	if old.seq > 0 && sameMembers(old.members, members) {
		return
	}
	c.seq++
	v := newView(c.name, members, now, c.seq)
	c.cur = v
	c.install(old, v)
	close(c.changed)
	c.changed = make(chan struct{})
}

// sameMembers reports whether two member lists (sorted by name) agree on
// everything a view depends on.
func sameMembers(a, b []gossip.Member) bool {
	return slices.EqualFunc(a, b, func(x, y gossip.Member) bool {
		return x.Name == y.Name && x.Addr == y.Addr && x.Status == y.Status && x.Meta == y.Meta
	})
}

// joinLoop joins through every seed, turns the node active, then keeps
// retrying seeds that are not members yet, so that nodes can start in any
// order. It gives up on a seed once it has been seen: after that,
// memberlist and the reconnect loop keep the membership together.
func (c *cluster) joinLoop() {
	defer c.wg.Done()
	pending := slices.Clone(c.cfg.Join)
	attempt := func() {
		if len(pending) == 0 {
			return
		}
		if _, err := c.mem.Join(pending); err != nil {
			c.log.Debug("join", "seeds", pending, "err", err)
		}
		known := map[string]bool{}
		for _, m := range c.mem.Members() {
			known[m.Addr] = true
		}
		pending = slices.DeleteFunc(pending, func(a string) bool { return known[a] })
	}
	attempt()
	// Nodes started together must not each form a cluster of their own
	// (each would own every slot): wait a little for a seed first. Only a
	// node that reaches none of them in BootstrapWait starts alone.
	for start := c.clock.Now(); len(pending) > 0 && len(pending) == len(c.cfg.Join) && c.clock.Since(start) < c.cfg.BootstrapWait; {
		select {
		case <-c.stop:
			return
		case <-c.clock.After(c.cfg.JoinRetry / 4):
		}
		attempt()
	}
	if err := c.mem.SetState(gossip.StateActive); err != nil {
		c.log.Warn("announce active", "err", err)
	}
	c.joined.Store(true)
	c.rebuild(c.now())
	t := c.clock.NewTicker(c.cfg.JoinRetry)
	defer t.Stop()
	for len(pending) > 0 {
		select {
		case <-c.stop:
			return
		case <-t.C:
			attempt()
		}
	}
}

// drain announces that this node is draining, so that no table includes it
// any more, and waits (at most max) until its own view shows that, plus a
// moment for the change to reach the others. It reports whether everything
// was handed over in time. handedOver, when set, is checked again whenever
// the channel changed returns is closed (a channel taken before the check),
// as the view is whenever it changes.
func (c *cluster) drain(ctx context.Context, max time.Duration, handedOver func() bool, changed func() <-chan struct{}) bool {
	if err := c.mem.SetState(gossip.StateDraining); err != nil {
		c.log.Warn("announce draining", "err", err)
	}
	deadline := c.clock.NewTimer(max)
	defer deadline.Stop()
	done := false
	for wait := true; !done && wait && ctx.Err() == nil; {
		var other <-chan struct{} // nil: never
		if changed != nil {
			other = changed()
		}
		c.mu.Lock()
		v, viewChanged := c.cur, c.changed
		c.mu.Unlock()
		done = v.owned.count() == 0 && (handedOver == nil || handedOver() ||
			len(v.table.Members()) == 0) // the last member: nobody to hand the slots to
		if !done {
			select {
			case <-viewChanged:
			case <-other:
			case <-ctx.Done():
			case <-deadline.C:
				wait = false
			}
		}
	}
	select {
	case <-c.clock.After(c.cfg.Gossip.GossipInterval * 3):
	case <-ctx.Done():
	}
	return done
}

// setGenesis advertises that this node holds slot state now (Fresh false),
// and, if it started a new cluster, the checksum of that table (Genesis).
func (c *cluster) setGenesis(table uint64) {
	if err := c.mem.UpdateMeta(func(m *gossip.Meta) { m.Fresh, m.Genesis = false, table }); err != nil {
		c.log.Warn("announce genesis", "table", table, "err", err)
	}
}

// kill stops gossip without leaving: peers declare this node dead after
// their failure detection, as after a crash.
func (c *cluster) kill() {
	close(c.stop)
	if err := c.mem.Close(); err != nil {
		c.log.Warn("close gossip", "err", err)
	}
	c.wg.Wait()
}

// close leaves the cluster (peers see "left", not "dead") and stops.
func (c *cluster) close() {
	close(c.stop)
	if err := c.mem.Leave(c.cfg.LeaveTimeout); err != nil {
		c.log.Warn("leave cluster", "err", err)
	}
	c.wg.Wait()
}
