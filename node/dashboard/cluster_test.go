package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chime-scheduler/chime/node/dispatch"
	"github.com/chime-scheduler/chime/ring"
	"github.com/chime-scheduler/chime/slots"
)

// fakeSource is a node as a Dashboard sees it: fixed stats, a due index of
// wake times, a view, and members that answer from peers (by name) or with
// fetchErr.
type fakeSource struct {
	stats    Stats
	wakes    []int64
	view     *View
	under    []uint16
	stalled  []uint16
	mu       sync.Mutex
	peers    map[string]func(ctx context.Context) (int, []byte, error)
	fetched  []string
	lateness []uint64
}

func (f *fakeSource) Stats() (Stats, error) { return f.stats, nil }
func (f *fakeSource) LatenessBuckets() ([]uint64, []float64) {
	return f.lateness, []float64{0.01, 0.1, 1}
}
func (f *fakeSource) ScanDue(from, to int64, fn func(int64) bool) error {
	for _, w := range f.wakes {
		if w >= from && w < to && !fn(w) {
			break
		}
	}
	return nil
}
func (f *fakeSource) View() *View { return f.view }
func (f *fakeSource) SlotHealth() (under, importing, stalled []uint16) {
	return f.under, nil, f.stalled
}
func (f *fakeSource) FetchMember(ctx context.Context, name, _ string) (int, []byte, error) {
	f.mu.Lock()
	f.fetched = append(f.fetched, name)
	p := f.peers[name]
	f.mu.Unlock()
	if p == nil {
		return 0, nil, errors.New("connection refused")
	}
	return p(ctx)
}

// answer is a peer that answers a with 200.
func answer(a MemberAnswer) func(context.Context) (int, []byte, error) {
	b, err := json.Marshal(a)
	return func(context.Context) (int, []byte, error) { return http.StatusOK, b, err }
}

// testView is a view of members named and alive (or, with a "!" suffix,
// dead), all active: the slot table spreads the slots over the live ones.
func testView(names ...string) *View {
	v := &View{}
	var eligible []ring.Member
	for _, n := range names {
		name := strings.TrimSuffix(n, "!")
		m := Member{Name: name, State: "active", Status: "alive", Up: true, HTTPAddr: "h-" + name, GossipAddr: "g-" + name}
		if strings.HasSuffix(n, "!") {
			m.Status, m.Up = "dead", false
		} else {
			eligible = append(eligible, ring.Member{Name: m.Name, HTTPAddr: m.HTTPAddr})
		}
		v.Members = append(v.Members, m)
	}
	v.Table = ring.Assign(eligible, slots.Count)
	return v
}

func newTestDashboard(src *fakeSource, now *time.Time) *Dashboard {
	return New(Config{Name: "a", HTTPAddr: "h-a", Now: func() time.Time { return *now }, Hosts: dispatch.NewHostStats()}, src)
}

