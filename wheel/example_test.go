package wheel_test

import (
	"fmt"
	"time"

	"github.com/chime-scheduler/chime/wheel"
)

// Example drives a wheel the way node/ does: sleep until Next(), then
// Advance to the time it woke. Here time jumps instead of sleeping.
func Example() {
	start := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	w, err := wheel.New(start, 10*time.Millisecond, 256, 4)
	if err != nil {
		fmt.Println(err)
		return
	}
	w.Add("b", start.Add(2*time.Second))
	w.Add("a", start.Add(2*time.Second))
	w.Add("c", start.Add(1503*time.Millisecond)) // not on a tick: still exact
	w.Add("gone", start.Add(time.Minute))
	w.Cancel("gone")
	w.Add("c", start.Add(1505*time.Millisecond)) // replaces c's due

	var fired []wheel.Entry
	for {
		next, ok := w.Next()
		if !ok {
			break
		}
		fired = w.Advance(next, fired[:0])
		for _, e := range fired {
			fmt.Printf("%s due %v, fired at %v\n", e.ID, e.Due.Sub(start), next.Sub(start))
		}
	}
	fmt.Println("left:", w.Len())
	// Output:
	// c due 1.505s, fired at 1.505s
	// a due 2s, fired at 2s
	// b due 2s, fired at 2s
	// left: 0
}

// ExampleWheel_Advance shows that expiry is exact although buckets are
// tick-sized: an entry due later in the current tick stays.
func ExampleWheel_Advance() {
	start := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	w, _ := wheel.New(start, 10*time.Millisecond, 256, 4)
	w.Add("x", start.Add(15*time.Millisecond))

	fmt.Println(len(w.Advance(start.Add(14*time.Millisecond), nil)))
	next, _ := w.Next()
	fmt.Println(next.Sub(start))
	fmt.Println(w.Advance(start.Add(15*time.Millisecond), nil)[0].ID)
	// Output:
	// 0
	// 15ms
	// x
}
