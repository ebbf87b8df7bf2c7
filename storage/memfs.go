package storage

import (
	"math/rand/v2"
	"strings"
	"sync/atomic"

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
}

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
	return errorfs.Wrap(m.fs, errorfs.InjectorFunc(func(op errorfs.Op) error {
		e := m.walFault.Load()
		if e == nil || !strings.HasSuffix(op.Path, ".log") {
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
