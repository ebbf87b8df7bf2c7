package dashboard

import (
	"context"
	"sync"
	"time"

	"github.com/chime-scheduler/chime/node/clock"
	"github.com/chime-scheduler/chime/node/dispatch"
	"github.com/chime-scheduler/chime/ring"
	"github.com/chime-scheduler/chime/slots"
)

// Source is what a Dashboard reads from its node. Its methods are called
// from the goroutine that takes snapshots and from HTTP handlers at the
// same time, so they must be safe for concurrent use.
type Source interface {
	// Stats returns the node's own readings.
	Stats() (Stats, error)
	// LatenessBuckets returns the fire-lateness histogram's cumulative
	// bucket counts and their upper bounds (seconds), the last bucket
	// being +Inf; nil while there is no histogram.
	LatenessBuckets() (cum []uint64, bounds []float64)
	// ScanDue calls fn with the wake time (Unix ns) of every due-index
	// entry in [from, to) of the slots this node owns, until fn returns
	// false.
	ScanDue(from, to int64, fn func(wake int64) bool) error
	// View returns the cluster as this node sees it, nil for a standalone
	// node. The same *View must come back until the view changes: the
	// slot table's bytes are built once per View.
	View() *View
	// SlotHealth returns the slots this node owns that are
	// under-replicated, importing (given to it but not served yet) and
	// stalled (not fired for --overdue-after).
	SlotHealth() (under, importing, stalled []uint16)
	// FetchMember calls GET /internal/v1/member on the member, signed as
	// calls between nodes are, and returns the answer's status and body.
	FetchMember(ctx context.Context, name, httpAddr string) (status int, body []byte, err error)
}

// Stats are the node readings a dashboard row shows.
type Stats struct {
	// Metrics are the node's counters and gauges by name, labels included
	// (as in GET /v1/stats).
	Metrics       map[string]float64
	UptimeSeconds float64
	// Ready: the node has loaded its due tasks (and, in a cluster, its view
	// has settled). An active node that is not ready shows as loading.
	Ready        bool
	TasksOverdue int64
	SlotsStalled int
	// TasksStored is the count of stored tasks, -1 while unknown.
	TasksStored int64
}

// View is one picture of the cluster, as the node sees it.
type View struct {
	// Members is every known member by name, dead and left too: the rows of
	// a cluster snapshot, in the order Snapshot.SlotOwners indexes.
	Members []Member
	// Table is the slot table computed from the eligible members.
	Table ring.Table
}

// Member is one member of a View, with gossip's names for its lifecycle
// state and liveness (as in GET /v1/cluster).
type Member struct {
	Name       string
	GossipAddr string
	HTTPAddr   string
	State      string // joining, active, draining
	Status     string // alive, suspect, dead, left
	// Up: alive or suspect, so worth asking for its row.
	Up bool
}

// Config is what a Dashboard knows of its node besides the Source.
type Config struct {
	Name     string // the node's name (Snapshot.Self)
	HTTPAddr string
	// Insecure: the node runs with --insecure-cluster; the dashboard warns.
	Insecure bool
	// Now is the clock; nil means clock.Real.Now.
	Now func() time.Time
	// Hosts is the callback latency per host, which the node's dispatcher
	// feeds.
	Hosts *dispatch.HostStats
	// Circuits returns the node's callback circuits that are not closed
	// (the circuit breaker); nil: none (the breaker is off).
	Circuits func() []dispatch.CircuitInfo
}

// heatmap parameters: 60 one-minute buckets, refreshed at most every 15 s,
// and a scan bounded to heatmapMaxKeys index entries.
const (
	heatmapBuckets = 60
	heatmapBucket  = time.Minute
	heatmapRefresh = 15 * time.Second
	heatmapMaxKeys = 2_000_000
	maxEvents      = 200
	rateWindow     = 900 * time.Millisecond
)

// Dashboard builds snapshots of one node (and, in a cluster, of every
// member it sees) and keeps what they need between calls: the counters of
// the previous call, to turn them into rates, the last heatmap, the event
// timeline and every member's last good row.
type Dashboard struct {
	cfg Config
	src Source
	mu  struct {
		sync.Mutex
		at      time.Time
		prev    map[string]float64
		rates   MemberSnapshot
		heat    WheelHeatmap
		heatAt  time.Time
		events  []Event
		latPrev []uint64
		// table holds the slot table, built on first use: one node owns
		// every slot, so it never changes and every snapshot shares its
		// (never modified) slices.
		table *Snapshot
		// clusterTable is the slot table of one view, for a cluster
		// member: rebuilt when the view changes, shared (never modified)
		// by every snapshot of that view.
		clusterTable struct {
			v      *View
			owners []byte
		}
		// peers holds the last good answer of every other member of the
		// view, by name, for members that do not answer in time.
		peers map[string]peerAnswer
	}
}

