package storage

import (
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// compactionSampleEvery is how often the scheduler re-reads how many
// compactions the store may run (pebble's own scheduler: every 100 ms).
const compactionSampleEvery = time.Second

// compactionScheduler is pebble's ConcurrencyLimitScheduler (v2.1.7,
// compaction_scheduler.go) with a slower periodic sample: it lets as many
// compactions run as DBForCompaction.GetAllowedWithoutPermission says,
// granting more when one ends (Done), when a flush raises the allowance
// (UpdateGetAllowedWithoutPermission), when the store asks (TrySchedule),
// and on a periodic sample that catches the rest. Pebble samples every
// 100 ms, a wake-up of an idle process ten times a second: in an idle
// cluster that was one of the largest sources of the wake-ups an idle
// node's CPU goes to (docs/BENCHMARKS.md, issue 17 item 1). A compaction
// whose allowance rose without a flush or another compaction ending starts
// up to a second later; compactions run for seconds.
//
// Locking follows pebble's: the store calls in with its own mutexes held
// (TrySchedule, UpdateGetAllowedWithoutPermission), so the store's
// GetWaitingCompaction and Schedule, which take them, are called only
// outside mu, by one granter at a time (granting).
type compactionScheduler struct {
	db   pebble.DBForCompaction
	poke chan struct{}
	stop chan struct{}
	done chan struct{}

	mu           sync.Mutex
	cond         *sync.Cond // signalled when granting ends
	running      int        // compactions granted and not Done
	unregistered bool
	granting     bool
	lastAllowed  int
}

var _ pebble.CompactionScheduler = (*compactionScheduler)(nil)

func newCompactionScheduler() *compactionScheduler {
	s := &compactionScheduler{poke: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	s.cond = sync.NewCond(&s.mu)
	return s
}

// Register implements pebble.CompactionScheduler; it starts the sampler.
func (s *compactionScheduler) Register(_ int, db pebble.DBForCompaction) {
	s.db = db
	go s.sample()
}

// Unregister implements pebble.CompactionScheduler: it stops the sampler
// and waits for a grant in progress; nothing is granted after it.
func (s *compactionScheduler) Unregister() {
	close(s.stop)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unregistered = true
	for s.granting {
		s.cond.Wait()
	}
}

// TrySchedule implements pebble.CompactionScheduler.
func (s *compactionScheduler) TrySchedule() (bool, pebble.CompactionGrantHandle) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.unregistered {
		return false, nil
	}
	s.lastAllowed = s.db.GetAllowedWithoutPermission()
	if s.lastAllowed > s.running {
		s.running++
		return true, s
	}
	return false, nil
}

// UpdateGetAllowedWithoutPermission implements pebble.CompactionScheduler:
// a raised allowance wakes the sampler to grant at once.
func (s *compactionScheduler) UpdateGetAllowedWithoutPermission() {
	s.mu.Lock()
	allowed := s.db.GetAllowedWithoutPermission()
	raised := allowed > s.lastAllowed
	s.lastAllowed = allowed
	s.mu.Unlock()
	if raised {
		select {
		case s.poke <- struct{}{}:
		default:
		}
	}
}

// Started, MeasureCPU and CumulativeStats implement
// pebble.CompactionGrantHandle; this scheduler does not pace.
func (s *compactionScheduler) Started()                                          {}
func (s *compactionScheduler) MeasureCPU(pebble.CompactionGoroutineKind)         {}
func (s *compactionScheduler) CumulativeStats(pebble.CompactionGrantHandleStats) {}

// Done implements pebble.CompactionGrantHandle: a compaction ended, which
// may let a waiting one run.
func (s *compactionScheduler) Done() {
	s.mu.Lock()
	s.running--
	s.mu.Unlock()
	s.grant()
}

func (s *compactionScheduler) sample() {
	defer close(s.done)
	// The samples fall on whole seconds since the Unix epoch, with the
	// other periodic work of an idle node (a cluster node's ticks and
	// gossip rounds fall on multiples of the gossip interval): a wake-up
	// of its own every second was one of the ~13 a second left in an
	// idle node (issue 17 item 1).
	// A poke before then grants at once but starts no ticker: the
	// ticker starts on the whole second, or it would keep the poke's phase.
	first := time.NewTimer(compactionSampleEvery - time.Duration(time.Now().UnixNano()%int64(compactionSampleEvery)))
	for waiting := true; waiting; {
		select {
		case <-s.stop:
			first.Stop()
			return
		case <-first.C:
			waiting = false
		case <-s.poke:
		}
		s.grant()
	}
	t := time.NewTicker(compactionSampleEvery)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		case <-s.poke:
		}
		s.grant()
	}
}

// grant lets waiting compactions run while the allowance has room, one
// granter at a time, calling into the store without holding mu.
func (s *compactionScheduler) grant() {
	s.mu.Lock()
	for s.granting {
		s.cond.Wait()
	}
	if s.unregistered {
		s.mu.Unlock()
		return
	}
	s.lastAllowed = s.db.GetAllowedWithoutPermission()
	room := s.lastAllowed - s.running
	if room <= 0 {
		s.mu.Unlock()
		return
	}
	s.granting = true
	s.mu.Unlock()
	for ; room > 0; room-- {
		if waiting, _ := s.db.GetWaitingCompaction(); !waiting || !s.db.Schedule(s) {
			break
		}
		s.mu.Lock()
		s.running++
		s.mu.Unlock()
	}
	s.mu.Lock()
	s.granting = false
	s.cond.Broadcast()
	s.mu.Unlock()
}
