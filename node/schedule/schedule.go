// Package schedule holds due-time arithmetic: when a task first fires, when it fires
// next, and how long a failed fire waits before its retry. It is pure (time
// comes in as values) except for a memo of parsed cron expressions.
//
// Instants are int64 Unix nanoseconds as in storage; 0 means "none".
// Periodic tasks are drift-free: the next due time is computed from the
// previous *logical* due time and the schedule, never from when a callback
// finished.
package schedule

import (
	"cmp"
	"container/list"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/chime-scheduler/chime/storage"
	"github.com/robfig/cron/v3"
)

// Errors of the schedule functions. Their text reaches API clients (through
// validate), so it carries no package prefix.
var (
	// errBadCron: the cron expression does not parse or is out of bounds.
	errBadCron = errors.New("invalid cron expression")
	// ErrBadTimezone: the timezone is not a loadable IANA name.
	ErrBadTimezone = errors.New("unknown timezone")
	// errNoOccurrence: the schedule has no occurrence in the searched window
	// (the cron library searches 5 years ahead), or the next one would not fit
	// in int64 nanoseconds.
	errNoOccurrence = errors.New("schedule has no occurrence within 5 years")
)

// Bounds of a schedule (API.md "Task (request body)").
const (
	// MaxSpan bounds how far ahead anything may be scheduled (delay_ms,
	// due_at, start_at, every_ms, @every): 10 years of 365.25 days. It keeps
	// every instant far inside int64 nanoseconds (year 2262).
	MaxSpan   = 87660 * time.Hour
	MaxSpanMs = int64(MaxSpan / time.Millisecond)
	// MaxCronLen bounds a cron expression, MaxTimezoneLen a zone name.
	MaxCronLen     = 256
	MaxTimezoneLen = 64
)

// HasTZPrefix reports whether a cron expression names its own zone, which the
// cron library would honour and we do not (the timezone field does that).
func HasTZPrefix(expr string) bool {
	s := strings.TrimSpace(expr)
	return strings.HasPrefix(s, "TZ=") || strings.HasPrefix(s, "CRON_TZ=")
}

// cronParser accepts 5 fields, 6 with seconds first, and descriptors
// (@daily, @every 5s, …). A parser is an immutable options value.
var cronParser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// lastInstant is the last whole second representable as int64 Unix
// nanoseconds (year 2262).
var lastInstant = time.Unix(math.MaxInt64/int64(time.Second), 0)

// Compiled is a parsed cron expression and the zone it runs in.
type Compiled struct {
	sched cron.Schedule
	loc   *time.Location
}

// next returns the first occurrence strictly after ns, or 0 if there is none
// (within the cron library's 5-year search, and before year 2262).
func (c Compiled) next(ns int64) int64 {
	// The parsed schedule has Location == time.Local, which robfig/cron reads
	// as "the zone of the argument": passing the instant in c.loc makes the
	// expression run in c.loc whatever the machine's local zone is.
	t := c.sched.Next(time.Unix(0, ns).In(c.loc))
	if t.IsZero() || t.After(lastInstant) {
		return 0
	}
	return t.UnixNano()
}

// nextOf is nextFire under spec's DST policy, without the flag.
func (c Compiled) nextOf(spec *storage.Spec, ns int64) int64 {
	t, _ := c.nextFire(ns, spec.DSTGap, spec.DSTOverlap)
	return t
}

