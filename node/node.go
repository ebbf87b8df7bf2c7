package node

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chime-scheduler/chime/node/chain"
	"github.com/chime-scheduler/chime/node/clock"
	"github.com/chime-scheduler/chime/node/dashboard"
	"github.com/chime-scheduler/chime/node/dispatch"
	"github.com/chime-scheduler/chime/node/forward"
	"github.com/chime-scheduler/chime/node/health"
	"github.com/chime-scheduler/chime/node/httpapi"
	"github.com/chime-scheduler/chime/node/idfilter"
	"github.com/chime-scheduler/chime/node/internalauth"
	"github.com/chime-scheduler/chime/node/keyring"
	"github.com/chime-scheduler/chime/node/membership"
	"github.com/chime-scheduler/chime/node/metrics"
	"github.com/chime-scheduler/chime/node/ownership"
	"github.com/chime-scheduler/chime/node/replication"
	"github.com/chime-scheduler/chime/ring/gossip"
	"github.com/chime-scheduler/chime/slots"
	"github.com/chime-scheduler/chime/storage"
)

// Node is one Chime node: store, writer, wheel loop, dispatcher and API.
// New allocates and validates; Start opens the store and starts the
// goroutines; Close stops them gracefully and waits.
type Node struct {
	cfg     Config
	log     *slog.Logger
	now     func() time.Time
	started time.Time

	store   *storage.Store
	writer  *writer
	loop    *loop
	chain   *chain.Outbox // creates the children of chains (node/chain)
	disp    *dispatch.Dispatcher
	metrics *metrics.Metrics
	api     *httpapi.Server  // the HTTP API (api.go)
	policy  *dispatch.Policy // the callback address policy, for create-time checks

	view    atomic.Pointer[view] // the cluster as this node sees it; never nil after New
	cluster *membership.Cluster  // nil for a standalone node
	fwd     *forward.Client
	guard   *internalauth.Guard  // authenticates the internal endpoints' calls; nil standalone
	keys    *keyring.Service     // the gossip key endpoints (internal_wiring.go)
	ship    *replication.Shipper // replication to replicas; nil standalone
	ctl     *ownership.Board     // slot ownership: the executor's inbox and published state; nil standalone
	exec    *ownership.Executor  // runs the ownership machine (slots.Machine); nil standalone
	ae      *replication.Checker // owner-side checksum checks; nil standalone or with AntiEntropyInterval 0

	dash       *dashboard.Dashboard // the live dashboard's snapshots and timeline
	hosts      *dispatch.HostStats
	breakers   *dispatch.Breakers // nil: Config.Breaker.Off
	ids        *idfilter.Filter
	rebuildIDs chan struct{} // cap 1: the id filter outgrew its size
	stopBG     chan struct{}
	tasks      struct {
		base  atomic.Int64 // tasks counted at start, -1 until the count is done
		delta atomic.Int64 // created minus deleted since the start
	}

	running atomic.Bool
	// storageErr is set once the store failed a write (storageFailed).
	storageErr atomic.Pointer[error]
	bg         sync.WaitGroup  // background work that uses the store
	health     *health.Monitor // the safety net (node/health)
	lease      time.Duration   // the ownership lease (cluster members)
	closeOnce  sync.Once
	closeErr   error
}