// New returns the dashboard of the node src reads. It starts nothing.
func New(cfg Config, src Source) *Dashboard {
	if cfg.Now == nil {
		cfg.Now = clock.Real.Now
	}
	return &Dashboard{cfg: cfg, src: src}
}

// Note records a timeline event (kind: start, join, dead, leave, restart,
// state, gone, table…); the timeline keeps the last 200.
func (d *Dashboard) Note(kind, text string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.mu.events = append(d.mu.events, Event{Time: d.cfg.Now(), Kind: kind, Text: text})
	if len(d.mu.events) > maxEvents {
		d.mu.events = d.mu.events[len(d.mu.events)-maxEvents:]
	}
}

// Snapshot returns the dashboard snapshot. Rates cover the time since the
// previous call (about a second when the websocket hub drives it).
//
// A standalone node is a one-node cluster: it (Members[0]) owns every slot,
// all ok, table version 1. A cluster member lists every member of its view,
// dead and left ones too, with the live stats each serves at
// GET /internal/v1/member, fetched in parallel (see clusterSnapshot), and the
// slot table of its view.
func (d *Dashboard) Snapshot(ctx context.Context) (*Snapshot, error) {
	v := d.src.View()
	self, heat, err := d.localRow(ctx, v)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	events := append([]Event(nil), d.mu.events...)
	if d.mu.table == nil {
		d.mu.table = singleNodeTable(d.cfg.Name)
	}
	table := d.mu.table
	d.mu.Unlock()
	snap := &Snapshot{
		Time:         d.cfg.Now(),
		Self:         d.cfg.Name,
		Insecure:     d.cfg.Insecure,
		Members:      []MemberSnapshot{self},
		SlotOwners:   table.SlotOwners,
		SlotStates:   table.SlotStates,
		TableVersion: table.TableVersion,
		Events:       events,
		Wheel:        heat,
		Hosts:        d.cfg.Hosts.Top(10),
		URLs:         d.cfg.Hosts.TopURLs(10),
	}
	circuits := [][]dispatch.CircuitInfo{d.circuits()}
	if v != nil {
		circuits = append(circuits, d.clusterSnapshot(ctx, v, self, snap)...)
	}
	snap.Hosts = markCircuits(snap.Hosts, circuits...)
	return snap, nil
}

// localRow returns this node's own dashboard row, with rates since the
// previous call (at least rateWindow apart, so that several callers do not
// shorten each other's windows), and its wheel heatmap (rescanned at most
// every heatmapRefresh). v is the node's view, nil standalone.
func (d *Dashboard) localRow(ctx context.Context, v *View) (MemberSnapshot, WheelHeatmap, error) {
	st, err := d.src.Stats()
	if err != nil {
		return MemberSnapshot{}, WheelHeatmap{}, err
	}
	now := d.cfg.Now()
	m := st.Metrics
	self := MemberSnapshot{
		Name: d.cfg.Name, State: "active", Status: "alive", HTTPAddr: d.cfg.HTTPAddr,
		SlotsOwned: slots.Count, TasksStored: st.TasksStored,
		WheelTasks:    int(m["chime_wheel_tasks"]),
		RSSBytes:      m["process_resident_memory_bytes"],
		Goroutines:    int(m["go_goroutines"]),
		DiskBytes:     m["chime_store_disk_bytes"],
		UptimeSeconds: st.UptimeSeconds,

		AntiEntropyResyncs: int64(m["chime_antientropy_resyncs_total"]),
		TasksOverdue:       st.TasksOverdue,
		SlotsStalled:       st.SlotsStalled,
	}
	if v != nil {
		d.selfFromView(&self, v)
	}
	if !st.Ready && self.State == "active" {
		self.State = "loading"
	}
	d.mu.Lock()
	if dt := now.Sub(d.mu.at).Seconds(); d.mu.prev != nil && dt >= rateWindow.Seconds() {
		rate := func(k string) float64 { return (m[k] - d.mu.prev[k]) / dt }
		r := &d.mu.rates
		r.FiresPerSec = rate(`chime_fires_total{result="success"}`) + rate(`chime_fires_total{result="failure"}`) + rate(`chime_fires_total{result="gone"}`)
		r.FailuresPerSec = rate(`chime_fires_total{result="failure"}`) + rate(`chime_fires_total{result="gone"}`)
		r.CreatesPerSec = rate("chime_tasks_created_total")
		r.CPUPercent = 100 * rate("process_cpu_seconds_total")
		r.LatenessP50Ms, r.LatenessP99Ms = d.recentLateness(&d.mu.latPrev)
		d.mu.prev, d.mu.at = m, now
	} else if d.mu.prev == nil {
		d.mu.prev, d.mu.at = m, now
		d.recentLateness(&d.mu.latPrev)
	}
	self.FiresPerSec, self.FailuresPerSec, self.CreatesPerSec = d.mu.rates.FiresPerSec, d.mu.rates.FailuresPerSec, d.mu.rates.CreatesPerSec
	self.CPUPercent, self.LatenessP50Ms, self.LatenessP99Ms = d.mu.rates.CPUPercent, d.mu.rates.LatenessP50Ms, d.mu.rates.LatenessP99Ms
	refresh := now.Sub(d.mu.heatAt) >= heatmapRefresh
	heat := d.mu.heat
	d.mu.Unlock()

	if refresh {
		heat = d.heatmap(ctx, now)
		d.mu.Lock()
		d.mu.heat, d.mu.heatAt = heat, now
		d.mu.Unlock()
	}
	return self, heat, nil
}

