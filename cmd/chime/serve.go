package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/chime-scheduler/chime/node"
	"github.com/chime-scheduler/chime/node/dispatch"
	"github.com/chime-scheduler/chime/node/tlsconf"
	"github.com/chime-scheduler/chime/ring/gossip"
	"github.com/chime-scheduler/chime/slots"
)

// shutdownGrace is how long running callbacks get to finish on SIGTERM.
const shutdownGrace = 10 * time.Second

// runServe runs `chime serve`: one node until ctx ends (SIGINT/SIGTERM),
// then a graceful stop: stop intake, let running fires finish up to 10 s,
// flush, close.
func runServe(ctx context.Context, args []string, _, stderr io.Writer, env func(string) string) error {
	cfg := node.DefaultConfig()
	fs := flag.NewFlagSet("chime serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	httpAddr := fs.String("http-addr", "127.0.0.1:7070", "address the HTTP API listens on")
	fs.StringVar(&cfg.DataDir, "data-dir", cfg.DataDir, "directory of the node's Pebble store")
	fs.StringVar(&cfg.Name, "name", "", "node name (default chime-<http port>)")
	fs.StringVar(&cfg.APIToken, "api-token", "", "require 'Authorization: Bearer <token>' on /v1/ and /metrics")
	apiTokenFile := fs.String("api-token-file", "", "read --api-token from this file")
	fs.StringVar(&cfg.ReadToken, "read-token", "", "a second bearer token that allows only reads: GET/HEAD on /v1/, the dashboard, /metrics (needs --api-token)")
	readTokenFile := fs.String("read-token-file", "", "read --read-token from this file")
	var publicHosts listFlag
	fs.Var(&publicHosts, "public-host", "a Host name (besides loopback) that a node without --api-token answers; repeatable or a comma list")
	insecureAPI := fs.Bool("insecure-api", false, "serve the API on a non-loopback --http-addr without --api-token (trusted networks only)")
	maxConns := fs.Int("max-conns", defaultMaxConns, "open API connections; beyond it new ones get 503")
	fs.DurationVar(&cfg.Tick, "tick", cfg.Tick, "timing wheel resolution")
	fs.DurationVar(&cfg.Window, "window", cfg.Window, "how far ahead due tasks are loaded into memory")
	fs.DurationVar(&cfg.MisfireGrace, "misfire-grace", cfg.MisfireGrace, "how late a periodic fire may start before its misfire policy applies")
	fs.DurationVar(&cfg.Retention, "retention", cfg.Retention, "keep a done, failed, inactive or completed task (and its executions) this long, unless the task sets retention_ms; 0 = forever")
	fs.DurationVar(&cfg.OverdueAfter, "overdue-after", cfg.OverdueAfter, "safety net: a task due this long ago and not fired is overdue, an owned slot not firing this long is stalled")
	fs.IntVar(&cfg.Limits.MaxPayloadBytes, "max-payload", cfg.Limits.MaxPayloadBytes, "largest task payload in bytes")
	fs.IntVar(&cfg.Dispatch.Concurrency, "concurrency", cfg.Dispatch.Concurrency, "callbacks in flight overall")
	fs.IntVar(&cfg.Dispatch.PerHost, "per-host", cfg.Dispatch.PerHost, "callbacks in flight per callback host")
	fs.IntVar(&cfg.Dispatch.MaxQueued, "dispatch-queue", cfg.Dispatch.MaxQueued, "callbacks waiting for a worker before creates get 429")
	breaker := fs.String("breaker", "on", "circuit breaker per callback host: on or off (off: every due fire is attempted, whatever the host's failures)")
	bdef := dispatch.DefaultBreakerConfig()
	fs.DurationVar(&cfg.Breaker.Window, "breaker-window", bdef.Window, "circuit breaker: the rolling window a host's attempts are counted over")
	fs.IntVar(&cfg.Breaker.MinAttempts, "breaker-min-attempts", bdef.MinAttempts, "circuit breaker: attempts in the window before a host's circuit may open")
	fs.Float64Var(&cfg.Breaker.FailureRatio, "breaker-failure-ratio", bdef.FailureRatio, "circuit breaker: share of attempts failed (connection error, timeout, 5xx) at which the circuit opens, in (0, 1]")
	fs.DurationVar(&cfg.Breaker.Probe, "breaker-probe", bdef.Probe, "circuit breaker: wait before the first probe of an open circuit; doubles after each failed probe")
	fs.DurationVar(&cfg.Breaker.ProbeMax, "breaker-probe-max", bdef.ProbeMax, "circuit breaker: longest wait between probes")
	fs.IntVar(&cfg.WriteQueue, "write-queue", cfg.WriteQueue, "API writes waiting for the writer before 429")
	fs.IntVar(&cfg.HistoryLimit, "history", cfg.HistoryLimit, "execution records kept per task")
	var tf trustFlags
	tf.register(fs)
	var cf clusterFlags
	cf.register(fs)
	var tlsf tlsFiles
	tlsf.register(fs)
	memLimit := byteSize(defaultMemoryLimit)
	fs.Var(&memLimit, "memory-limit", "the node's memory `budget`, e.g. 512MiB: 1/8 to Pebble's block cache, 1/16 to each of its (up to 3) memtables, 5/16 left for malloc's and the binary's pages, 3/8 to the Go runtime's soft limit (GOMEMLIMIT, when set, wins for that part); off: Pebble's defaults (32 MiB cache, 16 MiB memtables), no Go limit")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	idleProcsAfter := fs.Duration("idle-procs-after", defaultIdleProcsAfter, "run on one processor (GOMAXPROCS 1) once the node has used under 5 % of a core each second for this long, and on every CPU again in the first second over 20 %; 0 keeps every CPU (so does a GOMAXPROCS variable)")
	debugAddr := fs.String("debug-addr", "", "serve Go's pprof handlers on this address (e.g. 127.0.0.1:6060); off when empty")
	if err := parseWithEnv(fs, args, env); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("serve: unexpected argument %q", fs.Arg(0))
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return fmt.Errorf("serve: --log-level: %w", err)
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	var err error
	if cfg.APIToken, err = secretValue("--api-token", cfg.APIToken, *apiTokenFile); err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	if cfg.ReadToken, err = secretValue("--read-token", cfg.ReadToken, *readTokenFile); err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	if cfg.ReadToken != "" && cfg.APIToken == "" {
		return fmt.Errorf("serve: %w", errReadTokenAlone)
	}
	switch *breaker {
	case "on":
	case "off":
		cfg.Breaker.Off = true
	default:
		return fmt.Errorf("serve: --breaker %q: want on or off", *breaker)
	}
	if err := cfg.Breaker.Validate(); err != nil {
		return fmt.Errorf("serve: --breaker-*: %w", err)
	}
	if cfg.Breaker.Window <= 0 || cfg.Breaker.MinAttempts <= 0 || cfg.Breaker.FailureRatio <= 0 || cfg.Breaker.Probe <= 0 || cfg.Breaker.ProbeMax <= 0 {
		return errors.New("serve: --breaker-window, --breaker-min-attempts, --breaker-failure-ratio, --breaker-probe and --breaker-probe-max must be positive")
	}
	if *maxConns < 1 {
		return fmt.Errorf("serve: --max-conns %d: want at least 1", *maxConns)
	}
	mem, err := splitMemory(int64(memLimit))
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	cfg.PublicHosts = publicHosts
	// Before listening: a node must not be reachable, even briefly, where
	// it should not be.
	for _, a := range [][2]string{{"--http-addr", *httpAddr}, {"--debug-addr", *debugAddr}} {
		if a[1] == "" {
			continue
		}
		if err := checkExposure(a[0], a[1], cfg.APIToken != "", *insecureAPI); err != nil {
			return fmt.Errorf("serve: %w", err)
		}
		if !isLoopbackAddr(a[1]) && cfg.APIToken == "" {
			log.Warn("--insecure-api: the API is served without a token on a non-loopback address: anyone who reaches it can create, change and delete tasks", "addr", a[1])
		}
	}

	ln, err := net.Listen("tcp", *httpAddr)
	if err != nil {
		return fmt.Errorf("serve: listen: %w", err)
	}
	cfg.HTTPAddr = ln.Addr().String()
	if cfg.Name == "" {
		_, port, _ := net.SplitHostPort(cfg.HTTPAddr)
		cfg.Name = "chime-" + port
	}
	cfg.Logger = log
	if cfg.TLS, err = tlsf.load(); err != nil {
		ln.Close()
		return fmt.Errorf("serve: %w", err)
	}
	// Connections beyond --max-conns get a 503 before any TLS handshake.
	ln = newLimitListener(ln, *maxConns)
	scheme := "http"
	if cfg.TLS != nil {
		ln, scheme = tls.NewListener(ln, cfg.TLS.Server()), "https"
		stopHUP := reloadOnHUP(cfg.TLS, log)
		defer stopHUP()
	}
	if err = tf.apply(&cfg.Dispatch); err != nil {
		ln.Close()
		return fmt.Errorf("serve: %w", err)
	}
	if cfg.Cluster, err = cf.config(cfg.DataDir); err != nil {
		ln.Close()
		return fmt.Errorf("serve: %w", err)
	}
	if cfg.Cluster != nil && cfg.Cluster.Insecure {
		log.Warn("--insecure-cluster: calls between nodes and gossip are not authenticated: anyone who reaches this node's ports can steer or crash it")
	}
	malloc := mallocNames(mallocAtStart())
	if mem.Limit > 0 {
		cfg.CacheSize, cfg.MemTableSize = mem.Cache, mem.MemTable
		goLimit := "GOMEMLIMIT"
		if env("GOMEMLIMIT") == "" {
			prev := debug.SetMemoryLimit(mem.Go)
			defer debug.SetMemoryLimit(prev)
			goLimit = formatBytes(mem.Go)
		}
		log.Info("memory budget", "limit", formatBytes(mem.Limit), "block_cache", formatBytes(mem.Cache),
			"memtable", formatBytes(int64(mem.MemTable)), "go", goLimit, "malloc", malloc)
	} else {
		log.Info("memory budget off", "malloc", malloc)
	}
	n, err := node.New(cfg)
	if err != nil {
		ln.Close()
		return err
	}
	if err := n.Start(); err != nil {
		ln.Close()
		return fmt.Errorf("serve: %w", err)
	}
	handler := newHTTPHandler(n, cfg.APIToken, cfg.ReadToken, log)
	srv := &http.Server{
		Handler:           withDeadlines(handler, bodyReadTimeout, answerWriteTimeout),
		ReadHeaderTimeout: 10 * time.Second,
		MaxHeaderBytes:    maxHeaderBytes,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	if *debugAddr != "" {
		dbg := n.GuardHost // without a token: the DNS rebinding guard
		if cfg.APIToken != "" {
			dbg = func(h http.Handler) http.Handler { return requireToken(cfg.APIToken, h) }
		}
		stopDebug, err := serveDebug(*debugAddr, dbg, log)
		if err != nil {
			ln.Close()
			_ = n.Close(context.Background())
			return err
		}
		defer stopDebug()
	}
	procsCtx, stopProcs := context.WithCancel(context.Background())
	procsDone := make(chan struct{})
	go func() {
		defer close(procsDone)
		governProcs(procsCtx, *idleProcsAfter, env, log)
	}()
	defer func() { stopProcs(); <-procsDone }()
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	log.Info("chime serving", "http", scheme+"://"+cfg.HTTPAddr, "data_dir", cfg.DataDir, "version", version, "gossip", cf.addr)

	select {
	case <-ctx.Done():
		log.Info("shutting down: stopping intake, letting running callbacks finish", "grace", shutdownGrace)
	case err = <-serveErr:
		log.Error("http server failed", "err", err)
	}
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	if cfg.Cluster != nil {
		// A member drains first: its slots' new owners take them over
		// from it through the internal endpoints, so it keeps serving
		// until it has handed them over (writes to slots it no longer
		// serves answer 503 and are retried at the new owner).
		if e := n.Close(sctx); e != nil {
			return fmt.Errorf("serve: close: %w", e)
		}
	}
	if e := srv.Shutdown(sctx); e != nil && !errors.Is(e, context.DeadlineExceeded) {
		log.Warn("http shutdown", "err", e)
	}
	_ = handler.Close() // the dashboard's websockets: Shutdown does not close them
	if e := n.Close(sctx); e != nil {
		return fmt.Errorf("serve: close: %w", e)
	}
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// tlsFiles are serve's TLS flags.
type tlsFiles struct {
	cert, key, ca string
	mutual        bool
}

func (t *tlsFiles) register(fs *flag.FlagSet) {
	fs.StringVar(&t.cert, "tls-cert", "", "serve HTTPS (API, dashboard, metrics, calls between nodes) with this certificate chain, PEM; reloaded when it changes or on SIGHUP")
	fs.StringVar(&t.key, "tls-key", "", "the private key of --tls-cert, PEM")
	fs.StringVar(&t.ca, "tls-ca", "", "CA bundle (PEM) that signs the other nodes' certificates (default: the system roots)")
	fs.BoolVar(&t.mutual, "tls-mutual", false, "mutual TLS between nodes: present this node's certificate on calls to others, and require one signed by --tls-ca on internal endpoints")
}

// load returns the node's TLS material, or nil without --tls-cert.
func (t *tlsFiles) load() (*tlsconf.Reloader, error) {
	if t.cert == "" && t.key == "" && t.ca == "" && !t.mutual {
		return nil, nil
	}
	return tlsconf.New(tlsconf.Files{Cert: t.cert, Key: t.key, CA: t.ca, Mutual: t.mutual})
}

// reloadOnHUP reloads r's files on every SIGHUP until the returned stop.
func reloadOnHUP(r *tlsconf.Reloader, log *slog.Logger) (stop func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				return
			case <-hup:
				if err := r.Reload(); err != nil {
					log.Error("SIGHUP: TLS files not reloaded; the previous certificate stays in use", "err", err)
				} else {
					log.Info("SIGHUP: TLS files reloaded", "subject", r.Certificate().Subject.CommonName, "not_after", r.Certificate().NotAfter)
				}
			}
		}
	}()
	return func() { signal.Stop(hup); close(done) }
}

