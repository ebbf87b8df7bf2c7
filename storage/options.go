package storage

import (
	"errors"
	"fmt"
	"log/slog"
)

// Options configures a Store. The zero value of every field except Dir means
// "use the default"; Open copies the Options and never modifies the caller's.
type Options struct {
	// Dir is the data directory, created if missing. Required unless InMemory.
	Dir string

	// InMemory keeps everything in memory (pebble's in-memory filesystem):
	// nothing survives Close. For tests and dev; Dir is ignored.
	InMemory bool

	// Mem, when set, keeps everything in this in-memory filesystem, which
	// outlives Close: a store opened on it again finds its data (tests of
	// restarts; see MemFS). InMemory and Dir are ignored.
	Mem *MemFS

	// CacheSize is the block cache in bytes. Default DefaultCacheSize.
	// Larger caches keep more task records hot for Get on the fire path;
	// smaller ones leave memory for the node's in-memory wheel window.
	// Memtables come on top: the store's memory is bounded by
	// MemoryBytes, CacheSize + 3*MemTableSize (80 MiB with the defaults).
	CacheSize int64

	// MemTableSize is the size of one memtable in bytes. Default
	// DefaultMemTableSize. Larger memtables mean fewer flushes and L0 files
	// under sustained writes, at the cost of memory (up to two memtables
	// exist at once) and a longer WAL replay after a crash.
	MemTableSize uint64

	// HistoryLimit is how many execution records are kept per task; older
	// ones are deleted by AppendExecution. Default DefaultHistoryLimit.
	// Lowering it later does not delete records written beyond the new
	// limit before the change; Executions still returns at most the limit
	// the caller asks for.
	HistoryLimit int

	// DisableChecksums turns off the per-slot checksums (checksum.go) that
	// owner and follower compare for anti-entropy. Keeping them costs a
	// hash of every value written and, at commit, a read of the stored
	// value of every key a write replaces unless the writing Task knew it
	// (prior.go): about 6 us of CPU per created task and 12 us per task
	// whose wake moves, on top of 5-7 us, when nothing is known; close to
	// nothing when it is, as for the node's writer (BenchmarkBatchCommit,
	// docs/BENCHMARKS.md). A follower's replicated ops carry what they
	// replace (SlotOps.Priors). A node with no replica has nothing to
	// compare them with. Open then forgets
	// the stored checksums, and a later Open without it rebuilds them all
	// in one scan of the store.
	DisableChecksums bool

	// Slots is how many slot numbers are in use (0 to Slots-1): what the
	// scans of every slot (ScanDue, RecentExecutions) walk. Default 1<<16,
	// every uint16; the node passes slots.Count.
	Slots int

	// Logger receives pebble's errors (level Error) and, when the handler
	// enables level Debug, pebble's informational events. Nil discards.
	Logger *slog.Logger
}

// Defaults applied by Open for zero Options fields.
const (
	// DefaultCacheSize is 32 MiB. The cache holds index and bloom filter
	// blocks as well as data: with 10 bits per key and two keys per task
	// (task + due index) filters cost ~2.5 B per task, so 32 MiB keeps the
	// filters and indexes of several million tasks resident and a Get of a
	// missing id costs no disk read. It is the top of the 16-32 MB range
	// DESIGN §6 sets for small nodes.
	DefaultCacheSize int64 = 32 << 20

	// DefaultMemTableSize is 16 MiB. Pebble treats a batch larger than half
	// a memtable as a "large batch" that forces a memtable rotation and
	// flush; an API batch of 10000 tasks (~4 MB with due keys) stays well
	// below 8 MiB and takes the normal path. At 60k creates/s (~20 MB/s of
	// WAL) it flushes about once a second, and WAL replay after a crash is
	// bounded by a few tens of MB.
	DefaultMemTableSize uint64 = 16 << 20

	// DefaultHistoryLimit is 100 executions per task, the bound the API
	// documents for /v1/tasks/{id}/executions.
	DefaultHistoryLimit = 100

	// memTableStopWrites is how many memtables (mutable plus queued for
	// flush) may exist before pebble stops writes: pebble's default, stated
	// here because the block cache is sized from it.
	memTableStopWrites = 2

	// l0Pressed is the level-0 read amplification (sublevels) at which
	// Pressed reports pressure: half pebble's default L0StopWritesThreshold
	// (12), which the store keeps.
	l0Pressed = 6

	// maxOpenFiles bounds pebble's table cache. Enough for a small node's
	// LSM (a few GB of 2-64 MB tables) without exhausting ulimit -n, which
	// the node also needs for HTTP connections.
	maxOpenFiles = 256

	// bloomBitsPerKey gives a ~1% false positive rate on point Gets.
	bloomBitsPerKey = 10

	// memDir is the directory name used on the in-memory filesystem.
	memDir = "chime"
)

// Validate reports every problem with o, joined. Zero values are valid
// (they select defaults).
func (o Options) Validate() error {
	var errs []error
	if o.Dir == "" && !o.InMemory && o.Mem == nil {
		errs = append(errs, errors.New("storage: Dir is required unless InMemory or Mem"))
	}
	if o.CacheSize < 0 {
		errs = append(errs, fmt.Errorf("storage: CacheSize %d < 0", o.CacheSize))
	}
	if o.MemTableSize != 0 && o.MemTableSize < 1<<20 {
		errs = append(errs, fmt.Errorf("storage: MemTableSize %d < 1 MiB", o.MemTableSize))
	}
	if o.MemTableSize >= 4<<30 {
		errs = append(errs, fmt.Errorf("storage: MemTableSize %d >= 4 GiB", o.MemTableSize))
	}
	if o.HistoryLimit < 0 {
		errs = append(errs, fmt.Errorf("storage: HistoryLimit %d < 0", o.HistoryLimit))
	}
	if o.Slots < 0 || o.Slots > 1<<16 {
		errs = append(errs, fmt.Errorf("storage: Slots %d not in [0, 65536]", o.Slots))
	}
	return errors.Join(errs...)
}

// MemoryBytes is the most memory the store's block cache and memtables
// take with these Options (defaults applied): CacheSize plus the most
// memtables that exist at once, each MemTableSize; 80 MiB with the
// defaults. Open sizes pebble's cache to exactly this, and pebble keeps
// its cache and memtables within it (give or take a block per cache shard:
// it evicts per shard, after an insertion). In cgo builds pebble allocates them
// with C malloc, outside the Go heap and the Go runtime's memory limit.
// The rest of what pebble holds (iterators, compaction and table state) is
// Go heap.
func (o Options) MemoryBytes() int64 {
	o = o.withDefaults()
	return o.CacheSize + int64((memTableStopWrites+1)*o.MemTableSize)
}

// withDefaults returns a copy of o with zero fields set to their defaults.
func (o Options) withDefaults() Options {
	if o.CacheSize == 0 {
		o.CacheSize = DefaultCacheSize
	}
	if o.MemTableSize == 0 {
		o.MemTableSize = DefaultMemTableSize
	}
	if o.HistoryLimit == 0 {
		o.HistoryLimit = DefaultHistoryLimit
	}
	if o.Slots == 0 {
		o.Slots = 1 << 16
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}