// New validates cfg and builds a node. Nothing runs until Start.
func New(cfg Config) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	cfg.Clock = clock.Or(cfg.Clock) // the parts built with &n.cfg use it as is
	n := &Node{cfg: cfg, log: log.With("node", cfg.Name), now: cfg.Clock.Now, hosts: dispatch.NewHostStats(),
		ids: idfilter.New(idfilter.Min), rebuildIDs: make(chan struct{}, 1), stopBG: make(chan struct{})}
	n.tasks.base.Store(-1)
	n.chain = newChainOutbox(n)
	if !cfg.Breaker.Off {
		n.breakers = dispatch.NewBreakers(cfg.Breaker)
	}
	var err error
	if n.policy, err = dispatch.NewPolicy(cfg.Dispatch.CallbackAllow, cfg.Dispatch.CallbackDeny, cfg.Dispatch.CallbackDenyPrivate); err != nil {
		return nil, err // Validate has reported it already
	}
	n.health = health.New(cfg.OverdueAfter, health.Deps{
		ScanDue: func(to int64, f func() bool) error {
			return n.store.ScanDue(n.view.Load().Owns, 0, to, func(uint16, string, int64) bool { return f() })
		},
		Quiet: func(err error) bool { return err == storage.ErrClosed },
		Now:   n.now, Log: n.log})
	if cfg.Cluster != nil {
		n.lease = cfg.Cluster.ownershipConfig(cfg.Name).Lease
	}
	if cfg.Cluster == nil {
		n.view.Store(standaloneView(cfg.Name, cfg.HTTPAddr))
	} else {
		n.view.Store(nodeView(membership.NewView(cfg.Name, nil, time.Time{}, 0))) // owns nothing until it has joined
		fc := forward.Config{Self: cfg.Name, Secret: cfg.Cluster.Secret, Timeout: cfg.Cluster.ForwardTimeout,
			Clock: cfg.Clock, Dial: cfg.DialContext}
		if cfg.TLS != nil {
			fc.TLS = cfg.TLS.Client
		}
		n.fwd = forward.New(fc)
		n.guard = newGuard(n, n.fwd.Auth())
	}
	n.dash = newDashboard(n)
	n.keys = newKeys(n)
	n.api = newAPI(n)
	return n, nil
}