// clusterFlags are serve's cluster flags. Without --gossip-addr the node
// runs standalone and owns every slot.
type clusterFlags struct {
	addr, join, profile, key, label, secret     string
	keyFile, secretFile                         string
	insecure                                    bool
	probeInterval, probeTimeout, gossipInterval time.Duration
	antiEntropy                                 time.Duration
	maxMoves, traceSlots                        int
}

func (c *clusterFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.addr, "gossip-addr", "", "gossip (memberlist UDP+TCP) address, e.g. 127.0.0.1:7946; empty runs a standalone node")
	fs.StringVar(&c.join, "join", "", "comma list of other members' gossip addresses; joins through all of them and retries until each is seen")
	fs.StringVar(&c.profile, "profile", "", "gossip timing: local (fast failure detection, loopback) or lan (memberlist defaults); default local on a loopback --gossip-addr, else lan")
	fs.StringVar(&c.key, "gossip-key", "", "base64 32-byte key: encrypts gossip; members without it cannot join (required in a cluster)")
	fs.StringVar(&c.keyFile, "gossip-key-file", "", "read --gossip-key from this file")
	fs.StringVar(&c.label, "cluster-label", "chime", "cluster label on every gossip packet; members with another label are refused")
	fs.StringVar(&c.secret, "cluster-secret", "", "shared secret (32+ bytes) that signs calls between nodes (required in a cluster)")
	fs.StringVar(&c.secretFile, "cluster-secret-file", "", "read --cluster-secret from this file")
	fs.BoolVar(&c.insecure, "insecure-cluster", false, "run a cluster without --cluster-secret and --gossip-key: anyone who reaches its ports can steer it (trusted test networks only)")
	fs.DurationVar(&c.probeInterval, "probe-interval", 0, "memberlist probe interval (0: the profile's)")
	fs.DurationVar(&c.probeTimeout, "probe-timeout", 0, "memberlist probe timeout (0: the profile's)")
	fs.DurationVar(&c.gossipInterval, "gossip-interval", 0, "memberlist gossip interval (0: the profile's)")
	fs.DurationVar(&c.antiEntropy, "anti-entropy-interval", node.DefaultClusterConfig(gossip.Config{}).AntiEntropyInterval,
		"how long one anti-entropy pass over all slots takes (owners have replicas compare slot checksums; a copy that differs is resynced); 0 turns it off")
	fs.IntVar(&c.maxMoves, "max-moves", slots.DefaultMaxMoves,
		"slots this node takes over by a planned handover at once (join, drain); the others wait their turn")
	fs.IntVar(&c.traceSlots, "trace-slots", 0, "debugging: log the ownership events of every k-th slot at info level (0: none)")
}