// FirstDue returns the first due instant of a new task created at now:
//   - once: Spec.DueAt (which may be in the past: the task fires at once);
//   - every: StartAt if set and not in the past, else now + every; a StartAt
//     in the past gives the first point of the grid StartAt + k·every that is
//     >= now, so creating a task never starts with a backlog of missed fires;
//   - cron: the first occurrence strictly after now (an occurrence exactly at
//     now does not count, matching the cron library's Next) and not before
//     StartAt, evaluated in the task's timezone under its DST policy
//     (dst.go). "@every d" with a StartAt
//     follows the every rule above with period d; without one it is the
//     cron library's now + d, in whole seconds.
//
// It fails for an invalid spec (bad cron or zone, every <= 0) and when the
// schedule has no occurrence (errNoOccurrence).
func FirstDue(spec *storage.Spec, now time.Time) (int64, error) {
	nowNs := now.UnixNano()
	switch spec.Kind {
	case storage.KindOnce:
		return spec.DueAt, nil
	case storage.KindEvery:
		every, err := everyNs(spec)
		if err != nil {
			return 0, err
		}
		return orNoOccurrence(gridFrom(spec.StartAt, nowNs, every))
	case storage.KindCron:
		c, err := Compile(spec.Cron, spec.Timezone)
		if err != nil {
			return 0, err
		}
		if d, ok := c.sched.(cron.ConstantDelaySchedule); ok && spec.StartAt != 0 {
			return orNoOccurrence(gridFrom(spec.StartAt, nowNs, int64(d.Delay)))
		}
		if next := c.nextOf(spec, max(nowNs, spec.StartAt-1)); next != 0 {
			return next, nil
		}
		return 0, errNoOccurrence
	}
	return 0, fmt.Errorf("task has unknown schedule kind %d", spec.Kind)
}

// gridFrom returns the first point of the grid start + k·every (k >= 0) at
// or after now, or now + every without a start (0). ok is false on overflow.
func gridFrom(start, now, every int64) (int64, bool) {
	switch {
	case start == 0:
		return addNs(now, every)
	case start >= now:
		return start, true
	}
	// ceil((now-start)/every); no overflow: 0 < now-start < now and every <= 10 years.
	return gridPoint(start, (now-start+every-1)/every, every)
}

// NextDue returns the occurrence that follows the logical due time after: for
// fixed rate after + every, for cron the schedule's next occurrence strictly
// after after (and not before StartAt) in the task's timezone under its DST
// policy (dst.go). It returns 0 when there is none: for one-shot tasks, for a
// spec that no longer compiles, on int64 overflow and when the cron has no
// occurrence within 5 years. Repeated calls from the previous result enumerate every occurrence,
// which is what misfire fire_all needs.
func NextDue(spec *storage.Spec, after int64) int64 {
	switch spec.Kind {
	case storage.KindEvery:
		every, err := everyNs(spec)
		if err != nil {
			return 0
		}
		next, _ := addNs(after, every)
		return next
	case storage.KindCron:
		c, err := Compile(spec.Cron, spec.Timezone)
		if err != nil {
			return 0
		}
		// "@every d" is fixed rate: after is on its grid (start_at + k·d, or
		// whole seconds without a start_at), and the library's Next would
		// round a sub-second grid down to the second.
		if d, ok := c.sched.(cron.ConstantDelaySchedule); ok && after >= spec.StartAt {
			next, _ := addNs(after, int64(d.Delay))
			return next
		}
		return c.nextOf(spec, max(after, spec.StartAt-1))
	}
	return 0
}

// FirstAfter returns the first occurrence strictly after now, for the misfire
// policies fire_once and skip. due is a known occurrence, normally the
// task's missed NextDue: fixed-rate schedules (every_ms, and cron's
// "@every d") stay on the grid due + k·period, so a misfire does not shift
// their phase. If due is 0 the grid starts at StartAt, or at now when that is
// unset too; if due is already after now it is the answer. Other cron
// schedules do not need due: the result is the next occurrence after now
// (and not before StartAt). It returns 0 for one-shot tasks and whenever
// NextDue would.
func FirstAfter(spec *storage.Spec, due, now int64) int64 {
	switch spec.Kind {
	case storage.KindEvery:
		every, err := everyNs(spec)
		if err != nil {
			return 0
		}
		return gridAfter(cmp.Or(due, spec.StartAt), now, every)
	case storage.KindCron:
		c, err := Compile(spec.Cron, spec.Timezone)
		if err != nil {
			return 0
		}
		if d, ok := c.sched.(cron.ConstantDelaySchedule); ok && cmp.Or(due, spec.StartAt) != 0 {
			return gridAfter(cmp.Or(due, spec.StartAt), now, int64(d.Delay))
		}
		return c.nextOf(spec, max(now, spec.StartAt-1))
	}
	return 0
}

