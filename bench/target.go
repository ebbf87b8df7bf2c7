package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// chimePackage is what the harness builds when no binary is given.
const chimePackage = "github.com/chime-scheduler/chime/cmd/chime"

// TargetConfig says which node a workload runs against: a running one
// (URL) or one the harness starts and stops (Spawn).
type TargetConfig struct {
	// URL is the base URL of a running node, e.g. http://127.0.0.1:7070.
	// Exactly one of URL and Spawn must be set.
	URL string `json:"url,omitempty"`
	// Spawn starts `chime serve` on a free loopback port with a fresh
	// temporary data directory, waits for /readyz, and stops it with
	// SIGTERM at the end. Only a spawned (or PID-given) node reports CPU
	// and memory.
	Spawn bool `json:"spawn"`
	// ChimeBin is the chime binary to spawn. Empty builds ./cmd/chime
	// with `go build` into a temporary directory (the working directory
	// must be inside the module).
	ChimeBin string `json:"chime_bin,omitempty"`
	// ServeArgs are extra arguments for `chime serve`.
	ServeArgs []string `json:"serve_args,omitempty"`
	// Token is the API token for a URL target (Authorization: Bearer).
	// A spawned node runs without one.
	Token string `json:"-"`
	// PID is the process id of a URL target on this machine, so its CPU
	// and memory can be read from /proc. 0 = unknown.
	PID int `json:"pid,omitempty"`
	// DataDir is a URL target's data directory on this machine, for the
	// disk size. Empty = unknown.
	DataDir string `json:"data_dir,omitempty"`
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
}

func (c TargetConfig) validate() error {
	var errs []error
	switch {
	case c.Spawn && c.URL != "":
		errs = append(errs, errors.New("bench: give a target URL or spawn, not both"))
	case !c.Spawn && c.URL == "":
		errs = append(errs, errors.New("bench: give a target URL or spawn a node"))
	case c.URL != "":
		u, err := url.Parse(c.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("bench: target %q is not an http(s) URL", c.URL))
		}
	}
	if c.PID < 0 {
		errs = append(errs, fmt.Errorf("bench: pid %d < 0", c.PID))
	}
	return errors.Join(errs...)
}

// NodeStats describes the node under test as the run saw it.
type NodeStats struct {
	URL     string `json:"url"`
	Spawned bool   `json:"spawned"`
	Binary  string `json:"binary,omitempty"`
	PID     int    `json:"pid,omitempty"`
	// CPUSeconds is the node's CPU time (user + system) during the run;
	// 0 when it cannot be read (a remote target without PID).
	CPUSeconds float64 `json:"cpu_seconds"`
	// RSSBytes is the resident set at the end of the run, PeakRSSBytes
	// the process's peak (VmHWM).
	RSSBytes     int64 `json:"rss_bytes"`
	PeakRSSBytes int64 `json:"peak_rss_bytes"`
	// DiskBytes is the size of the data directory at the end, when known.
	DiskBytes int64 `json:"disk_bytes,omitempty"`
}

// target is a node under test. Methods are called from the workload's
// goroutine only.
type target struct {
	cfg     TargetConfig
	api     *apiClient
	tmp     string // temporary directory the target owns (spawn), removed by close
	bin     string
	dataDir string
	addr    string // host:port of a spawned node
	prog    Progress

	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd has been waited for
	log    *os.File      // the spawned node's stdout and stderr

	startCPU time.Duration
	lastCPU  time.Duration // CPU of previous incarnations (restarts)
}

// openTarget connects to or spawns the node, and returns once it answers
// /readyz. conns sizes the client's connection pool.
func openTarget(ctx context.Context, cfg TargetConfig, conns int, prog Progress) (*target, error) {
	t := &target{cfg: cfg, dataDir: cfg.DataDir, prog: prog}
	if !cfg.Spawn {
		t.api = newAPIClient(cfg.URL, cfg.Token, conns)
		if err := t.waitReady(ctx); err != nil {
			return nil, err
		}
		if s, ok := t.sample(); ok {
			t.startCPU = s.cpu
		}
		return t, nil
	}
	tmp, err := os.MkdirTemp("", "chime-bench-")
	if err != nil {
		return nil, fmt.Errorf("bench: temp dir: %w", err)
	}
	t.tmp = tmp
	t.dataDir = filepath.Join(tmp, "data")
	t.bin = cfg.ChimeBin
	if t.bin == "" {
		prog.logf("building %s", chimePackage)
		if t.bin, err = buildChime(ctx, tmp); err != nil {
			t.close()
			return nil, err
		}
	}
	if t.addr, err = freeLoopbackAddr(); err != nil {
		t.close()
		return nil, err
	}
	t.api = newAPIClient("http://"+t.addr, "", conns)
	if err := t.start(ctx); err != nil {
		t.close()
		return nil, err
	}
	return t, nil
}