// config returns the node's cluster config, or nil for a standalone node.
func (c *clusterFlags) config(dataDir string) (*node.ClusterConfig, error) {
	if c.addr == "" {
		if c.join != "" {
			return nil, errors.New("--join needs --gossip-addr")
		}
		return nil, nil
	}
	host, portStr, err := net.SplitHostPort(c.addr)
	if err != nil {
		return nil, fmt.Errorf("--gossip-addr %q: %w", c.addr, err)
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return nil, fmt.Errorf("--gossip-addr %q: host must be an IP address", c.addr)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 0 || port > 65535 {
		return nil, fmt.Errorf("--gossip-addr %q: bad port", c.addr)
	}
	profile := c.profile
	if profile == "" {
		profile = "lan"
		if ip.IsLoopback() {
			profile = "local"
		}
	}
	var g gossip.Config
	switch profile {
	case "local":
		g = gossip.DefaultLocalConfig()
	case "lan":
		g = gossip.DefaultLANConfig()
	default:
		return nil, fmt.Errorf("--profile %q: want local or lan", c.profile)
	}
	g.BindAddr, g.BindPort = host, port
	key, err := secretValue("--gossip-key", c.key, c.keyFile)
	if err != nil {
		return nil, err
	}
	if g.SecretKey, err = gossip.ParseSecretKey(key); err != nil {
		return nil, fmt.Errorf("--gossip-key: %w", err)
	}
	// The keyring `chime cluster keys` rotates is kept beside the data; once
	// it exists it holds the gossip keys (see gossip.Config.KeyringFile).
	hasKeyring := false
	if dataDir != "" {
		g.KeyringFile = filepath.Join(dataDir, keyringFile)
		_, err := os.Stat(g.KeyringFile)
		hasKeyring = err == nil
	}
	secret, err := secretValue("--cluster-secret", c.secret, c.secretFile)
	if err != nil {
		return nil, err
	}
	switch {
	case secret != "" && len(secret) < minClusterSecret:
		return nil, fmt.Errorf("--cluster-secret has %d bytes: it needs at least %d (e.g. openssl rand -hex 32)", len(secret), minClusterSecret)
	case c.insecure:
	case secret == "" || len(g.SecretKey) == 0 && !hasKeyring:
		return nil, errors.New("a cluster needs --cluster-secret (32+ bytes) and --gossip-key (base64 of 32 bytes), as flags, " +
			"CHIME_CLUSTER_SECRET/CHIME_GOSSIP_KEY or --cluster-secret-file/--gossip-key-file " +
			"(scripts/cluster.sh makes both), or --insecure-cluster on a trusted test network")
	}
	g.Label = c.label
	if c.probeInterval > 0 {
		g.ProbeInterval = c.probeInterval
	}
	if c.probeTimeout > 0 {
		g.ProbeTimeout = c.probeTimeout
	}
	if c.gossipInterval > 0 {
		g.GossipInterval = c.gossipInterval
	}
	cc := node.DefaultClusterConfig(g)
	cc.AntiEntropyInterval = c.antiEntropy
	if c.maxMoves < 1 {
		return nil, fmt.Errorf("--max-moves %d: want at least 1", c.maxMoves)
	}
	cc.MaxMoves = c.maxMoves
	if c.traceSlots < 0 {
		return nil, fmt.Errorf("--trace-slots %d: want 0 (off) or more", c.traceSlots)
	}
	cc.TraceSlots = c.traceSlots
	for a := range strings.SplitSeq(c.join, ",") {
		if a = strings.TrimSpace(a); a != "" && a != c.addr {
			cc.Join = append(cc.Join, a)
		}
	}
	// The secret never falls back to the gossip key or the API token:
	// every API client would hold the key to the internal plane.
	cc.Secret, cc.Insecure = []byte(secret), c.insecure
	return &cc, nil
}

// trustFlags are serve's callback trust flags: the signing keys and the
// callback address policy.
type trustFlags struct {
	key, keyFile, next, nextFile string
	allow, deny                  ruleListFlag
	denyPrivate                  bool
}

func (t *trustFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&t.key, "signing-key", "", "sign every callback with this key (16+ bytes): X-Chime-Signature: t=<unix>,v1=<hex HMAC-SHA256(key, t.fire-id.body)>")
	fs.StringVar(&t.keyFile, "signing-key-file", "", "read --signing-key from this file")
	fs.StringVar(&t.next, "signing-key-next", "", "during a key rotation, the next signing key: callbacks carry a v1= for each key")
	fs.StringVar(&t.nextFile, "signing-key-next-file", "", "read --signing-key-next from this file")
	fs.Var(&t.allow, "callback-allow", "allow callbacks to this `CIDR, IP, host name or host:port` even if denied by default (repeatable, or a comma list)")
	fs.Var(&t.deny, "callback-deny", "deny callbacks to this `CIDR, IP, host name or host:port`; wins over --callback-allow (repeatable, or a comma list)")
	fs.BoolVar(&t.denyPrivate, "callback-deny-private", false, "also deny callbacks to loopback, RFC 1918 and ULA (fc00::/7) addresses")
}