// gridAfter returns the first point of the grid anchor + k·every (k >= 0)
// strictly after now, or now + every without an anchor (0); 0 on overflow.
func gridAfter(anchor, now, every int64) int64 {
	if anchor == 0 {
		next, _ := addNs(now, every)
		return next
	}
	if anchor > now {
		return anchor
	}
	next, _ := gridPoint(anchor, (now-anchor)/every+1, every)
	return next
}

// everyNs returns a fixed-rate task's period in nanoseconds.
func everyNs(spec *storage.Spec) (int64, error) {
	if spec.EveryMs <= 0 || spec.EveryMs > MaxSpanMs {
		return 0, fmt.Errorf("every_ms %d out of range", spec.EveryMs)
	}
	return spec.EveryMs * int64(time.Millisecond), nil
}

// addNs returns a+b for b > 0, or 0, false when the sum overflows int64.
func addNs(a, b int64) (int64, bool) {
	if a > math.MaxInt64-b {
		return 0, false
	}
	return a + b, true
}

// gridPoint returns start + k·every for k >= 0 and every > 0, or 0, false
// on overflow.
func gridPoint(start, k, every int64) (int64, bool) {
	if k > math.MaxInt64/every {
		return 0, false
	}
	return addNs(start, k*every)
}

// orNoOccurrence turns an overflowed instant into errNoOccurrence.
func orNoOccurrence(ns int64, ok bool) (int64, error) {
	if !ok {
		return 0, errNoOccurrence
	}
	return ns, nil
}

// Retry backoff (API.md "Callback"): 1 s, 2 s, 4 s … capped at 60 s, ±20 %
// jitter; a Retry-After from the receiver replaces it, capped at 1 hour.
const (
	backoffBase     = time.Second
	backoffCap      = 60 * time.Second
	backoffJitter   = 0.2
	retryAfterLimit = time.Hour
)

// Backoff returns the wait before retry number n (n = 1 is the first retry;
// n < 1 counts as 1). Without retryAfter it is min(2^(n-1) s, 60 s) scaled by
// a factor drawn uniformly from [0.8, 1.2) using rnd, so waits lie in
// [0.8 s, 72 s); the jitter applies at the cap too, so retries of many tasks
// failing together stay spread out. A nil rnd means no jitter. If retryAfter
// > 0 (the receiver's Retry-After) the wait is exactly retryAfter, capped at
// 1 hour. rnd is not safe for concurrent use; the caller owns it.
func Backoff(n int, retryAfter time.Duration, rnd *rand.Rand) time.Duration {
	if retryAfter > 0 {
		return min(retryAfter, retryAfterLimit)
	}
	d := backoffCap
	if n < 1 {
		n = 1
	}
	if n <= 7 { // 2^6 s = 64 s is already past the cap
		d = min(backoffBase<<(n-1), backoffCap)
	}
	if rnd != nil {
		d = time.Duration(float64(d) * (1 - backoffJitter + 2*backoffJitter*rnd.Float64()))
	}
	return d
}

// Compile returns the parsed form of a cron expression in timezone tz
// ("" = UTC), from the package's memo. Errors wrap errBadCron or
// ErrBadTimezone.
func Compile(expr, tz string) (Compiled, error) {
	return schedules.get(expr, tz)
}

// scheduleCacheSize bounds the memo of parsed cron expressions. A cluster
// typically has few distinct (cron, timezone) pairs; 4096 covers e.g. every
// minute-of-day for a couple of zones, at roughly 200 B an entry (< 1 MiB).
const scheduleCacheSize = 4096

// schedules memoizes Compile. It is package-level because it caches a
// pure function: results are identical with or without it, so it is not
// state that nodes sharing a process could observe.
var schedules = newScheduleCache(scheduleCacheSize)

// scheduleCache is a bounded LRU of parsed cron expressions keyed by
// (expression, timezone), plus the zones loaded so far. It is safe for
// concurrent use; parsing happens outside the lock, so two goroutines missing
// on the same key may both parse it (harmless: same result).
type scheduleCache struct {
	size int
	mu   struct {
		sync.Mutex
		entries map[scheduleKey]*list.Element // values are *scheduleEntry
		lru     list.List                     // front = most recently used
		zones   map[string]*time.Location     // cleared when it reaches size
	}
}

