package node

import (
	"testing"

	"github.com/chime-scheduler/chime/slots"
)

func TestOwnedSet(t *testing.T) {
	var a, b ownedSet
	for _, s := range []uint16{0, 1, 63, 64, 100, slots.Count - 1} {
		a.set(s)
	}
	b.set(1)
	b.set(100)
	if got := a.minus(&b); len(got) != 4 || got[0] != 0 || got[1] != 63 || got[2] != 64 || got[3] != slots.Count-1 {
		t.Errorf("minus = %v", got)
	}
	if a.count() != 6 || a.has(2) || !a.has(slots.Count-1) || a.has(slots.Count) || a.has(65535) {
		t.Errorf("count %d, has(2) %v, has(last) %v, has(Count) %v", a.count(), a.has(2), a.has(slots.Count-1), a.has(slots.Count))
	}
}
