package schedule

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/chime-scheduler/chime/storage"

	_ "time/tzdata" // the zone tests must not depend on the machine's zoneinfo
)

// at parses an RFC 3339 instant into Unix nanoseconds.
func at(t testing.TB, s string) int64 {
	t.Helper()
	v, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatalf("bad instant %q: %v", s, err)
	}
	return v.UnixNano()
}

// instant renders Unix nanoseconds for test messages ("0" for none).
func instant(ns int64) string {
	if ns == 0 {
		return "0"
	}
	return time.Unix(0, ns).UTC().Format(time.RFC3339Nano)
}

func everySpec(everyMs int64, startAt int64) *storage.Spec {
	return &storage.Spec{Kind: storage.KindEvery, EveryMs: everyMs, StartAt: startAt}
}

func dstSpec(expr, tz string, gap storage.DSTGap, overlap storage.DSTOverlap) *storage.Spec {
	s := cronSpec(expr, tz, 0)
	s.DSTGap, s.DSTOverlap = gap, overlap
	return s
}

func cronSpec(expr, tz string, startAt int64) *storage.Spec {
	return &storage.Spec{Kind: storage.KindCron, Cron: expr, Timezone: tz, StartAt: startAt}
}

func TestFirstDue(t *testing.T) {
	tests := []struct {
		name    string
		spec    *storage.Spec
		now     string
		want    string // RFC 3339; ignored when wantErr is set
		wantErr error
	}{
		{name: "once is its due_at", spec: &storage.Spec{Kind: storage.KindOnce, DueAt: at(t, "2026-03-01T12:00:05Z")},
			now: "2026-03-01T12:00:00Z", want: "2026-03-01T12:00:05Z"},
		{name: "once in the past stays in the past", spec: &storage.Spec{Kind: storage.KindOnce, DueAt: at(t, "2026-03-01T11:00:00Z")},
			now: "2026-03-01T12:00:00Z", want: "2026-03-01T11:00:00Z"},
		{name: "every without start_at", spec: everySpec(1500, 0),
			now: "2026-03-01T12:00:00.25Z", want: "2026-03-01T12:00:01.75Z"},
		{name: "every with start_at ahead", spec: everySpec(60000, at(t, "2026-03-01T13:00:00Z")),
			now: "2026-03-01T12:00:00Z", want: "2026-03-01T13:00:00Z"},
		{name: "every with start_at now", spec: everySpec(60000, at(t, "2026-03-01T12:00:00Z")),
			now: "2026-03-01T12:00:00Z", want: "2026-03-01T12:00:00Z"},
		{name: "every with start_at past keeps the grid", spec: everySpec(15*60000, at(t, "2026-03-01T11:00:00Z")),
			now: "2026-03-01T12:07:00Z", want: "2026-03-01T12:15:00Z"},
		{name: "every with start_at past, now on the grid", spec: everySpec(15*60000, at(t, "2026-03-01T11:00:00Z")),
			now: "2026-03-01T12:00:00Z", want: "2026-03-01T12:00:00Z"},
		{name: "every with start_at 1ns past", spec: everySpec(100, at(t, "2026-03-01T11:59:59.999999999Z")),
			now: "2026-03-01T12:00:00Z", want: "2026-03-01T12:00:00.099999999Z"},
		{name: "cron 5 fields", spec: cronSpec("*/15 * * * *", "", 0),
			now: "2026-03-01T12:07:30Z", want: "2026-03-01T12:15:00Z"},
		{name: "cron occurrence exactly at now does not count", spec: cronSpec("*/15 * * * *", "", 0),
			now: "2026-03-01T12:15:00Z", want: "2026-03-01T12:30:00Z"},
		{name: "cron 1ns before an occurrence", spec: cronSpec("*/15 * * * *", "", 0),
			now: "2026-03-01T12:14:59.999999999Z", want: "2026-03-01T12:15:00Z"},
		{name: "cron 6 fields, seconds first", spec: cronSpec("30 * * * * *", "", 0),
			now: "2026-03-01T12:00:10Z", want: "2026-03-01T12:00:30Z"},
		{name: "cron names", spec: cronSpec("0 9 * * MON", "", 0), // 2026-03-01 is a Sunday
			now: "2026-03-01T12:00:00Z", want: "2026-03-02T09:00:00Z"},
		{name: "@daily", spec: cronSpec("@daily", "", 0),
			now: "2026-03-01T12:00:00Z", want: "2026-03-02T00:00:00Z"},
		{name: "@hourly", spec: cronSpec("@hourly", "", 0),
			now: "2026-03-01T12:00:00Z", want: "2026-03-01T13:00:00Z"},
		{name: "@monthly", spec: cronSpec("@monthly", "", 0),
			now: "2026-03-01T12:00:00Z", want: "2026-04-01T00:00:00Z"},
		{name: "@every counts from now, whole seconds", spec: cronSpec("@every 5s", "", 0),
			now: "2026-03-01T12:00:00.5Z", want: "2026-03-01T12:00:05Z"},
		{name: "@every below 1s rounds up to 1s", spec: cronSpec("@every 100ms", "", 0),
			now: "2026-03-01T12:00:00Z", want: "2026-03-01T12:00:01Z"},
		{name: "@every with start_at ahead starts at start_at", spec: cronSpec("@every 1h", "", at(t, "2026-03-01T13:00:00Z")),
			now: "2026-03-01T12:00:00Z", want: "2026-03-01T13:00:00Z"},
		{name: "@every with start_at past keeps the grid", spec: cronSpec("@every 1h", "", at(t, "2026-03-01T10:30:00Z")),
			now: "2026-03-01T12:00:00Z", want: "2026-03-01T12:30:00Z"},
		{name: "cron with start_at ahead", spec: cronSpec("0 * * * *", "", at(t, "2026-03-01T15:30:00Z")),
			now: "2026-03-01T12:00:00Z", want: "2026-03-01T16:00:00Z"},
		{name: "cron with start_at on an occurrence includes it", spec: cronSpec("0 * * * *", "", at(t, "2026-03-01T16:00:00Z")),
			now: "2026-03-01T12:00:00Z", want: "2026-03-01T16:00:00Z"},
		{name: "cron with start_at past is ignored", spec: cronSpec("0 * * * *", "", at(t, "2026-01-01T00:00:00Z")),
			now: "2026-03-01T12:00:00Z", want: "2026-03-01T13:00:00Z"},
		{name: "cron in a timezone", spec: cronSpec("0 9 * * *", "Europe/Berlin", 0), // CET = UTC+1
			now: "2026-03-01T12:00:00Z", want: "2026-03-02T08:00:00Z"},
		{name: "cron explicit UTC", spec: cronSpec("0 9 * * *", "UTC", 0),
			now: "2026-03-01T12:00:00Z", want: "2026-03-02T09:00:00Z"},
		{name: "leap day", spec: cronSpec("0 0 29 2 *", "", 0),
			now: "2026-03-01T12:00:00Z", want: "2028-02-29T00:00:00Z"},

		{name: "cron never matches", spec: cronSpec("0 0 30 2 *", "", 0), now: "2026-03-01T12:00:00Z", wantErr: errNoOccurrence},
		{name: "cron invalid", spec: cronSpec("0 0 *", "", 0), now: "2026-03-01T12:00:00Z", wantErr: errBadCron},
		{name: "timezone invalid", spec: cronSpec("@daily", "Nowhere/City", 0), now: "2026-03-01T12:00:00Z", wantErr: ErrBadTimezone},
		{name: "every overflows int64", spec: everySpec(MaxSpanMs, 0), now: "2262-01-01T00:00:00Z", wantErr: errNoOccurrence},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			now := time.Unix(0, at(t, tt.now))
			got, err := FirstDue(tt.spec, now)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Errorf("FirstDue(%+v, %s) = %s, %v; want error %v", tt.spec, tt.now, instant(got), err, tt.wantErr)
				}
				return
			}
			if err != nil || got != at(t, tt.want) {
				t.Errorf("FirstDue(%+v, %s) = %s, %v; want %s", tt.spec, tt.now, instant(got), err, tt.want)
			}
		})
	}
	t.Run("unknown kind", func(t *testing.T) {
		if got, err := FirstDue(&storage.Spec{}, time.Unix(0, 1)); err == nil {
			t.Errorf("FirstDue(kind 0) = %d, nil; want an error", got)
		}
	})
}

