package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/chime-scheduler/chime/node/clock"
	"github.com/chime-scheduler/chime/node/dispatch"
	"github.com/chime-scheduler/chime/node/httpapi"
	"github.com/chime-scheduler/chime/node/tlsconf"
	"github.com/chime-scheduler/chime/ring/gossip"
	"github.com/chime-scheduler/chime/slots"
	"github.com/chime-scheduler/chime/storage"
)

// Config configures a Node. Start from DefaultConfig; New copies it.
type Config struct {
	// Name identifies the node in answers (X-Chime-Node, the task's owner).
	// Default "chime".
	Name string

	// HTTPAddr is where the API is served, as other nodes and clients reach
	// it (reported in /v1/cluster). The node does not listen itself.
	HTTPAddr string

	// DataDir is the Pebble directory. Default "./chime-data".
	DataDir string
	// InMemory keeps the store in memory (tests only: nothing survives Close).
	InMemory bool
	// Mem, when set, keeps the store in this in-memory filesystem, which
	// outlives Close: a node started again on the same Mem (or on its
	// CrashClone) restarts with its data. Tests only; InMemory and DataDir
	// are ignored.
	Mem *storage.MemFS

	// Tick is the timing wheel's resolution. 10 ms bounds lateness to about a
	// tick in steady state while costing at most 100 wakeups a second.
	Tick time.Duration
	// Window is how far ahead tasks are loaded from the due index into the
	// wheel. 60 s keeps memory bounded by the fire rate, not the task count,
	// and leaves ample time to load a window's tasks.
	Window time.Duration
	// LoadInterval is how often the loader extends the loaded window. A
	// scan costs one index seek per owned slot that may hold due keys
	// (16384 seeks, 30-70 ms of CPU measured with a busy store; none on an
	// idle one) whatever the window holds, so 5 s keeps it near 1 % of a
	// core while the window still reaches 55 s ahead. Tasks created or moved
	// inside the window are filed directly, not by the scan.
	LoadInterval time.Duration
	// MisfireGrace is how late a periodic fire may start before it counts as
	// missed and the task's misfire policy applies. 5 s tolerates a restart or
	// a burst without skipping, yet catches real downtime.
	MisfireGrace time.Duration
	// Retention is how long a task that reached a final status (done,
	// failed, inactive, completed) is kept, with its execution history,
	// when the task has no retention_ms of its own; 0 keeps such tasks
	// forever. It is read when the task becomes final (the expiry is
	// stored then), so changing it does not move the expiry of tasks that
	// are final already. 7 days leaves time to look at a result.
	Retention time.Duration

	// OverdueAfter is the safety net's threshold (GET /v1/stats, /readyz,
	// the dashboard, chime_tasks_overdue and chime_slots_stalled): a task
	// in a slot this node owns that is due more than this long ago and
	// has not fired is overdue, and an owned slot not firing this long is
	// stalled. A healthy node never has either; 10 s is well above a
	// failover's pause (about 4 s local) and a busy dispatcher's lateness.
	OverdueAfter time.Duration

	// APIToken, when set, is required as "Authorization: Bearer <token>" on
	// /v1/ and /metrics.
	APIToken string
	// ReadToken, when set (it needs APIToken), is a second bearer token
	// that allows only reads: GET and HEAD on /v1/ (not /v1/cluster/keys)
	// and /metrics. Task answers to its holders show callback URLs without
	// their user:password.
	ReadToken string
	// PublicHosts are the names, besides loopback ones and the host of
	// HTTPAddr, that a node without APIToken accepts in a request's Host
	// header (the DNS rebinding guard, see edge.go).
	PublicHosts []string
	// Limits bounds request sizes.
	Limits httpapi.Limits
	// Dispatch configures the callback dispatcher.
	Dispatch DispatchConfig

	// Breaker configures the circuit breaker per callback host
	// (dispatch.BreakerConfig; zero fields take their defaults, Off
	// disables it): while a host fails, its fires are held instead of
	// attempted.
	Breaker dispatch.BreakerConfig

	// WriteQueue is how many API write requests may wait for the writer.
	// Beyond it the API answers 429 instead of queueing without bound.
	WriteQueue int
	// MaxGroupTasks caps how many task writes share one commit and fsync.
	// Larger groups amortize the fsync further but delay every write in them.
	MaxGroupTasks int
	// IdleSync bounds how long fire intents and results stay unsynced when
	// no API write forces an fsync. Firing then costs at most one fsync per
	// IdleSync rather than one per callback; a crash within it repeats the
	// fires finished in it, with their fire ids (at least once). 10 ms, a
	// tick, keeps that window smaller than a callback round trip.
	IdleSync time.Duration
	// HistoryLimit is how many execution records are kept per task.
	HistoryLimit int
	// CacheSize and MemTableSize size the Pebble store (0 = storage defaults).
	CacheSize    int64
	MemTableSize uint64

	// Cluster makes the node a cluster member; nil runs it standalone,
	// owning every slot.
	Cluster *ClusterConfig
	// TLS, when set, says HTTPAddr serves HTTPS (chime serve wraps the
	// listener with TLS.Server()): the node tells the other members so in
	// its gossip meta, and they call it over TLS. Its own calls to members
	// that serve HTTPS use TLS.Client() (their certificate verified against
	// the CA; with mutual TLS this node's presented). With mutual TLS the
	// internal endpoints refuse a call without a verified client
	// certificate. Members without TLS are called over plain HTTP.
	TLS *tlsconf.Reloader

	// DialContext, when set, opens every connection the node makes: to
	// other members (forwarded requests, ownership messages, replication
	// and snapshots, listings, the dashboard's member snapshots) and to
	// callback receivers (https
	// callbacks run TLS over it). network is always "tcp" and addr a
	// host:port. Nil dials TCP with net.Dialer, as in production; tests set
	// it to put a cluster on an in-memory network (with Handler served on
	// that network's listeners), where partitions and crashes are cut at
	// will and a testing/synctest bubble can fake time. It must honour
	// ctx's deadline and cancellation. Callbacks reach it only after the
	// callback address policy passed: with an IP:port, never a name (the
	// dispatcher resolves names itself and checks every address).
	DialContext func(ctx context.Context, network, addr string) (net.Conn, error)

	// Logger receives the node's logs; nil discards them.
	Logger *slog.Logger
	// Clock is the node's one clock: every part of the node (the writer,
	// the run loop, the cluster, the forwarder, replication, ownership, the
	// dispatcher, the HTTP API) reads the time and waits through it. Nil
	// means clock.Real.
	Clock clock.Clock
	// Seed seeds retry jitter; 0 picks one from the clock.
	Seed uint64

	// lookup, when set, resolves callback host names (tests: DNS
	// rebinding); nil uses net.DefaultResolver.
	lookup func(ctx context.Context, host string) ([]netip.Addr, error)
}