type scheduleKey struct{ expr, tz string }

type scheduleEntry struct {
	key scheduleKey
	val Compiled
}

// newScheduleCache returns an empty cache holding at most size schedules.
func newScheduleCache(size int) *scheduleCache {
	c := &scheduleCache{size: max(size, 1)}
	c.mu.entries = make(map[scheduleKey]*list.Element)
	c.mu.zones = make(map[string]*time.Location)
	return c
}

// get returns the compiled schedule for (expr, tz), parsing it on a miss.
// Failures are not cached. A hit costs a map lookup and a list move under
// the mutex.
func (c *scheduleCache) get(expr, tz string) (Compiled, error) {
	k := scheduleKey{expr, tz}
	c.mu.Lock()
	if el, ok := c.mu.entries[k]; ok {
		c.mu.lru.MoveToFront(el)
		v := el.Value.(*scheduleEntry).val
		c.mu.Unlock()
		return v, nil
	}
	loc, ok := c.mu.zones[tz]
	c.mu.Unlock()

	if !ok {
		var err error
		if loc, err = loadZone(tz); err != nil {
			return Compiled{}, err
		}
	}
	sched, err := parseCron(expr)
	if err != nil {
		return Compiled{}, err
	}
	v := Compiled{sched: sched, loc: loc}

	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.mu.zones) >= c.size {
		clear(c.mu.zones)
	}
	c.mu.zones[tz] = loc
	if el, ok := c.mu.entries[k]; ok { // another goroutine got here first
		c.mu.lru.MoveToFront(el)
		return el.Value.(*scheduleEntry).val, nil
	}
	c.mu.entries[k] = c.mu.lru.PushFront(&scheduleEntry{key: k, val: v})
	for c.mu.lru.Len() > c.size {
		c.evictOldestLocked()
	}
	return v, nil
}

// evictOldestLocked drops the least recently used entry. c.mu must be held.
func (c *scheduleCache) evictOldestLocked() {
	el := c.mu.lru.Back()
	c.mu.lru.Remove(el)
	delete(c.mu.entries, el.Value.(*scheduleEntry).key)
}

// len returns the number of cached schedules.
func (c *scheduleCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.lru.Len()
}

// loadZone loads an IANA zone; "" is UTC. "Local" is refused: a task's
// schedule must not depend on the machine that happens to own it.
func loadZone(tz string) (*time.Location, error) {
	if tz == "" {
		return time.UTC, nil
	}
	if tz == "Local" || len(tz) > MaxTimezoneLen {
		return nil, fmt.Errorf("%w %q", ErrBadTimezone, tz)
	}
	loc, err := time.LoadLocation(tz)
	if err != nil {
		return nil, fmt.Errorf("%w %q", ErrBadTimezone, tz)
	}
	return loc, nil
}

// parseCron parses expr with cronParser and bounds what the library accepts
// but we do not: TZ=/CRON_TZ= prefixes (the timezone field does that, and the
// library panics on a prefix without a following space) and @every periods
// longer than 10 years. @every periods below 1 s are rounded up to 1 s and
// sub-second parts dropped, as the library does.
func parseCron(expr string) (cron.Schedule, error) {
	if len(expr) > MaxCronLen {
		return nil, fmt.Errorf("%w: longer than %d bytes", errBadCron, MaxCronLen)
	}
	if HasTZPrefix(expr) {
		return nil, fmt.Errorf("%w %q: TZ= and CRON_TZ= prefixes are not supported; use the timezone field", errBadCron, expr)
	}
	sched, err := cronParser.Parse(strings.TrimSpace(expr))
	if err != nil {
		return nil, fmt.Errorf("%w %q: %v", errBadCron, expr, err)
	}
	if d, ok := sched.(cron.ConstantDelaySchedule); ok && d.Delay > MaxSpan {
		return nil, fmt.Errorf("%w %q: @every period longer than 10 years", errBadCron, expr)
	}
	return sched, nil
}
