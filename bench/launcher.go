package bench

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// launcher starts and signals the processes of spawned nodes. Node i is
// 1-based. Both implementations use the layout of scripts/cluster.sh: node
// i is named ni, serves HTTP on 127.0.0.1:httpBase+i-1 and gossips on
// 127.0.0.1:gossipBase+i-1, joins every other node, and keeps its data and
// log in <dir>/ni/. Methods are called from the workload's goroutine only.
type launcher interface {
	// addrs returns node i's HTTP and gossip addresses (gossip "" for a
	// standalone node).
	addrs(i int) (httpAddr, gossipAddr string)
	// dataDir returns node i's data directory.
	dataDir(i int) string
	// up starts nodes 1..n of an n-node cluster. It may return before the
	// nodes are ready; the caller waits for /readyz.
	up(ctx context.Context, n int) error
	// start starts node i: again after stop, or i = size+1 as a new member
	// that joins all the others.
	start(ctx context.Context, i int) error
	// pid returns node i's process id, 0 when it does not run.
	pid(i int) int
	// alive reports whether node i's process runs.
	alive(i int) bool
	// kill SIGKILLs node i and returns once the process is gone.
	kill(i int) error
	// stop sends SIGTERM to node i and waits for it to exit, SIGKILLing it
	// after the stop timeout; an unclean exit is an error.
	stop(i int) error
	// logTail returns the end of node i's log, for errors.
	logTail(i int) string
	// binary returns the chime binary the nodes run and, when it is not
	// the one the caller asked for, a warning saying so.
	binary() (path, warning string)
	// close stops every node still running; it returns the first problem.
	close() error
}

// layout is where spawned nodes live: ports and directories.
type layout struct {
	dir        string // CHIME_CLUSTER_DIR: <dir>/ni/{data,log,pid}
	httpBase   int
	gossipBase int // 0: standalone nodes without gossip
}

func (l layout) addrs(i int) (string, string) {
	h := "127.0.0.1:" + strconv.Itoa(l.httpBase+i-1)
	if l.gossipBase == 0 {
		return h, ""
	}
	return h, "127.0.0.1:" + strconv.Itoa(l.gossipBase+i-1)
}

func (l layout) nodeDir(i int) string { return filepath.Join(l.dir, "n"+strconv.Itoa(i)) }
func (l layout) dataDir(i int) string { return filepath.Join(l.nodeDir(i), "data") }
func (l layout) logPath(i int) string { return filepath.Join(l.nodeDir(i), "log") }

func (l layout) logTail(i int) string {
	b, err := os.ReadFile(l.logPath(i))
	if err != nil {
		return ""
	}
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return fmt.Sprintf("n%d log (tail):\n%s", i, b)
}

// clusterSecrets makes the cluster secret and gossip key the nodes share
// (a node in a cluster refuses to start without them) on first use, in
// <dir>/secrets with mode 0600 as scripts/cluster.sh does, and returns the
// environment that hands them to a node as files.
func (l layout) clusterSecrets() ([]string, error) {
	dir := filepath.Join(l.dir, "secrets")
	secret, key := filepath.Join(dir, "cluster-secret"), filepath.Join(dir, "gossip-key")
	env := []string{"CHIME_CLUSTER_SECRET_FILE=" + secret, "CHIME_GOSSIP_KEY_FILE=" + key}
	if a, err1 := os.Stat(secret); err1 == nil && a.Size() > 0 {
		if b, err2 := os.Stat(key); err2 == nil && b.Size() > 0 {
			return env, nil
		}
	}
	b := make([]byte, 64)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("bench: cluster secrets: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("bench: cluster secrets: %w", err)
	}
	if err := os.WriteFile(secret, []byte(hex.EncodeToString(b[:32])), 0o600); err != nil {
		return nil, fmt.Errorf("bench: cluster secrets: %w", err)
	}
	if err := os.WriteFile(key, []byte(base64.StdEncoding.EncodeToString(b[32:])), 0o600); err != nil {
		return nil, fmt.Errorf("bench: cluster secrets: %w", err)
	}
	return env, nil
}

// serveArgs is the `chime serve` command line of node i of a size-node
// cluster: the one scripts/cluster.sh runs.
func (l layout) serveArgs(i, size int, extra []string) []string {
	httpAddr, gossipAddr := l.addrs(i)
	if l.gossipBase == 0 {
		return append([]string{"serve", "--data-dir", l.dataDir(i), "--http-addr", httpAddr}, extra...)
	}
	args := []string{"serve", "--name", "n" + strconv.Itoa(i), "--http-addr", httpAddr,
		"--gossip-addr", gossipAddr, "--data-dir", l.dataDir(i)}
	var join []string
	for j := 1; j <= size; j++ {
		if j != i {
			_, g := l.addrs(j)
			join = append(join, g)
		}
	}
	if len(join) > 0 {
		args = append(args, "--join", strings.Join(join, ","))
	}
	return append(args, extra...)
}