func TestNextDue(t *testing.T) {
	tests := []struct {
		name  string
		spec  *storage.Spec
		after string
		want  string // RFC 3339, or "0" for none
	}{
		{"once has no next", &storage.Spec{Kind: storage.KindOnce, DueAt: 1}, "2026-03-01T12:00:00Z", "0"},
		{"every adds the period to the logical due", everySpec(250, 0), "2026-03-01T12:00:00.1Z", "2026-03-01T12:00:00.35Z"},
		{"every ignores start_at after it", everySpec(60000, at(t, "2026-03-01T00:00:00Z")), "2026-03-01T12:00:00Z", "2026-03-01T12:01:00Z"},
		{"every with a corrupt period", everySpec(0, 0), "2026-03-01T12:00:00Z", "0"},
		{"cron 5 fields", cronSpec("0 */2 * * *", "", 0), "2026-03-01T12:00:00Z", "2026-03-01T14:00:00Z"},
		{"cron 6 fields", cronSpec("*/10 * * * * *", "", 0), "2026-03-01T12:00:50Z", "2026-03-01T12:01:00Z"},
		{"@weekly", cronSpec("@weekly", "", 0), "2026-03-01T00:00:00Z", "2026-03-08T00:00:00Z"},
		{"@yearly", cronSpec("@yearly", "", 0), "2026-03-01T00:00:00Z", "2027-01-01T00:00:00Z"},
		{"@every is relative to the logical due", cronSpec("@every 1m30s", "", 0), "2026-03-01T12:00:00Z", "2026-03-01T12:01:30Z"},
		// With a start_at the grid is start_at + k·period to the nanosecond:
		// the cron library's Next would round to the whole second.
		{"@every keeps a sub-second start_at grid", cronSpec("@every 1s", "", at(t, "2026-03-01T12:00:00.014Z")), "2026-03-01T12:00:00.014Z", "2026-03-01T12:00:01.014Z"},
		{"cron respects start_at", cronSpec("@hourly", "", at(t, "2026-03-02T00:00:00Z")), "2026-03-01T12:00:00Z", "2026-03-02T00:00:00Z"},
		{"cron that no longer parses", cronSpec("bogus", "", 0), "2026-03-01T12:00:00Z", "0"},
		{"cron with an unknown zone", cronSpec("@daily", "Nowhere/City", 0), "2026-03-01T12:00:00Z", "0"},

		// 09:00 in Berlin is 08:00Z in winter (CET, UTC+1) and 07:00Z in
		// summer (CEST, UTC+2); the clocks change on 2026-03-29 and 2026-10-25.
		{"Berlin 09:00 into summer time", cronSpec("0 9 * * *", "Europe/Berlin", 0), "2026-03-28T08:00:00Z", "2026-03-29T07:00:00Z"},
		{"Berlin 09:00 in summer time", cronSpec("0 9 * * *", "Europe/Berlin", 0), "2026-03-29T07:00:00Z", "2026-03-30T07:00:00Z"},
		{"Berlin 09:00 back to winter time", cronSpec("0 9 * * *", "Europe/Berlin", 0), "2026-10-24T07:00:00Z", "2026-10-25T08:00:00Z"},

		// New York springs forward on 2026-03-08: 02:00 EST jumps to 03:00 EDT,
		// so 02:30 does not exist that day. The default gap policy "shift"
		// fires at the end of the gap, 03:00 EDT (07:00Z); "skip" (what
		// robfig/cron did on its own, and Chime before the dst field) goes on
		// to 02:30 EDT on the 9th.
		{"New York 02:30 shifted on spring-forward day", cronSpec("30 2 * * *", "America/New_York", 0), "2026-03-07T07:30:00Z", "2026-03-08T07:00:00Z"},
		{"New York 02:30 skipped on spring-forward day", dstSpec("30 2 * * *", "America/New_York", storage.DSTGapSkip, 0), "2026-03-07T07:30:00Z", "2026-03-09T06:30:00Z"},
		// New York falls back on 2026-11-01: 01:00-02:00 happens twice (EDT,
		// then EST). The default overlap policy "first" fires at 01:30 EDT
		// (05:30Z) only; "both" (robfig/cron's own behaviour) fires at 01:30
		// EST (06:30Z) too.
		{"New York 01:30 first on fall-back day", cronSpec("30 1 * * *", "America/New_York", 0), "2026-10-31T05:30:00Z", "2026-11-01T05:30:00Z"},
		{"New York 01:30 once on fall-back day", cronSpec("30 1 * * *", "America/New_York", 0), "2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"},
		{"New York 01:30 again on fall-back day (both)", dstSpec("30 1 * * *", "America/New_York", 0, storage.DSTOverlapBoth), "2026-11-01T05:30:00Z", "2026-11-01T06:30:00Z"},
		{"New York 01:30 after fall-back day", cronSpec("30 1 * * *", "America/New_York", 0), "2026-11-01T06:30:00Z", "2026-11-02T06:30:00Z"},
		// A fixed-rate task is immune to DST: every_ms counts real time.
		{"every across Berlin DST", everySpec(24*3600*1000, 0), "2026-03-28T08:00:00Z", "2026-03-29T08:00:00Z"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := NextDue(tt.spec, at(t, tt.after))
			if instant(got) != tt.want && !(tt.want != "0" && got == at(t, tt.want)) {
				t.Errorf("NextDue(%+v, %s) = %s, want %s", tt.spec, tt.after, instant(got), tt.want)
			}
		})
	}
	t.Run("every near the end of int64", func(t *testing.T) {
		if got := NextDue(everySpec(1000, 0), math.MaxInt64-10); got != 0 {
			t.Errorf("NextDue(every 1s, MaxInt64-10) = %d, want 0", got)
		}
	})
}