// TestClusterSnapshotRows: one row per member of the view in its order, a
// live member's own row with the view's identity and counts, a failing or
// dead one stale (the dead one never asked), a member that stops answering
// keeping its last row, and members gone from the view forgotten.
func TestClusterSnapshotRows(t *testing.T) {
	now := time.Date(2026, 1, 1, 10, 0, 30, 0, time.UTC)
	src := &fakeSource{stats: Stats{Metrics: map[string]float64{}, Ready: true, TasksStored: 3}, view: testView("a", "b", "c", "d", "e!"),
		peers: map[string]func(context.Context) (int, []byte, error){
			"b": answer(MemberAnswer{MemberSnapshot: MemberSnapshot{Name: "b", State: "active", TasksStored: 7, Goroutines: 9},
				Wheel: &WheelHeatmap{Start: now.Truncate(time.Minute), BucketSeconds: 60, Counts: []int{0, 2}}}),
			"c": func(context.Context) (int, []byte, error) {
				return http.StatusUnauthorized, []byte(`{"error":"no"}`), nil
			},
			"d": func(context.Context) (int, []byte, error) { return http.StatusOK, []byte(`{`), nil },
		}}
	d := newTestDashboard(src, &now)
	s, err := d.Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CheckSlotTable(); err != nil || s.TableVersion != src.view.Table.Checksum() {
		t.Fatalf("table: %v, version %d, want the view's checksum", err, s.TableVersion)
	}
	var names []string
	for _, m := range s.Members {
		names = append(names, m.Name)
	}
	if want := []string{"a", "b", "c", "d", "e"}; !slices.Equal(names, want) {
		t.Fatalf("members %v, want %v", names, want)
	}
	counts := src.view.Table.Counts()
	for i, m := range s.Members {
		if m.SlotsOwned != counts[m.Name].Owned || m.SlotsFollowing != counts[m.Name].Following || m.GossipAddr != "g-"+m.Name {
			t.Errorf("row %d %+v: want the view's counts %+v and gossip address", i, m, counts[m.Name])
		}
	}
	a, b, c, dd, e := s.Members[0], s.Members[1], s.Members[2], s.Members[3], s.Members[4]
	if a.Stale || a.TasksStored != 3 || a.State != "active" || a.Status != "alive" {
		t.Errorf("self row %+v", a)
	}
	if b.Stale || b.TasksStored != 7 || b.Goroutines != 9 || b.HTTPAddr != "h-b" || b.Error != "" {
		t.Errorf("b's row %+v, want its own, fresh", b)
	}
	if !c.Stale || c.TasksStored != -1 || c.Error != `c answered 401: {"error":"no"}` {
		t.Errorf("c's row %+v, want stale with the status", c)
	}
	if !dd.Stale || !strings.HasPrefix(dd.Error, "d answered a malformed row") {
		t.Errorf("d's row %+v, want stale, malformed", dd)
	}
	if !e.Stale || e.Status != "dead" || e.Error != "" || slices.Contains(src.fetched, "e") {
		t.Errorf("e's row %+v (fetched %v), want stale, dead, never asked", e, src.fetched)
	}
	if s.Wheel.Counts[1] != 2 {
		t.Errorf("wheel %v, want b's two fires in bucket 1", s.Wheel.Counts)
	}

	// b stops answering: its last row stays, stale, with its age.
	src.peers["b"] = nil
	now = now.Add(3 * time.Second)
	s, _ = d.Snapshot(t.Context())
	if b := s.Members[1]; !b.Stale || b.TasksStored != 7 || b.StatsAgeSeconds != 3 || !strings.HasPrefix(b.Error, "unreachable: ") {
		t.Errorf("b after it stopped answering: %+v", b)
	}

	// A view without b forgets b's last row: it is stale and empty when b
	// comes back unanswering.
	src.view = testView("a")
	s, _ = d.Snapshot(t.Context())
	d.mu.Lock()
	cached := len(d.mu.peers)
	d.mu.Unlock()
	if len(s.Members) != 1 || cached != 0 {
		t.Errorf("one-member view: %d rows, %d cached, want 1 and 0", len(s.Members), cached)
	}
	src.view = testView("a", "b")
	s, _ = d.Snapshot(t.Context())
	if b := s.Members[1]; !b.Stale || b.TasksStored != -1 {
		t.Errorf("b back but silent: %+v, want an empty stale row", b)
	}
}

// TestFetchMemberTimeout: a member that does not answer within
// memberFetchTimeout is unreachable, and the snapshot does not wait longer.
func TestFetchMemberTimeout(t *testing.T) {
	now := time.Now()
	src := &fakeSource{stats: Stats{Metrics: map[string]float64{}}, view: testView("a", "b"),
		peers: map[string]func(context.Context) (int, []byte, error){
			"b": func(ctx context.Context) (int, []byte, error) { <-ctx.Done(); return 0, nil, ctx.Err() },
		}}
	start := time.Now()
	s, err := newTestDashboard(src, &now).Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 5*memberFetchTimeout {
		t.Errorf("the snapshot took %v", took)
	}
	if want := "unreachable: timed out after 500ms"; s.Members[1].Error != want {
		t.Errorf("b's error %q, want %q", s.Members[1].Error, want)
	}
}

// TestClusterSnapshotSlotStates: the slot map's health comes from every
// member's own report — slots whose follower lags are under-replicated,
// slots still being taken over are unavailable, slots not firing stalled —
// and a slot no member owns is unavailable.
func TestClusterSnapshotSlotStates(t *testing.T) {
	now := time.Now()
	for _, tc := range []struct {
		name    string
		view    *View
		want    map[int]SlotState // others ok
		allGone bool
	}{
		{"reported by a member", testView("a", "f"),
			map[int]SlotState{1: SlotStalled, 2: SlotUnderReplicated, 3: SlotUnderReplicated, 5: SlotUnderReplicated, 7: SlotUnavailable, 9: SlotUnavailable, 11: SlotStalled}, false},
		{"no member owns anything", &View{Members: []Member{{Name: "a", State: "joining", Status: "alive", Up: true}},
			Table: ring.Assign(nil, slots.Count)}, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := &fakeSource{stats: Stats{Metrics: map[string]float64{}}, view: tc.view, under: []uint16{2}, stalled: []uint16{1},
				peers: map[string]func(context.Context) (int, []byte, error){
					"f": answer(MemberAnswer{MemberSnapshot: MemberSnapshot{Name: "f"},
						UnderReplicated: []uint16{3, 5, 7}, Importing: []uint16{7, 9}, Stalled: []uint16{11, 40000}}),
				}}
			s, err := newTestDashboard(src, &now).Snapshot(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			for slot, st := range s.SlotStates {
				want := tc.want[slot]
				if tc.allGone {
					want = SlotUnavailable
				}
				if st != want {
					t.Fatalf("slot %d is %v, want %v", slot, st, want)
				}
			}
		})
	}
}