// newLauncher picks ports for capacity nodes and returns the launcher cfg
// asks for: the cluster script for a cluster when one is given, else Go.
func newLauncher(cfg TargetConfig, bin, tmp string, clustered bool, capacity int, prog Progress) (launcher, error) {
	l := layout{dir: filepath.Join(tmp, "cluster"), httpBase: cfg.BasePort, gossipBase: cfg.GossipBasePort}
	var err error
	if l.httpBase == 0 {
		if l.httpBase, err = freePortRun(capacity, false, 0, 0); err != nil {
			return nil, err
		}
	}
	if !clustered {
		l.gossipBase = 0
	} else if l.gossipBase == 0 {
		if l.gossipBase, err = freePortRun(capacity, true, l.httpBase, capacity); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(l.dir, 0o755); err != nil {
		return nil, fmt.Errorf("bench: cluster dir: %w", err)
	}
	if clustered && cfg.ClusterScript != "" {
		return newScriptLauncher(l, cfg, prog)
	}
	return &execLauncher{layout: l, bin: bin, extra: cfg.ServeArgs, stopTimeout: cfg.StopTimeout,
		procs: map[int]*execProc{}, prog: prog}, nil
}

// freePortRun returns p such that 127.0.0.1 ports p..p+k-1 were free a
// moment ago for TCP (and UDP too when udp is set: memberlist binds both),
// outside [avoid, avoid+avoidN). The run lies below the kernel's ephemeral
// ports (ip_local_port_range) where it can: a node started long after the
// pick (a join's, after a million creates) found its port taken by one of
// the bench's own outgoing connections, whose source ports come from that
// range (`bind: address already in use`, two joins of ~15 in a sitting).
func freePortRun(k int, udp bool, avoid, avoidN int) (int, error) {
	lo, hi := portRunLow, ephemeralLow()
	for range 200 {
		var base int
		if hi-lo > k {
			base = lo + mrand.IntN(hi-lo-k)
		} else {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				return 0, fmt.Errorf("bench: find free ports: %w", err)
			}
			base = ln.Addr().(*net.TCPAddr).Port
			_ = ln.Close()
		}
		if base+k-1 > 65535 || (base < avoid+avoidN && avoid < base+k) {
			continue
		}
		var hold []io.Closer
		ok := true
		for p := base; p < base+k && ok; p++ {
			addr := "127.0.0.1:" + strconv.Itoa(p)
			l, err := net.Listen("tcp", addr)
			if ok = err == nil; !ok {
				break
			}
			hold = append(hold, l)
			if udp {
				u, err := net.ListenPacket("udp", addr)
				if ok = err == nil; ok {
					hold = append(hold, u)
				}
			}
		}
		for _, h := range hold {
			_ = h.Close()
		}
		if ok {
			return base, nil
		}
	}
	return 0, fmt.Errorf("bench: no run of %d free ports found", k)
}

// portRunLow is the lowest port freePortRun picks: above the well-known
// and most registered services' ports.
const portRunLow = 20000

// ephemeralLow returns the first of the kernel's ephemeral ports (Linux:
// /proc/sys/net/ipv4/ip_local_port_range), 32768 when it cannot tell.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 32768
	}
	lo, err := strconv.Atoi(f[0])
	if err != nil || lo < 1024 {
		return 32768
	}
	return lo
}

// execLauncher starts the nodes as children of this process.
type execLauncher struct {
	layout
	bin         string
	extra       []string // ServeArgs
	stopTimeout time.Duration
	size        int
	procs       map[int]*execProc
	prog        Progress
}

type execProc struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed once cmd has been waited for
	log    *os.File
}

func (e *execLauncher) up(ctx context.Context, n int) error {
	e.size = n
	for i := 1; i <= n; i++ {
		if err := e.start(ctx, i); err != nil {
			return err
		}
	}
	return nil
}