// Repeated NextDue calls from the logical due stay on the schedule however
// late each fire completes: the result never depends on completion time.
func TestNextDueIsDriftFree(t *testing.T) {
	tests := []struct {
		name string
		spec *storage.Spec
		from string
		n    int
		want string
	}{
		{"every 100ms, 1000 fires", everySpec(100, 0), "2026-03-01T12:00:00.05Z", 1000, "2026-03-01T12:01:40.05Z"},
		{"every 7s, 10000 fires", everySpec(7000, 0), "2026-03-01T12:00:00Z", 10000, "2026-03-02T07:26:40Z"},
		{"@every 7s, 10000 fires", cronSpec("@every 7s", "", 0), "2026-03-01T12:00:00Z", 10000, "2026-03-02T07:26:40Z"},
		{"@every 2s from a sub-second start_at, 100 fires", cronSpec("@every 2s", "", at(t, "2026-03-01T12:00:00.5Z")), "2026-03-01T12:00:00.5Z", 100, "2026-03-01T12:03:20.5Z"},
		{"every minute by cron, 1440 fires", cronSpec("* * * * *", "Europe/Berlin", 0), "2026-03-29T00:00:00Z", 1440, "2026-03-30T00:00:00Z"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			due := at(t, tt.from)
			for range tt.n {
				due = NextDue(tt.spec, due)
			}
			if due != at(t, tt.want) {
				t.Errorf("%d × NextDue(%+v) from %s = %s, want %s", tt.n, tt.spec, tt.from, instant(due), tt.want)
			}
		})
	}
}

