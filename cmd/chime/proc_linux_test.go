package main

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// childProcAttr makes the kernel SIGKILL a chime child when the test
// binary dies (a panic, a -timeout), so no `chime serve` outlives the
// test. Pdeathsig follows the thread that started the child; the Go
// runtime only ends a thread whose goroutine exits while locked to it,
// which nothing in these tests does.
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// callbackSenders maps the client port of every open loopback TCP
// connection to serverPort that a child process of the test holds to that
// child's name (its --name, or "pid N"). It reads the sockets' inodes from
// /proc/net/tcp, then the children's descriptors: one pass for all
// connections, a few milliseconds.
func callbackSenders(serverPort int) map[int]string {
	inodes := map[string]int{} // "socket:[inode]" -> client port
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		for local, inode := range socketsTo(table, serverPort) {
			inodes["socket:["+inode+"]"] = local
		}
	}
	out := map[int]string{}
	if len(inodes) == 0 {
		return out
	}
	for _, pid := range childPIDs() {
		dir := "/proc/" + pid + "/fd/"
		fds, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		name := ""
		for _, fd := range fds {
			l, err := os.Readlink(dir + fd.Name())
			if err != nil {
				continue
			}
			if port, ok := inodes[l]; ok {
				if name == "" {
					name = procName(pid)
				}
				out[port] = name
			}
		}
	}
	return out
}

// childPIDs lists the test process's children (each thread lists those
// it started).
func childPIDs() []string {
	files, _ := filepath.Glob("/proc/self/task/*/children")
	var out []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err == nil {
			out = append(out, strings.Fields(string(b))...)
		}
	}
	return out
}

// procName returns the --name argument of process pid, or "pid N".
func procName(pid string) string {
	b, _ := os.ReadFile("/proc/" + pid + "/cmdline")
	if name := argAfter(strings.Split(string(b), "\x00"), "--name"); name != "" {
		return name
	}
	return "pid " + pid
}

// socketsTo returns the local port and inode of every socket in table
// (/proc/net/tcp format) connected to remote port remote.
func socketsTo(table string, remote int) map[int]string {
	f, err := os.Open(table)
	if err != nil {
		return nil
	}
	defer f.Close()
	port := func(addr string) int { // "0100007F:1F90" -> 8080
		_, hex, ok := strings.Cut(addr, ":")
		if !ok {
			return -1
		}
		v, err := strconv.ParseUint(hex, 16, 16)
		if err != nil {
			return -1
		}
		return int(v)
	}
	out := map[int]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode ...
		fs := strings.Fields(sc.Text())
		if len(fs) < 10 || fs[0] == "sl" {
			continue
		}
		if port(fs[2]) == remote && fs[9] != "0" {
			out[port(fs[1])] = fs[9]
		}
	}
	return out
}
