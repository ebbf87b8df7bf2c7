package dispatch

import (
	"testing"
	"time"
)

// TestBreakerSteps drives one host's circuit through a script of results
// and questions on a fake clock.
func TestBreakerSteps(t *testing.T) {
	const host = "http://h:80"
	t0 := time.Unix(1_000_000, 0)
	type step struct {
		at     time.Duration // since t0
		op     string        // "ok", "fail" (Record), "ask" (Allow)
		id     int           // attempt id (task "t<id>")
		n      int           // repeat the op n times (0: once)
		change CircuitChange // Record's answer
		allow  bool          // Allow's answer
		retry  time.Duration // Allow's retry when it holds, since t0
		state  CircuitState  // the state after the step
	}
	id := func(i int) AttemptID { return AttemptID{Task: "t", Seq: uint64(i), Attempt: 1} }
	cases := []struct {
		name  string
		steps []step
	}{
		{"below min attempts stays closed", []step{
			{op: "fail", n: 19, state: CircuitClosed},
			{op: "ask", allow: true, state: CircuitClosed},
		}},
		{"min attempts all failed opens", []step{
			{op: "fail", n: 19},
			{op: "fail", change: CircuitOpened, state: CircuitOpen},
			{at: time.Second, op: "ask", id: 1, allow: false, retry: 5 * time.Second, state: CircuitOpen},
		}},
		{"half failed opens", []step{
			{op: "ok", n: 10},
			{op: "fail", n: 9},
			{op: "fail", change: CircuitOpened, state: CircuitOpen},
		}},
		{"less than half failed stays closed", []step{
			{op: "ok", n: 11},
			{op: "fail", n: 9, state: CircuitClosed},
			{op: "ask", allow: true},
		}},
		{"old attempts leave the window", []step{
			{op: "fail", n: 19},
			{at: 31 * time.Second, op: "fail", state: CircuitClosed},
			{at: 31 * time.Second, op: "fail", n: 18, state: CircuitClosed},
			{at: 31 * time.Second, op: "fail", change: CircuitOpened, state: CircuitOpen},
		}},
		{"probe schedule doubles to the cap, success closes", []step{
			{op: "fail", n: 20, state: CircuitOpen},
			{at: 4 * time.Second, op: "ask", id: 1, allow: false, retry: 5 * time.Second},
			{at: 5 * time.Second, op: "ask", id: 1, allow: true, state: CircuitHalfOpen},
			{at: 5 * time.Second, op: "ask", id: 2, allow: false, retry: 65 * time.Second},
			{at: 6 * time.Second, op: "fail", id: 2, state: CircuitHalfOpen},                         // not the probe
			{at: 6 * time.Second, op: "fail", id: 1, change: CircuitProbeFailed, state: CircuitOpen}, // the probe: next in 10 s
			{at: 15 * time.Second, op: "ask", id: 2, allow: false, retry: 16 * time.Second},
			{at: 16 * time.Second, op: "ask", id: 2, allow: true, state: CircuitHalfOpen},
			{at: 16 * time.Second, op: "fail", id: 2, change: CircuitProbeFailed, state: CircuitOpen}, // 20 s
			{at: 36 * time.Second, op: "ask", id: 3, allow: true},
			{at: 36 * time.Second, op: "fail", id: 3, change: CircuitProbeFailed}, // 40 s
			{at: 76 * time.Second, op: "ask", id: 4, allow: true},
			{at: 76 * time.Second, op: "fail", id: 4, change: CircuitProbeFailed}, // 60 s, the cap
			{at: 135 * time.Second, op: "ask", id: 5, allow: false, retry: 136 * time.Second},
			{at: 136 * time.Second, op: "ask", id: 5, allow: true},
			{at: 136 * time.Second, op: "fail", id: 5, change: CircuitProbeFailed}, // still 60 s
			{at: 196 * time.Second, op: "ask", id: 6, allow: true},
			{at: 197 * time.Second, op: "ok", id: 6, change: CircuitClosedAgain, state: CircuitClosed},
			{at: 197 * time.Second, op: "ask", id: 7, allow: true},
			// a fresh window: one more failure does not open it again
			{at: 197 * time.Second, op: "fail", id: 7, state: CircuitClosed},
		}},
		{"a late success while open closes", []step{
			{op: "fail", n: 20, state: CircuitOpen},
			{at: time.Second, op: "ok", change: CircuitClosedAgain, state: CircuitClosed},
		}},
		{"a lost probe is replaced after ProbeMax", []step{
			{op: "fail", n: 20},
			{at: 5 * time.Second, op: "ask", id: 1, allow: true, state: CircuitHalfOpen},
			{at: 5 * time.Second, op: "ask", id: 1, allow: true}, // the same attempt again
			{at: 64 * time.Second, op: "ask", id: 2, allow: false, retry: 65 * time.Second},
			{at: 65 * time.Second, op: "ask", id: 2, allow: true, state: CircuitHalfOpen},
			{at: 66 * time.Second, op: "fail", id: 1, state: CircuitHalfOpen}, // the old probe no longer counts
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := NewBreakers(BreakerConfig{})
			for i, s := range tc.steps {
				now := t0.Add(s.at)
				for range max(s.n, 1) {
					switch s.op {
					case "ok", "fail":
						if got := b.Record(host, id(s.id), now, s.op == "fail"); got != s.change && s.n == 0 {
							t.Fatalf("step %d: Record = %v, want %v", i, got, s.change)
						}
					case "ask":
						ok, retry := b.Allow(host, id(s.id), now)
						if ok != s.allow {
							t.Fatalf("step %d: Allow = %v, want %v", i, ok, s.allow)
						}
						if !ok && !retry.Equal(t0.Add(s.retry)) {
							t.Fatalf("step %d: retry at %v, want %v", i, retry.Sub(t0), s.retry)
						}
					}
				}
				if s.state != 0 || s.op != "ask" {
					got := CircuitClosed
					if c := b.c[host]; c != nil {
						got = c.state
					}
					if s.state != 0 && got != s.state {
						t.Fatalf("step %d: state %v, want %v", i, got, s.state)
					}
				}
			}
		})
	}
}

