package storage

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// ErrNotFound is returned by Get when the task does not exist.
var ErrNotFound = errors.New("storage: not found")

// ErrClosed is returned by every Store method that returns an error, and by
// Batch.Commit, once Store.Close has begun.
var ErrClosed = errors.New("storage: closed")

// ErrFailed wraps the error of a write or sync that did not reach the disk.
// Pebble's commit pipeline does not recover from a failed write-ahead-log
// write or fsync, and what the kernel did with the failed pages is unknown
// (an fsync that failed once may succeed later without the data), so the
// store takes no more writes after one: every later write returns the same
// error (Store.Failed). Reads may still work. The node stops and hands its
// slots to their followers.
var ErrFailed = errors.New("storage: failed")

// ErrCorrupt wraps the error of a task record that does not decode (a
// disk or software fault wrote bytes that are not a task). Get returns it;
// ScanTasks skips such records; both count them (CorruptRecords) and log
// each key once.
var ErrCorrupt = errors.New("storage: corrupt record")

// maxCorruptLogged bounds how many corrupt keys a store remembers, to log
// each once.
const maxCorruptLogged = 10000

// noteCorrupt counts a task record at key that did not decode and logs it
// the first time.
func (s *Store) noteCorrupt(key []byte, err error) {
	s.corrupt.Add(1)
	s.corruptMu.Lock()
	if s.corruptKeys == nil {
		s.corruptKeys = map[string]struct{}{}
	}
	_, seen := s.corruptKeys[string(key)]
	if !seen && len(s.corruptKeys) < maxCorruptLogged {
		s.corruptKeys[string(key)] = struct{}{}
	}
	s.corruptMu.Unlock()
	if !seen {
		s.log.Error("storage: a task record does not decode: skipped by listings, not fired", "key", fmt.Sprintf("%q", key), "err", err)
	}
}

// CorruptRecords counts the reads of task records that did not decode
// since the store opened (a record read twice counts twice).
func (s *Store) CorruptRecords() uint64 { return s.corrupt.Load() }

// Store is Chime's durable state on one node: task records, the due index
// and execution history, in one Pebble database. It is safe for concurrent
// use; see doc.go for the durability contract.
type Store struct {
	db           *pebble.DB
	historyLimit uint64
	memTableSize uint64 // Options.MemTableSize
	slots        int    // Options.Slots
	checksums    bool   // maintain slot checksums (!Options.DisableChecksums)

	// sums serializes the commits that change slot checksums (checksum.go)
	// from reading the old values to applying the batch, so that each
	// commit's reads see every earlier one's writes. It is held for the
	// apply only, never for an fsync.
	sums struct {
		sync.Mutex
		// m caches stored checksums by slot (zero: no checksum key); a
		// slot not in m is read from its key on first use. An entry
		// changes with the stored value, under the lock.
		m map[uint16]Checksum
		// reads counts the keys commits read for their checksums
		// (what they replace, unless the writer knew it: prior.go), for
		// tests and benchmarks.
		reads uint64
	}

	// state counts operations in flight in its low bits and carries
	// closedBit once Close has begun. Operations enter with Add(1) and back
	// out if closedBit is set, so Close can wait for the count to drain
	// without a lock on the hot path.
	state atomic.Int64
	// due is the superset of the slots that may hold due keys (duemarks.go).
	due *dueMarks
	// writes counts the commits and slot drops (Writes).
	writes    atomic.Uint64
	drained   chan struct{} // closed when closing and no operation is in flight
	drainOnce sync.Once
	closeOnce sync.Once
	closeErr  error
	// failed holds the error of the write that failed the store (catch).
	failed atomic.Pointer[error]
	// failedC is closed when failed is set (FailedC).
	failedC chan struct{}
	log     *slog.Logger
	// corrupt counts the task records that did not decode (noteCorrupt);
	// corruptKeys remembers the first maxCorruptLogged of them, each
	// logged once.
	corrupt     atomic.Uint64
	corruptMu   sync.Mutex
	corruptKeys map[string]struct{}
}

const closedBit int64 = 1 << 62

// Open opens (creating if needed) the store described by opts.
func Open(opts Options) (*Store, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if opts.Mem != nil {
		return open(opts, opts.Mem.vfs(), memDir)
	}
	if opts.InMemory {
		return open(opts, vfs.NewMem(), memDir)
	}
	return open(opts, vfs.Default, opts.Dir)
}