// TestSlotOwnersBeyond255: members past index 254 do not fit a byte; their
// slots show as NoOwner and the table stays valid.
func TestSlotOwnersBeyond255(t *testing.T) {
	names := make([]string, 300)
	for i := range names {
		names[i] = fmt.Sprintf("m%03d", i)
	}
	v := testView(names...)
	owners := slotOwners(v)
	s := &Snapshot{Members: make([]MemberSnapshot, len(v.Members))}
	if err := s.SetSlotTable(1, owners, make([]SlotState, slots.Count)); err != nil {
		t.Fatal(err)
	}
	none := 0
	for slot, o := range owners {
		if o == NoOwner {
			none++
			continue
		}
		if want, _ := v.Table.Owner(uint16(slot)); v.Members[o].Name != want.Name {
			t.Fatalf("slot %d: owner %s, want %s", slot, v.Members[o].Name, want.Name)
		}
	}
	if none == 0 {
		t.Errorf("no slot without an owner byte, want those of members 255 and up")
	}
}

func TestMergeWheels(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	w := func(start time.Time, truncated bool, counts ...int) WheelHeatmap {
		return WheelHeatmap{Start: start, BucketSeconds: 60, Counts: counts, Truncated: truncated}
	}
	tests := []struct {
		name string
		in   []WheelHeatmap
		want WheelHeatmap
	}{
		{"one", []WheelHeatmap{w(t0, false, 1, 2, 3)}, w(t0, false, 1, 2, 3)},
		{"same start", []WheelHeatmap{w(t0, false, 1, 2, 3), w(t0, false, 10, 0, 5)}, w(t0, false, 11, 2, 8)},
		{"a minute ahead", []WheelHeatmap{w(t0, false, 1, 2, 3), w(t0.Add(time.Minute), false, 10, 20, 30)}, w(t0, false, 1, 12, 23)},
		{"a minute behind", []WheelHeatmap{w(t0, false, 1, 2, 3), w(t0.Add(-time.Minute), false, 10, 20, 30)}, w(t0, false, 21, 32, 3)},
		{"truncated part", []WheelHeatmap{w(t0, false, 1, 2, 3), w(t0, true, 1, 1, 1)}, w(t0, true, 2, 3, 4)},
		{"other bucket size ignored", []WheelHeatmap{w(t0, false, 1), {Start: t0, BucketSeconds: 30, Counts: []int{9}}}, w(t0, false, 1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			first := slices.Clone(tt.in[0].Counts)
			got := mergeWheels(tt.in)
			if !got.Start.Equal(tt.want.Start) || got.Truncated != tt.want.Truncated || !slices.Equal(got.Counts, tt.want.Counts) {
				t.Errorf("mergeWheels() = %+v, want %+v", got, tt.want)
			}
			if !slices.Equal(tt.in[0].Counts, first) {
				t.Errorf("mergeWheels changed its first input to %v", tt.in[0].Counts)
			}
		})
	}
}

// TestClusterSnapshotURLs: the per-URL latency of the members adds up, as
// the per-host one does: the serving node's own and each live member's.
func TestClusterSnapshotURLs(t *testing.T) {
	now := time.Date(2026, 1, 1, 10, 0, 30, 0, time.UTC)
	peer := dispatch.NewHostStats()
	for range 3 {
		peer.Observe("http://x", "http://x/slow", 300*time.Millisecond)
	}
	src := &fakeSource{stats: Stats{Metrics: map[string]float64{}, Ready: true}, view: testView("a", "b"),
		peers: map[string]func(context.Context) (int, []byte, error){
			"b": answer(MemberAnswer{MemberSnapshot: MemberSnapshot{Name: "b", State: "active"},
				Hosts: peer.Hists(20), URLs: peer.URLHists(20)}),
		}}
	d := newTestDashboard(src, &now)
	for range 5 {
		d.cfg.Hosts.Observe("http://x", "http://x/fast", time.Millisecond)
	}
	d.cfg.Hosts.Observe("http://x", "http://x/slow", 300*time.Millisecond)
	s, err := d.Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(s.URLs) != 2 || s.URLs[0].Host != "http://x/fast" || s.URLs[0].Count != 5 || s.URLs[1].Host != "http://x/slow" || s.URLs[1].Count != 4 {
		t.Errorf("URLs = %+v, want fast (5) and slow (4, both members)", s.URLs)
	}
	if len(s.Hosts) != 1 || s.Hosts[0].Count != 9 {
		t.Errorf("Hosts = %+v, want x with 9", s.Hosts)
	}
}
