package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestClusterScript drives scripts/cluster.sh through a node's life: up 3,
// `chime cluster status` against n1, kill 2, start 2, down --wipe. The nodes
// are real `chime serve` processes on loopback; t.Cleanup SIGKILLs any node
// the script left behind, found by its pid file.
func TestClusterScript(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node cluster of processes")
	}
	parallelProcs(t, 3)
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("scripts/cluster.sh needs bash")
	}
	scriptPath, err := filepath.Abs(filepath.Join("..", "..", "scripts", "cluster.sh"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	httpBase := freePortRun(t, 3, false, nil)
	gossipBase := freePortRun(t, 3, true, []int{httpBase, httpBase + 1, httpBase + 2})
	t.Cleanup(func() { killClusterNodes(t, dir) })

	env := []string{
		"CHIME_CLUSTER_DIR=" + dir,
		"CHIME_BASE_PORT=" + strconv.Itoa(httpBase),
		"CHIME_GOSSIP_BASE_PORT=" + strconv.Itoa(gossipBase),
	}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CHIME_") { // no token, data dir or serve args from the caller
			env = append(env, kv)
		}
	}
	sh := func(timeout time.Duration, args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, "bash", append([]string{scriptPath}, args...)...)
		cmd.Env = env
		cmd.WaitDelay = 10 * time.Second
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("cluster.sh %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
		}
		return stdout.String()
	}
	nodeLine := func(i int) string {
		return fmt.Sprintf("n%d http://127.0.0.1:%d 127.0.0.1:%d", i, httpBase+i-1, gossipBase+i-1)
	}
	n1 := fmt.Sprintf("http://127.0.0.1:%d", httpBase)

	// The build is part of up; on a cold cache it takes a while on 2 cores.
	out := sh(5*time.Minute, "up", "3")
	if want := nodeLine(1) + "\n" + nodeLine(2) + "\n" + nodeLine(3) + "\n"; out != want {
		t.Fatalf("cluster.sh up 3 printed\n%s\nwant\n%s", out, want)
	}
	waitForMembers(t, n1, 3)
	// A local cluster is secure by default: the script made a secret and a
	// gossip key on first use, readable by the owner only, and the nodes
	// (which refuse to run a cluster without them) took them.
	for name, valid := range map[string]func(string) bool{
		"cluster-secret": func(s string) bool { b, err := hex.DecodeString(s); return err == nil && len(b) == 32 },
		"gossip-key":     func(s string) bool { b, err := base64.StdEncoding.DecodeString(s); return err == nil && len(b) == 32 },
	} {
		p := filepath.Join(dir, "secrets", name)
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v, want 0600", p, fi.Mode().Perm())
		}
		b, _ := os.ReadFile(p)
		if !valid(strings.TrimSpace(string(b))) {
			t.Errorf("%s holds %q", p, b)
		}
	}

	pid2 := readPid(t, dir, 2)
	sh(time.Minute, "kill", "2")
	if isClusterNode(pid2, dir) {
		t.Fatalf("n2 (pid %d) still runs after cluster.sh kill 2", pid2)
	}
	status := sh(time.Minute, "status")
	for i, want := range []string{"alive", "dead", "alive"} {
		if f := statusFields(t, status, i+1); f[3] != want {
			t.Errorf("cluster.sh status: n%d is %s, want %s\n%s", i+1, f[3], want, status)
		}
	}
	if !strings.Contains(status, "NAME") || !strings.Contains(status, "self: n1") {
		t.Errorf("cluster.sh status does not end with chime cluster status:\n%s", status)
	}

	if out := sh(3*time.Minute, "start", "2"); out != nodeLine(2)+"\n" {
		t.Fatalf("cluster.sh start 2 printed %q, want %q", out, nodeLine(2)+"\n")
	}
	if pid := readPid(t, dir, 2); pid == pid2 || !isClusterNode(pid, dir) {
		t.Fatalf("after cluster.sh start 2: pid %d (before the kill: %d) is not a new running node", pid, pid2)
	}
	waitForMembers(t, n1, 3)

	pids := []int{readPid(t, dir, 1), readPid(t, dir, 2), readPid(t, dir, 3)}
	if out := sh(2*time.Minute, "down", "--wipe"); !strings.HasPrefix(out, "stopped n1 n2 n3\n") {
		t.Errorf("cluster.sh down --wipe printed %q, want it to start with \"stopped n1 n2 n3\"", out)
	}
	for i, pid := range pids {
		if isClusterNode(pid, dir) {
			t.Errorf("n%d (pid %d) still runs after cluster.sh down", i+1, pid)
		}
	}
	for i := 1; i <= 3; i++ {
		if _, err := os.Stat(filepath.Join(dir, fmt.Sprintf("n%d", i))); !os.IsNotExist(err) {
			t.Errorf("after down --wipe, n%d's directory: %v, want it gone", i, err)
		}
	}
}