func TestFirstAfter(t *testing.T) {
	tests := []struct {
		name string
		spec *storage.Spec
		due  string // "" = 0
		now  string
		want string // "0" = none
	}{
		{"once has none", &storage.Spec{Kind: storage.KindOnce}, "2026-03-01T12:00:00Z", "2026-03-01T12:05:00Z", "0"},
		{"every keeps the phase of due", everySpec(60000, 0), "2026-03-01T12:00:10Z", "2026-03-01T12:05:30Z", "2026-03-01T12:06:10Z"},
		{"every with now on the grid is strictly after", everySpec(60000, 0), "2026-03-01T12:00:00Z", "2026-03-01T12:05:00Z", "2026-03-01T12:06:00Z"},
		{"every with due == now", everySpec(60000, 0), "2026-03-01T12:05:00Z", "2026-03-01T12:05:00Z", "2026-03-01T12:06:00Z"},
		{"every with due ahead returns due", everySpec(60000, 0), "2026-03-01T12:10:00Z", "2026-03-01T12:05:00Z", "2026-03-01T12:10:00Z"},
		{"every without due uses start_at", everySpec(60000, at(t, "2026-03-01T11:00:30Z")), "", "2026-03-01T12:05:00Z", "2026-03-01T12:05:30Z"},
		{"every without due or start_at", everySpec(60000, 0), "", "2026-03-01T12:05:00.5Z", "2026-03-01T12:06:00.5Z"},
		{"every after a year of downtime", everySpec(100, 0), "2025-03-01T12:00:00.01Z", "2026-03-01T12:00:00Z", "2026-03-01T12:00:00.01Z"},
		{"cron next after now", cronSpec("*/15 * * * *", "", 0), "2026-03-01T11:00:00Z", "2026-03-01T12:07:00Z", "2026-03-01T12:15:00Z"},
		{"cron with now on an occurrence", cronSpec("*/15 * * * *", "", 0), "2026-03-01T11:00:00Z", "2026-03-01T12:15:00Z", "2026-03-01T12:30:00Z"},
		{"cron not before start_at", cronSpec("*/15 * * * *", "", at(t, "2026-03-02T00:00:00Z")), "", "2026-03-01T12:07:00Z", "2026-03-02T00:00:00Z"},
		{"cron in a timezone", cronSpec("0 9 * * *", "Europe/Berlin", 0), "2026-03-27T08:00:00Z", "2026-03-29T12:00:00Z", "2026-03-30T07:00:00Z"},
		{"cron that no longer parses", cronSpec("bogus", "", 0), "", "2026-03-01T12:07:00Z", "0"},
		{"@every keeps the phase of due", cronSpec("@every 1m", "", 0), "2026-03-01T12:00:10Z", "2026-03-01T12:05:30Z", "2026-03-01T12:06:10Z"},
		{"@every without due uses start_at", cronSpec("@every 1m", "", at(t, "2026-03-01T11:00:30Z")), "", "2026-03-01T12:05:00Z", "2026-03-01T12:05:30Z"},
		{"@every without due or start_at", cronSpec("@every 1m", "", 0), "", "2026-03-01T12:05:00.5Z", "2026-03-01T12:06:00Z"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var due int64
			if tt.due != "" {
				due = at(t, tt.due)
			}
			got := FirstAfter(tt.spec, due, at(t, tt.now))
			if instant(got) != tt.want && !(tt.want != "0" && got == at(t, tt.want)) {
				t.Errorf("FirstAfter(%+v, %s, %s) = %s, want %s", tt.spec, tt.due, tt.now, instant(got), tt.want)
			}
		})
	}
	t.Run("every near the end of int64", func(t *testing.T) {
		if got := FirstAfter(everySpec(MaxSpanMs, 0), 1, math.MaxInt64-10); got != 0 {
			t.Errorf("FirstAfter(every 10y, 1, MaxInt64-10) = %d, want 0", got)
		}
	})
}

