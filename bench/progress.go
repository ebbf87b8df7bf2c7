package bench

import (
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/schollz/progressbar/v3"
)

// Progress says where a run reports what it is doing. The zero value
// reports nothing.
type Progress struct {
	// W receives progress; nil discards it.
	W io.Writer
	// Bars draws progress bars (for a terminal). Otherwise a phase prints a
	// plain line when it starts, at every 10 % and when it ends, which
	// stays readable in CI logs.
	Bars bool
}

// logf prints one plain line.
func (p Progress) logf(format string, args ...any) {
	if p.W == nil {
		return
	}
	fmt.Fprintf(p.W, format+"\n", args...)
}

// phase tracks one long step of a run (creating tasks, waiting for fires).
// Add is safe for concurrent use.
type phase struct {
	p       Progress
	name    string
	total   int64
	start   time.Time
	done    atomic.Int64
	nextPct atomic.Int64 // next multiple of 10 % to print (plain mode)
	bar     *progressbar.ProgressBar
	endOnce sync.Once
	mu      sync.Mutex // serializes plain-line writes to p.W from concurrent Adds
}

// startPhase begins a phase of total units.
func (p Progress) startPhase(name string, total int64) *phase {
	ph := &phase{p: p, name: name, total: max(total, 1), start: time.Now()}
	ph.nextPct.Store(10)
	if p.W == nil {
		return ph
	}
	if p.Bars {
		ph.bar = progressbar.NewOptions64(ph.total,
			progressbar.OptionSetWriter(p.W),
			progressbar.OptionSetDescription(name),
			progressbar.OptionSetWidth(30),
			progressbar.OptionShowCount(),
			progressbar.OptionShowIts(),
			progressbar.OptionSetItsString("ops"),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionOnCompletion(func() { fmt.Fprintln(p.W) }),
		)
		return ph
	}
	p.logf("%s: %d to go", name, total)
	return ph
}

// Add records n more units done.
func (ph *phase) Add(n int64) {
	done := ph.done.Add(n)
	if ph.bar != nil {
		_ = ph.bar.Add64(n) // only fails past max, which is harmless here
		return
	}
	if ph.p.W == nil {
		return
	}
	for {
		next := ph.nextPct.Load()
		if next > 90 || done*100 < next*ph.total {
			return
		}
		if ph.nextPct.CompareAndSwap(next, next+10) {
			ph.mu.Lock()
			ph.p.logf("%s: %d%% (%d/%d, %s)", ph.name, next, done, ph.total, time.Since(ph.start).Round(time.Millisecond))
			ph.mu.Unlock()
		}
	}
}

// Set records that done units are done in total (for polled counters).
func (ph *phase) Set(done int64) {
	if d := done - ph.done.Load(); d > 0 {
		ph.Add(d)
	}
}

// End finishes the phase and prints its rate. It is idempotent.
func (ph *phase) End() {
	ph.endOnce.Do(func() {
		if ph.bar != nil {
			_ = ph.bar.Exit()
		}
		d := time.Since(ph.start)
		n := ph.done.Load()
		ph.mu.Lock()
		defer ph.mu.Unlock()
		ph.p.logf("%s: done %d in %s (%s/s)", ph.name, n, d.Round(time.Millisecond), fmtNum(float64(n)/d.Seconds()))
	})
}
