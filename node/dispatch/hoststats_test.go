package dispatch

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestMergeHosts: histograms add up by host, exactly: the merged
// quantiles are those of one histogram holding every observation.
func TestMergeHosts(t *testing.T) {
	a, b, all := NewHostStats(), NewHostStats(), NewHostStats()
	obs := func(h *HostStats, host string, ms, times int) {
		for range times {
			h.Observe(host, host+"/cb", time.Duration(ms)*time.Millisecond)
			all.Observe(host, host+"/cb", time.Duration(ms)*time.Millisecond)
		}
	}
	obs(a, "http://x", 2, 90)
	obs(b, "http://x", 300, 10)
	obs(b, "http://y", 5, 50)
	obs(a, "http://z", 1, 1)
	got := MergeHosts(2, a.Hists(20), b.Hists(20), []HostHist{{Host: "http://y", Buckets: [][2]uint64{{latencyBuckets, 7}}}})
	if want := all.Top(2); !slices.Equal(got, want) {
		t.Errorf("MergeHosts() = %+v, want %+v", got, want)
	}
}

// TestURLStats: URLs are counted beside their hosts; a full table drops the
// URL with the fewest calls for a new one, so the busiest stay and memory
// stays bounded, and the host totals count every call.
func TestURLStats(t *testing.T) {
	h := NewHostStats()
	ms := time.Millisecond
	for range 50 {
		h.Observe("http://a", "http://a/busy", 2*ms)
	}
	for range 20 {
		h.Observe("http://a", "http://a/mid", 40*ms)
	}
	for i := range 3 * maxURLs { // a flood of one-off URLs, e.g. ids in paths
		h.Observe("http://a", fmt.Sprintf("http://a/once/%d", i), ms)
	}
	h.Observe("http://a", "http://a/long/"+strings.Repeat("x", 2*maxURLLen), ms)
	h.mu.Lock()
	n := len(h.mu.urls)
	for u := range h.mu.urls {
		if len(u) > maxURLLen {
			t.Errorf("a URL key of %d bytes, over %d", len(u), maxURLLen)
		}
	}
	h.mu.Unlock()
	if n > maxURLs {
		t.Errorf("%d URLs kept, over %d", n, maxURLs)
	}
	top := h.TopURLs(2)
	if len(top) != 2 || top[0].Host != "http://a/busy" || top[0].Count != 50 || top[1].Host != "http://a/mid" || top[1].Count != 20 {
		t.Errorf("TopURLs(2) = %+v, want busy (50) then mid (20)", top)
	}
	if hosts := h.Top(5); len(hosts) != 1 || hosts[0].Count != uint64(50+20+3*maxURLs+1) {
		t.Errorf("Top = %+v, want one host with every call", hosts)
	}
	if got := MergeHosts(1, h.URLHists(10), h.URLHists(10)); len(got) != 1 || got[0].Host != "http://a/busy" || got[0].Count != 100 {
		t.Errorf("MergeHosts of the URL histograms = %+v, want busy with 100", got)
	}
}