func TestBackoffWithoutJitter(t *testing.T) {
	tests := []struct {
		n          int
		retryAfter time.Duration
		want       time.Duration
	}{
		{-1, 0, time.Second},
		{0, 0, time.Second},
		{1, 0, time.Second},
		{2, 0, 2 * time.Second},
		{3, 0, 4 * time.Second},
		{6, 0, 32 * time.Second},
		{7, 0, 60 * time.Second},
		{8, 0, 60 * time.Second},
		{100, 0, 60 * time.Second},
		{math.MaxInt, 0, 60 * time.Second},
		{1, 5 * time.Second, 5 * time.Second},
		{9, 90 * time.Second, 90 * time.Second},
		{1, time.Hour, time.Hour},
		{1, 2 * time.Hour, time.Hour},
		{3, -time.Second, 4 * time.Second},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("n=%d/retry_after=%v", tt.n, tt.retryAfter), func(t *testing.T) {
			if got := Backoff(tt.n, tt.retryAfter, nil); got != tt.want {
				t.Errorf("Backoff(%d, %v, nil) = %v, want %v", tt.n, tt.retryAfter, got, tt.want)
			}
		})
	}
}

func TestBackoffJitter(t *testing.T) {
	const seed1, seed2 = 1, 2
	t.Logf("seed (%d, %d)", seed1, seed2)
	rnd := rand.New(rand.NewPCG(seed1, seed2))
	for n := 1; n <= 9; n++ {
		base := Backoff(n, 0, nil)
		lo, hi := base*8/10, base*12/10
		gotMin, gotMax := time.Duration(math.MaxInt64), time.Duration(0)
		for range 1000 {
			d := Backoff(n, 0, rnd)
			if d < lo || d >= hi {
				t.Fatalf("Backoff(%d) = %v, want in [%v, %v)", n, d, lo, hi)
			}
			gotMin, gotMax = min(gotMin, d), max(gotMax, d)
		}
		// 1000 uniform draws cover both ends of the ±20 % band.
		if gotMin > base*82/100 || gotMax < base*118/100 {
			t.Errorf("Backoff(%d) over 1000 draws spans [%v, %v], want close to [%v, %v)", n, gotMin, gotMax, lo, hi)
		}
	}
	t.Run("retry_after is not jittered", func(t *testing.T) {
		if got := Backoff(2, 3*time.Second, rnd); got != 3*time.Second {
			t.Errorf("Backoff(2, 3s, rnd) = %v, want 3s", got)
		}
	})
	t.Run("same seed same waits", func(t *testing.T) {
		a, b := rand.New(rand.NewPCG(7, 7)), rand.New(rand.NewPCG(7, 7))
		for n := 1; n < 20; n++ {
			if x, y := Backoff(n, 0, a), Backoff(n, 0, b); x != y {
				t.Fatalf("Backoff(%d) with equal seeds = %v and %v", n, x, y)
			}
		}
	})
}

