package node

import (
	"encoding/json"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/chime-scheduler/chime/node/httpapi"
	"github.com/chime-scheduler/chime/slots"
)

// TestDueLoadCluster: GET /v1/stats/due, asked of any member of a
// three-node cluster, adds up to exactly the tasks created, although every
// due key is stored twice (owner and follower): each member counts the
// slots it owns only, and each row matches the tasks its member owns. A
// crashed member is listed as unavailable, not dropped.
func TestDueLoadCluster(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newFaultCluster(t, 3, 77)
		defer c.close()
		const k = 60
		list := ids("due", k, c.table(0), nil)
		first := time.Now().Add(10 * time.Minute)
		if n := c.createVia(0, list, first, 5*time.Minute); n != k { // over 10 min .. 5 h
			t.Fatalf("%d of %d created", n, k)
		}
		// Every due key is on two stores: the count must not take both.
		stored := 0
		for _, fn := range c.nodes {
			err := fn.n.store.ScanDue(nil, 0, 1<<63-1, func(uint16, string, int64) bool { stored++; return true })
			if err != nil {
				t.Fatal(err)
			}
		}
		if stored != 2*k {
			t.Fatalf("%d due keys stored, want %d (owner and follower)", stored, 2*k)
		}
		perOwner := map[string]int64{}
		for _, id := range list {
			o, _ := c.table(0).Owner(slots.Of(id))
			perOwner[o.Name]++
		}
		due := func(via int, query string) httpapi.DueLoad {
			t.Helper()
			var d httpapi.DueLoad
			// The links are lossy: a member's row may be unavailable once.
			for try := 0; try < 5; try++ {
				code, b := c.request(via, http.MethodGet, "/v1/stats/due?"+query, nil)
				d = httpapi.DueLoad{}
				if code != http.StatusOK || json.Unmarshal(b, &d) != nil {
					t.Fatalf("via %d: %d %s", via, code, b)
				}
				if !d.Unavailable {
					break
				}
				time.Sleep(200 * time.Millisecond)
			}
			return d
		}
		for via := range 3 {
			d := due(via, "hours=6")
			if d.Total != k || d.Unavailable || d.Truncated || len(d.Nodes) != 3 {
				t.Fatalf("via %d: total %d unavailable %v truncated %v rows %d, want %d", via, d.Total, d.Unavailable, d.Truncated, len(d.Nodes), k)
			}
			var sum int64
			for _, row := range d.Nodes {
				var hours int64
				for _, h := range row.Hours {
					hours += h
				}
				if row.Total != perOwner[row.Node] || hours != row.Total || len(row.Hours) != 6 {
					t.Errorf("via %d: row %s total %d (hours %d), owns %d tasks", via, row.Node, row.Total, hours, perOwner[row.Node])
				}
				sum += row.Total
			}
			if sum != k {
				t.Errorf("via %d: rows add up to %d", via, sum)
			}
		}
		// The first hour from now (a few seconds after the tasks' base
		// time): the tasks due 10 min .. 60 min after it, one every 5 min.
		d := due(1, "hours=1")
		var minutes int64
		for _, row := range d.Nodes {
			for _, m := range row.Minutes {
				minutes += m
			}
		}
		if d.Total != 11 || minutes != 11 {
			t.Errorf("first hour: total %d, minutes add up to %d, want 11", d.Total, minutes)
		}
		// by=slot: the 50 busiest slots, busiest first.
		d = due(2, "by=slot&hours=6")
		var inSlots int64
		for _, s := range d.Slots {
			inSlots += s.Count
		}
		if len(d.Slots) == 0 || len(d.Slots) > 50 || inSlots > k || d.Slots[0].Count < d.Slots[len(d.Slots)-1].Count {
			t.Errorf("by=slot: %+v", d.Slots)
		}

		c.crash(2)
		code, b := c.request(0, http.MethodGet, "/v1/stats/due?hours=6", nil)
		var after httpapi.DueLoad
		if code != http.StatusOK || json.Unmarshal(b, &after) != nil {
			t.Fatalf("after crash: %d %s", code, b)
		}
		if !after.Unavailable || len(after.Nodes) != 3 {
			t.Fatalf("after crash: %s", b)
		}
		for _, row := range after.Nodes {
			if row.Node == c.nodes[2].name && (row.Available || row.Error == "") {
				t.Errorf("the crashed member's row: %+v", row)
			}
		}
	})
}
