package dispatch

// The circuit breaker per callback host: the pure bookkeeping (rolling
// window counts, closed/open/half-open, the probe schedule, the release
// ramp). The node asks it before an attempt starts (Allow) and tells it
// every result (Record); holding and releasing fires is the node's.

import (
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"
)

// BreakerConfig tunes the circuit breaker per callback host. A zero field
// means its default (DefaultBreakerConfig); Validate rejects negative
// values.
type BreakerConfig struct {
	// Off disables the breaker: every due fire is attempted.
	Off bool
	// Window is the rolling window the attempts are counted over.
	// Default 30 s.
	Window time.Duration
	// MinAttempts is how many attempts the window must hold before the
	// circuit may open. Default 20.
	MinAttempts int
	// FailureRatio is the share of failed attempts (connection error,
	// timeout, 5xx) at which the circuit opens, in (0, 1]. Default 0.5.
	FailureRatio float64
	// Probe is the wait between an opening and the first probe; it
	// doubles after each failed probe, up to ProbeMax. Defaults 5 s, 60 s.
	Probe    time.Duration
	ProbeMax time.Duration
	// RampStart is how many held fires are released in the first second
	// after the circuit closes; the budget doubles every second after.
	// Default 10.
	RampStart int
}

// DefaultBreakerConfig returns the breaker's defaults.
func DefaultBreakerConfig() BreakerConfig {
	return BreakerConfig{Window: 30 * time.Second, MinAttempts: 20, FailureRatio: 0.5,
		Probe: 5 * time.Second, ProbeMax: 60 * time.Second, RampStart: 10}
}

// Validate reports every problem of c. Zero fields are valid (defaults).
func (c BreakerConfig) Validate() error {
	var errs []error
	if c.Window < 0 {
		errs = append(errs, errors.New("node: breaker: Window must be >= 0 (0 = default)"))
	}
	if c.MinAttempts < 0 {
		errs = append(errs, errors.New("node: breaker: MinAttempts must be >= 0 (0 = default)"))
	}
	if c.FailureRatio < 0 || c.FailureRatio > 1 || c.FailureRatio != c.FailureRatio {
		errs = append(errs, errors.New("node: breaker: FailureRatio must be in (0, 1] (0 = default)"))
	}
	if c.Probe < 0 || c.ProbeMax < 0 {
		errs = append(errs, errors.New("node: breaker: Probe and ProbeMax must be >= 0 (0 = default)"))
	}
	if c.RampStart < 0 {
		errs = append(errs, errors.New("node: breaker: RampStart must be >= 0 (0 = default)"))
	}
	d := c.withDefaults()
	if d.ProbeMax < d.Probe {
		errs = append(errs, fmt.Errorf("node: breaker: ProbeMax (%v) must be >= Probe (%v)", d.ProbeMax, d.Probe))
	}
	return errors.Join(errs...)
}

func (c BreakerConfig) withDefaults() BreakerConfig {
	def := DefaultBreakerConfig()
	if c.Window <= 0 {
		c.Window = def.Window
	}
	if c.MinAttempts <= 0 {
		c.MinAttempts = def.MinAttempts
	}
	if c.FailureRatio <= 0 || c.FailureRatio > 1 {
		c.FailureRatio = def.FailureRatio
	}
	if c.Probe <= 0 {
		c.Probe = def.Probe
	}
	if c.ProbeMax <= 0 {
		c.ProbeMax = max(def.ProbeMax, c.Probe)
	}
	if c.RampStart <= 0 {
		c.RampStart = def.RampStart
	}
	return c
}

// CircuitState is the state of one host's circuit.
type CircuitState uint8

// Circuit states.
const (
	CircuitClosed   CircuitState = iota // attempts go
	CircuitOpen                         // attempts are held until the next probe
	CircuitHalfOpen                     // one probe is in flight; the others are held
)

func (s CircuitState) String() string {
	switch s {
	case CircuitOpen:
		return "open"
	case CircuitHalfOpen:
		return "half_open"
	}
	return "closed"
}

// CircuitChange is what Record did to a circuit.
type CircuitChange uint8

// Circuit changes.
const (
	CircuitUnchanged CircuitChange = iota
	CircuitOpened
	CircuitClosedAgain // it was open or half-open and a success closed it
	CircuitProbeFailed // the probe failed: open again, the next probe later (NextProbe)
)

