package bench

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"time"
)

// chimePackage is what the harness builds when no binary is given.
const chimePackage = "github.com/chime-scheduler/chime/cmd/chime"

// maxNodes bounds a spawned cluster: every node shares the same two cores.
const maxNodes = 16

// TargetConfig says which nodes a workload runs against: running ones
// (URLs) or ones the harness starts and stops (Spawn).
type TargetConfig struct {
	// URLs are the base URLs of running nodes, e.g. http://127.0.0.1:7070:
	// one node, or several members of one cluster (work is spread over
	// them). Exactly one of URLs and Spawn must be set.
	URLs []string `json:"urls,omitempty"`
	// Spawn starts Nodes `chime serve` processes on free loopback ports,
	// each with a fresh temporary data directory, waits for /readyz (and,
	// for a cluster, until every node sees the same slot table), and stops
	// them with SIGTERM at the end. Only spawned (or PID-given) nodes
	// report CPU and memory.
	Spawn bool `json:"spawn"`
	// Nodes is how many nodes to spawn. Default 1: a standalone node
	// without gossip, as before clustering. More start a cluster on
	// loopback: node I is named nI and joins all the others, as
	// scripts/cluster.sh starts it.
	Nodes int `json:"nodes,omitempty"`
	// ChimeBin is the chime binary to spawn. Empty builds ./cmd/chime
	// with `go build` into a temporary directory (the working directory
	// must be inside the module). With ClusterScript the script runs
	// ChimeBin (CHIME_BIN) instead of building its checkout; without
	// ChimeBin it builds.
	ChimeBin string `json:"chime_bin,omitempty"`
	// ServeArgs are extra arguments for every `chime serve`. With
	// ClusterScript they travel in CHIME_SERVE_ARGS, split at spaces.
	ServeArgs []string `json:"serve_args,omitempty"`
	// ClusterScript is scripts/cluster.sh. When set, a spawned cluster
	// (Nodes > 1, or a workload that adds nodes) is started through it
	// (`up N`, `start I`, `stop I`, `down --wipe`) with CHIME_CLUSTER_DIR
	// in a temporary directory; killing is a SIGKILL to the pid in the
	// script's pid file. Empty starts the same command lines from Go.
	ClusterScript string `json:"cluster_script,omitempty"`
	// BasePort and GossipBasePort are the HTTP and gossip ports of node
	// 1; node I uses base+I-1, like scripts/cluster.sh. 0 finds free runs
	// of ports.
	BasePort       int `json:"base_port,omitempty"`
	GossipBasePort int `json:"gossip_base_port,omitempty"`
	// Token is the API token for URL targets (Authorization: Bearer).
	// Spawned nodes run without one.
	Token string `json:"-"`
	// CAFile is a CA bundle (PEM) that signs https URL targets'
	// certificates; empty means the system roots.
	CAFile string `json:"ca_file,omitempty"`
	// PIDs are the process ids of URL targets on this machine, in URL
	// order, so their CPU and memory can be read from /proc. Missing or 0
	// = unknown.
	PIDs []int `json:"pids,omitempty"`
	// DataDirs are the URL targets' data directories on this machine, in
	// URL order, for the disk size. Missing or empty = unknown.
	DataDirs []string `json:"data_dirs,omitempty"`
	// ReadyTimeout bounds the wait for /readyz after a spawn or restart.
	// Default 60 s: a restart of a 10M-task node loads its due index first.
	ReadyTimeout time.Duration `json:"ready_timeout_ns"`
	// StopTimeout is how long a spawned node gets to exit after SIGTERM
	// before it is killed. Default 30 s.
	StopTimeout time.Duration `json:"stop_timeout_ns"`
}

func (c *TargetConfig) setDefaults() {
	if c.ReadyTimeout <= 0 {
		c.ReadyTimeout = 60 * time.Second
	}
	if c.StopTimeout <= 0 {
		c.StopTimeout = 30 * time.Second
	}
	if c.Spawn && c.Nodes == 0 {
		c.Nodes = 1
	}
}

// nodeCount returns how many nodes the target has (spawned or given).
func (c TargetConfig) nodeCount() int {
	if c.Spawn {
		return max(c.Nodes, 1)
	}
	return len(c.URLs)
}