// selfFromView sets row's lifecycle state, liveness, gossip address and
// slot counts from this node's own entry in v: joining and alive until it
// is in the view.
func (d *Dashboard) selfFromView(row *MemberSnapshot, v *View) {
	c := v.Table.Counts()[d.cfg.Name]
	row.State, row.Status, row.SlotsOwned, row.SlotsFollowing = "joining", "alive", c.Owned, c.Following
	for _, m := range v.Members {
		if m.Name == d.cfg.Name {
			row.State, row.Status, row.GossipAddr = m.State, m.Status, m.GossipAddr
		}
	}
}

// recentLateness returns p50 and p99 fire lateness (ms) of the fires since
// the previous call, from the lateness histogram's bucket deltas.
func (d *Dashboard) recentLateness(prev *[]uint64) (p50, p99 float64) {
	cum, bounds := d.src.LatenessBuckets()
	delta := make([]uint64, len(cum))
	for i := range cum {
		delta[i] = cum[i]
		if i < len(*prev) {
			delta[i] -= (*prev)[i]
		}
	}
	*prev = cum
	return 1000 * cumQuantile(delta, bounds, 0.5), 1000 * cumQuantile(delta, bounds, 0.99)
}

// cumQuantile interpolates quantile q in cumulative bucket counts.
func cumQuantile(cum []uint64, bounds []float64, q float64) float64 {
	if len(cum) == 0 || cum[len(cum)-1] == 0 {
		return 0
	}
	rank := q * float64(cum[len(cum)-1])
	prevB, prevC := 0.0, 0.0
	for i, c := range cum {
		if float64(c) >= rank {
			if i >= len(bounds) || float64(c) == prevC {
				return prevB
			}
			return prevB + (bounds[i]-prevB)*(rank-prevC)/(float64(c)-prevC)
		}
		prevB, prevC = bounds[min(i, len(bounds)-1)], float64(c)
	}
	return prevB
}

// heatmap counts due-index entries per minute over the next hour, in the
// slots this node owns: the replicas it holds as a follower are their
// owner's to count, so that a cluster's heatmaps add up.
func (d *Dashboard) heatmap(ctx context.Context, now time.Time) WheelHeatmap {
	start := now.Truncate(heatmapBucket)
	h := WheelHeatmap{Start: start, BucketSeconds: int(heatmapBucket / time.Second), Counts: make([]int, heatmapBuckets)}
	from, to := start.UnixNano(), start.Add(heatmapBuckets*heatmapBucket).UnixNano()
	seen := 0
	err := d.src.ScanDue(from, to, func(wake int64) bool {
		h.Counts[(wake-from)/int64(heatmapBucket)]++
		seen++
		if seen >= heatmapMaxKeys || ctx.Err() != nil {
			h.Truncated = true
			return false
		}
		return true
	})
	if err != nil {
		h.Truncated = true
	}
	return h
}

// circuits returns this node's circuits that are not closed.
func (d *Dashboard) circuits() []dispatch.CircuitInfo {
	if d.cfg.Circuits == nil {
		return nil
	}
	return d.cfg.Circuits()
}

// markCircuits sets the circuit state and held count of the hosts whose
// circuit is not closed on some member (open wins over half_open; held
// fires add up), and adds such hosts missing from the top. The circuits'
// hosts are dispatch.HostKey's, the latency table's may carry redacted
// credentials: they are matched by HostKey.
func markCircuits(hosts []HostLatency, lists ...[]dispatch.CircuitInfo) []HostLatency {
	type agg struct {
		state string
		held  int
	}
	by := map[string]*agg{}
	var order []string
	for _, l := range lists {
		for _, c := range l {
			a := by[c.Host]
			if a == nil {
				a = &agg{state: c.State}
				by[c.Host] = a
				order = append(order, c.Host)
			}
			if c.State == "open" {
				a.state = "open"
			}
			a.held += c.Held
		}
	}
	if len(by) == 0 {
		return hosts
	}
	seen := map[string]bool{}
	for i := range hosts {
		k := dispatch.HostKey(hosts[i].Host)
		if a := by[k]; a != nil {
			hosts[i].Circuit, hosts[i].Held = a.state, a.held
			seen[k] = true
		}
	}
	for _, h := range order {
		if !seen[h] {
			hosts = append(hosts, HostLatency{Host: h, Circuit: by[h].state, Held: by[h].held})
		}
	}
	return hosts
}
