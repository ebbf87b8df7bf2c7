package idfilter

import (
	"fmt"
	"testing"

	"github.com/cespare/xxhash/v2"
)

func TestIDFilter(t *testing.T) {
	f := New(Min)
	if !f.MayContain("anything") {
		t.Fatal("before its first build the filter must answer maybe for every id")
	}
	stored := make([]string, 5000)
	for i := range stored {
		stored[i] = fmt.Sprintf("stored-%d", i)
	}
	err := f.Build(func(add func([]byte)) error {
		for _, id := range stored {
			add([]byte(id))
		}
		f.Add("created-during-scan") // a create racing the scan
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range append(stored, "created-during-scan") {
		if !f.MayContain(id) {
			t.Fatalf("stored id %q reported absent: a false negative would allow a duplicate create", id)
		}
	}
	fp := 0
	for i := range 100000 {
		if f.MayContain(fmt.Sprintf("new-%d", i)) {
			fp++
		}
	}
	if fp > 1000 {
		t.Errorf("%d false positives in 100000 new ids, want about 0 at this load", fp)
	}
}

// TestIDFilterRebuildsWhenFull grows a filter sized for 4,096 ids (the
// node's is sized for Min, a million: the same logic, 256 times
// the ids to add under -race).
func TestIDFilterRebuildsWhenFull(t *testing.T) {
	const min = 1 << 12
	f := New(min)
	if err := f.Build(func(func([]byte)) error { return nil }); err != nil {
		t.Fatal(err)
	}
	var all []string
	asked := false
	for i := 0; !asked; i++ {
		id := fmt.Sprintf("id-%d", i)
		all = append(all, id)
		asked = f.Add(id)
	}
	if len(all) <= min {
		t.Fatalf("rebuild asked after %d ids, want after more than %d", len(all), min)
	}
	if f.Add("one-more") {
		t.Error("a second rebuild was asked while one is pending")
	}
	all = append(all, "one-more")
	err := f.Build(func(add func([]byte)) error {
		for _, id := range all[:len(all)/2] {
			add([]byte(id))
		}
		f.Add("during-rebuild")
		for _, id := range all[len(all)/2:] {
			add([]byte(id))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range append(all, "during-rebuild") {
		if !f.MayContain(id) {
			t.Fatalf("id %q lost by the rebuild", id)
		}
	}
	if c := f.mu.cur.capacity; c < 2*len(all) {
		t.Errorf("rebuilt capacity %d, want at least %d", c, 2*len(all))
	}
}

// TestIDFilterSize: a filter takes its 10 bits per planned id (to a word),
// not the next power of two (up to twice that: 32 MiB instead of 20 for
// the 16.7M ids a node with 10M stored tasks plans for), and still gives
// about 1 % false positives once full.
func TestIDFilterSize(t *testing.T) {
	for _, capacity := range []int{1 << 12, 3000, 1 << 16, 100_000} {
		t.Run(fmt.Sprint("capacity=", capacity), func(t *testing.T) {
			b := newBloom(capacity)
			if got, want := len(b.words)*64, capacity*bloomBitsPerID; got < want || got >= want+64 {
				t.Errorf("newBloom(%d): %d bits, want %d rounded up to a word", capacity, got, want)
			}
			for i := range capacity {
				b.add(xxhash.Sum64String(fmt.Sprintf("stored-%d", i)))
			}
			fp := 0
			const asked = 100_000
			for i := range asked {
				if b.has(xxhash.Sum64String(fmt.Sprintf("new-%d", i))) {
					fp++
				}
			}
			if rate := float64(fp) / asked; rate > 0.015 {
				t.Errorf("newBloom(%d) full: %.2f %% false positives, want about 1 %%", capacity, 100*rate)
			}
		})
	}
}