func (c TargetConfig) validate() error {
	var errs []error
	switch {
	case c.Spawn && len(c.URLs) > 0:
		errs = append(errs, errors.New("bench: give a target URL or spawn, not both"))
	case !c.Spawn && len(c.URLs) == 0:
		errs = append(errs, errors.New("bench: give a target URL or spawn a node"))
	}
	for _, s := range c.URLs {
		u, err := url.Parse(s)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("bench: target %q is not an http(s) URL", s))
		}
	}
	if c.Nodes < 0 || c.Nodes > maxNodes {
		errs = append(errs, fmt.Errorf("bench: nodes %d not in [1, %d]", c.Nodes, maxNodes))
	}
	if !c.Spawn && c.Nodes > 1 {
		errs = append(errs, errors.New("bench: nodes is for spawned clusters; list a running cluster's URLs instead"))
	}
	if len(c.PIDs) > len(c.URLs) || len(c.DataDirs) > len(c.URLs) {
		errs = append(errs, fmt.Errorf("bench: %d pids and %d data dirs for %d target URLs", len(c.PIDs), len(c.DataDirs), len(c.URLs)))
	}
	for _, p := range c.PIDs {
		if p < 0 {
			errs = append(errs, fmt.Errorf("bench: pid %d < 0", p))
		}
	}
	for _, p := range []int{c.BasePort, c.GossipBasePort} {
		if p < 0 || p+maxNodes > 65535 {
			errs = append(errs, fmt.Errorf("bench: base port %d not in [1, %d]", p, 65535-maxNodes))
		}
	}
	return errors.Join(errs...)
}

// NodeStats describes one node under test, or the sum over a cluster's
// nodes, as the run saw it.
type NodeStats struct {
	// Name is the node's name (nI for a spawned cluster node).
	Name    string `json:"name,omitempty"`
	URL     string `json:"url"`
	Spawned bool   `json:"spawned"`
	Binary  string `json:"binary,omitempty"`
	PID     int    `json:"pid,omitempty"`
	// Killed says the harness SIGKILLed the node during the run (failover):
	// its figures are from just before the kill.
	Killed bool `json:"killed,omitempty"`
	// CPUSeconds is the node's CPU time (user + system) during the run;
	// 0 when it cannot be read (a remote target without PID).
	CPUSeconds float64 `json:"cpu_seconds"`
	// RSSBytes is the resident set at the end of the run, PeakRSSBytes
	// the process's peak (VmHWM). Summed over a cluster, the peak is the
	// sum of each node's own peak.
	RSSBytes     int64 `json:"rss_bytes"`
	PeakRSSBytes int64 `json:"peak_rss_bytes"`
	// DiskBytes is the size of the data directory at the end, when known.
	DiskBytes int64 `json:"disk_bytes,omitempty"`
}

// member is one node of a target. Its fields are used from the workload's
// goroutine only.
type member struct {
	index      int    // 1-based position in the target
	name       string // nI for spawned nodes; "" for URL targets
	api        *apiClient
	httpAddr   string // host:port
	gossipAddr string // spawned cluster nodes only
	dataDir    string
	pid        int
	running    bool // a spawned node whose process runs
	killed     bool
	// whole counts the node's CPU from its process start (a node added
	// during the run: its startup is part of what is measured) instead of
	// from its first /readyz.
	whole bool

	startCPU time.Duration // CPU at the start of the measurement
	prevCPU  time.Duration // CPU of earlier incarnations (restarts)
	last     procSample    // the last sample read, prevCPU included
	sampled  bool
}

// target is the set of nodes under test. Methods are called from the
// workload's goroutine only.
type target struct {
	cfg       TargetConfig
	prog      Progress
	conns     int
	nodes     []*member
	api       *apiClient // nodes[0].api: what single-node code talks to
	tmp       string     // temporary directory the target owns, removed by close
	bin       string
	launch    launcher    // nil for URL targets
	clustered bool        // spawned with gossip
	warnings  []string    // collected for the result (e.g. the script ran another binary)
	roots     *tls.Config // spawned nodes serve HTTPS signed by this CA (--ca); nil: HTTP
}

// openTarget connects to the nodes or spawns them, and returns once each
// answers /readyz (a spawned cluster: once all agree on the slot table).
// conns sizes each node's client connection pool.
func openTarget(ctx context.Context, cfg TargetConfig, conns int, prog Progress) (*target, error) {
	return openTargetOpts(ctx, cfg, targetOpts{conns: conns, prog: prog})
}