func TestParseCron(t *testing.T) {
	tests := []struct {
		expr string
		ok   bool
	}{
		{"* * * * *", true},
		{"0 9 * * MON-FRI", true},
		{"0 0 1 JAN,JUL *", true},
		{"*/5 * * * * *", true},
		{"0 30 9 ? * *", true},
		{" 0 9 * * * ", true},
		{"@yearly", true},
		{"@annually", true},
		{"@monthly", true},
		{"@weekly", true},
		{"@daily", true},
		{"@midnight", true},
		{"@hourly", true},
		{"@every 1h30m", true},
		{"@daily ", true},
		{"@every 87660h", true},
		{"", false},
		{"* * * *", false},
		{"0 0 0 * * * *", false},
		{"60 * * * * *", false},
		{"* 24 * * *", false},
		{"5-1 * * * *", false},
		{"*/0 * * * *", false},
		{"1-2-3 * * * *", false},
		{"@every", false},
		{"@every 1 h", false},
		{"@every 87661h", false},
		{"TZ=UTC", false},
		{"CRON_TZ=Europe/Berlin 0 9 * * *", false},
		{"TZ=", false},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			_, err := parseCron(tt.expr)
			if (err == nil) != tt.ok {
				t.Errorf("parseCron(%q) error = %v, want ok %v", tt.expr, err, tt.ok)
			}
			if err != nil && !errors.Is(err, errBadCron) {
				t.Errorf("parseCron(%q) error = %v, want it to wrap errBadCron", tt.expr, err)
			}
		})
	}
}

