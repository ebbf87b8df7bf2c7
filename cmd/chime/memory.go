package main

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/chime-scheduler/chime/storage"
)

// This file is serve's --memory-limit: one budget for the node's memory,
// split between Pebble's block cache and memtables (allocated outside the Go
// heap: C malloc in cgo builds) and the Go runtime's soft limit
// (runtime/debug.SetMemoryLimit, what GOMEMLIMIT sets), with an allowance
// for what the C allocator keeps beyond Pebble's live bytes.

const (
	// defaultMemoryLimit is off: the store at its defaults (80 MiB) and no
	// Go limit. A Go limit below the live heap makes the GC collect without
	// pause (up to the runtime's cap of half the CPU), and the live heap is
	// not bounded by this budget: 64 batches of 1,000 tasks in flight hold
	// 180-270 MiB of it while they wait for the writer. With a
	// 256 MiB split (96 MiB for Go) such a burst cost 4x the CPU per task
	// (docs/BENCHMARKS.md). With the malloc tuning below alone a 10M-task
	// ingest peaked at 290 MiB (667 MiB before it), 242 MiB with 256MiB.
	defaultMemoryLimit = 0
	// minMemoryLimit is 128 MiB, which gives Go 48 MiB: an idle node's
	// heap is about 30 MiB, and a limit below the live heap makes the GC
	// collect without pause (up to the runtime's cap of half the CPU).
	minMemoryLimit = 128 << 20
	// maxMemTable caps the memtable a large budget gets: beyond 64 MiB a
	// memtable only lengthens WAL replay after a crash.
	maxMemTable = 64 << 20
)

// memoryBudget is a --memory-limit split. The zero value (limit 0) leaves
// the store at its defaults and sets no Go limit.
type memoryBudget struct {
	Limit    int64  // the whole budget, bytes
	Cache    int64  // Pebble block cache (storage.Options.CacheSize)
	MemTable uint64 // one Pebble memtable (storage.Options.MemTableSize)
	Other    int64  // what the process holds besides the Go heap and Pebble's live bytes
	Go       int64  // the Go runtime's soft limit
}

// splitMemory splits limit bytes into
//   - 1/8 for the block cache and 1/16 (at most maxMemTable) for each of
//     the up to three memtables: the store's MemoryBytes, 5/16 in all;
//   - 5/16 for what the process holds outside the Go heap and Pebble's live
//     bytes: the memory glibc's malloc keeps after Pebble frees it, the
//     binary's mapped pages (~25 MiB), thread stacks. Measured 60-90 MiB
//     in 2M-task ingests at 256 MiB;
//   - the rest, 3/8, for the Go runtime's soft limit.
//
// At 256 MiB: the store's own defaults (32 MiB cache, 16 MiB
// memtables: 80 MiB), 80 MiB other, 96 MiB Go.
func splitMemory(limit int64) (memoryBudget, error) {
	if limit == 0 {
		return memoryBudget{}, nil
	}
	if limit < minMemoryLimit {
		return memoryBudget{}, fmt.Errorf("--memory-limit %s: want at least %s (or off)", formatBytes(limit), formatBytes(minMemoryLimit))
	}
	b := memoryBudget{Limit: limit, Cache: limit / 8, MemTable: uint64(min(limit/16, maxMemTable)), Other: limit / 16 * 5}
	store := storage.Options{CacheSize: b.Cache, MemTableSize: b.MemTable}.MemoryBytes()
	b.Go = limit - store - b.Other
	return b, nil
}

// byteSize is a flag.Value for a size in bytes, written as GOMEMLIMIT is:
// an integer with an optional unit B, KiB, MiB, GiB or TiB (256MiB), or
// "off" for 0.
type byteSize int64

var byteUnits = []struct {
	suffix string
	shift  uint
}{{"TiB", 40}, {"GiB", 30}, {"MiB", 20}, {"KiB", 10}, {"B", 0}}

func (b *byteSize) String() string { return formatBytes(int64(*b)) }

func (b *byteSize) Set(s string) error {
	if s == "off" {
		*b = 0
		return nil
	}
	num, shift := s, uint(0)
	for _, u := range byteUnits {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			num, shift = n, u.shift
			break
		}
	}
	v, err := strconv.ParseInt(num, 10, 64)
	if err != nil || v < 0 {
		return errors.New("want a size such as 256MiB (units B, KiB, MiB, GiB, TiB) or off")
	}
	if v > math.MaxInt64>>shift {
		return errors.New("size out of range")
	}
	*b = byteSize(v << shift)
	return nil
}

// formatBytes writes n in the largest unit that divides it.
func formatBytes(n int64) string {
	if n == 0 {
		return "off"
	}
	for _, u := range byteUnits {
		if u.shift > 0 && n%(1<<u.shift) == 0 {
			return strconv.FormatInt(n>>u.shift, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10) + "B"
}

// glibc's malloc holds pebble's block cache and memtables in cgo builds.
// Left at its defaults it keeps far more than pebble uses: up to 8 arenas
// per core, each keeping the memory freed into it, and a mmap threshold
// that rises to the largest block freed (a 16 MiB memtable), after which
// memtables and filter blocks are carved from the arenas too and their
// holes are kept. A 10M-task ingest peaked at 667 MiB of RSS with pebble
// using 84 MiB and Go about 190 (docs/BENCHMARKS.md). serve therefore
// sets, when the binary is loaded (malloc_glibc.go):
const (
	// mallocArenas is M_ARENA_MAX: one arena, so that what one thread
	// frees the next allocation of any thread reuses. Two arenas peaked at
	// 282 MiB in a 2M-task ingest, one at 213 MiB, at the same rate;
	// pebble's allocations are few and large enough (blocks of KiBs) that
	// the arena's lock is no bottleneck on 2 cores.
	mallocArenas = 1
	// mallocMmapThreshold is M_MMAP_THRESHOLD, fixed at glibc's initial
	// 128 KiB (setting it stops the rise): memtables and large filter and
	// index blocks are mapped on their own and unmapped when freed.
	mallocMmapThreshold = 128 << 10
)

// tuneMalloc applies mallocArenas and mallocMmapThreshold to glibc's
// malloc, each unless the environment sets it (MALLOC_ARENA_MAX,
// MALLOC_MMAP_THRESHOLD_), and returns what it set. A constructor in
// malloc_glibc.go does this when the binary is loaded, before any thread
// allocates; serve logs what it set (mallocNames(mallocAtStart())).
func tuneMalloc(env func(string) string) []string {
	return mallocNames(applyMalloc(env("MALLOC_ARENA_MAX") != "", env("MALLOC_MMAP_THRESHOLD_") != ""))
}

// mallocNames names the settings of an applyMalloc mask; nil for none or
// when the allocator is not glibc's (-1).
func mallocNames(mask int) []string {
	var set []string
	if mask > 0 && mask&1 != 0 {
		set = append(set, "M_ARENA_MAX="+strconv.Itoa(mallocArenas))
	}
	if mask > 0 && mask&2 != 0 {
		set = append(set, "M_MMAP_THRESHOLD="+strconv.Itoa(mallocMmapThreshold))
	}
	return set
}
