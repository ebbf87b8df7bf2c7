package clock

import (
	"testing"
	"testing/synctest"
	"time"
)

// TestRealInBubble checks that Real is the time package's clock, faked
// inside a synctest bubble like time itself.
func TestRealInBubble(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := Real.Now()
		<-Real.After(time.Second)
		if d := Real.Since(start); d != time.Second {
			t.Errorf("Since after After(1s) = %v, want 1s", d)
		}
		tm := Real.NewTimer(2 * time.Second)
		<-tm.C
		tk := Real.NewTicker(time.Second)
		<-tk.C
		<-tk.C
		tk.Stop()
		if d := Real.Now().Sub(start); d != 5*time.Second {
			t.Errorf("elapsed = %v, want 5s", d)
		}
	})
}

func TestOr(t *testing.T) {
	if Or(nil) != Real {
		t.Error("Or(nil) is not Real")
	}
	var c Clock = system{}
	if Or(c) != c {
		t.Error("Or(c) is not c")
	}
}

// TestNowAllocs checks that reading the clock through the interface does
// not allocate (it is called on the writer's and the loop's hot paths).
func TestNowAllocs(t *testing.T) {
	var c Clock = Real
	if n := testing.AllocsPerRun(100, func() { _ = c.Now(); _ = c.Since(time.Time{}) }); n != 0 {
		t.Errorf("Now+Since allocate %v times per call, want 0", n)
	}
}