// apply reads the keys (flag, CHIME_SIGNING_KEY[_NEXT] or file) and sets
// the trust fields of d.
func (t *trustFlags) apply(d *node.DispatchConfig) error {
	key, err := secretValue("--signing-key", t.key, t.keyFile)
	if err != nil {
		return err
	}
	next, err := secretValue("--signing-key-next", t.next, t.nextFile)
	if err != nil {
		return err
	}
	for _, k := range []struct{ name, v string }{{"--signing-key", key}, {"--signing-key-next", next}} {
		if k.v != "" && len(k.v) < node.MinSigningKey {
			return fmt.Errorf("%s has %d bytes: it needs at least %d (e.g. openssl rand -hex 32)", k.name, len(k.v), node.MinSigningKey)
		}
	}
	if next != "" && key == "" {
		return errors.New("--signing-key-next needs --signing-key (the key in use)")
	}
	if key != "" {
		d.SigningKey = []byte(key)
	}
	if next != "" {
		d.SigningKeyNext = []byte(next)
	}
	d.CallbackAllow, d.CallbackDeny, d.CallbackDenyPrivate = t.allow, t.deny, t.denyPrivate
	return nil
}

// ruleListFlag is a repeatable flag.Value of address rules; one value may
// be a comma list (as CHIME_CALLBACK_DENY=a,b gives it). Rules are checked
// by node.Config.Validate.
type ruleListFlag []string

