package dispatch

import (
	"slices"
	"testing"
	"time"
)

// TestMergeHosts: histograms add up by host, exactly: the merged
// quantiles are those of one histogram holding every observation.
func TestMergeHosts(t *testing.T) {
	a, b, all := NewHostStats(), NewHostStats(), NewHostStats()
	obs := func(h *HostStats, host string, ms, times int) {
		for range times {
			h.Observe(host, time.Duration(ms)*time.Millisecond)
			all.Observe(host, time.Duration(ms)*time.Millisecond)
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