// Start opens the store and starts the node. The node serves requests at
// once; /readyz turns 200 when the first load of the due index landed.
func (n *Node) Start() error {
	st, err := storage.Open(storage.Options{
		Dir:          n.cfg.DataDir,
		InMemory:     n.cfg.InMemory,
		Mem:          n.cfg.Mem,
		CacheSize:    n.cfg.CacheSize,
		MemTableSize: n.cfg.MemTableSize,
		HistoryLimit: n.cfg.HistoryLimit,
		Slots:        slots.Count,
		Logger:       n.log,
	})
	if err != nil {
		return err
	}
	n.store = st
	n.started = n.now()
	seed := n.cfg.Seed
	if seed == 0 {
		seed = uint64(n.now().UnixNano())
	}
	var metas map[uint16]storage.SlotMeta
	if n.cfg.Cluster != nil {
		if metas, err = st.SlotMetas(); err != nil {
			st.Close()
			return err
		}
	}
	if n.cfg.Cluster != nil {
		n.ctl = ownership.NewBoard()
	}
	var wr *writer
	n.metrics = metrics.New(metrics.Gauges{
		StoreBytes:    func() float64 { return float64(st.Stats().DiskBytes) },
		DispatchQueue: func() float64 { return float64(n.disp.Queued()) },
		DispatchRun:   func() float64 { return float64(n.disp.Running()) },
		WriteQueue:    func() float64 { return float64(len(wr.api)) },
		ReplPending: func() float64 {
			if n.ship == nil {
				return 0
			}
			return float64(n.ship.Pending())
		},
		TasksStored: func() float64 {
			c, _ := n.taskCount()
			return float64(c)
		},
		Importing: func() float64 {
			if n.ctl == nil {
				return 0
			}
			return float64(n.ctl.Counts().Importing)
		},
		Unavailable: func() float64 {
			if n.ctl == nil {
				return 0
			}
			return float64(n.ctl.Counts().Unavailable)
		},
		Stalled: func() float64 { return float64(len(n.health.Stalled().Slots)) },
		Overdue: func() float64 { return float64(max(0, n.health.Overdue())) },
		Corrupt: func() float64 { return float64(n.store.CorruptRecords()) },
		StorageFailed: func() float64 {
			if n.storageErr.Load() != nil {
				return 1
			}
			return 0
		},
		ReplBehind: func() float64 {
			if n.ctl == nil {
				return 0
			}
			return float64(n.ctl.Counts().UnderReplicated)
		},
		ReplUngranted: func() float64 {
			if n.ctl == nil {
				return 0
			}
			return float64(n.ctl.Counts().FollowerPending)
		},
	})
	var lp *loop
	// The writer hands its groups to the shipper, which reads snapshots
	// from the writer: built below, over it, before either runs.
	var ship *replication.Shipper
	var replicate func([]replication.Msg, *replication.Wait)
	if n.cfg.Cluster != nil {
		replicate = func(m []replication.Msg, w *replication.Wait) { ship.Enqueue(m, w) }
	}
	wr = newWriter(&n.cfg, writerDeps{
		store:      st,
		notify:     func(ch []wakeChange) { lp.notify(ch) },
		dispatch:   func(j *dispatch.Job) bool { return n.disp.Submit(j) },
		inWorkers:  func() int { return n.disp.Running() },
		roomOpened: func() { lp.wake() },
		metrics:    n.metrics,
		hosts:      n.hosts,
		ids:        n.ids,
		rebuildIDs: func() {
			select {
			case n.rebuildIDs <- struct{}{}:
			default:
			}
		},
		counted:   func(d int64) { n.tasks.delta.Add(d) },
		view:      n.view.Load,
		ctl:       n.ctl,
		metas:     metas,
		replicate: replicate,
		log:       n.log,
		now:       n.now,
		chain:     n.chain,
		breakers:  n.breakers,
		circuitEvent: func(kind, text string) {
			if n.dash != nil {
				n.dash.Note(kind, text)
			}
		},
	}, seed)
	n.disp = dispatch.New(n.cfg.Dispatch, dispatch.Deps{
		OnResult: func(r dispatch.Result) {
			wr.send(&doneOp{writeOp: writeOp{kind: opDone}, res: r})
		},
		Clock:       n.cfg.Clock,
		Node:        n.cfg.Name,
		DialContext: n.cfg.DialContext,
		LookupNetIP: n.cfg.lookup,
	})
	lp, err = newLoop(&n.cfg, st, wr, n.metrics, n.log, n.now, n.view.Load)
	if err != nil {
		st.Close()
		return err
	}
	n.writer, n.loop = wr, lp
	noteViewMetrics(n.metrics, n.view.Load().View)
	if n.cfg.Cluster != nil {
		ship = replication.NewShipper(n.cfg.Name, replication.ShipperDeps{
			Transport: peers{fwd: n.fwd, view: n.view.Load}, Ownership: n.ctl, Copies: replData{wr}, Clock: n.cfg.Clock, Log: n.log,
			TableOwner: func(s uint16) string {
				o, _ := n.view.Load().Owner(s)
				return o.Name
			}})
		n.ship = ship
		voters, err := st.Voters()
		if err != nil {
			st.Close()
			return err
		}
		consents, err := st.Consents()
		if err != nil {
			st.Close()
			return err
		}
		persisted := slotStates(metas)
		c, err := membership.New(n.cfg.Cluster.membership(n.cfg.Name, n.cfg.HTTPAddr, len(persisted) == 0, n.cfg.TLS != nil),
			n.cfg.Clock, n.log, n.installView)
		if err != nil {
			st.Close()
			return err
		}
		ex, err := n.newOwnership(n.ctl, persisted, voters, consents, wr, st, c, ship)
		if err != nil {
			st.Close()
			return err
		}
		n.cluster, n.exec = c, ex
	}
	n.disp.Start()
	go wr.run()
	n.bg.Add(1)
	go func() {
		defer n.bg.Done()
		n.chain.Run(n.stopBG)
	}()
	go lp.run()
	if n.cluster != nil {
		go n.ship.Run()
		go n.exec.Run()
		if err := n.cluster.Start(); err != nil {
			n.exec.Close()
			lp.close()
			close(wr.stop)
			<-wr.done
			n.ship.Close()
			n.disp.Close(context.Background())
			st.Close()
			return err
		}
		if iv := n.cfg.Cluster.AntiEntropyInterval; iv > 0 {
			n.ae = replication.NewChecker(replication.CheckerConfig{Self: n.cfg.Name, Interval: iv, Hold: 2 * n.lease,
				Version: storage.ChecksumVersion, Beat: n.cfg.Cluster.Gossip.GossipInterval}, replication.CheckerDeps{Transport: peers{fwd: n.fwd, view: n.view.Load},
				Ownership: n.ctl, Sums: replData{wr}, Clock: n.cfg.Clock, Metrics: aeMetrics{n.metrics}, Log: n.log})
			go n.ae.Run()
		}
	}
	n.running.Store(true)
	n.countTasks()
	n.every(health.ScanEvery, func() bool { n.health.Scan(); return true })
	n.watchStorage()
	n.dash.Note("start", "node "+n.cfg.Name+" started")
	n.log.Info("node started", "data_dir", n.cfg.DataDir)
	return nil
}

