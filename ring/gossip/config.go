package gossip

import (
	"encoding/base64"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/hashicorp/memberlist"
)

// SecretKeySize is the length of Config.SecretKey: AES-256.
const SecretKeySize = 32

// Config configures a Membership. Start from DefaultLANConfig or
// DefaultLocalConfig, set Name (and for a real network the addresses), and
// pass it to New, which copies it.
//
// The memberlist knobs keep memberlist's names and meaning; their doc here
// states the trade-off. Failure detection time is roughly ProbeInterval
// (until the dead node is probed) + ProbeInterval (the probe round) +
// SuspicionMult × max(1, log10(N)) × ProbeInterval (the suspicion timeout;
// up to SuspicionMaxTimeoutMult times longer while other members can still
// confirm the suspicion).
type Config struct {
	// Name identifies this node in the cluster and must be unique and stable
	// across restarts: the slot table is computed from names. Required.
	Name string

	// BindAddr and BindPort are where the real UDP/TCP transport listens
	// (ignored when Transport is set). BindAddr must be an IP; BindPort 0
	// picks a free port (tests), which is then what the node advertises.
	BindAddr string
	BindPort int
	// AdvertiseAddr and AdvertisePort are what other members dial. Empty
	// and 0 mean the bind address and port (with 0.0.0.0, memberlist picks
	// a private interface address).
	AdvertiseAddr string
	AdvertisePort int

	// SecretKey enables gossip encryption (AES-GCM) with this 32-byte key;
	// nil disables it. Members with a different key, or without one, cannot
	// join (every incoming message must be encrypted with the key). See
	// ParseSecretKey for the base64 --gossip-key form.
	SecretKey []byte
	// KeyringFile, when set, keeps the keyring across restarts: every
	// change (Membership.InstallKey, UseKey, RemoveKey) is written to it
	// (mode 0600) before it takes effect, and when it exists at New its
	// keys and primary key are used instead of SecretKey (a SecretKey it
	// lacks is logged and ignored: the cluster rotated away from it).
	// Delete it to start from SecretKey again.
	KeyringFile string
	// Label is the cluster label prefixed to every packet and stream (at
	// most 255 bytes); members with a different label are refused. It keeps
	// two clusters on one network apart even without a key. Empty means none.
	Label string

	// Transport carries memberlist's packets and streams; nil means the
	// real UDP/TCP transport on BindAddr:BindPort. Tests pass a
	// memnet.Transport.
	Transport memberlist.Transport
	// Logger receives membership logs and memberlist's own log lines
	// (mapped from its [DEBUG]/[INFO]/[WARN]/[ERR] prefixes to slog levels);
	// nil discards them.
	Logger *slog.Logger

	// ProbeInterval is how often a random member is probed. Shorter detects
	// failures faster at the cost of more probe traffic and, on a starved
	// machine, false suspicions.
	ProbeInterval time.Duration
	// ProbeTimeout is how long to wait for a direct probe's ack before
	// asking IndirectChecks other members to probe; it must be below
	// ProbeInterval and above the network's round-trip time under load.
	ProbeTimeout time.Duration
	// IndirectChecks is how many members probe a target that missed a
	// direct probe. More reduces false suspicion from one lossy link.
	IndirectChecks int
	// SuspicionMult scales the suspicion timeout (see the type doc): how
	// long a suspect has to refute before it is declared dead. Higher
	// means fewer false deaths and slower detection.
	SuspicionMult int
	// SuspicionMaxTimeoutMult bounds how much longer than the minimum a
	// suspicion may last while confirmations from other members are still
	// expected.
	SuspicionMaxTimeoutMult int
	// AwarenessMaxMultiplier bounds how far a node that notices it is
	// unhealthy (missed acks; see Stats.HealthScore) stretches its own
	// probe interval and timeouts, so a starved node does not accuse
	// healthy peers.
	AwarenessMaxMultiplier int
	// GossipInterval is how often queued broadcasts (joins, state changes,
	// suspicions) are sent to GossipNodes random members. Shorter spreads
	// changes faster and sends more small packets.
	GossipInterval time.Duration
	// GossipNodes is how many members each gossip round sends to.
	GossipNodes int
	// GossipToTheDeadTime is how long dead members still receive gossip,
	// which lets a member wrongly declared dead learn it and refute.
	GossipToTheDeadTime time.Duration
	// RetransmitMult scales how many times a broadcast is retransmitted:
	// RetransmitMult × ceil(log10(N+1)).
	RetransmitMult int
	// PushPullInterval is how often a full state sync runs with one random
	// member: the anti-entropy that repairs whatever gossip missed. 0
	// disables it (not recommended).
	PushPullInterval time.Duration
	// TCPTimeout bounds one stream exchange (join, push/pull, TCP probe
	// fallback). A seed that black-holes packets costs this much in Join.
	TCPTimeout time.Duration

	// ReconnectInterval is how often one dead member (declared dead, not
	// left) is retried with a push/pull. memberlist never contacts dead
	// members again by itself, so without this two sides of a healed
	// partition stay apart. 0 disables it.
	ReconnectInterval time.Duration
	// ReconnectTimeout is how long after its death a member is still
	// retried (0: never). Longer rejoins members after longer outages at
	// the cost of one attempt per interval for each member that never
	// returns.
	ReconnectTimeout time.Duration

	// EventBuffer is the capacity of the Events channel. When it is full an
	// event is dropped, counted in Stats.EventsDropped, logged (rate
	// limited) and Resync is signalled; the consumer then re-reads
	// Snapshot. Larger absorbs bigger bursts (a join delivers one event per
	// member) at the cost of memory.
	EventBuffer int
	// DropLogInterval is the minimum time between two WARN logs about
	// dropped events; each log carries the count since the previous one.
	DropLogInterval time.Duration
	// UpdateTimeout bounds how long SetState waits for the new state to be
	// sent to at least one member. 0 waits without limit.
	UpdateTimeout time.Duration
	// LeaveWait is how long Leave waits after broadcasting the leave before
	// shutting down, so that the message reaches more members than the
	// first (gossip keeps spreading it meanwhile).
	LeaveWait time.Duration
}

