package ownership

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/chime-scheduler/chime/node/clock"
)

// TestTickPeriod: the tick period is rounded down to a multiple of the
// beat, or to a divisor of a longer beat, never above the period asked
// for, and left alone without a beat.
func TestTickPeriod(t *testing.T) {
	ms := time.Millisecond
	for _, c := range []struct {
		name    string
		d, beat time.Duration
		want    time.Duration
	}{
		{"local profile: 133 ms on the 100 ms gossip beat", 133 * ms, 100 * ms, 100 * ms},
		{"LAN profile: 267 ms on the 200 ms gossip beat", 267 * ms, 200 * ms, 200 * ms},
		{"several beats", 450 * ms, 100 * ms, 400 * ms},
		{"an exact multiple", 300 * ms, 100 * ms, 300 * ms},
		{"a beat twice the period: half the beat", 50 * ms, 100 * ms, 50 * ms},
		{"a 1 s beat: an eighth of it", 133 * ms, time.Second, 125 * ms},
		{"a beat a little longer: half of it", 133 * ms, 150 * ms, 75 * ms},
		{"no beat", 133 * ms, 0, 133 * ms},
	} {
		if got := tickPeriod(c.d, c.beat); got != c.want {
			t.Errorf("%s: tickPeriod(%v, %v) = %v, want %v", c.name, c.d, c.beat, got, c.want)
		}
	}
}

// TestPingDue: a member is pinged on the first tick at or after each
// multiple of the period unless something was sent to it since, or once
// the period passed since the last send by the monotonic clock whatever
// the wall clock says.
func TestPingDue(t *testing.T) {
	ms := time.Millisecond
	at := func(d time.Duration) time.Time { return time.Unix(1_800_000_000, 0).Add(d) }
	every := 250 * ms
	for _, c := range []struct {
		name      string
		now, last time.Time
		want      bool
	}{
		{"nothing sent since the mark at 250 ms", at(300 * ms), at(200 * ms), true},
		{"sent since the mark", at(300 * ms), at(250 * ms), false},
		{"sent at the previous tick, no mark between", at(200 * ms), at(100 * ms), false},
		{"the mark at 500 ms passed", at(500 * ms), at(300 * ms), true},
		{"never sent", at(100 * ms), time.Time{}, true},
		{"the wall clock stepped back: not due by the mark", at(100 * ms), at(time.Hour).Add(-every), false},
	} {
		if got := pingDue(c.now, c.last, every); got != c.want {
			t.Errorf("%s: pingDue(%v, %v) = %v, want %v", c.name, c.now, c.last, got, c.want)
		}
	}
	// On 100 ms ticks the 250 ms period gives four pings a second, at
	// most 300 ms apart: the first tick's, then one for each of the eight
	// marks up to 2 s.
	var last time.Time
	var sent []time.Duration
	for tick := 100 * ms; tick <= 2*time.Second; tick += 100 * ms {
		if pingDue(at(tick), last, every) {
			last = at(tick)
			sent = append(sent, tick)
		}
	}
	if len(sent) != 9 {
		t.Errorf("pings over 2 s of 100 ms ticks at %v, want 9", sent)
	}
	for i := 1; i < len(sent); i++ {
		if gap := sent[i] - sent[i-1]; gap > 300*ms {
			t.Errorf("pings %v and %v are %v apart", sent[i-1], sent[i], gap)
		}
	}
}

// TestStallWatchBeatsOnTheMultiples: a watch started at any moment beats
// on the multiples of its period since the Unix epoch, so nodes started
// apart tick at the same instants.
func TestStallWatchBeatsOnTheMultiples(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		every := 100 * time.Millisecond
		time.Sleep(37 * time.Millisecond) // start off the beat
		stop := make(chan struct{})
		ticks := make(chan struct{}, 1)
		var w stallWatch
		go w.run(clock.Real, every, ticks, stop)
		for range 5 {
			<-ticks
			if off := time.Now().UnixNano() % int64(every); off != 0 {
				t.Errorf("a beat at %v, %v past a multiple of %v", time.Now(), time.Duration(off), every)
			}
		}
		close(stop)
	})
}