// DispatchConfig tunes the callback dispatcher (package dispatch: its
// limits, TLS, signing keys and callback address rules; see dispatch.Config
// for each field).
type DispatchConfig = dispatch.Config

// DefaultDispatchConfig returns the dispatcher's production defaults.
func DefaultDispatchConfig() DispatchConfig { return dispatch.DefaultConfig() }

// MinSigningKey is the shortest callback signing key, in bytes
// (dispatch.MinSigningKey).
const MinSigningKey = dispatch.MinSigningKey

// MaxNameBytes bounds a node's name. Peers refuse names over 1 KiB on the
// ownership wire (node/ownership), so a node named longer could not take
// part in a cluster; the name also travels in every gossip and ownership
// message and in the X-Chime-Node header, so the bound is well below that.
const MaxNameBytes = 255

// DefaultConfig returns the production defaults.
func DefaultConfig() Config {
	return Config{
		Name:          "chime",
		DataDir:       "./chime-data",
		Tick:          10 * time.Millisecond,
		Window:        60 * time.Second,
		LoadInterval:  5 * time.Second,
		MisfireGrace:  5 * time.Second,
		Retention:     7 * 24 * time.Hour,
		OverdueAfter:  10 * time.Second,
		Limits:        httpapi.DefaultLimits(),
		Dispatch:      DefaultDispatchConfig(),
		WriteQueue:    1024,
		MaxGroupTasks: 16384,
		IdleSync:      10 * time.Millisecond,
		HistoryLimit:  100,
	}
}

// Validate reports every problem with c at once.
func (c *Config) Validate() error {
	var errs []error
	check := func(ok bool, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf(format, args...))
		}
	}
	check(c.Name != "", "node: Name is empty")
	check(len(c.Name) <= MaxNameBytes, "node: Name is %d bytes, more than %d", len(c.Name), MaxNameBytes)
	// The ownership machine persists lists of names comma-separated
	// (slots.SlotState.HandedDropped).
	check(!strings.Contains(c.Name, ","), "node: Name %q holds a comma", c.Name)
	check(c.InMemory || c.Mem != nil || c.DataDir != "", "node: DataDir is empty")
	check(c.Tick >= time.Millisecond, "node: Tick %v is below 1ms", c.Tick)
	check(c.Window >= 2*c.LoadInterval, "node: Window %v must be at least twice LoadInterval %v", c.Window, c.LoadInterval)
	check(c.LoadInterval >= c.Tick, "node: LoadInterval %v is below Tick %v", c.LoadInterval, c.Tick)
	check(c.MisfireGrace >= 0, "node: MisfireGrace is negative")
	check(c.Retention >= 0 && c.Retention <= httpapi.MaxRetention, "node: Retention %v is not between 0 and %v", c.Retention, httpapi.MaxRetention)
	check(c.OverdueAfter >= time.Second, "node: OverdueAfter %v is below 1s", c.OverdueAfter)
	check(c.Limits.MaxPayloadBytes > 0 && c.Limits.MaxBatchTasks > 0 && c.Limits.MaxBodyBytes > 0, "node: Limits must be positive")
	check(c.Dispatch.Concurrency > 0 && c.Dispatch.PerHost > 0 && c.Dispatch.MaxQueued > 0, "node: Dispatch limits must be positive")
	if err := c.Breaker.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.Dispatch.ValidateTrust(); err != nil {
		errs = append(errs, err)
	}
	check(c.WriteQueue > 0, "node: WriteQueue must be positive")
	check(c.MaxGroupTasks > 0, "node: MaxGroupTasks must be positive")
	check(c.IdleSync > 0, "node: IdleSync must be positive")
	check(c.HistoryLimit > 0, "node: HistoryLimit must be positive")
	check(c.ReadToken == "" || c.APIToken != "", "node: ReadToken needs APIToken: without it writes would be open while reads need a token")
	check(c.ReadToken == "" || c.ReadToken != c.APIToken, "node: ReadToken equals APIToken")
	if c.Cluster != nil {
		check(c.HTTPAddr != "", "node: HTTPAddr is required in a cluster: other nodes forward to it")
		if err := c.Cluster.validate(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

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
	// after the owner is declared dead, Lease+LeaseMargin passed and its
	// view stayed unchanged for slots.Config.TakeSettle (500 ms; at most
	// OwnershipSettle). Keep Lease below the failure detection time, and
	// OwnershipSettle a few probe intervals.
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
		sc.TakeSettle = min(sc.TakeSettle, sc.Settle)
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