// open opens the store on a given filesystem: Open uses the OS, a fresh
// in-memory one or the caller's MemFS; crash tests pass a
// vfs.NewCrashableMem and its clones.
func open(opts Options, fs vfs.FS, dir string) (*Store, error) {
	opts = opts.withDefaults()
	log := opts.Logger
	po := &pebble.Options{
		FS: fs,
		// Pebble charges memtables against the block cache (a reservation of
		// each memtable's size, including one recycled memtable). Without
		// adding them, two 16 MiB memtables would leave a 32 MiB cache with
		// no room for blocks at all. So the cache is sized for CacheSize of
		// blocks plus the most memtables that can exist at once.
		CacheSize:                   opts.MemoryBytes(),
		MemTableSize:                opts.MemTableSize,
		MemTableStopWritesThreshold: memTableStopWrites,
		MaxOpenFiles:                maxOpenFiles,
		FormatMajorVersion:          pebble.FormatNewest,
		Logger:                      pebbleLogger{log: log},
		EventListener: &pebble.EventListener{
			DiskSlow: func(info pebble.DiskSlowInfo) {
				log.Warn("pebble: disk slow", "component", "pebble", "info", info.String())
			},
			WriteStallBegin: func(info pebble.WriteStallBeginInfo) {
				log.Warn("pebble: write stall", "component", "pebble", "reason", info.Reason)
			},
		},
	}
	// Bloom filters on every level (L1+ inherit L0's policy): a Get of a
	// missing id usually touches no data block.
	po.Levels[0].FilterPolicy = bloom.FilterPolicy(bloomBitsPerKey)
	po.Experimental.CompactionScheduler = newCompactionScheduler()
	db, err := pebble.Open(dir, po)
	if err != nil {
		return nil, fmt.Errorf("storage: open %q: %w", dir, err)
	}
	if opts.DisableChecksums {
		err = forgetChecksums(db)
	} else {
		err = ensureChecksums(db)
	}
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	s := &Store{
		db:           db,
		historyLimit: uint64(opts.HistoryLimit),
		memTableSize: opts.MemTableSize,
		slots:        opts.Slots,
		checksums:    !opts.DisableChecksums,
		drained:      make(chan struct{}),
		failedC:      make(chan struct{}),
		log:          log,
	}
	s.sums.m = map[uint16]Checksum{}
	s.due = new(dueMarks)
	return s, nil
}

// catch, deferred first in every write path, turns pebble's Fatalf panic
// into ErrFailed in *err and marks the store failed. Other panics go on.
func (s *Store) catch(err *error) {
	r := recover()
	if r == nil {
		return
	}
	f, ok := r.(fatalPanic)
	if !ok {
		panic(r)
	}
	e := fmt.Errorf("%w: %s", ErrFailed, string(f))
	if s.failed.CompareAndSwap(nil, &e) {
		close(s.failedC)
	}
	*err = *s.failed.Load()
}

// Failed returns the error that stopped the store's writes (wrapping
// ErrFailed), or nil.
func (s *Store) Failed() error {
	if e := s.failed.Load(); e != nil {
		return *e
	}
	return nil
}

// FailedC returns a channel closed when the store fails (Failed turns
// non-nil).
func (s *Store) FailedC() <-chan struct{} { return s.failedC }

// enter registers an operation. It returns false (and registers nothing)
// once Close has begun.
func (s *Store) enter() bool {
	if s.state.Add(1)&closedBit != 0 {
		s.leave()
		return false
	}
	return true
}

// leave ends an operation started by enter.
func (s *Store) leave() {
	if s.state.Add(-1) == closedBit {
		s.drainOnce.Do(func() { close(s.drained) })
	}
}

// Close waits for operations in flight (including running scans, so do not
// call it from a scan callback), then closes the database. Committed batches
// not yet covered by a Sync may be lost; call Sync first to keep them.
// Close is idempotent: later calls return the first call's result.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		if s.state.Or(closedBit) == 0 {
			s.drainOnce.Do(func() { close(s.drained) })
		}
		<-s.drained
		var err error
		func() {
			defer s.catch(&err)
			err = s.db.Close()
		}()
		if err != nil {
			s.closeErr = fmt.Errorf("storage: close: %w", err)
		}
	})
	return s.closeErr
}