// buildChime builds the chime command into dir and returns the binary.
func buildChime(ctx context.Context, dir string) (string, error) {
	bin := filepath.Join(dir, "chime")
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

// start launches the spawned node and waits for /readyz.
func (t *target) start(ctx context.Context) error {
	logf, err := os.OpenFile(filepath.Join(t.tmp, "node.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("bench: node log: %w", err)
	}
	args := append([]string{"serve", "--data-dir", t.dataDir, "--http-addr", t.addr}, t.cfg.ServeArgs...)
	// Not CommandContext: the node is stopped with SIGTERM by stop, never
	// killed because a context ended mid-measurement.
	cmd := exec.Command(t.bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = nodeEnv(os.Environ())
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		return fmt.Errorf("bench: start %s: %w", t.bin, err)
	}
	t.cmd, t.log, t.exited = cmd, logf, make(chan struct{})
	go func(exited chan struct{}) {
		_ = cmd.Wait() // the exit status is reported through stop's caller
		close(exited)
	}(t.exited)
	t.prog.logf("spawned chime serve pid %d on %s", cmd.Process.Pid, t.addr)
	if err := t.waitReady(ctx); err != nil {
		return fmt.Errorf("%w\n%s", err, t.logTail())
	}
	return nil
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

// waitReady polls /readyz until it answers 200.
func (t *target) waitReady(ctx context.Context) error {
	deadline := time.Now().Add(t.cfg.ReadyTimeout)
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	for {
		if t.api.ready(ctx) {
			return nil
		}
		if t.exited != nil {
			select {
			case <-t.exited:
				return fmt.Errorf("bench: chime serve exited before /readyz answered 200")
			default:
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("bench: %s/readyz did not answer 200 within %s", t.api.base, t.cfg.ReadyTimeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// pid returns the node's process id, 0 if unknown.
func (t *target) pid() int {
	if t.cmd != nil && t.cmd.Process != nil {
		return t.cmd.Process.Pid
	}
	return t.cfg.PID
}

// sample reads the node's CPU and memory; ok is false when that is not
// possible (remote target, or the process is gone).
func (t *target) sample() (procSample, bool) {
	pid := t.pid()
	if pid == 0 {
		return procSample{}, false
	}
	s, err := readProc(pid)
	if err != nil {
		return procSample{}, false
	}
	s.cpu += t.lastCPU
	return s, true
}

// stop sends SIGTERM to a spawned node and waits for it to exit, killing it
// after StopTimeout. It returns how long the exit took.
func (t *target) stop() (time.Duration, error) {
	if t.cmd == nil {
		return 0, nil
	}
	if s, ok := t.sample(); ok {
		t.lastCPU = s.cpu
	}
	start := time.Now()
	var err error
	if sigErr := t.cmd.Process.Signal(syscall.SIGTERM); sigErr != nil && !errors.Is(sigErr, os.ErrProcessDone) {
		err = fmt.Errorf("bench: SIGTERM chime serve: %w", sigErr)
	}
	timer := time.NewTimer(t.cfg.StopTimeout)
	defer timer.Stop()
	select {
	case <-t.exited:
	case <-timer.C:
		_ = t.cmd.Process.Kill() // it may have exited in between
		<-t.exited
		err = errors.Join(err, fmt.Errorf("bench: chime serve did not exit within %s of SIGTERM; killed", t.cfg.StopTimeout))
	}
	took := time.Since(start)
	if st := t.cmd.ProcessState; err == nil && st != nil && !st.Success() {
		err = fmt.Errorf("bench: chime serve exited with %s after SIGTERM\n%s", st, t.logTail())
	}
	_ = t.log.Close()
	t.cmd = nil
	return took, err
}

// restart stops a spawned node and starts it again on the same data
// directory and port. It returns the time SIGTERM took to exit the node and
// the time from exec until /readyz answered 200.
func (t *target) restart(ctx context.Context) (stopTook, readyTook time.Duration, err error) {
	if !t.cfg.Spawn {
		return 0, 0, errors.New("bench: restart needs a spawned node")
	}
	if stopTook, err = t.stop(); err != nil {
		return stopTook, 0, err
	}
	start := time.Now()
	if err := t.start(ctx); err != nil {
		return stopTook, 0, err
	}
	return stopTook, time.Since(start), nil
}

// logTail returns the last lines of a spawned node's log, for errors.
func (t *target) logTail() string {
	if t.tmp == "" {
		return ""
	}
	b, err := os.ReadFile(filepath.Join(t.tmp, "node.log"))
	if err != nil {
		return ""
	}
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return "node log (tail):\n" + string(b)
}

// stats describes the node now; call it before close.
func (t *target) stats() *NodeStats {
	ns := &NodeStats{URL: t.api.base, Spawned: t.cfg.Spawn, Binary: t.bin, PID: t.pid()}
	if s, ok := t.sample(); ok {
		ns.CPUSeconds = (s.cpu - t.startCPU).Seconds()
		ns.RSSBytes, ns.PeakRSSBytes = s.rss, s.peakRSS
	}
	if t.dataDir != "" {
		if n, err := dirSize(t.dataDir); err == nil {
			ns.DiskBytes = n
		}
	}
	return ns
}

// close stops a spawned node and removes the temporary directory. It
// returns the stop error, if any.
func (t *target) close() error {
	var err error
	if t.cmd != nil {
		_, err = t.stop()
	}
	if t.api != nil {
		t.api.close()
	}
	if t.tmp != "" {
		err = errors.Join(err, os.RemoveAll(t.tmp))
	}
	return err
}