// targetOpts are the workload's needs beyond its TargetConfig.
type targetOpts struct {
	conns int
	prog  Progress
	// cluster spawns gossiping members even for Nodes = 1 (a workload
	// that adds nodes needs a cluster to join).
	cluster bool
	// spare is how many more nodes the workload may add (ports reserved).
	spare int
}

func openTargetOpts(ctx context.Context, cfg TargetConfig, o targetOpts) (*target, error) {
	t := &target{cfg: cfg, prog: o.prog, conns: o.conns}
	var roots *tls.Config
	if cfg.CAFile != "" {
		pem, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return nil, fmt.Errorf("bench: CA file: %w", err)
		}
		roots = &tls.Config{RootCAs: x509.NewCertPool(), MinVersion: tls.VersionTLS12}
		if !roots.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("bench: CA file %s holds no PEM certificate", cfg.CAFile)
		}
	}
	if cfg.Spawn && servesTLS(cfg.ServeArgs) {
		if roots == nil {
			return nil, errors.New("bench: spawned nodes serve TLS (--tls-cert in their arguments): give the CA that signs it (--ca)")
		}
		t.roots = roots
	}
	if !cfg.Spawn {
		for i, u := range cfg.URLs {
			m := &member{index: i + 1, api: newAPIClient(u, cfg.Token, o.conns)}
			if roots != nil && m.api.hc != nil {
				m.api.hc.TLSConfig = roots
			}
			if pu, err := url.Parse(u); err == nil {
				m.httpAddr = pu.Host
			}
			if i < len(cfg.PIDs) {
				m.pid = cfg.PIDs[i]
			}
			if i < len(cfg.DataDirs) {
				m.dataDir = cfg.DataDirs[i]
			}
			t.nodes = append(t.nodes, m)
		}
		t.api = t.nodes[0].api
		for _, m := range t.nodes {
			if err := t.waitReady(ctx, m); err != nil {
				t.close()
				return nil, err
			}
			m.running = m.pid > 0
			if s, ok := m.sample(); ok {
				m.startCPU = s.cpu
			}
			if len(t.nodes) > 1 { // members are told apart by name
				v, err := fetchCluster(ctx, m.api)
				if err != nil {
					t.close()
					return nil, err
				}
				m.name = v.Self
			}
		}
		return t, nil
	}

	tmp, err := os.MkdirTemp("", "chime-bench-")
	if err != nil {
		return nil, fmt.Errorf("bench: temp dir: %w", err)
	}
	t.tmp = tmp
	t.clustered = cfg.Nodes > 1 || o.cluster
	t.bin = cfg.ChimeBin
	if t.bin == "" && !(t.clustered && cfg.ClusterScript != "") {
		o.prog.logf("building %s", chimePackage)
		if t.bin, err = buildChime(ctx, tmp); err != nil {
			t.close()
			return nil, err
		}
	}
	if t.launch, err = newLauncher(cfg, t.bin, tmp, t.clustered, cfg.Nodes+o.spare, o.prog); err != nil {
		t.close()
		return nil, err
	}
	for i := 1; i <= cfg.Nodes; i++ {
		t.addMember(i)
	}
	t.api = t.nodes[0].api
	if err := t.launch.up(ctx, cfg.Nodes); err != nil {
		t.close()
		return nil, err
	}
	bin, note := t.launch.binary()
	t.bin = bin
	if note != "" {
		t.warnings = append(t.warnings, note)
	}
	for _, m := range t.nodes {
		if err := t.started(ctx, m); err != nil {
			t.close()
			return nil, err
		}
	}
	if t.clustered {
		if _, err := waitAgreed(ctx, t.nodes, len(t.nodes), cfg.ReadyTimeout); err != nil {
			t.close()
			return nil, err
		}
	}
	return t, nil
}

// servesTLS reports whether chime serve arguments make it serve HTTPS.
func servesTLS(args []string) bool {
	for _, a := range args {
		if a == "--tls-cert" || a == "-tls-cert" || strings.HasPrefix(a, "--tls-cert=") || strings.HasPrefix(a, "-tls-cert=") {
			return true
		}
	}
	return false
}