// Get returns the task stored under (slot, id), or ErrNotFound. Callers pass
// the task's slot; the store does not hash ids. The returned task is the
// caller's.
func (s *Store) Get(slot uint16, id string) (*Task, error) {
	if !s.enter() {
		return nil, ErrClosed
	}
	defer s.leave()
	c := getCodec()
	defer putCodec(c)
	c.key = appendTaskKey(c.key[:0], slot, id)
	v, closer, err := s.db.Get(c.key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("storage: get %d/%s: %w", slot, id, err)
	}
	t := new(Task)
	err = c.decodeTask(v, t)
	if err != nil {
		s.noteCorrupt(c.key, err)
		err = fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	if err == nil && s.checksums && t.Slot == slot && t.ID == id {
		t.setStored(prior{priorValue, keyHash(c.key, v)}) // prior.go
	}
	_ = closer.Close() // never fails for Get's closer
	if err != nil {
		return nil, fmt.Errorf("storage: get %d/%s: %w", slot, id, err)
	}
	return t, nil
}

// Sync makes every batch committed before the call durable by syncing the
// write-ahead log. Concurrent callers (and concurrent Commit(true) calls)
// share fsyncs through pebble's commit pipeline.
func (s *Store) Sync() (err error) {
	if err := s.Failed(); err != nil {
		return err
	}
	if !s.enter() {
		return ErrClosed
	}
	defer s.leave()
	defer s.catch(&err)
	// An empty WAL record written with Sync: the WAL is sequential, so its
	// fsync covers every record written before it.
	if err := s.db.LogData(nil, pebble.Sync); err != nil {
		return fmt.Errorf("storage: sync: %w", err)
	}
	return nil
}

// DropSlot deletes every key of slot (tasks, due index, history, meta,
// checksum) with one range deletion, committed with Sync.
func (s *Store) DropSlot(slot uint16) (err error) {
	if err := s.Failed(); err != nil {
		return err
	}
	if !s.enter() {
		return ErrClosed
	}
	defer s.leave()
	defer s.catch(&err)
	// Under the checksum mutex: a commit in flight must not write the
	// slot's old checksum back. Drops are rare; holding it over the fsync
	// is simpler than a second commit path.
	s.sums.Lock()
	defer s.sums.Unlock()
	var start, end [slotPrefixLen]byte
	if err := s.db.DeleteRange(appendSlotPrefix(start[:0], slot), appendSlotEnd(end[:0], slot), pebble.Sync); err != nil {
		return fmt.Errorf("storage: drop slot %d: %w", slot, err)
	}
	s.sums.m[slot] = Checksum{}
	s.writes.Add(1)
	return nil
}

// Writes counts the batches committed and the slots dropped so far (failed
// attempts too): a reader that saw the same count twice saw no write in
// between (GET /v1/stats/due reuses a count while it stands).
func (s *Store) Writes() uint64 { return s.writes.Load() }

// Stats is a snapshot of storage gauges for metrics and the dashboard.
type Stats struct {
	DiskBytes     uint64 // WAL, tables and manifest on disk
	WALBytes      uint64 // live write-ahead log on disk
	MemTableBytes uint64 // memory allocated by memtables
	CacheBytes    int64  // block cache in use
	CacheHits     int64  // block cache hits since Open
	CacheMisses   int64  // block cache misses since Open
	L0Files       int64  // level-0 tables; a growing count means compaction lags writes
}

// Stats returns current gauges, or the zero Stats after Close. It costs one
// short lock inside pebble and no I/O.
func (s *Store) Stats() Stats {
	if !s.enter() {
		return Stats{}
	}
	defer s.leave()
	m := s.db.Metrics()
	return Stats{
		DiskBytes:     m.DiskSpaceUsage(),
		WALBytes:      m.WAL.PhysicalSize,
		MemTableBytes: m.MemTable.Size,
		CacheBytes:    m.BlockCache.Size,
		CacheHits:     m.BlockCache.Hits,
		CacheMisses:   m.BlockCache.Misses,
		L0Files:       m.Levels[0].TablesCount,
	}
}

// Pressed reports whether the store is close to stopping writes (a pebble
// write stall): its memtables hold more than the last one's worth before
// writes stop (pebble stops them at memTableStopWrites memtables' bytes:
// flushes lag), or level 0 is half way to its stop threshold. (Their count
// says nothing: pebble lets small memtables pile up until they are worth a
// flush.) A caller with writes that can wait (a replica's
// snapshots) defers them then, so that those that cannot (fire intents,
// ownership states) do not wait behind a stall. One short lock inside
// pebble, no I/O; false after Close.
func (s *Store) Pressed() bool {
	if !s.enter() {
		return false
	}
	defer s.leave()
	m := s.db.Metrics()
	return m.MemTable.Size > (memTableStopWrites-1)*s.memTableSize || int(m.Levels[0].Sublevels) >= l0Pressed
}

// Compact flushes the memtables and compacts every per-slot key, so that
// the space of deleted keys (expired tasks, dropped slots) is reclaimed on
// disk now rather than when background compactions reach it. It is slow
// (it rewrites the data) and meant for tests, benchmarks and maintenance.
func (s *Store) Compact(ctx context.Context) (err error) {
	if err := s.Failed(); err != nil {
		return err
	}
	if !s.enter() {
		return ErrClosed
	}
	defer s.leave()
	defer s.catch(&err)
	if err := s.db.Flush(); err != nil {
		return fmt.Errorf("storage: compact: %w", err)
	}
	if err := s.db.Compact(ctx, slotKeysLower, slotKeysUpper, true); err != nil {
		return fmt.Errorf("storage: compact: %w", err)
	}
	return nil
}