// DefaultLANConfig returns the production profile: memberlist's
// DefaultLANConfig values (detection in about 5-6 s for a few nodes,
// tuned by HashiCorp for data-centre LANs), listening on all interfaces
// at port 7946. Name must still be set.
func DefaultLANConfig() Config {
	return Config{
		BindAddr: "0.0.0.0", // memberlist default: reachable from other hosts
		BindPort: 7946,      // memberlist's (and Serf's) well-known port

		// The following are memberlist.DefaultLANConfig's values, restated
		// so each is visible here; TestDefaultLANConfigMatchesMemberlist
		// keeps them in step on upgrades.
		ProbeInterval:           time.Second,            // failure check every second
		ProbeTimeout:            500 * time.Millisecond, // generous LAN round trip
		IndirectChecks:          3,                      // 3 helpers for a missed probe
		SuspicionMult:           4,                      // 4 × log10(N) probe intervals to refute
		SuspicionMaxTimeoutMult: 6,                      // ≤ 120 s even for 10k nodes
		AwarenessMaxMultiplier:  8,                      // a starved node backs off to 8 s probes
		GossipInterval:          200 * time.Millisecond, // changes spread in well under a second
		GossipNodes:             3,
		GossipToTheDeadTime:     30 * time.Second, // same as push/pull
		RetransmitMult:          4,
		PushPullInterval:        30 * time.Second, // anti-entropy at low frequency
		TCPTimeout:              10 * time.Second,

		// Ours. Serf retries failed members every 30 s for 24 h; 10 s
		// re-merges a healed partition sooner for the cost of one push/pull
		// (or one refused dial) per interval while a member is dead.
		ReconnectInterval: 10 * time.Second,
		ReconnectTimeout:  24 * time.Hour,
		// A join of N members emits N events at once; 256 absorbs that for
		// any cluster we expect, and a drop costs only a Snapshot re-read.
		EventBuffer:     256,
		DropLogInterval: 10 * time.Second,
		UpdateTimeout:   5 * time.Second,
		// DESIGN §3: Leave, then about 1 s before Shutdown.
		LeaveWait: time.Second,
	}
}

