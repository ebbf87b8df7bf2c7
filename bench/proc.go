package bench

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat.
// It is 100 on every Linux configuration Go supports; reading it properly
// needs sysconf(_SC_CLK_TCK), i.e. cgo.
const clockTicks = 100

// procSample is a process's resource use at one instant, from /proc.
type procSample struct {
	cpu     time.Duration // user + system CPU since the process started
	rss     int64         // resident set size, bytes (VmRSS)
	peakRSS int64         // peak resident set size, bytes (VmHWM)
}

// readProc samples process pid. CPU has a resolution of 10 ms, so callers
// measure phases that take seconds and divide by many operations.
func readProc(pid int) (procSample, error) {
	var s procSample
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return s, fmt.Errorf("bench: read cpu of pid %d: %w", pid, err)
	}
	// The command name (field 2) is in parentheses and may contain spaces
	// or parentheses; the fixed fields start after the last ')'.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return s, fmt.Errorf("bench: malformed /proc/%d/stat", pid)
	}
	f := bytes.Fields(stat[i+1:])
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return s, fmt.Errorf("bench: short /proc/%d/stat", pid)
	}
	utime, err1 := strconv.ParseInt(string(f[11]), 10, 64)
	stime, err2 := strconv.ParseInt(string(f[12]), 10, 64)
	if err1 != nil || err2 != nil {
		return s, fmt.Errorf("bench: malformed cpu times in /proc/%d/stat", pid)
	}
	s.cpu = time.Duration(utime+stime) * time.Second / clockTicks

	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return s, fmt.Errorf("bench: read memory of pid %d: %w", pid, err)
	}
	for line := range bytes.SplitSeq(status, []byte("\n")) {
		switch {
		case bytes.HasPrefix(line, []byte("VmRSS:")):
			s.rss = parseKB(line)
		case bytes.HasPrefix(line, []byte("VmHWM:")):
			s.peakRSS = parseKB(line)
		}
	}
	return s, nil
}

// ctxSwitches returns the context switches (voluntary and not) of every
// thread process pid has now, from /proc/<pid>/task/*/status: how often
// it was put on a CPU and taken off, which for an idle process is about
// how often it woke up. Threads that exited are not counted (a Go
// process keeps its threads). false if pid's threads cannot be read.
func ctxSwitches(pid int) (int64, bool) {
	paths, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/status", pid))
	if err != nil || len(paths) == 0 {
		return 0, false
	}
	var n int64
	for _, p := range paths {
		status, err := os.ReadFile(p)
		if err != nil {
			continue // the thread exited
		}
		for line := range bytes.SplitSeq(status, []byte("\n")) {
			if bytes.HasPrefix(line, []byte("voluntary_ctxt_switches:")) || bytes.HasPrefix(line, []byte("nonvoluntary_ctxt_switches:")) {
				if _, v, ok := bytes.Cut(line, []byte(":")); ok {
					c, err := strconv.ParseInt(string(bytes.TrimSpace(v)), 10, 64)
					if err == nil {
						n += c
					}
				}
			}
		}
	}
	return n, true
}

// procRunning reports whether process pid exists and is not a zombie.
func procRunning(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 || i+2 >= len(stat) {
		return false
	}
	state := stat[i+2]
	return state != 'Z' && state != 'X'
}

// parseKB parses a /proc/<pid>/status line like "VmRSS:   1234 kB" into
// bytes; 0 when malformed.
func parseKB(line []byte) int64 {
	f := bytes.Fields(line)
	if len(f) < 2 {
		return 0
	}
	v, err := strconv.ParseInt(string(f[1]), 10, 64)
	if err != nil {
		return 0
	}
	return v << 10
}

// selfCPU returns this process's CPU time so far; 0 if /proc is missing.
func selfCPU() time.Duration {
	s, err := readProc(os.Getpid())
	if err != nil {
		return 0
	}
	return s.cpu
}

// dirSize returns the total size in bytes of the regular files under dir.
func dirSize(dir string) (int64, error) {
	var total int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			info, err := d.Info()
			if err != nil {
				return err
			}
			total += info.Size()
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("bench: size of %s: %w", dir, err)
	}
	return total, nil
}

// perOp returns d in microseconds per operation, or 0 when n is 0.
func perOp(d time.Duration, n int64) float64 {
	if n <= 0 {
		return 0
	}
	return float64(d.Nanoseconds()) / 1e3 / float64(n)
}

// perSecond returns n per second over d, or 0 when d is not positive.
func perSecond(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}
