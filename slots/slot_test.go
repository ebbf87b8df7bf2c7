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

// TestHashTags: Redis Cluster's hash tag rule, its own examples included.
func TestHashTags(t *testing.T) {
	for _, tc := range []struct{ id, key string }{
		{"user1000", "user1000"},
		{"{user1000}.following", "user1000"},
		{"{user1000}.followers", "user1000"},
		{"foo{}{bar}", "foo{}{bar}"}, // the first tag is empty: the whole id
		{"foo{{bar}}zap", "{bar"},
		{"foo{bar}{zap}", "bar"},
		{"{", "{"},
		{"}{x}", "x"},
		{"a{b", "a{b"},
		{"{ab}", "ab"},
	} {
		if got := HashKey(tc.id); got != tc.key {
			t.Errorf("HashKey(%q) = %q, want %q", tc.id, got, tc.key)
		}
		if Of(tc.id) != Of(tc.key) {
			t.Errorf("Of(%q) = %d, Of(%q) = %d: want equal", tc.id, Of(tc.id), tc.key, Of(tc.key))
		}
	}
	// A tenant's tasks land in one slot.
	want := Of("{tenant-7}.a")
	for _, id := range []string{"{tenant-7}.b", "x{tenant-7}", "{tenant-7}"} {
		if Of(id) != want {
			t.Errorf("Of(%q) = %d, want %d as {tenant-7}.a", id, Of(id), want)
		}
	}
}
