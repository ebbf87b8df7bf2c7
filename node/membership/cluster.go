// Package membership is a node's membership layer: it joins the cluster
// through its seeds (retrying them, so nodes start in any order), runs
// gossip (package ring/gossip, memberlist) and turns every membership
// change into a View: the members, the slot table computed from the
// eligible ones (package ring), the slots this node owns and whether it
// sees a majority. It hands each view, in order, to the install func it is
// built with, and drains (announces draining and waits until its own view
// shows it) and leaves on request.
//
// It knows nothing else of the node (it imports no node/ package but
// node/clock), so its tests run several clusters in one process on memnet.
// Only package node imports it (scripts/check-deps.sh enforces both).
package membership

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chime-scheduler/chime/node/clock"
	"github.com/chime-scheduler/chime/ring/gossip"
)

// Config is what a Cluster needs of the node's cluster configuration
// (node.ClusterConfig documents the fields it shares).
type Config struct {
	// Name and HTTPAddr are this node's name and the address other nodes
	// and clients reach its API at (Meta.HTTPAddr).
	Name, HTTPAddr string
	// Gossip configures memberlist; its Name is set from Name.
	Gossip gossip.Config
	// Join lists the gossip addresses of the seeds; JoinRetry is the
	// interval between join attempts to seeds not seen yet.
	Join      []string
	JoinRetry time.Duration
	// SettleTime is how long the membership must stay unchanged before
	// Ready; LeaveTimeout bounds the graceful leave of Close;
	// BootstrapWait is how long a node with seeds keeps trying to reach
	// one before it starts a cluster of its own.
	SettleTime, LeaveTimeout, BootstrapWait time.Duration
	// Fresh: the node holds no slot state (Meta.Fresh); see SetGenesis.
	Fresh bool
	// TLS: HTTPAddr serves HTTPS (Meta.TLS).
	TLS bool
}

// ProtoVersion is the inter-node HTTP protocol this node speaks (Meta.Proto).
const ProtoVersion = 1

// Cluster runs the node's membership: it joins, and turns membership
// changes into views that it hands to install (the node stores the view and
// tells the loop which slots it gained). It knows nothing else of the node,
// so tests run several in one process on memnet.
type Cluster struct {
	clock clock.Clock
	now   func() time.Time // clock.Now
	log   *slog.Logger
	// install receives every new view with the one it replaces, in order,
	// never concurrently.
	install func(old, v *View)

	cfg    Config
	mem    *gossip.Membership
	joined atomic.Bool // the first join round is over (success or not)
	stop   chan struct{}
	wg     sync.WaitGroup
	mu     sync.Mutex // serializes rebuild
	cur    *View      // guarded by mu
	seq    uint64     // views built; guarded by mu
	// changed is closed, and replaced, when cur is; guarded by mu.
	changed chan struct{}
}

// New builds the membership of node cfg.Name; Start starts it. install
// receives every view it builds, with the one it replaces.
func New(cfg Config, clk clock.Clock, log *slog.Logger, install func(old, v *View)) (*Cluster, error) {
	g := cfg.Gossip
	g.Name = cfg.Name
	if g.Logger == nil {
		g.Logger = log
	}
	mem, err := gossip.New(g)
	if err != nil {
		return nil, fmt.Errorf("node: cluster: %w", err)
	}
	return &Cluster{clock: clk, now: clk.Now, log: log, install: install, changed: make(chan struct{}),
		cfg: cfg, mem: mem, stop: make(chan struct{}), cur: NewView(cfg.Name, nil, time.Time{}, 0)}, nil
}

// View returns the current view.
func (c *Cluster) View() *View {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cur
}

// Ready reports whether the first join round is over and no membership
// change happened within SettleTime.
func (c *Cluster) Ready() bool {
	return c.joined.Load() && c.View().Settled(c.now(), c.cfg.SettleTime)
}

// Start starts gossip as a joining member (owning nothing), joins the
// seeds, then turns active. Views are built from then on.
func (c *Cluster) Start() error {
	meta := gossip.Meta{HTTPAddr: c.cfg.HTTPAddr, BootID: rand.Uint64(), State: gossip.StateJoining, Proto: ProtoVersion, Fresh: c.cfg.Fresh, Empty: c.cfg.Fresh, TLS: c.cfg.TLS}
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
func (c *Cluster) run() {
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
func (c *Cluster) rebuild(now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	members, _ := c.mem.Snapshot()
	old := c.cur
	if old.Seq > 0 && sameMembers(old.Members, members) {
		return
	}
	c.seq++
	changed := now
	if old.Seq > 0 && sameMembership(old.Members, members) {
		// Only members' Fresh or Genesis moved: a node of a forming
		// cluster took its first slots. The table and the member set
		// are the same, so the view stays as settled as it was (before,
		// every bootstrap made the others wait another SettleTime to
		// bootstrap and to be ready).
		changed = old.Changed
	}
	v := NewView(c.cfg.Name, members, changed, c.seq)
	c.cur = v
	c.install(old, v)
	close(c.changed)
	c.changed = make(chan struct{})
}

// sameMembership reports whether two member lists (sorted by name) agree
// on everything but the members' Fresh and Genesis (Meta): the same members
// at the same addresses in the same states.
func sameMembership(a, b []gossip.Member) bool {
	return slices.EqualFunc(a, b, func(x, y gossip.Member) bool {
		xm, ym := x.Meta, y.Meta
		xm.Fresh, xm.Genesis, ym.Fresh, ym.Genesis = false, 0, false, 0
		return x.Name == y.Name && x.Addr == y.Addr && x.Status == y.Status && xm == ym
	})
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
func (c *Cluster) joinLoop() {
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

// Drain announces that this node is draining, so that no table includes it
// any more, and waits (at most max) until its own view shows that, plus a
// moment for the change to reach the others. It reports whether everything
// was handed over in time. handedOver, when set, is checked again whenever
// the channel changed returns is closed (a channel taken before the check),
// as the view is whenever it changes.
func (c *Cluster) Drain(ctx context.Context, max time.Duration, handedOver func() bool, changed func() <-chan struct{}) bool {
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
		done = v.Owned.Count() == 0 && (handedOver == nil || handedOver() ||
			len(v.Table.Members()) == 0) // the last member: nobody to hand the slots to
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

// SetGenesis advertises that this node holds slot state now (Fresh false),
// and, if it started a new cluster, the checksum of that table (Genesis).
func (c *Cluster) SetGenesis(table uint64) {
	if err := c.mem.UpdateMeta(func(m *gossip.Meta) { m.Fresh, m.Genesis = false, table }); err != nil {
		c.log.Warn("announce genesis", "table", table, "err", err)
	}
}

// Kill stops gossip without leaving: peers declare this node dead after
// their failure detection, as after a crash.
func (c *Cluster) Kill() {
	close(c.stop)
	if err := c.mem.Close(); err != nil {
		c.log.Warn("close gossip", "err", err)
	}
	c.wg.Wait()
}

// Close leaves the cluster (peers see "left", not "dead") and stops.
func (c *Cluster) Close() {
	close(c.stop)
	if err := c.mem.Leave(c.cfg.LeaveTimeout); err != nil {
		c.log.Warn("leave cluster", "err", err)
	}
	c.wg.Wait()
}

// Gossip is the memberlist underneath, for what the node does with it
// directly: rotate the gossip keys (node/keyring) and forget a dead member.
func (c *Cluster) Gossip() *gossip.Membership { return c.mem }
