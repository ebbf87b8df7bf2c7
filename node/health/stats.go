package health

import (
	"math"
	"sort"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Stats is the answer of GET /v1/stats: this node's counters and gauges,
// read from the same collectors /metrics exposes, keyed by metric name
// (with labels as name{label="value"}), plus lateness quantiles.
type Stats struct {
	Node          string             `json:"node"`
	UptimeSeconds float64            `json:"uptime_seconds"`
	Ready         bool               `json:"ready"`
	Metrics       map[string]float64 `json:"metrics"`
	LatenessP50   float64            `json:"fire_lateness_p50_seconds"`
	LatenessP99   float64            `json:"fire_lateness_p99_seconds"`
	// The safety net (Monitor): tasks in owned slots due more than
	// --overdue-after ago and not fired (-1 before the first scan), owned
	// slots not firing for that long (the first 100 of them, and how many
	// per reason), and why the node is degraded (none: healthy).
	TasksOverdue int64          `json:"tasks_overdue"`
	SlotsStalled int            `json:"slots_stalled"`
	StalledSlots []uint16       `json:"stalled_slots,omitempty"`
	StallReasons map[string]int `json:"stall_reasons,omitempty"`
	Degraded     []string       `json:"degraded,omitempty"`
	// Callbacks is the circuit breaker per callback host: whether it is
	// on, and the circuits not closed (open: fires held until the next
	// probe; half_open: a probe in flight).
	Callbacks Callbacks `json:"callbacks"`
}

// Callbacks is Stats.Callbacks.
type Callbacks struct {
	Breaker  string    `json:"breaker"` // on, off
	Circuits []Circuit `json:"circuits"`
}

// Circuit is one callback host's circuit that is not closed.
type Circuit struct {
	Host        string    `json:"host"`  // scheme://host:port
	State       string    `json:"state"` // open, half_open
	Held        int       `json:"held"`  // fires held, waiting for the circuit to close
	OpenedAt    time.Time `json:"opened_at"`
	NextProbeAt time.Time `json:"next_probe_at,omitzero"` // open: when the next probe may go
}

// Stats reads g's metrics into a Stats of node (up for uptime, ready or
// not) with the safety net's readings.
func (mon *Monitor) Stats(node string, uptime time.Duration, ready bool, g prometheus.Gatherer) (*Stats, error) {
	mfs, err := g.Gather()
	if err != nil {
		return nil, err
	}
	st := &Stats{
		Node:          node,
		UptimeSeconds: uptime.Seconds(),
		Ready:         ready,
		Metrics:       make(map[string]float64),
		TasksOverdue:  mon.overdue.Load(),
		Degraded:      mon.Reasons(),
	}
	if r := mon.Stalled(); len(r.Slots) > 0 {
		st.SlotsStalled, st.StalledSlots, st.StallReasons = len(r.Slots), r.Slots[:min(100, len(r.Slots))], r.Reasons
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			name := mf.GetName() + labelString(m.GetLabel())
			switch {
			case m.Counter != nil:
				st.Metrics[name] = m.Counter.GetValue()
			case m.Gauge != nil:
				st.Metrics[name] = m.Gauge.GetValue()
			case m.Histogram != nil:
				h := m.Histogram
				st.Metrics[name+"_count"] = float64(h.GetSampleCount())
				st.Metrics[name+"_sum"] = h.GetSampleSum()
				if mf.GetName() == "chime_fire_lateness_seconds" {
					st.LatenessP50 = bucketQuantile(h, 0.50)
					st.LatenessP99 = bucketQuantile(h, 0.99)
				}
			}
		}
	}
	return st, nil
}

func labelString(ls []*dto.LabelPair) string {
	if len(ls) == 0 {
		return ""
	}
	s := "{"
	for i, l := range ls {
		if i > 0 {
			s += ","
		}
		s += l.GetName() + `="` + l.GetValue() + `"`
	}
	return s + "}"
}

// bucketQuantile estimates quantile q of a histogram by linear
// interpolation inside the bucket that holds it, as Prometheus's
// histogram_quantile does. It returns 0 for an empty histogram.
func bucketQuantile(h *dto.Histogram, q float64) float64 {
	total := float64(h.GetSampleCount())
	if total == 0 {
		return 0
	}
	bs := h.GetBucket()
	sort.Slice(bs, func(i, j int) bool { return bs[i].GetUpperBound() < bs[j].GetUpperBound() })
	rank := q * total
	prevBound, prevCount := 0.0, 0.0
	for _, b := range bs {
		c := float64(b.GetCumulativeCount())
		if c >= rank {
			ub := b.GetUpperBound()
			if math.IsInf(ub, 1) || c == prevCount {
				return prevBound
			}
			return prevBound + (ub-prevBound)*(rank-prevCount)/(c-prevCount)
		}
		prevBound, prevCount = b.GetUpperBound(), c
	}
	return prevBound
}
