package storage

import (
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// MemFS is an in-memory filesystem for a store whose data must outlive
// Close: a test stops a node and opens it again on the same MemFS (a
// restart with its data kept), or on a CrashClone (a restart after the
// process was killed at that moment). Options.InMemory, by contrast, gives
// every Open a fresh filesystem. MemFS does no real I/O, so a store on it
// runs inside a testing/synctest bubble. It is for tests; a MemFS must not
// hold two open stores at once.
type MemFS struct {
	fs *vfs.MemFS
	// walFault, when set, fails every write and sync of the write-ahead
	// log (FailWAL).
	walFault atomic.Pointer[error]
	// syncDelay, when set, is how long every sync of the write-ahead log
	// takes (DelaySync), in nanoseconds.
	syncDelay atomic.Int64
}

// DelaySync makes every later sync of the store's write-ahead log on m
// take d (0: no delay), as a slow disk does: commits are visible at once,
// durability comes d later. Inside a testing/synctest bubble the wait is
// on the bubble's clock.
func (m *MemFS) DelaySync(d time.Duration) { m.syncDelay.Store(int64(d)) }

// FailWAL makes every later write and sync of the store's write-ahead log
// on m fail with err (nil: stop failing), as a failing disk does. Pebble
// cannot go on after that: the store fails (ErrFailed).
func (m *MemFS) FailWAL(err error) {
	if err == nil {
		m.walFault.Store(nil)
		return
	}
	m.walFault.Store(&err)
}

// vfs returns the filesystem a store opens on m: m's, with FailWAL's
// faults injected.
func (m *MemFS) vfs() vfs.FS {
	return errorfs.Wrap(unsyncedFS{m.fs}, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if !strings.HasSuffix(op.Path, ".log") {
			return nil
		}
		if d := m.syncDelay.Load(); d > 0 {
			switch op.Kind {
			case errorfs.OpFileSync, errorfs.OpFileSyncData, errorfs.OpFileSyncTo:
				time.Sleep(time.Duration(d))
			}
		}
		e := m.walFault.Load()
		if e == nil {
			return nil
		}
		switch op.Kind {
		case errorfs.OpFileWrite, errorfs.OpFileWriteAt, errorfs.OpFileSync, errorfs.OpFileSyncData, errorfs.OpFileSyncTo, errorfs.OpFileFlush:
			return *e
		}
		return nil
	}))
}

// NewMemFS returns an empty in-memory filesystem.
func NewMemFS() *MemFS {
	return &MemFS{fs: vfs.NewCrashableMem()}
}

// CrashClone returns a copy of what a process killed right now leaves on
// disk: everything written to the filesystem so far, synced or not, since
// the operating system keeps unsynced writes when a process dies (only
// power loss drops them). Commits without sync that pebble still holds in
// its own WAL buffer are lost, as they are on a real kill. A store still
// open on m keeps writing to m, never to the clone. Safe while a store is
// open on m.
func (m *MemFS) CrashClone() *MemFS {
	// UnsyncedDataPercent 100 keeps everything, so the generator is never
	// consulted for a choice; pebble still requires one.
	rng := rand.New(rand.NewPCG(1, 2))
	return &MemFS{fs: m.fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 100, RNG: rng})}
}

// unsyncedFS passes every call to the MemFS except a file's or directory's
// sync, which it answers at once. A crashable MemFS's sync copies the whole
// file to keep what a power loss would leave, so a store's WAL cost
// O(size) per commit (quadratic per WAL, and many times that under -race,
// which checks every copied byte); CrashClone keeps unsynced data too
// (UnsyncedDataPercent 100: a killed process loses no write the OS has),
// so the synced copy is never read. Sync errors are still injected
// (FailWAL wraps this FS).
type unsyncedFS struct{ vfs.FS }

func (u unsyncedFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	return unsynced(u.FS.Create(name, c))
}

func (u unsyncedFS) Open(name string, opts ...vfs.OpenOption) (vfs.File, error) {
	return unsynced(u.FS.Open(name, opts...))
}

func (u unsyncedFS) OpenReadWrite(name string, c vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	return unsynced(u.FS.OpenReadWrite(name, c, opts...))
}

func (u unsyncedFS) OpenDir(name string) (vfs.File, error) { return unsynced(u.FS.OpenDir(name)) }

func (u unsyncedFS) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	return unsynced(u.FS.ReuseForWrite(oldname, newname, c))
}

func (u unsyncedFS) Unwrap() vfs.FS { return u.FS }

func unsynced(f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return unsyncedFile{f}, nil
}

type unsyncedFile struct{ vfs.File }

func (unsyncedFile) Sync() error                             { return nil }
func (unsyncedFile) SyncData() error                         { return nil }
func (unsyncedFile) SyncTo(int64) (fullSync bool, err error) { return false, nil }