func TestScheduleCache(t *testing.T) {
	t.Run("evicts the least recently used", func(t *testing.T) {
		c := newScheduleCache(2)
		for _, expr := range []string{"@daily", "@hourly", "@daily", "@weekly"} { // touching @daily makes @hourly the oldest
			if _, err := c.get(expr, ""); err != nil {
				t.Fatal(err)
			}
		}
		if n := c.len(); n != 2 {
			t.Errorf("len() = %d, want 2", n)
		}
		for expr, want := range map[string]bool{"@daily": true, "@hourly": false, "@weekly": true} {
			c.mu.Lock()
			_, got := c.mu.entries[scheduleKey{expr, ""}]
			c.mu.Unlock()
			if got != want {
				t.Errorf("cached(%q) = %v, want %v", expr, got, want)
			}
		}
	})
	t.Run("timezone is part of the key", func(t *testing.T) {
		c := newScheduleCache(4)
		utc, err := c.get("0 9 * * *", "")
		if err != nil {
			t.Fatal(err)
		}
		ber, err := c.get("0 9 * * *", "Europe/Berlin")
		if err != nil {
			t.Fatal(err)
		}
		from := at(t, "2026-03-01T00:00:00Z")
		if u, b := utc.next(from), ber.next(from); u == b {
			t.Errorf("next in UTC and Berlin are both %s; want them to differ", instant(u))
		}
	})
	t.Run("failures are not cached", func(t *testing.T) {
		c := newScheduleCache(4)
		for _, k := range []scheduleKey{{"bogus", ""}, {"@daily", "Nowhere/City"}} {
			if _, err := c.get(k.expr, k.tz); err == nil {
				t.Errorf("get(%q, %q) = nil error, want one", k.expr, k.tz)
			}
		}
		if n := c.len(); n != 0 {
			t.Errorf("len() = %d after failures, want 0", n)
		}
	})
	t.Run("concurrent use", func(t *testing.T) {
		c := newScheduleCache(5) // smaller than the key set: hits, misses and evictions race
		exprs := make([]string, 20)
		for i := range exprs {
			exprs[i] = fmt.Sprintf("%d * * * *", i)
		}
		from := at(t, "2026-03-01T12:30:00Z")
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for g := range 8 {
			wg.Go(func() {
				for i := range 200 {
					minute := (g + i) % len(exprs)
					s, err := c.get(exprs[minute], "")
					if err != nil {
						errs <- err
						return
					}
					want := from + int64(30+minute)*int64(time.Minute) // "m * * * *" after 12:30 is 13:m
					if got := s.next(from); got != want {
						errs <- fmt.Errorf("get(%q).next(%s) = %s, want %s", exprs[minute], instant(from), instant(got), instant(want))
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		if n := c.len(); n > 5 {
			t.Errorf("len() = %d, want at most 5", n)
		}
	})
}

func BenchmarkNextDue(b *testing.B) {
	after := at(b, "2026-03-01T12:00:00Z")
	for _, bc := range []struct {
		name string
		spec *storage.Spec
	}{
		{"kind=every", everySpec(1000, 0)},
		{"kind=cron", cronSpec("*/5 * * * *", "", 0)},
		{"kind=cron-tz", cronSpec("0 9 * * MON-FRI", "Europe/Berlin", 0)},
		{"kind=cron-every", cronSpec("@every 5s", "", 0)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if NextDue(bc.spec, after) == 0 {
					b.Fatal("no next due")
				}
			}
		})
	}
	// Baseline: what every call would cost without the cache.
	b.Run("kind=cron-tz-uncached", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			loc, err := loadZone("Europe/Berlin")
			if err != nil {
				b.Fatal(err)
			}
			s, err := parseCron("0 9 * * MON-FRI")
			if err != nil {
				b.Fatal(err)
			}
			if (Compiled{s, loc}).next(after) == 0 {
				b.Fatal("no next due")
			}
		}
	})
}
