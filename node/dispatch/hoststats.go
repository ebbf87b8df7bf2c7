package dispatch

// Per-host and per-URL callback latency, for the dashboard's latency view.

import (
	"math"
	"sort"
	"sync"
	"time"
)

// HostStats keeps a callback latency histogram per callback host and per
// callback URL, for the dashboard's latency view. It tracks at most
// maxHosts hosts (later ones are counted under "other": every call counts
// in the host totals) and maxURLs URLs (a new URL, once the table is
// full, replaces the one with the fewest calls: the busiest stay, the
// rare ones churn), so memory stays bounded whatever users send. Its user
// decides what a host and a URL are (the node: the callback URL's
// scheme://host:port, credentials redacted, and that with the path, no
// query) and what to observe. Safe for concurrent use.
type HostStats struct {
	mu struct {
		sync.Mutex
		hosts map[string]*latencyHist // guarded by mu
		urls  map[string]*latencyHist // guarded by mu
	}
}

const (
	maxHosts = 256
	maxURLs  = 256
	// maxURLLen bounds a URL key: a longer one is cut.
	maxURLLen = 256
)

// latencyHist is a log-bucketed histogram: bucket i holds durations in
// [base·r^(i-1), base·r^i) with r = 2^(1/4), base 50 µs; about 9 % error.
type latencyHist struct {
	counts [latencyBuckets]uint64
	total  uint64
}

const (
	latencyBuckets = 96
	latencyBase    = 50 * time.Microsecond
)

// latencyBucket is the bucket of d.
func latencyBucket(d time.Duration) int {
	if d <= latencyBase {
		return 0
	}
	i := int(math.Ceil(4 * math.Log2(float64(d)/float64(latencyBase))))
	return min(i, latencyBuckets-1)
}

// bucketUpper is the upper bound of bucket i.
func bucketUpper(i int) time.Duration {
	return time.Duration(float64(latencyBase) * math.Pow(2, float64(i)/4))
}

// NewHostStats returns empty stats.
func NewHostStats() *HostStats {
	h := &HostStats{}
	h.mu.hosts = make(map[string]*latencyHist)
	h.mu.urls = make(map[string]*latencyHist)
	return h
}

// Observe records one callback to host, at url ("": none), that took d.
func (h *HostStats) Observe(host, url string, d time.Duration) {
	b := latencyBucket(d)
	h.mu.Lock()
	defer h.mu.Unlock()
	if url != "" {
		url = url[:min(len(url), maxURLLen)]
		uh := h.mu.urls[url]
		if uh == nil {
			if len(h.mu.urls) >= maxURLs {
				h.evictURL()
			}
			uh = &latencyHist{}
			h.mu.urls[url] = uh
		}
		uh.counts[b]++
		uh.total++
	}
	lh := h.mu.hosts[host]
	if lh == nil {
		if len(h.mu.hosts) >= maxHosts {
			host = "other"
			lh = h.mu.hosts[host]
		}
		if lh == nil {
			lh = &latencyHist{}
			h.mu.hosts[host] = lh
		}
	}
	lh.counts[b]++
	lh.total++
}

// evictURL drops the URL with the fewest calls (the first by name of
// those): O(maxURLs), only when a new URL comes to a full table.
func (h *HostStats) evictURL() {
	var victim string
	least := uint64(math.MaxUint64)
	for u, uh := range h.mu.urls {
		if uh.total < least || uh.total == least && u < victim {
			victim, least = u, uh.total
		}
	}
	delete(h.mu.urls, victim)
}

// HostLatency is one callback host's latency summary.
type HostLatency struct {
	Host  string  `json:"host"`
	Count uint64  `json:"count"`
	P50Ms float64 `json:"p50_ms"`
	P90Ms float64 `json:"p90_ms"`
	P99Ms float64 `json:"p99_ms"`
	// Circuit and Held are set by the dashboard for a host whose circuit
	// breaker is not closed: its state (open, half_open) and the fires
	// held (Breakers.Circuits).
	Circuit string `json:"circuit,omitempty"`
	Held    int    `json:"held,omitempty"`
}

// Top returns the n hosts with the most callbacks, most first.
func (h *HostStats) Top(n int) []HostLatency { return h.top(n, false) }

// TopURLs returns the n URLs with the most callbacks, most first (each
// HostLatency.Host holds the URL).
func (h *HostStats) TopURLs(n int) []HostLatency { return h.top(n, true) }

func (h *HostStats) top(n int, urls bool) []HostLatency {
	h.mu.Lock()
	m := h.mu.hosts
	if urls {
		m = h.mu.urls
	}
	out := make([]HostLatency, 0, len(m))
	for host, lh := range m {
		out = append(out, HostLatency{
			Host: host, Count: lh.total,
			P50Ms: lh.quantile(0.50), P90Ms: lh.quantile(0.90), P99Ms: lh.quantile(0.99),
		})
	}
	h.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].Count != out[j].Count {
			return out[i].Count > out[j].Count
		}
		return out[i].Host < out[j].Host
	})
	if len(out) > n {
		out = out[:n]
	}
	return out
}

// quantile returns the upper bound of the bucket holding quantile q, in ms.
func (lh *latencyHist) quantile(q float64) float64 {
	if lh.total == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(lh.total)))
	var seen uint64
	for i, c := range lh.counts {
		seen += c
		if seen >= rank {
			return float64(bucketUpper(i)) / float64(time.Millisecond)
		}
	}
	return float64(bucketUpper(latencyBuckets-1)) / float64(time.Millisecond)
}

// HostHist is one host's latency histogram as members send it to the node
// serving the dashboard (GET /internal/v1/member): the non-empty buckets
// as [bucket, count] pairs. MergeHosts adds them up.
type HostHist struct {
	Host    string      `json:"host"`
	Buckets [][2]uint64 `json:"buckets"`
}

// Hists returns the histograms of the n hosts with the most callbacks.
func (h *HostStats) Hists(n int) []HostHist { return h.hists(n, false) }

// URLHists returns the histograms of the n URLs with the most callbacks
// (each HostHist.Host holds the URL).
func (h *HostStats) URLHists(n int) []HostHist { return h.hists(n, true) }

func (h *HostStats) hists(n int, urls bool) []HostHist {
	h.mu.Lock()
	m := h.mu.hosts
	if urls {
		m = h.mu.urls
	}
	out := make([]HostHist, 0, len(m))
	totals := make(map[string]uint64, len(m))
	for host, lh := range m {
		hh := HostHist{Host: host}
		for i, c := range lh.counts {
			if c > 0 {
				hh.Buckets = append(hh.Buckets, [2]uint64{uint64(i), c})
			}
		}
		totals[host] = lh.total
		out = append(out, hh)
	}
	h.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if a, b := totals[out[i].Host], totals[out[j].Host]; a != b {
			return a > b
		}
		return out[i].Host < out[j].Host
	})
	if len(out) > n {
		out = out[:n]
	}
	return out
}

// MergeHosts adds the histograms of several members up by host and
// returns the n hosts with the most callbacks, as Top does for one node.
// Buckets out of range are ignored.
func MergeHosts(n int, lists ...[]HostHist) []HostLatency {
	merged := NewHostStats()
	for _, l := range lists {
		for _, hh := range l {
			lh := merged.mu.hosts[hh.Host]
			if lh == nil {
				lh = &latencyHist{}
				merged.mu.hosts[hh.Host] = lh
			}
			for _, b := range hh.Buckets {
				if b[0] < latencyBuckets {
					lh.counts[b[0]] += b[1]
					lh.total += b[1]
				}
			}
		}
	}
	return merged.Top(n)
}