// waitForMembers polls `chime cluster status --json` at addr until it lists
// n members, each alive, active and owning slots, which together own every
// slot; it fails after 90 s with the last answer. Joining and the handover of
// slots take a few gossip rounds after /readyz.
func waitForMembers(t *testing.T, addr string, n int) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	var last string
	for {
		var stdout, stderr bytes.Buffer
		err := run(t.Context(), []string{"cluster", "status", "--json", "--addr", addr}, &stdout, &stderr, func(string) string { return "" })
		last = fmt.Sprintf("err %v\n%s%s", err, stdout.String(), stderr.String())
		if err == nil && membersSettled(stdout.Bytes(), n) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("chime cluster status --addr %s: no %d active members owning every slot within 90s; last answer:\n%s", addr, n, last)
		}
		time.Sleep(250 * time.Millisecond)
	}
	// The table form shows the same members.
	var stdout, stderr bytes.Buffer
	if err := run(t.Context(), []string{"cluster", "status", "--addr", addr}, &stdout, &stderr, func(string) string { return "" }); err != nil {
		t.Fatalf("chime cluster status: %v\n%s", err, stderr.String())
	}
	lines := strings.Split(strings.TrimSuffix(stdout.String(), "\n"), "\n")
	if len(lines) != n+2 || !strings.HasPrefix(lines[0], "self: n1 ") {
		t.Fatalf("chime cluster status printed %d lines, want a header, column names and %d members:\n%s", len(lines), n, stdout.String())
	}
	for i, line := range lines[2:] {
		if f := strings.Fields(line); f[0] != fmt.Sprintf("n%d", i+1) || f[1] != "active" {
			t.Errorf("chime cluster status row %d = %q, want n%d active", i+1, line, i+1)
		}
	}
}

// membersSettled reports whether a GET /v1/cluster answer lists n members,
// all alive and active and owning slots, that together own all 16384 slots.
func membersSettled(body []byte, n int) bool {
	var view struct {
		Members []struct {
			State      string `json:"state"`
			Status     string `json:"status"`
			SlotsOwned int    `json:"slots_owned"`
		} `json:"members"`
	}
	if json.Unmarshal(body, &view) != nil || len(view.Members) != n {
		return false
	}
	total := 0
	for _, m := range view.Members {
		if m.State != "active" || m.Status != "alive" || m.SlotsOwned <= 0 {
			return false
		}
		total += m.SlotsOwned
	}
	return total == 16384
}

// statusFields returns the fields of node i's line in cluster.sh status:
// index, name, pid, alive/dead, ready, URL.
func statusFields(t *testing.T, status string, i int) []string {
	t.Helper()
	for line := range strings.SplitSeq(status, "\n") {
		if f := strings.Fields(line); len(f) >= 5 && f[0] == strconv.Itoa(i) && f[1] == fmt.Sprintf("n%d", i) {
			return f
		}
	}
	t.Fatalf("no line for n%d in cluster.sh status:\n%s", i, status)
	return nil
}

// readPid reads node i's pid file.
func readPid(t *testing.T, dir string, i int) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("n%d", i), "pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("n%d's pid file: %v", i, err)
	}
	return pid
}

// isClusterNode reports whether pid runs a `chime serve` whose command line
// names a data directory under dir. A zombie has an empty command line.
func isClusterNode(pid int, dir string) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return false
	}
	cmdline := string(bytes.ReplaceAll(b, []byte{0}, []byte{' '}))
	return strings.Contains(cmdline, "chime") && strings.Contains(cmdline, " serve ") && strings.Contains(cmdline, dir+string(filepath.Separator))
}

// killClusterNodes SIGKILLs every node under dir that still runs, by pid
// file, and logs the nodes' logs when the test failed.
func killClusterNodes(t *testing.T, dir string) {
	t.Helper()
	nodes, _ := filepath.Glob(filepath.Join(dir, "n*"))
	for _, nd := range nodes {
		if b, err := os.ReadFile(filepath.Join(nd, "pid")); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && isClusterNode(pid, dir) {
				t.Logf("killing leftover node %s (pid %d)", filepath.Base(nd), pid)
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		if t.Failed() {
			if log, err := os.ReadFile(filepath.Join(nd, "log")); err == nil {
				t.Logf("%s/log:\n%s", filepath.Base(nd), log)
			}
		}
	}
}

// freePortRun returns a port p such that p … p+n-1 are free on 127.0.0.1
// for TCP (and UDP too when udp is set, as gossip uses both) and none of
// them is in avoid. It looks below the kernel's ephemeral range: a port
// handed out by listening on :0 is an ephemeral one, which an outgoing
// connection of a running node may take while the test has n2 down, and
// n2 then cannot restart. The ports are only known to have been free a
// moment ago; a clash makes a node fail with "address in use".
func freePortRun(t *testing.T, n int, udp bool, avoid []int) int {
	t.Helper()
	const low = 20000
	high := ephemeralLow() - n
	for range 200 {
		base := low + rand.IntN(max(high-low, 1))
		free := true
		for p := base; p < base+n && free; p++ {
			free = !slices.Contains(avoid, p) && portFree(p, udp)
		}
		if free {
			return base
		}
	}
	t.Fatalf("no %d consecutive free loopback ports in [%d, %d)", n, low, high+n)
	return 0
}

// ephemeralLow is the first port of the kernel's ephemeral range, 32768
// when /proc does not say.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 32768
	}
	if p, err := strconv.Atoi(f[0]); err == nil && p > 21000 {
		return p
	}
	return 32768
}

// portFree reports whether 127.0.0.1:p can be bound for TCP, and for UDP
// when udp is set.
func portFree(p int, udp bool) bool {
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(p))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return false
	}
	ln.Close()
	if udp {
		pc, err := net.ListenPacket("udp", addr)
		if err != nil {
			return false
		}
		pc.Close()
	}
	return true
}