// countTasks scans the stored task ids once in the background: it counts
// them (from then on the writer keeps the count: creates minus deletes)
// and fills the id filter that lets creates of new ids skip a store read.
// Tasks created while the scan runs may be counted twice: the count is an
// estimate for the dashboard, never used for decisions. Later, when the
// filter outgrows its size, the writer asks for a rebuild, which runs here
// too, until the node closes.
func (n *Node) countTasks() {
	n.bg.Add(1)
	go func() {
		defer n.bg.Done()
		before := n.tasks.delta.Load()
		var c int64
		err := n.ids.Build(func(add func([]byte)) error {
			return n.store.ScanTaskIDs(nil, func(_ uint16, id []byte) bool {
				c++
				add(id)
				return true
			})
		})
		if err != nil {
			n.log.Warn("scan task ids", "err", err)
			return
		}
		n.tasks.base.Store(c - before)
		for {
			select {
			case <-n.stopBG:
				return
			case <-n.rebuildIDs:
			}
			err := n.ids.Build(func(add func([]byte)) error {
				return n.store.ScanTaskIDs(nil, func(_ uint16, id []byte) bool {
					add(id)
					select {
					case <-n.stopBG:
						return false
					default:
						return true
					}
				})
			})
			if err != nil {
				n.log.Warn("rebuild id filter", "err", err)
			}
		}
	}()
}

// taskCount returns the estimated number of stored tasks, once known.
func (n *Node) taskCount() (int64, bool) {
	b := n.tasks.base.Load()
	if b < 0 {
		return 0, false
	}
	return b + n.tasks.delta.Load(), true
}

// Ready reports whether the node has loaded its due tasks and is firing;
// in a cluster also that it has joined and its view has settled: no
// membership change within SettleTime.
func (n *Node) Ready() bool {
	if !n.running.Load() {
		return false
	}
	select {
	case <-n.loop.loaded:
	default:
		return false
	}
	if c := n.cluster; c != nil {
		// The counts must be those of the node's current table: until the
		// ownership machine has taken a new table in (a joiner's first
		// table with slots, while the machine works through the last
		// step), they count the old one's slots, and a joiner owning
		// nothing yet read as ready (bench join: 1.7 s after the start,
		// 4,006 slots still to import).
		sum := n.ctl.TableSum()
		k := n.ctl.Counts()
		return c.Ready() && n.ctl.Tabled() && sum == n.view.Load().version &&
			k.Importing == 0 && k.Unavailable == 0 && k.Firing == k.Owned
	}
	return true
}

// notReadyReason says why Ready is false (or "ready").
func (n *Node) notReadyReason() string {
	if e := n.storageErr.Load(); e != nil {
		return "storage failed: " + (*e).Error()
	}
	if !n.running.Load() {
		return "stopping"
	}
	select {
	case <-n.loop.loaded:
	default:
		return "loading due tasks"
	}
	if c := n.cluster; c != nil {
		sum := n.ctl.TableSum()
		k := n.ctl.Counts()
		switch {
		case !c.Ready() || !n.ctl.Tabled():
			return "joining: the cluster view has not settled"
		case sum != n.view.Load().version:
			return "taking the new slot table in"
		case k.Importing > 0 || k.Unavailable > 0:
			return fmt.Sprintf("taking slots over: %d importing, %d unavailable", k.Importing, k.Unavailable)
		case k.Firing != k.Owned:
			return fmt.Sprintf("%d of %d owned slots not firing (no lease or no majority)", k.Owned-k.Firing, k.Owned)
		}
	}
	return "ready"
}

// installView makes v the node's view: from now on the writer fires only
// v's slots, and the loop loads the slots gained.
func (n *Node) installView(old, v *membership.View) {
	n.view.Store(nodeView(v))
	if n.fwd != nil {
		n.fwd.NoteTLS(v.Members)
	}
	if n.guard != nil {
		n.guard.NoteView(guardMembers(v.Members))
	}
	gained, lost := v.Owned.Minus(&old.Owned), old.Owned.Minus(&v.Owned)
	n.ctl.ViewChanged(ownView(old), ownView(v))
	noteViewMetrics(n.metrics, v)
	for _, c := range membership.Changes(old.Members, v.Members) {
		n.dash.Note(c.Kind, c.Text)
	}
	if len(gained) > 0 || len(lost) > 0 || old.Table.Checksum() != v.Table.Checksum() {
		n.log.Info("slot table changed", "members", len(v.Table.Members()), "owned", v.Owned.Count(),
			"gained", len(gained), "lost", len(lost), "checksum", fmt.Sprintf("%016x", v.Table.Checksum()))
		n.dash.Note("table", fmt.Sprintf("table %016x: %d members, owns %d slots (+%d −%d)",
			v.Table.Checksum(), len(v.Table.Members()), v.Owned.Count(), len(gained), len(lost)))
	}
}