func (r *ruleListFlag) String() string { return strings.Join(*r, ",") }

func (r *ruleListFlag) Set(v string) error {
	for rule := range strings.SplitSeq(v, ",") {
		if rule = strings.TrimSpace(rule); rule != "" {
			*r = append(*r, rule)
		}
	}
	return nil
}

// keyringFile is the gossip keyring's file in the data directory.
const keyringFile = "gossip-keyring.json"

// minClusterSecret is the shortest --cluster-secret: 32 bytes.
const minClusterSecret = 32

// secretValue returns a secret given as a flag (or its environment
// variable) or in a file (trailing whitespace trimmed), not both.
func secretValue(name, value, file string) (string, error) {
	if file == "" {
		return value, nil
	}
	if value != "" {
		return "", fmt.Errorf("%s and %s-file both given: use one", name, name)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("%s-file: %w", name, err)
	}
	v := strings.TrimRight(string(b), " \t\r\n")
	if v == "" {
		return "", fmt.Errorf("%s-file %s is empty", name, file)
	}
	return v, nil
}

// parseWithEnv parses args after applying CHIME_<FLAG_NAME> variables as
// defaults (--data-dir <- CHIME_DATA_DIR); flags on the command line win.
func parseWithEnv(fs *flag.FlagSet, args []string, env func(string) string) error {
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		name := "CHIME_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v := env(name); v != "" {
			if err := f.Value.Set(v); err != nil {
				errs = append(errs, fmt.Errorf("%s=%q: %w", name, v, err))
			}
		}
	})
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return fs.Parse(args)
}

// serveDebug serves net/http/pprof on addr, wrapped in guard, until the
// returned func is called.
func serveDebug(addr string, guard func(http.Handler) http.Handler, log *slog.Logger) (func(), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("serve: --debug-addr: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: guard(mux), ReadHeaderTimeout: 10 * time.Second, MaxHeaderBytes: maxHeaderBytes}
	go func() { _ = srv.Serve(ln) }()
	log.Info("debug server", "addr", ln.Addr().String())
	return func() { _ = srv.Close() }, nil
}