// DefaultLocalConfig returns the profile for loopback dev clusters and
// tests (the default of `chime serve` on loopback): DefaultLANConfig with
// ProbeInterval 500 ms, ProbeTimeout 200 ms, GossipInterval 100 ms and
// SuspicionMult 3 (memberlist's DefaultLocalConfig value), and bound to
// 127.0.0.1. For up to 9 nodes it detects a crash in about 2.5 s
// (suspicion 3 × 500 ms = 1.5 s plus probing; SuspicionMult 4 took
// ~2.7 s, and a crashed node's tasks fired 0.4 s later); the 200 ms probe profile
// detects in about 1 s but produced false deaths under CPU starvation on a
// 2-core box (DESIGN §3). Reconnects run every 2 s so a healed partition
// re-merges quickly.
func DefaultLocalConfig() Config {
	c := DefaultLANConfig()
	c.BindAddr = "127.0.0.1" // loopback only
	c.ProbeInterval = 500 * time.Millisecond
	c.ProbeTimeout = 200 * time.Millisecond   // loopback RTT is µs; leaves room for a busy box
	c.GossipInterval = 100 * time.Millisecond // spread changes within a few hundred ms
	c.ReconnectInterval = 2 * time.Second     // cheap on loopback: a dead port refuses at once
	c.SuspicionMult = 3                       // memberlist's own local profile: 1.5 s to refute
	return c
}

// Validate reports every problem with c at once (errors.Join).
func (c *Config) Validate() error {
	var errs []error
	check := func(ok bool, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf("gossip: "+format, args...))
		}
	}
	check(c.Name != "", "Name is empty")
	if c.Transport == nil {
		check(net.ParseIP(c.BindAddr) != nil, "BindAddr %q is not an IP", c.BindAddr)
	}
	check(c.BindPort >= 0 && c.BindPort <= 65535, "BindPort %d outside [0, 65535]", c.BindPort)
	check(c.AdvertiseAddr == "" || net.ParseIP(c.AdvertiseAddr) != nil, "AdvertiseAddr %q is not an IP", c.AdvertiseAddr)
	check(c.AdvertisePort >= 0 && c.AdvertisePort <= 65535, "AdvertisePort %d outside [0, 65535]", c.AdvertisePort)
	check(len(c.SecretKey) == 0 || len(c.SecretKey) == SecretKeySize, "SecretKey is %d bytes, want %d", len(c.SecretKey), SecretKeySize)
	check(len(c.Label) <= memberlist.LabelMaxSize, "Label is %d bytes, max %d", len(c.Label), memberlist.LabelMaxSize)
	check(c.ProbeInterval > 0, "ProbeInterval must be positive")
	check(c.ProbeTimeout > 0 && c.ProbeTimeout < c.ProbeInterval, "ProbeTimeout %v must be positive and below ProbeInterval %v", c.ProbeTimeout, c.ProbeInterval)
	check(c.IndirectChecks >= 0, "IndirectChecks is negative")
	check(c.SuspicionMult >= 1, "SuspicionMult must be at least 1")
	check(c.SuspicionMaxTimeoutMult >= 1, "SuspicionMaxTimeoutMult must be at least 1")
	check(c.AwarenessMaxMultiplier >= 1, "AwarenessMaxMultiplier must be at least 1")
	check(c.GossipInterval > 0, "GossipInterval must be positive")
	check(c.GossipNodes >= 1, "GossipNodes must be at least 1")
	check(c.GossipToTheDeadTime >= 0, "GossipToTheDeadTime is negative")
	check(c.RetransmitMult >= 1, "RetransmitMult must be at least 1")
	check(c.PushPullInterval >= 0, "PushPullInterval is negative")
	check(c.TCPTimeout > 0, "TCPTimeout must be positive")
	check(c.ReconnectInterval >= 0, "ReconnectInterval is negative")
	check(c.ReconnectTimeout >= 0, "ReconnectTimeout is negative")
	check(c.EventBuffer >= 1, "EventBuffer must be at least 1")
	check(c.DropLogInterval >= 0, "DropLogInterval is negative")
	check(c.UpdateTimeout >= 0, "UpdateTimeout is negative")
	check(c.LeaveWait >= 0, "LeaveWait is negative")
	return errors.Join(errs...)
}