func (e *execLauncher) start(_ context.Context, i int) error {
	if p := e.procs[i]; p != nil && e.alive(i) {
		return fmt.Errorf("bench: n%d is already running (pid %d)", i, p.cmd.Process.Pid)
	}
	e.size = max(e.size, i)
	if err := os.MkdirAll(e.dataDir(i), 0o755); err != nil {
		return fmt.Errorf("bench: data dir: %w", err)
	}
	logf, err := os.OpenFile(e.logPath(i), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("bench: node log: %w", err)
	}
	args := e.serveArgs(i, e.size, e.extra)
	fmt.Fprintf(logf, "=== %s bench: %s %s\n", time.Now().UTC().Format(time.RFC3339), e.bin, strings.Join(args, " "))
	// Not CommandContext: a node is stopped with SIGTERM by stop, never
	// killed because a context ended mid-measurement.
	cmd := exec.Command(e.bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = nodeEnv(os.Environ())
	if e.gossipBase != 0 {
		sec, err := e.clusterSecrets()
		if err != nil {
			_ = logf.Close()
			return err
		}
		cmd.Env = append(cmd.Env, sec...)
	}
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		return fmt.Errorf("bench: start %s: %w", e.bin, err)
	}
	p := &execProc{cmd: cmd, exited: make(chan struct{}), log: logf}
	go func() {
		_ = cmd.Wait() // the exit status is reported by stop
		close(p.exited)
	}()
	e.procs[i] = p
	httpAddr, _ := e.addrs(i)
	e.prog.logf("spawned chime serve pid %d on %s", cmd.Process.Pid, httpAddr)
	return nil
}

func (e *execLauncher) pid(i int) int {
	if p := e.procs[i]; p != nil && e.alive(i) {
		return p.cmd.Process.Pid
	}
	return 0
}

func (e *execLauncher) alive(i int) bool {
	p := e.procs[i]
	if p == nil {
		return false
	}
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

func (e *execLauncher) kill(i int) error {
	p := e.procs[i]
	if p == nil || !e.alive(i) {
		return fmt.Errorf("bench: n%d is not running", i)
	}
	if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("bench: SIGKILL n%d: %w", i, err)
	}
	<-p.exited
	_ = p.log.Close()
	return nil
}

func (e *execLauncher) stop(i int) error {
	p := e.procs[i]
	if p == nil || !e.alive(i) {
		return nil
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("bench: SIGTERM chime serve: %w", err)
	}
	return e.await(i, p)
}

// await waits for p to exit after SIGTERM, killing it after stopTimeout.
func (e *execLauncher) await(i int, p *execProc) error {
	defer p.log.Close()
	timer := time.NewTimer(e.stopTimeout)
	defer timer.Stop()
	select {
	case <-p.exited:
	case <-timer.C:
		_ = p.cmd.Process.Kill() // it may have exited in between
		<-p.exited
		return fmt.Errorf("bench: chime serve did not exit within %s of SIGTERM; killed", e.stopTimeout)
	}
	if st := p.cmd.ProcessState; st != nil && !st.Success() {
		return fmt.Errorf("bench: chime serve exited with %s after SIGTERM\n%s", st, e.logTail(i))
	}
	return nil
}

func (e *execLauncher) binary() (string, string) { return e.bin, "" }

// close sends SIGTERM to every running node at once, then waits for each.
func (e *execLauncher) close() error {
	var running []int
	for i, p := range e.procs {
		if e.alive(i) && p.cmd.Process.Signal(syscall.SIGTERM) == nil {
			running = append(running, i)
		}
	}
	var errs []error
	for _, i := range running {
		errs = append(errs, e.await(i, e.procs[i]))
	}
	for _, p := range e.procs {
		_ = p.log.Close() // a node that exited on its own; closing twice is harmless
	}
	return errors.Join(errs...)
}

// scriptLauncher drives scripts/cluster.sh. The nodes run detached from
// this process (setsid); they are found through the script's pid files, and
// a pid is signalled only while /proc shows it is that node's chime serve.
type scriptLauncher struct {
	layout
	script       string
	env          []string
	chimeBin     string // run by the script (CHIME_BIN); "" = the script builds
	timeout      time.Duration
	binaryChange string
	prog         Progress
}

func newScriptLauncher(l layout, cfg TargetConfig, prog Progress) (*scriptLauncher, error) {
	script, err := filepath.Abs(cfg.ClusterScript)
	if err != nil {
		return nil, fmt.Errorf("bench: cluster script: %w", err)
	}
	if _, err := os.Stat(script); err != nil {
		return nil, fmt.Errorf("bench: cluster script: %w", err)
	}
	env := append(nodeEnv(os.Environ()),
		"CHIME_CLUSTER_DIR="+l.dir,
		"CHIME_BASE_PORT="+strconv.Itoa(l.httpBase),
		"CHIME_GOSSIP_BASE_PORT="+strconv.Itoa(l.gossipBase),
		"CHIME_READY_TIMEOUT="+strconv.Itoa(int((cfg.ReadyTimeout+time.Second-1)/time.Second)))
	if len(cfg.ServeArgs) > 0 {
		env = append(env, "CHIME_SERVE_ARGS="+strings.Join(cfg.ServeArgs, " "))
	}
	if cfg.ChimeBin != "" {
		// The script runs this binary rather than building its checkout.
		bin, err := filepath.Abs(cfg.ChimeBin)
		if err != nil {
			return nil, fmt.Errorf("bench: chime binary: %w", err)
		}
		env = append(env, "CHIME_BIN="+bin)
	}
	// Else the script builds the binary in up; a cold build takes minutes
	// on a busy 2-core box.
	return &scriptLauncher{layout: l, script: script, env: env, chimeBin: cfg.ChimeBin,
		timeout: cfg.ReadyTimeout + cfg.StopTimeout + 5*time.Minute, prog: prog}, nil
}