// IsOutage reports whether r counts as a failure for the breaker: a
// connection error or a timeout (no response) or a 5xx. A 4xx (429
// included: the receiver answers, and its Retry-After paces the retries)
// and a refused address do not.
func IsOutage(r *Result) bool {
	if r.Outcome != OutcomeFailure || r.Err == Shutdown {
		return false
	}
	return r.StatusCode == 0 || r.StatusCode >= 500
}

// AttemptID names one attempt of one fire, so the breaker knows its probe's
// result when it comes.
type AttemptID struct {
	Task    string
	Seq     uint64
	Attempt int
}

const (
	windowBuckets = 30   // the window is counted in this many buckets
	maxCircuits   = 4096 // hosts tracked; beyond, a new host is not (never held)
)

// Breakers keeps the circuit of every callback host (the key is
// HostKey's: scheme://host:port). Safe for concurrent use; the node calls
// Allow and Record from its writer goroutine, the stats readers Circuits.
type Breakers struct {
	cfg BreakerConfig
	mu  sync.Mutex
	c   map[string]*circuit
}

type bucket struct {
	idx                int64 // which bucket of time it counts (ns / bucket width)
	attempts, failures uint32
}

type circuit struct {
	state     CircuitState
	buckets   [windowBuckets]bucket
	openedAt  time.Time
	nextProbe time.Time     // open: when the next probe may go
	interval  time.Duration // the wait before nextProbe
	probe     AttemptID     // half-open: the probe in flight
	probeAt   time.Time     // half-open: when it started
	held      int           // the node's count of fires held, for display
}

// NewBreakers returns the breakers of cfg (zero fields: defaults).
func NewBreakers(cfg BreakerConfig) *Breakers {
	return &Breakers{cfg: cfg.withDefaults(), c: make(map[string]*circuit)}
}

// Config returns the configuration in force (defaults filled in).
func (b *Breakers) Config() BreakerConfig { return b.cfg }

// Gating reports whether host's circuit is not closed: only then may Allow
// say no.
func (b *Breakers) Gating(host string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	c := b.c[host]
	return c != nil && c.state != CircuitClosed
}

// Allow reports whether attempt id to host may start at now. A closed
// circuit lets everything go. An open one lets one attempt go once its
// probe time has come, as the probe (the circuit turns half-open), and
// holds the others; a half-open one holds all but its probe (a probe that
// has not reported for ProbeMax is given up and the next attempt probes).
// When it holds, retry is when the attempt may be asked about again.
func (b *Breakers) Allow(host string, id AttemptID, now time.Time) (ok bool, retry time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	c := b.c[host]
	if c == nil {
		return true, time.Time{}
	}
	switch c.state {
	case CircuitOpen:
		if now.Before(c.nextProbe) {
			return false, c.nextProbe
		}
		c.state, c.probe, c.probeAt = CircuitHalfOpen, id, now
		return true, time.Time{}
	case CircuitHalfOpen:
		if id == c.probe {
			return true, time.Time{} // the probe itself, started again (e.g. the dispatcher was full)
		}
		lost := c.probeAt.Add(b.cfg.ProbeMax)
		if now.Before(lost) {
			return false, lost
		}
		c.probe, c.probeAt = id, now
		return true, time.Time{}
	}
	return true, time.Time{}
}