// ParseSecretKey decodes the base64 form of a gossip key (the
// --gossip-key flag; standard encoding, padding optional) and checks that
// it is SecretKeySize bytes. An empty string means no key (nil, nil).
func ParseSecretKey(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	key, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		key, err = base64.RawStdEncoding.DecodeString(s)
	}
	if err != nil {
		return nil, fmt.Errorf("gossip: secret key is not base64: %w", err)
	}
	if len(key) != SecretKeySize {
		return nil, fmt.Errorf("gossip: secret key is %d bytes, want %d", len(key), SecretKeySize)
	}
	return key, nil
}

// clone returns a copy of c that shares no mutable memory with it.
func (c *Config) clone() Config {
	cc := *c
	cc.SecretKey = append([]byte(nil), c.SecretKey...)
	if len(cc.SecretKey) == 0 {
		cc.SecretKey = nil
	}
	return cc
}

// memberlistConfig builds memberlist's configuration from c, with d as its
// Delegate and EventDelegate and keys as its keyring (nil: no encryption). It starts from memberlist.DefaultLANConfig so
// that every knob we do not expose keeps memberlist's default.
func (c *Config) memberlistConfig(d *delegate, keys *memberlist.Keyring, logger *slog.Logger) *memberlist.Config {
	mc := memberlist.DefaultLANConfig()
	mc.Name = c.Name
	mc.BindAddr = c.BindAddr
	mc.BindPort = c.BindPort
	mc.AdvertiseAddr = c.AdvertiseAddr
	mc.AdvertisePort = c.AdvertisePort
	if c.AdvertisePort == 0 {
		mc.AdvertisePort = c.BindPort
	}
	// The keyring holds SecretKey (or the keyring file's keys); memberlist
	// would add SecretKey to it again and make it primary.
	mc.SecretKey, mc.Keyring = nil, keys
	mc.Label = c.Label
	mc.Transport = c.Transport
	mc.Delegate = d
	mc.Events = d
	mc.LogOutput = nil
	mc.Logger = log.New(slogWriter{logger}, "", 0)

	mc.ProbeInterval = c.ProbeInterval
	mc.ProbeTimeout = c.ProbeTimeout
	mc.IndirectChecks = c.IndirectChecks
	mc.SuspicionMult = c.SuspicionMult
	mc.SuspicionMaxTimeoutMult = c.SuspicionMaxTimeoutMult
	mc.AwarenessMaxMultiplier = c.AwarenessMaxMultiplier
	mc.GossipInterval = c.GossipInterval
	mc.GossipNodes = c.GossipNodes
	mc.GossipToTheDeadTime = c.GossipToTheDeadTime
	mc.RetransmitMult = c.RetransmitMult
	mc.PushPullInterval = c.PushPullInterval
	mc.TCPTimeout = c.TCPTimeout
	// No LZW on outgoing messages: pings, acks and the few broadcasts
	// are tens of bytes, and memberlist's compression allocated a fresh
	// LZW writer (tens of KiB) per message: most of an idle node's probe
	// cost (issue 17). Compressed messages from other versions are still
	// read: memberlist decompresses what arrives whatever this says.
	mc.EnableCompression = false
	return mc
}