// addMember adds spawned node i (not started yet) to the target.
func (t *target) addMember(i int) *member {
	httpAddr, gossipAddr := t.launch.addrs(i)
	scheme := "http://"
	if t.roots != nil {
		scheme = "https://" // spawned with --tls-cert (see servesTLS)
	}
	m := &member{index: i, name: fmt.Sprintf("n%d", i), httpAddr: httpAddr, gossipAddr: gossipAddr,
		dataDir: t.launch.dataDir(i), api: newAPIClient(scheme+httpAddr, "", t.conns)}
	if t.roots != nil && m.api.hc != nil {
		m.api.hc.TLSConfig = t.roots
	}
	if !t.clustered {
		m.name = ""
	}
	t.nodes = append(t.nodes, m)
	return m
}

// started records that the launcher started m's process, and waits until
// it answers /readyz.
func (t *target) started(ctx context.Context, m *member) error {
	m.pid, m.running, m.killed = t.launch.pid(m.index), true, false
	if err := t.waitReady(ctx, m); err != nil {
		return err
	}
	if !m.sampled && !m.whole {
		if s, ok := m.sample(); ok {
			m.startCPU = s.cpu
		}
	}
	return nil
}

// buildChime builds the chime command into dir and returns the binary.
func buildChime(ctx context.Context, dir string) (string, error) {
	bin := dir + "/chime"
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, chimePackage)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("bench: go build %s: %w\n%s", chimePackage, err, bytes.TrimSpace(out))
	}
	return bin, nil
}

// freeLoopbackAddr returns a 127.0.0.1 address whose port was free a
// moment ago. Another process may take it before the node binds it; the
// node then fails to start and the run reports that.
func freeLoopbackAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("bench: find a free port: %w", err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		return "", fmt.Errorf("bench: find a free port: %w", err)
	}
	return addr, nil
}

// nodeEnv strips CHIME_* variables so a spawned node runs with its
// defaults and the flags the harness gives, whatever the caller's shell has.
func nodeEnv(env []string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, "CHIME_") {
			out = append(out, kv)
		}
	}
	return out
}