// Record counts the result of attempt id to host, finished at now (failed:
// IsOutage), and returns what it did to the circuit. A closed circuit
// opens when its window holds at least MinAttempts attempts of which at
// least FailureRatio failed. An open or half-open circuit closes on any
// success; its probe's failure opens it again, the wait before the next
// probe doubled (up to ProbeMax).
func (b *Breakers) Record(host string, id AttemptID, now time.Time, failed bool) CircuitChange {
	b.mu.Lock()
	defer b.mu.Unlock()
	c := b.c[host]
	if c == nil {
		if len(b.c) >= maxCircuits && !b.evictLocked(now) {
			return CircuitUnchanged
		}
		c = &circuit{}
		b.c[host] = c
	}
	width := int64(b.cfg.Window / windowBuckets)
	if width <= 0 {
		width = 1
	}
	idx := now.UnixNano() / width
	bk := &c.buckets[idx%windowBuckets]
	if bk.idx != idx {
		*bk = bucket{idx: idx}
	}
	bk.attempts++
	if failed {
		bk.failures++
	}
	switch c.state {
	case CircuitClosed:
		if !failed {
			return CircuitUnchanged
		}
		var attempts, failures uint64
		for _, k := range c.buckets {
			if k.idx > idx-windowBuckets && k.idx <= idx {
				attempts += uint64(k.attempts)
				failures += uint64(k.failures)
			}
		}
		if attempts >= uint64(b.cfg.MinAttempts) && float64(failures) >= b.cfg.FailureRatio*float64(attempts) {
			c.state, c.openedAt, c.interval = CircuitOpen, now, b.cfg.Probe
			c.nextProbe = now.Add(c.interval)
			return CircuitOpened
		}
		return CircuitUnchanged
	default:
		if !failed {
			*c = circuit{} // closed, with a fresh window: the old failures are the outage's
			return CircuitClosedAgain
		}
		if c.state == CircuitHalfOpen && id == c.probe {
			c.interval = min(2*c.interval, b.cfg.ProbeMax)
			c.state, c.nextProbe, c.probe = CircuitOpen, now.Add(c.interval), AttemptID{}
			return CircuitProbeFailed
		}
		return CircuitUnchanged
	}
}

// evictLocked drops one closed circuit with nothing counted in its
// window, to make room; false if there is none.
func (b *Breakers) evictLocked(now time.Time) bool {
	width := max(int64(b.cfg.Window/windowBuckets), 1)
	cur := now.UnixNano() / width
	for h, c := range b.c {
		if c.state != CircuitClosed {
			continue
		}
		stale := true
		for _, k := range c.buckets {
			if k.idx > cur-windowBuckets && k.attempts > 0 {
				stale = false
				break
			}
		}
		if stale {
			delete(b.c, h)
			return true
		}
	}
	return false
}

// NextProbe returns when host's open circuit lets its next probe go (zero
// when it is not open).
func (b *Breakers) NextProbe(host string) time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	if c := b.c[host]; c != nil && c.state == CircuitOpen {
		return c.nextProbe
	}
	return time.Time{}
}

// SetHeld records how many fires the node holds for host (for Circuits).
func (b *Breakers) SetHeld(host string, n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if c := b.c[host]; c != nil {
		c.held = n
	}
}

// CircuitInfo is one host's circuit as /v1/stats and the dashboard show it.
type CircuitInfo struct {
	Host      string    `json:"host"`
	State     string    `json:"state"`
	Held      int       `json:"held"`
	OpenedAt  time.Time `json:"opened_at"`
	NextProbe time.Time `json:"next_probe_at,omitzero"`
}

// Circuits returns the circuits that are not closed, by host.
func (b *Breakers) Circuits() []CircuitInfo {
	b.mu.Lock()
	out := []CircuitInfo{}
	for h, c := range b.c {
		if c.state == CircuitClosed {
			continue
		}
		ci := CircuitInfo{Host: h, State: c.state.String(), Held: c.held, OpenedAt: c.openedAt.UTC()}
		if c.state == CircuitOpen {
			ci.NextProbe = c.nextProbe.UTC()
		}
		out = append(out, ci)
	}
	b.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Host < out[j].Host })
	return out
}

// ReleaseDelay is when the i-th (from 0) of the fires held while a circuit
// was open is released after it closes: first of them in the first second,
// twice as many in each second after, spread evenly inside each second.
func ReleaseDelay(i, first int) time.Duration {
	if first <= 0 {
		first = 1
	}
	budget, start := first, 0 // fires released in second k, and the first of them
	for k := 0; ; k++ {
		if i < start+budget {
			return time.Duration(k)*time.Second + time.Duration(i-start)*time.Second/time.Duration(budget)
		}
		start += budget
		if budget < 1<<30 {
			budget *= 2
		}
	}
}

// HostKey returns the breaker's (and the dispatcher's queue) key of a
// callback URL: "scheme://host:port" in lower case, default port filled in,
// userinfo dropped.
func HostKey(rawURL string) string {
	var kb [64]byte
	return string(hostKey(kb[:0], rawURL))
}
