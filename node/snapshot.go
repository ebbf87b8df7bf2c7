package node

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/chime-scheduler/chime/slots"
)

// Snapshot is what the live dashboard shows: every member's vital signs,
// where the slots live, recent events, the pending-fire heatmap and
// callback latency per host. It is JSON for the websocket stream
// (GET /v1/ws) and GET /v1/snapshot. Field names are append-only.
type Snapshot struct {
	Time    time.Time        `json:"time"`
	Self    string           `json:"self"`
	Members []MemberSnapshot `json:"members"`
	// SlotMap lists compact slot ranges with their owner and state
	// ("ok", "under_replicated", "unavailable").
	SlotMap []SlotRange   `json:"slot_map"`
	Events  []Event       `json:"events"`
	Wheel   WheelHeatmap  `json:"wheel"`
	Hosts   []HostLatency `json:"hosts"`
}

// MemberSnapshot is one node's row in the dashboard.
type MemberSnapshot struct {
	Name           string  `json:"name"`
	State          string  `json:"state"`
	HTTPAddr       string  `json:"http_addr"`
	GossipAddr     string  `json:"gossip_addr"`
	SlotsOwned     int     `json:"slots_owned"`
	SlotsFollowing int     `json:"slots_following"`
	TasksStored    int64   `json:"tasks_stored"` // -1 while unknown (counting after a start)
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
}

// SlotRange is a run of consecutive slots with one owner and state.
type SlotRange struct {
	From  int    `json:"from"`
	To    int    `json:"to"` // inclusive
	Owner string `json:"owner"`
	State string `json:"state"`
}

// Event is one membership or handover event for the dashboard timeline.
type Event struct {
	Time time.Time `json:"time"`
	Kind string    `json:"kind"`
	Text string    `json:"text"`
}

// WheelHeatmap counts pending fires (by wake time) per bucket from Start.
type WheelHeatmap struct {
	Start         time.Time `json:"start"`
	BucketSeconds int       `json:"bucket_seconds"`
	Counts        []int     `json:"counts"`
	Truncated     bool      `json:"truncated"` // the scan stopped early; counts are lower bounds
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

// sampler turns counters into rates between dashboard snapshots.
type sampler struct {
	mu struct {
		sync.Mutex
		at      time.Time
		prev    map[string]float64
		rates   MemberSnapshot
		heat    WheelHeatmap
		heatAt  time.Time
		events  []Event
		latPrev []uint64
	}
}

// event records a timeline event.
func (n *Node) event(kind, text string) {
	s := &n.sampler
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.events = append(s.mu.events, Event{Time: n.now(), Kind: kind, Text: text})
	if len(s.mu.events) > maxEvents {
		s.mu.events = s.mu.events[len(s.mu.events)-maxEvents:]
	}
}

// Snapshot returns the dashboard snapshot of this node. Rates cover the
// time since the previous call (about a second when the websocket hub
// drives it).
func (n *Node) Snapshot(ctx context.Context) (*Snapshot, error) {
	st, err := n.stats()
	if err != nil {
		return nil, err
	}
	now := n.now()
	m := st.Metrics
	self := MemberSnapshot{
		Name: n.cfg.Name, State: "active", HTTPAddr: n.cfg.HTTPAddr,
		SlotsOwned: slots.Count, TasksStored: -1,
		WheelTasks:    int(m["chime_wheel_tasks"]),
		RSSBytes:      m["process_resident_memory_bytes"],
		Goroutines:    int(m["go_goroutines"]),
		DiskBytes:     m["chime_store_disk_bytes"],
		UptimeSeconds: st.UptimeSeconds,
	}
	if c, ok := n.taskCount(); ok {
		self.TasksStored = c
	}
	if !n.Ready() {
		self.State = "loading"
	}
	s := &n.sampler
	s.mu.Lock()
	// Rates cover at least rateWindow, so several callers (the websocket
	// hub, GET /v1/snapshot) do not shorten each other's windows.
	if dt := now.Sub(s.mu.at).Seconds(); s.mu.prev != nil && dt >= rateWindow.Seconds() {
		rate := func(k string) float64 { return (m[k] - s.mu.prev[k]) / dt }
		r := &s.mu.rates
		r.FiresPerSec = rate(`chime_fires_total{result="success"}`) + rate(`chime_fires_total{result="failure"}`) + rate(`chime_fires_total{result="gone"}`)
		r.FailuresPerSec = rate(`chime_fires_total{result="failure"}`) + rate(`chime_fires_total{result="gone"}`)
		r.CreatesPerSec = rate("chime_tasks_created_total")
		r.CPUPercent = 100 * rate("process_cpu_seconds_total")
		r.LatenessP50Ms, r.LatenessP99Ms = n.recentLateness(&s.mu.latPrev)
		s.mu.prev, s.mu.at = m, now
	} else if s.mu.prev == nil {
		s.mu.prev, s.mu.at = m, now
		n.recentLateness(&s.mu.latPrev)
	}
	self.FiresPerSec, self.FailuresPerSec, self.CreatesPerSec = s.mu.rates.FiresPerSec, s.mu.rates.FailuresPerSec, s.mu.rates.CreatesPerSec
	self.CPUPercent, self.LatenessP50Ms, self.LatenessP99Ms = s.mu.rates.CPUPercent, s.mu.rates.LatenessP50Ms, s.mu.rates.LatenessP99Ms
	refresh := now.Sub(s.mu.heatAt) >= heatmapRefresh
	heat := s.mu.heat
	events := append([]Event(nil), s.mu.events...)
	s.mu.Unlock()

	if refresh {
		heat = n.heatmap(ctx, now)
		s.mu.Lock()
		s.mu.heat, s.mu.heatAt = heat, now
		s.mu.Unlock()
	}
	return &Snapshot{
		Time:    now,
		Self:    n.cfg.Name,
		Members: []MemberSnapshot{self},
		SlotMap: []SlotRange{{From: 0, To: slots.Count - 1, Owner: n.cfg.Name, State: "ok"}},
		Events:  events,
		Wheel:   heat,
		Hosts:   n.hosts.top(10),
	}, nil
}

// recentLateness returns p50 and p99 fire lateness (ms) of the fires since
// the previous call, from the lateness histogram's bucket deltas.
func (n *Node) recentLateness(prev *[]uint64) (p50, p99 float64) {
	cum, bounds := n.metrics.latenessBuckets()
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

// heatmap counts due-index entries per minute over the next hour.
func (n *Node) heatmap(ctx context.Context, now time.Time) WheelHeatmap {
	start := now.Truncate(heatmapBucket)
	h := WheelHeatmap{Start: start, BucketSeconds: int(heatmapBucket / time.Second), Counts: make([]int, heatmapBuckets)}
	from, to := start.UnixNano(), start.Add(heatmapBuckets*heatmapBucket).UnixNano()
	seen := 0
	err := n.store.ScanDue(nil, from, to, func(_ uint16, _ string, wake int64) bool {
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

// callbackHost is the scheme://host:port part of a callback URL, the key of
// the per-host latency view.
func callbackHost(u string) string {
	rest := u
	if i := strings.Index(rest, "://"); i >= 0 {
		rest = rest[i+3:]
	}
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		return u[:len(u)-len(rest)+i]
	}
	return u
}
