package ui

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/chime-scheduler/chime/ring"
)

// TestMain fails the run if any goroutine (hub, writers, readers, test
// servers) survives the tests.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// The fake snapshot mirrors the JSON of the node's snapshot (node/dashboard/snapshot.go)
// without importing it: ui must not depend on node or its parts. (The test uses ring, a
// pure package, to build a real slot table.)
type fakeSnapshot struct {
	Time         time.Time     `json:"time"`
	Self         string        `json:"self"`
	Members      []fakeMember  `json:"members"`
	SlotOwners   []byte        `json:"slot_owners"` // one byte per slot (base64 in JSON): index into Members, 255 none
	SlotStates   []byte        `json:"slot_states"` // one byte per slot (base64 in JSON): 0 ok, 1 under-replicated, 2 unavailable
	TableVersion uint64        `json:"table_version"`
	Events       []fakeEvent   `json:"events"`
	Wheel        fakeWheel     `json:"wheel"`
	Hosts        []fakeLatency `json:"hosts"`
	Blob         string        `json:"blob,omitempty"` // padding for the slow-client tests
}

type fakeMember struct {
	Name           string  `json:"name"`
	State          string  `json:"state"`
	Status         string  `json:"status"`
	Stale          bool    `json:"stale"`
	HTTPAddr       string  `json:"http_addr"`
	GossipAddr     string  `json:"gossip_addr"`
	SlotsOwned     int     `json:"slots_owned"`
	SlotsFollowing int     `json:"slots_following"`
	TasksStored    int64   `json:"tasks_stored"`
	WheelTasks     int     `json:"wheel_tasks"`
	FiresPerSec    float64 `json:"fires_per_sec"`
	FailuresPerSec float64 `json:"failures_per_sec"`
	CreatesPerSec  float64 `json:"creates_per_sec"`
	LatenessP50Ms  float64 `json:"lateness_p50_ms"`
	LatenessP99Ms  float64 `json:"lateness_p99_ms"`
	CPUPercent     float64 `json:"cpu_percent"`
	RSSBytes       float64 `json:"rss_bytes"`
	Goroutines     int     `json:"goroutines"`
	DiskBytes      float64 `json:"disk_bytes"`
	UptimeSeconds  float64 `json:"uptime_seconds"`

	AntiEntropyResyncs int64 `json:"antientropy_resyncs"`
}

type fakeEvent struct {
	Time time.Time `json:"time"`
	Kind string    `json:"kind"`
	Text string    `json:"text"`
}

type fakeWheel struct {
	Start         time.Time `json:"start"`
	BucketSeconds int       `json:"bucket_seconds"`
	Counts        []int     `json:"counts"`
	Truncated     bool      `json:"truncated"`
}

type fakeLatency struct {
	Host  string  `json:"host"`
	Count uint64  `json:"count"`
	P50Ms float64 `json:"p50_ms"`
	P90Ms float64 `json:"p90_ms"`
	P99Ms float64 `json:"p99_ms"`
}

// numSlots is the cluster's slot count, the length of the slot table.
const numSlots = 16384

// newFakeSnapshot builds a snapshot of n members whose slot table is the
// one ring.Assign computes for them (rendezvous hashing: with 5 members
// about 13,000 runs of one owner), with slots 8000–8099 under-replicated.
func newFakeSnapshot(n int, now time.Time) *fakeSnapshot {
	s := &fakeSnapshot{Time: now, Self: "chime-1", TableVersion: 1}
	members := make([]ring.Member, n)
	index := make(map[string]byte, n)
	for i := range members {
		members[i] = ring.Member{Name: fmt.Sprintf("chime-%d", i+1), HTTPAddr: fmt.Sprintf("127.0.0.1:%d", 7070+i)}
		index[members[i].Name] = byte(i)
	}
	table := ring.Assign(members, numSlots)
	owners, states := make([]byte, numSlots), make([]byte, numSlots)
	for slot := range numSlots {
		owner, _ := table.Owner(uint16(slot))
		owners[slot] = index[owner.Name]
		if slot >= 8000 && slot < 8100 {
			states[slot] = 1
		}
	}
	s.SlotOwners, s.SlotStates = owners, states
	counts := table.Counts()
	for i, m := range members {
		s.Members = append(s.Members, fakeMember{
			Name: m.Name, State: "active", Status: "alive",
			HTTPAddr: m.HTTPAddr, GossipAddr: fmt.Sprintf("127.0.0.1:%d", 7946+i),
			SlotsOwned: counts[m.Name].Owned, SlotsFollowing: counts[m.Name].Following, TasksStored: int64(1000 * (i + 1)),
			WheelTasks: 40 * (i + 1), FiresPerSec: float64(10 * (i + 1)), LatenessP50Ms: 1.5, LatenessP99Ms: 8,
			CPUPercent: 12.5, RSSBytes: 90 << 20, Goroutines: 60, DiskBytes: 64 << 20, UptimeSeconds: 3600,
		})
	}
	s.Events = []fakeEvent{{Time: now.Add(-time.Minute), Kind: "join", Text: "chime-2 joined"}}
	s.Wheel = fakeWheel{Start: now.Truncate(time.Minute), BucketSeconds: 60, Counts: make([]int, 60)}
	s.Wheel.Counts[3] = 500
	s.Hosts = []fakeLatency{{Host: "http://127.0.0.1:9000", Count: 1000, P50Ms: 2, P90Ms: 5, P99Ms: 20}}
	return s
}

// fakeAPI is a real implementation of API over canned data: it counts the
// snapshots taken, and can fail or block on demand.
type fakeAPI struct {
	members int
	blob    string

	mu struct {
		sync.Mutex
		calls int           // guards: snapshots taken
		err   error         // returned instead of a snapshot when set
		base  *fakeSnapshot // built on first use; each call copies it
	}
}

var _ API = (*fakeAPI)(nil)

func (f *fakeAPI) Snapshot(ctx context.Context) (any, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mu.calls++
	if f.mu.err != nil {
		return nil, f.mu.err
	}
	if f.mu.base == nil {
		f.mu.base = newFakeSnapshot(max(f.members, 1), time.Now())
		f.mu.base.Blob = f.blob
	}
	s := *f.mu.base
	s.Time = time.Now()
	return &s, nil
}

func (f *fakeAPI) calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.mu.calls
}

func (f *fakeAPI) fail(err error) {
	f.mu.Lock()
	f.mu.err = err
	f.mu.Unlock()
}

var errFakeDown = errors.New("fake: store is closed")

// waitFor polls cond until it holds, failing the test after 10 s. It waits
// for an outcome; it never asserts on how long it took.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