func TestBreakerOtherHostsUnaffected(t *testing.T) {
	b := NewBreakers(BreakerConfig{MinAttempts: 2})
	now := time.Unix(0, 0)
	b.Record("http://a:80", AttemptID{}, now, true)
	b.Record("http://a:80", AttemptID{}, now, true)
	if ok, _ := b.Allow("http://a:80", AttemptID{Task: "x"}, now); ok {
		t.Fatal("a: allowed while open")
	}
	if ok, _ := b.Allow("http://b:80", AttemptID{Task: "x"}, now); !ok {
		t.Fatal("b: held")
	}
	if !b.Gating("http://a:80") || b.Gating("http://b:80") {
		t.Fatal("Gating wrong")
	}
	b.SetHeld("http://a:80", 7)
	cs := b.Circuits()
	if len(cs) != 1 || cs[0].Host != "http://a:80" || cs[0].State != "open" || cs[0].Held != 7 {
		t.Fatalf("Circuits = %+v", cs)
	}
}

func TestIsOutage(t *testing.T) {
	cases := []struct {
		r    Result
		want bool
	}{
		{Result{Outcome: OutcomeFailure, Err: "dial tcp: connection refused"}, true},
		{Result{Outcome: OutcomeFailure, Err: "timeout after 5s"}, true},
		{Result{Outcome: OutcomeFailure, StatusCode: 500}, true},
		{Result{Outcome: OutcomeFailure, StatusCode: 503}, true},
		{Result{Outcome: OutcomeFailure, StatusCode: 429}, false},
		{Result{Outcome: OutcomeFailure, StatusCode: 400}, false},
		{Result{Outcome: OutcomeFailure, StatusCode: 302}, false},
		{Result{Outcome: OutcomeFailure, Err: Shutdown}, false},
		{Result{Outcome: OutcomeSuccess, StatusCode: 200}, false},
		{Result{Outcome: OutcomeGone, StatusCode: 410}, false},
		{Result{Outcome: OutcomeDenied, Err: "denied"}, false},
	}
	for _, c := range cases {
		if got := IsOutage(&c.r); got != c.want {
			t.Errorf("IsOutage(%+v) = %v, want %v", c.r, got, c.want)
		}
	}
}

func TestReleaseDelay(t *testing.T) {
	cases := []struct {
		i, first int
		want     time.Duration
	}{
		{0, 10, 0},
		{5, 10, 500 * time.Millisecond},
		{9, 10, 900 * time.Millisecond},
		{10, 10, time.Second},
		{29, 10, time.Second + 950*time.Millisecond},
		{30, 10, 2 * time.Second},
		{70, 10, 3 * time.Second},
		{0, 0, 0},
		{1, 1, time.Second},
	}
	for _, c := range cases {
		if got := ReleaseDelay(c.i, c.first); got != c.want {
			t.Errorf("ReleaseDelay(%d, %d) = %v, want %v", c.i, c.first, got, c.want)
		}
	}
}

func TestBreakerConfigValidate(t *testing.T) {
	if err := (BreakerConfig{}).Validate(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []BreakerConfig{
		{Window: -1}, {MinAttempts: -1}, {FailureRatio: 1.5}, {FailureRatio: -0.1},
		{Probe: -1}, {Probe: 2 * time.Minute, ProbeMax: time.Minute}, {RampStart: -1},
	} {
		if c.Validate() == nil {
			t.Errorf("%+v: no error", c)
		}
	}
}