// noteViewMetrics updates m's cluster gauges from view v.
func noteViewMetrics(m *metrics.Metrics, v *membership.View) {
	c := v.Table.Counts()[v.Self]
	m.NoteView(c.Owned, c.Following, v.Members)
}

// Handler is the node's HTTP API.
func (n *Node) Handler() http.Handler { return n.api }

// GuardHost wraps h (the dashboard) in the API's Host check: without an API
// token, a request whose Host is not loopback, the node's own address or
// a Config.PublicHosts name gets 421 in the error shape.
func (n *Node) GuardHost(h http.Handler) http.Handler { return n.api.GuardHost(h) }

// Close stops the node gracefully: no new fires start, running callbacks
// get until ctx ends to finish (their results are recorded), everything
// written is synced, and the store is closed. Callbacks cut off by ctx, and
// fires that had not started, stay persisted as in flight and are repeated
// with the same fire id after a restart. Idempotent.
func (n *Node) Close(ctx context.Context) error {
	return n.shutdown(ctx, stopGraceful)
}

// How a node stops (shutdown).
type stopMode uint8

const (
	stopGraceful stopMode = iota // drain, then leave (Close)
	stopCrash                    // no drain, gossip stops without a leave: peers see it die (tests)
	stopFailed                   // no drain (the store takes no writes), then leave (storageFailed)
)

// every runs f every d on a background goroutine until the node stops or
// f returns false. The runs fall on the multiples of d since the Unix
// epoch (gossip.UntilBeat), with the node's other periodic work: an idle
// node's CPU goes mostly to waking up (issue 17 item 1).
func (n *Node) every(d time.Duration, f func() bool) {
	n.bg.Add(1)
	go func() {
		defer n.bg.Done()
		first := n.cfg.Clock.NewTimer(gossip.UntilBeat(n.cfg.Clock.Now(), d))
		select {
		case <-n.stopBG:
			first.Stop()
			return
		case <-first.C:
		}
		if !f() {
			return
		}
		t := n.cfg.Clock.NewTicker(d)
		defer t.Stop()
		for {
			select {
			case <-n.stopBG:
				return
			case <-t.C:
			}
			if !f() {
				return
			}
		}
	}()
}

// watchStorage stops the node when the store fails a write (it waits on
// the store's FailedC, not on a poll), until the node stops.
func (n *Node) watchStorage() {
	n.bg.Add(1)
	go func() {
		defer n.bg.Done()
		select {
		case <-n.store.FailedC():
			n.storageFailed(n.store.Failed())
		case <-n.stopBG:
		}
	}()
}

// storageFailed stops a node whose store failed a write or a sync: what
// the disk holds is unknown and pebble takes no more writes, so the node
// must not go on acknowledging writes or firing from it. It stops firing
// and intake at once (running callbacks are cut: their fires are repeated
// by the next owner with the same fire id), and leaves the cluster without
// a drain (a handover needs writes): the followers, which hold every
// acknowledged write, take its slots over. The HTTP server keeps answering:
// /v1/ with 503 naming the failure, /readyz 503 with it, /metrics with
// chime_storage_failed 1.
func (n *Node) storageFailed(err error) {
	if !n.storageErr.CompareAndSwap(nil, &err) {
		return
	}
	n.log.Error("storage failed: no more writes or fires here; leaving the cluster so the followers take this node's slots over. Replace the disk or move the data, then restart", "err", err)
	go func() {
		ctx, cancel := context.WithCancel(context.Background())
		cancel() // cut running callbacks
		_ = n.shutdown(ctx, stopFailed)
	}()
}

// stoppedError is the answer to a request after the node stopped.
func (n *Node) stoppedError() *Error {
	if e := n.storageErr.Load(); e != nil {
		return &Error{Code: CodeUnavailable, Message: "storage failed: " + (*e).Error() + "; this node takes no writes and fires nothing: retry on another member"}
	}
	return errStopping
}