// run runs the script with args and returns its stdout.
func (s *scriptLauncher) run(ctx context.Context, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", append([]string{s.script}, args...)...)
	cmd.Env = s.env
	cmd.WaitDelay = 10 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("bench: cluster.sh %s: %w\n%s", strings.Join(args, " "), err, bytes.TrimSpace(stderr.Bytes()))
	}
	return stdout.String(), nil
}

func (s *scriptLauncher) up(ctx context.Context, n int) error {
	bin := filepath.Join(s.dir, "bin", "chime")
	s.prog.logf("cluster.sh up %d (CHIME_CLUSTER_DIR=%s, ports %d/%d)", n, s.dir, s.httpBase, s.gossipBase)
	if _, err := s.run(ctx, "up", strconv.Itoa(n)); err != nil {
		return err
	}
	if s.chimeBin != "" && !sameFile(s.chimeBin, bin) {
		s.binaryChange = fmt.Sprintf("cluster.sh ran a binary other than %s (a script without CHIME_BIN?)", s.chimeBin)
	}
	return nil
}

func (s *scriptLauncher) start(ctx context.Context, i int) error {
	_, err := s.run(ctx, "start", strconv.Itoa(i))
	return err
}

func (s *scriptLauncher) stop(i int) error {
	_, err := s.run(context.Background(), "stop", strconv.Itoa(i))
	return err
}

// pid reads node i's pid file and checks that the process is that node.
func (s *scriptLauncher) pid(i int) int {
	b, err := os.ReadFile(filepath.Join(s.nodeDir(i), "pid"))
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 || !isServe(pid, s.dataDir(i)) {
		return 0
	}
	return pid
}

func (s *scriptLauncher) alive(i int) bool { return s.pid(i) != 0 }

func (s *scriptLauncher) kill(i int) error {
	pid := s.pid(i)
	if pid == 0 {
		return fmt.Errorf("bench: n%d is not running", i)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("bench: SIGKILL n%d (pid %d): %w", i, pid, err)
	}
	for deadline := time.Now().Add(5 * time.Second); s.pid(i) != 0; {
		if time.Now().After(deadline) {
			return fmt.Errorf("bench: n%d (pid %d) survived SIGKILL for 5 s", i, pid)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return nil
}

func (s *scriptLauncher) binary() (string, string) {
	return filepath.Join(s.dir, "bin", "chime"), s.binaryChange
}

// close runs `cluster.sh down`, then SIGKILLs any node it left running.
func (s *scriptLauncher) close() error {
	_, err := s.run(context.Background(), "down")
	entries, _ := os.ReadDir(s.dir)
	for _, e := range entries {
		i, convErr := strconv.Atoi(strings.TrimPrefix(e.Name(), "n"))
		if convErr != nil || !strings.HasPrefix(e.Name(), "n") {
			continue
		}
		if pid := s.pid(i); pid != 0 {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			err = errors.Join(err, fmt.Errorf("bench: n%d (pid %d) survived cluster.sh down; killed", i, pid))
		}
	}
	return err
}

// isServe reports whether pid runs `chime serve` on dataDir (and is not a
// zombie): the check scripts/cluster.sh makes before it signals a pid.
func isServe(pid int, dataDir string) bool {
	if !procRunning(pid) {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return false
	}
	args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
	serve, dir := false, false
	for k, a := range args {
		serve = serve || a == "serve"
		dir = dir || (a == "--data-dir" && k+1 < len(args) && args[k+1] == dataDir)
	}
	return serve && dir
}

// sameFile reports whether two files have the same contents.
func sameFile(a, b string) bool {
	sum := func(p string) ([32]byte, bool) {
		f, err := os.ReadFile(p)
		return sha256.Sum256(f), err == nil
	}
	x, okx := sum(a)
	y, oky := sum(b)
	return okx && oky && x == y
}
