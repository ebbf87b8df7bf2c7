package slots

import (
	"strconv"
	"testing"

	"github.com/cespare/xxhash/v2"
)

func TestOf(t *testing.T) {
	tests := []string{"", "a", "task-1", "01JABCDEFGHJKMNPQRSTVWXYZ0", "x:y.z~_-"}
	for _, id := range tests {
		got := Of(id)
		want := Slot(xxhash.Sum64String(id) % Count)
		if got != want {
			t.Errorf("Of(%q) = %d, want %d", id, got, want)
		}
		if got >= Count {
			t.Errorf("Of(%q) = %d, out of range", id, got)
		}
	}
}

func TestOfSpreads(t *testing.T) {
	seen := make(map[Slot]bool)
	for i := range 100000 {
		seen[Of("task-"+strconv.Itoa(i))] = true
	}
	// 100k ids over 16384 slots leave essentially none empty.
	if len(seen) < Count*99/100 {
		t.Errorf("100000 ids hit %d slots, want >= %d", len(seen), Count*99/100)
	}
}
