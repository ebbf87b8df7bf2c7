// Package clock is the one source of time of node/ and its sub-packages:
// the node is given a Clock at construction and hands it to every part it
// builds. Only Real reads the time or waits on it directly
// (scripts/check-deps.sh enforces that).
//
// Tests fake time with testing/synctest, which fakes the time package
// itself inside a bubble, so Real is the clock there as well.
//
// Reading the clock and waiting go through it; arithmetic on times and
// durations (t.Add, t.Sub, time.Unix, …) stays with package time.
package clock

import "time"

// Clock reads the current time and waits. Timers and tickers are the
// time package's own, so that callers select on, Stop and Reset them as
// usual.
type Clock interface {
	// Now returns the current time (with its monotonic reading).
	Now() time.Time
	// Since returns the time elapsed since t.
	Since(t time.Time) time.Duration
	// NewTimer returns a timer that fires once after d.
	NewTimer(d time.Duration) *time.Timer
	// NewTicker returns a ticker that fires every d until stopped.
	NewTicker(d time.Duration) *time.Ticker
	// After delivers the time once after d.
	After(d time.Duration) <-chan time.Time
}

// Real is the system clock: the time package.
var Real Clock = system{}

type system struct{}

func (system) Now() time.Time                         { return time.Now() }
func (system) Since(t time.Time) time.Duration        { return time.Since(t) }
func (system) NewTimer(d time.Duration) *time.Timer   { return time.NewTimer(d) }
func (system) NewTicker(d time.Duration) *time.Ticker { return time.NewTicker(d) }
func (system) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Or returns c, or Real when c is nil.
func Or(c Clock) Clock {
	if c == nil {
		return Real
	}
	return c
}
