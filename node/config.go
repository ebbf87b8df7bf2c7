package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"time"

	"github.com/chime-scheduler/chime/node/clock"
	"github.com/chime-scheduler/chime/node/dispatch"
	"github.com/chime-scheduler/chime/node/httpapi"
	"github.com/chime-scheduler/chime/node/tlsconf"
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
	// scan costs one index seek per slot (16384 seeks, 30-70 ms of CPU
	// measured with a busy store) whatever the window holds, so 5 s keeps it
	// near 1 % of a core while the window still reaches 55 s ahead. Tasks
	// created or moved inside the window are filed directly, not by the scan.
	LoadInterval time.Duration
	// MisfireGrace is how late a periodic fire may start before it counts as
	// missed and the task's misfire policy applies. 5 s tolerates a restart or
	// a burst without skipping, yet catches real downtime.
	MisfireGrace time.Duration

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
	check(c.InMemory || c.Mem != nil || c.DataDir != "", "node: DataDir is empty")
	check(c.Tick >= time.Millisecond, "node: Tick %v is below 1ms", c.Tick)
	check(c.Window >= 2*c.LoadInterval, "node: Window %v must be at least twice LoadInterval %v", c.Window, c.LoadInterval)
	check(c.LoadInterval >= c.Tick, "node: LoadInterval %v is below Tick %v", c.LoadInterval, c.Tick)
	check(c.MisfireGrace >= 0, "node: MisfireGrace is negative")
	check(c.OverdueAfter >= time.Second, "node: OverdueAfter %v is below 1s", c.OverdueAfter)
	check(c.Limits.MaxPayloadBytes > 0 && c.Limits.MaxBatchTasks > 0 && c.Limits.MaxBodyBytes > 0, "node: Limits must be positive")
	check(c.Dispatch.Concurrency > 0 && c.Dispatch.PerHost > 0 && c.Dispatch.MaxQueued > 0, "node: Dispatch limits must be positive")
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
