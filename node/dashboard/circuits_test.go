package dashboard

import (
	"testing"

	"github.com/chime-scheduler/chime/node/dispatch"
)

// TestMarkCircuits: the callback table shows each host's circuit across
// the members (open wins, held fires add up), matched by host key (the
// table's host may carry redacted credentials or no default port), and a
// host with a circuit not in the top is added.
func TestMarkCircuits(t *testing.T) {
	hosts := []HostLatency{
		{Host: "https://***@a.example:443", Count: 10},
		{Host: "http://b.example:80", Count: 5},
		{Host: "http://quiet.example:80", Count: 1},
	}
	got := markCircuits(hosts,
		[]dispatch.CircuitInfo{{Host: "https://a.example:443", State: "half_open", Held: 3}},
		nil,
		[]dispatch.CircuitInfo{
			{Host: "https://a.example:443", State: "open", Held: 4},
			{Host: "http://b.example:80", State: "half_open", Held: 1},
			{Host: "http://c.example:8080", State: "open", Held: 9},
		})
	want := []HostLatency{
		{Host: "https://***@a.example:443", Count: 10, Circuit: "open", Held: 7},
		{Host: "http://b.example:80", Count: 5, Circuit: "half_open", Held: 1},
		{Host: "http://quiet.example:80", Count: 1},
		{Host: "http://c.example:8080", Circuit: "open", Held: 9},
	}
	if len(got) != len(want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("row %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	if got := markCircuits([]HostLatency{{Host: "http://x:80"}}); got[0].Circuit != "" {
		t.Errorf("no circuits: %+v", got)
	}
}
