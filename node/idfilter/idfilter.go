// Package idfilter is the Bloom filter of stored task ids that lets a
// create of a new id skip the 409-if-exists read.
package idfilter

import (
	"math/bits"
	"sync"

	"github.com/cespare/xxhash/v2"
)

// Filter answers "might a task with this id be stored?" so that creating
// a task with a new id (the common case) skips the Pebble read that the
// 409-if-exists check would otherwise cost (about 10 us per task measured
// under create load: a third of the create path). It is a Bloom filter over
// every stored id: false positives only cost that read; false negatives
// cannot happen once it is ready.
//
// It is filled from a key-only scan of the store at start (until then
// MayContain says yes to everything) and from every create. Deletes are not
// removed (a deleted id stays a possible false positive). When more ids have
// been added than it was sized for, the node rebuilds it twice as large
// from another scan, feeding new creates to both filters meanwhile.
//
// Safe for concurrent use: the writer adds and asks, a background scan adds.
type Filter struct {
	min int // the fewest ids any of its Bloom filters is sized for
	mu  struct {
		sync.Mutex
		cur     *bloom // guarded by mu
		next    *bloom // being rebuilt; nil otherwise
		ready   bool   // cur holds every stored id
		pending bool   // a (re)build is running
	}
}

// bloom is a plain Bloom filter with 10 bits per planned id and 7 probes
// (about 1 % false positives at capacity). Its size is exactly that (to a
// word), not a power of two: probes map a hash onto the bits with a
// multiply-shift (Lemire's fastrange), so a filter for 16.7M ids takes
// 20 MiB rather than 32.
type bloom struct {
	words    []uint64
	nbits    uint64
	capacity int
	added    int
}

const (
	bloomBitsPerID = 10
	bloomProbes    = 7
	Min            = 1 << 20
)

func newBloom(capacity int) *bloom {
	words := (capacity*bloomBitsPerID + 63) / 64
	return &bloom{words: make([]uint64, words), nbits: uint64(words) * 64, capacity: capacity}
}

// bit maps probe i of hash h onto [0, nbits).
func (b *bloom) bit(h uint64, i uint64) uint64 {
	hi, _ := bits.Mul64(h+i*(h>>32|h<<32), b.nbits)
	return hi
}

func (b *bloom) add(h uint64) {
	for i := range uint64(bloomProbes) {
		p := b.bit(h, i)
		b.words[p/64] |= 1 << (p % 64)
	}
	b.added++
}

func (b *bloom) has(h uint64) bool {
	for i := range uint64(bloomProbes) {
		p := b.bit(h, i)
		if b.words[p/64]&(1<<(p%64)) == 0 {
			return false
		}
	}
	return true
}

// New returns a filter that is never smaller than min ids
// (Min in production; tests use small ones, so that growing past
// it costs thousands of ids, not a million).
func New(min int) *Filter {
	f := &Filter{min: min}
	f.mu.cur = newBloom(min)
	return f
}

// MayContain reports whether id might be stored.
func (f *Filter) MayContain(id string) bool {
	h := xxhash.Sum64String(id)
	f.mu.Lock()
	defer f.mu.Unlock()
	return !f.mu.ready || f.mu.cur.has(h)
}

// MayContainBytes is MayContain for an id in bytes (a key's tail).
func (f *Filter) MayContainBytes(id []byte) bool {
	h := xxhash.Sum64(id)
	f.mu.Lock()
	defer f.mu.Unlock()
	return !f.mu.ready || f.mu.cur.has(h)
}

// Add records a stored id. It reports whether the filter has outgrown its
// size and no rebuild is running: the caller should start one.
func (f *Filter) Add(id string) (rebuild bool) {
	h := xxhash.Sum64String(id)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mu.cur.add(h)
	if f.mu.next != nil {
		f.mu.next.add(h)
	}
	if f.mu.ready && !f.mu.pending && f.mu.cur.added > f.mu.cur.capacity {
		f.mu.pending = true
		return true
	}
	return false
}

// Build fills the filter from scan, which must call add for every stored id
// (a snapshot taken after this call starts). The first build makes the
// filter ready; later ones replace it with one sized for twice its ids.
func (f *Filter) Build(scan func(add func(id []byte)) error) error {
	f.mu.Lock()
	f.mu.pending = true
	next := f.mu.cur
	if f.mu.ready {
		next = newBloom(max(2*f.mu.cur.added, f.min))
		f.mu.next = next
	}
	f.mu.Unlock()
	err := scan(func(id []byte) {
		h := xxhash.Sum64(id)
		f.mu.Lock()
		next.add(h)
		f.mu.Unlock()
	})
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mu.pending = false
	f.mu.next = nil
	if err != nil {
		return err
	}
	f.mu.cur = next
	f.mu.ready = true
	return nil
}