// waitReady polls m's /readyz until it answers 200.
func (t *target) waitReady(ctx context.Context, m *member) error {
	deadline := time.Now().Add(t.cfg.ReadyTimeout)
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	for {
		if m.api.ready(ctx) {
			return nil
		}
		if t.launch != nil && !t.launch.alive(m.index) {
			return fmt.Errorf("bench: chime serve %s exited before /readyz answered 200\n%s", m.label(), t.launch.logTail(m.index))
		}
		if time.Now().After(deadline) {
			err := fmt.Errorf("bench: %s/readyz did not answer 200 within %s", m.api.base, t.cfg.ReadyTimeout)
			if t.launch != nil {
				err = fmt.Errorf("%w\n%s", err, t.launch.logTail(m.index))
			}
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// label names m in messages.
func (m *member) label() string {
	if m.name != "" {
		return m.name
	}
	return m.api.base
}

// sample reads m's CPU and memory. A node that is not running (killed,
// stopped) keeps its last sample. ok is false when nothing is known (a
// remote target without PID).
func (m *member) sample() (procSample, bool) {
	if m.running && m.pid > 0 {
		if s, err := readProc(m.pid); err == nil {
			s.cpu += m.prevCPU
			m.last, m.sampled = s, true
			return s, true
		}
	}
	return m.last, m.sampled
}

// sample returns the CPU and memory of all nodes together; ok is false
// when none could be read.
func (t *target) sample() (procSample, bool) {
	var sum procSample
	known := false
	for _, m := range t.nodes {
		if s, ok := m.sample(); ok {
			sum.cpu += s.cpu
			sum.rss += s.rss
			sum.peakRSS += s.peakRSS
			known = true
		}
	}
	return sum, known
}

// beforeSignal takes a last sample of m before its process is signalled,
// so the CPU it used stays counted after it is gone.
func (m *member) beforeSignal() {
	if s, ok := m.sample(); ok {
		m.prevCPU = s.cpu
	}
	m.running = false
}

// kill SIGKILLs spawned node m and returns the instant of the signal.
func (t *target) kill(m *member) (time.Time, error) {
	if t.launch == nil {
		return time.Time{}, errors.New("bench: kill needs a spawned node")
	}
	m.beforeSignal()
	at := time.Now()
	if err := t.launch.kill(m.index); err != nil {
		return at, err
	}
	m.killed = true
	return at, nil
}

// stop sends SIGTERM to spawned node m and waits for it to exit, killing
// it after StopTimeout. It returns how long the exit took.
func (t *target) stop(m *member) (time.Duration, error) {
	if t.launch == nil || !m.running {
		return 0, nil
	}
	m.beforeSignal()
	start := time.Now()
	err := t.launch.stop(m.index)
	return time.Since(start), err
}

// restart stops the spawned first node and starts it again on the same
// data directory and port. It returns the time SIGTERM took to exit the
// node and the time from exec until /readyz answered 200.
func (t *target) restart(ctx context.Context) (stopTook, readyTook time.Duration, err error) {
	if !t.cfg.Spawn {
		return 0, 0, errors.New("bench: restart needs a spawned node")
	}
	m := t.nodes[0]
	if stopTook, err = t.stop(m); err != nil {
		return stopTook, 0, err
	}
	start := time.Now()
	if err := t.startNode(ctx, m); err != nil {
		return stopTook, 0, err
	}
	return stopTook, time.Since(start), nil
}

// addNode adds node len(nodes)+1 of a spawned cluster, not started yet:
// startNode starts it, and it joins the others.
func (t *target) addNode() (*member, error) {
	if t.launch == nil || !t.clustered {
		return nil, errors.New("bench: adding a node needs a spawned cluster")
	}
	m := t.addMember(len(t.nodes) + 1)
	m.whole = true
	return m, nil
}

// startNode starts spawned node m and returns once it answers /readyz.
func (t *target) startNode(ctx context.Context, m *member) error {
	if err := t.launch.start(ctx, m.index); err != nil {
		return err
	}
	return t.started(ctx, m)
}

// live returns the nodes whose processes run (URL targets: all).
func (t *target) live() []*member {
	var out []*member
	for _, m := range t.nodes {
		if !m.killed {
			out = append(out, m)
		}
	}
	return out
}

// spread returns a client chooser that sends request k to node k mod N,
// or nil for a single node.
func (t *target) spread() func(req, first int) *apiClient {
	if len(t.nodes) < 2 {
		return nil
	}
	nodes := t.nodes
	return func(req, _ int) *apiClient { return nodes[req%len(nodes)].api }
}

// stats describes the target now, the sum over its nodes for a cluster;
// call it before close.
func (t *target) stats() *NodeStats { return sumStats(t, t.nodeStats()) }

// allStats returns stats and perNode from one sample of the nodes, so that
// the sum matches its parts.
func (t *target) allStats() (*NodeStats, []NodeStats) {
	per := t.nodeStats()
	if len(per) < 2 {
		return sumStats(t, per), nil
	}
	return sumStats(t, per), per
}

// sumStats is the target's stats from per, the sample of each node.
func sumStats(t *target, per []NodeStats) *NodeStats {
	if len(per) == 1 {
		return &per[0]
	}
	sum := NodeStats{Name: fmt.Sprintf("%d nodes", len(per)), Spawned: t.cfg.Spawn, Binary: t.bin}
	var urls []string
	for _, s := range per {
		urls = append(urls, s.URL)
		sum.CPUSeconds += s.CPUSeconds
		sum.RSSBytes += s.RSSBytes
		sum.PeakRSSBytes += s.PeakRSSBytes
		sum.DiskBytes += s.DiskBytes
	}
	sum.URL = strings.Join(urls, ",")
	return &sum
}

// nodeStats describes each node now.
func (t *target) nodeStats() []NodeStats {
	out := make([]NodeStats, 0, len(t.nodes))
	for _, m := range t.nodes {
		ns := NodeStats{Name: m.name, URL: m.api.base, Spawned: t.cfg.Spawn, Binary: t.bin, PID: m.pid, Killed: m.killed}
		if s, ok := m.sample(); ok {
			ns.CPUSeconds = (s.cpu - m.startCPU).Seconds()
			ns.RSSBytes, ns.PeakRSSBytes = s.rss, s.peakRSS
		}
		if m.dataDir != "" {
			if n, err := dirSize(m.dataDir); err == nil {
				ns.DiskBytes = n
			}
		}
		out = append(out, ns)
	}
	return out
}

// close stops spawned nodes and removes the temporary directory. It
// returns the first stop error, if any.
func (t *target) close() error {
	var err error
	if t.launch != nil {
		for _, m := range t.nodes {
			if m.running {
				m.beforeSignal()
			}
		}
		err = t.launch.close()
	}
	for _, m := range t.nodes {
		m.api.close()
	}
	if t.tmp != "" {
		err = errors.Join(err, os.RemoveAll(t.tmp))
	}
	return err
}
