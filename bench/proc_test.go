package bench

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestReadProcSelf(t *testing.T) {
	s, err := readProc(os.Getpid())
	if err != nil {
		t.Skipf("no /proc here: %v", err)
	}
	if s.cpu < 0 || s.rss <= 0 || s.peakRSS < s.rss {
		t.Errorf("readProc(self) = %+v, want cpu ≥ 0 and 0 < rss ≤ peak", s)
	}
	if _, err := readProc(-1); err == nil {
		t.Error("readProc(-1) = nil error")
	}
}

func TestParseKB(t *testing.T) {
	tests := []struct {
		line string
		want int64
	}{
		{"VmRSS:	    1234 kB", 1234 << 10},
		{"VmHWM: 0 kB", 0},
		{"VmRSS:", 0},
		{"VmRSS: lots kB", 0},
	}
	for _, tt := range tests {
		t.Run(tt.line, func(t *testing.T) {
			if got := parseKB([]byte(tt.line)); got != tt.want {
				t.Errorf("parseKB(%q) = %d, want %d", tt.line, got, tt.want)
			}
		})
	}
}

func TestDirSize(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "a", "b"), 0o755); err != nil {
		t.Fatal(err)
	}
	for path, n := range map[string]int{"x": 10, "a/y": 100, "a/b/z": 1000} {
		if err := os.WriteFile(filepath.Join(dir, path), make([]byte, n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := dirSize(dir)
	if err != nil || got != 1110 {
		t.Errorf("dirSize = %d, %v, want 1110, nil", got, err)
	}
	if _, err := dirSize(filepath.Join(dir, "missing")); err == nil {
		t.Error("dirSize(missing) = nil error")
	}
}

func TestRates(t *testing.T) {
	if got := perOp(3*time.Millisecond, 1000); got != 3 {
		t.Errorf("perOp(3ms, 1000) = %v µs, want 3", got)
	}
	if got := perOp(time.Second, 0); got != 0 {
		t.Errorf("perOp(1s, 0) = %v, want 0", got)
	}
	if got := perSecond(500, 250*time.Millisecond); got != 2000 {
		t.Errorf("perSecond(500, 250ms) = %v, want 2000", got)
	}
	if got := perSecond(5, 0); got != 0 {
		t.Errorf("perSecond(5, 0) = %v, want 0", got)
	}
}

// TestCtxSwitchesSelf: this process's context switches over all its
// threads are counted, and grow when it sleeps and wakes.
func TestCtxSwitchesSelf(t *testing.T) {
	before, ok := ctxSwitches(os.Getpid())
	if !ok {
		t.Skip("no /proc/self/task here")
	}
	for range 20 {
		time.Sleep(time.Millisecond) // each sleep parks a thread and wakes it
	}
	after, ok := ctxSwitches(os.Getpid())
	if !ok || before <= 0 || after < before+10 {
		t.Errorf("ctxSwitches: %d before, %d (%v) after 20 sleeps: want at least 10 more", before, after, ok)
	}
	if _, ok := ctxSwitches(-1); ok {
		t.Error("ctxSwitches(-1) read something")
	}
}
