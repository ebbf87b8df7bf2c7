package bench

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chime-scheduler/chime/slots"
)

// Cluster pieces of the harness without real nodes: routing, the slot
// owner map, /metrics parsing, the fire ledger, the spawn layout.

// halfCluster makes f1 and f2 a two-node cluster: n1 owns slots
// 0..8191, n2 the rest.
func halfCluster(t *testing.T, f1, f2 *fakeNode) {
	t.Helper()
	members := []clusterMember{
		{Name: "n1", HTTPAddr: strings.TrimPrefix(f1.url, "http://"), State: "active", Status: "alive", SlotsOwned: 8192, OwnedRanges: [][2]uint16{{0, 8191}}},
		{Name: "n2", HTTPAddr: strings.TrimPrefix(f2.url, "http://"), State: "active", Status: "alive", SlotsOwned: 8192, OwnedRanges: [][2]uint16{{8192, 16383}}},
	}
	f1.setCluster(t, "n1", members)
	f2.setCluster(t, "n2", members)
}

func TestRunCreateRoutesAgainstFakeCluster(t *testing.T) {
	f1, f2 := startFakeNode(t, 0, ""), startFakeNode(t, 0, "")
	halfCluster(t, f1, f2)
	cfg := DefaultCreateConfig()
	cfg.Target.URLs = []string{f1.url, f2.url}
	cfg.Mode, cfg.Route, cfg.N, cfg.Concurrency, cfg.SkipBaseline = ModeSingle, RouteCompare, 200, 4, true
	res, err := RunCreate(t.Context(), cfg)
	if err != nil {
		t.Fatalf("RunCreate: %v", err)
	}
	if len(res.Routes) != 2 || res.Routes[0].Route != RouteOwner || res.Routes[1].Route != RouteForeign || res.Create != &res.Routes[0] {
		t.Fatalf("Routes = %+v, want an owner then a foreign phase, Create the first", res.Routes)
	}
	for _, cs := range res.Routes {
		if cs.Acked != 200 || cs.Forwarded == nil || *cs.Forwarded != 0 {
			t.Errorf("%s phase: acked %d, forwarded %v; want 200 and a count of 0 (the fakes forward nothing)", cs.Route, cs.Acked, cs.Forwarded)
		}
	}
	// Ids are bc-<run>-o-<i> (owner) and bc-<run>-f-<i> (foreign).
	counts := map[string]int{}
	for k, f := range []*fakeNode{f1, f2} {
		for id := range f.storedIDs() {
			ownedHere := (slots.Of(id) < 8192) == (k == 0)
			switch {
			case strings.Contains(id, "-o-") && !ownedHere:
				t.Errorf("owner route sent %s (slot %d) to n%d, which does not own it", id, slots.Of(id), k+1)
			case strings.Contains(id, "-f-") && ownedHere:
				t.Errorf("foreign route sent %s (slot %d) to its owner n%d", id, slots.Of(id), k+1)
			}
			counts[fmt.Sprintf("n%d", k+1)]++
		}
	}
	if counts["n1"]+counts["n2"] != 400 || counts["n1"] == 0 || counts["n2"] == 0 {
		t.Errorf("tasks stored per node = %v, want 400 spread over both", counts)
	}
	if len(res.Nodes) != 2 || res.Nodes[0].Name != "n1" || res.Nodes[1].Name != "n2" {
		t.Errorf("Nodes = %+v, want n1 and n2, named from /v1/cluster", res.Nodes)
	}
	var md bytes.Buffer
	if err := res.WriteMarkdown(&md); err != nil || !strings.Contains(md.String(), "create single via foreign") ||
		!strings.Contains(md.String(), "direct to the owner") {
		t.Errorf("markdown (err %v) lacks the foreign rows next to the owner ceiling:\n%s", err, md.String())
	}
}

func TestRunCreateSpreadsBatchesOverURLs(t *testing.T) {
	f1, f2 := startFakeNode(t, 0, ""), startFakeNode(t, 0, "")
	halfCluster(t, f1, f2)
	cfg := DefaultCreateConfig()
	cfg.Target.URLs = []string{f1.url, f2.url}
	cfg.N, cfg.Batch, cfg.Concurrency, cfg.SkipBaseline = 400, 100, 2, true
	res, err := RunCreate(t.Context(), cfg)
	if err != nil {
		t.Fatalf("RunCreate: %v", err)
	}
	if res.Create.Acked != 400 || f1.stored() != 200 || f2.stored() != 200 {
		t.Errorf("acked %d, stored %d + %d; want 400 as four batches, two per node", res.Create.Acked, f1.stored(), f2.stored())
	}
	if res.Create.Route != RouteAny {
		t.Errorf("Route = %q, want %q", res.Create.Route, RouteAny)
	}
}

func TestRouteVia(t *testing.T) {
	nodes := []*member{{name: "n1", api: &apiClient{base: "1"}}, {name: "n2", api: &apiClient{base: "2"}}, {name: "n3", api: &apiClient{base: "3"}}}
	om := make(ownerMap, slots.Count)
	for s := range om {
		om[s] = int8(s % 3)
	}
	id := func(i int) string { return "t-" + strconv.Itoa(i) }
	owner := func(i int) string { return strconv.Itoa(int(om[slots.Of(id(i))]) + 1) }
	tests := []struct {
		route string
		check func(req int, got string) bool
		want  string
	}{
		{RouteAny, func(req int, got string) bool { return got == strconv.Itoa(req%3+1) }, "node req mod 3"},
		{RouteOwner, func(req int, got string) bool { return got == owner(req) }, "the owner"},
		{RouteForeign, func(req int, got string) bool { return got != owner(req) }, "a non-owner"},
	}
	for _, tt := range tests {
		t.Run(tt.route, func(t *testing.T) {
			via, err := routeVia(tt.route, nodes, om, id)
			if err != nil {
				t.Fatal(err)
			}
			seen := map[string]bool{}
			for req := range 300 {
				got := via(req, req).base
				seen[got] = true
				if !tt.check(req, got) {
					t.Fatalf("request %d (task %s, owner n%s) went to n%s, want %s", req, id(req), owner(req), got, tt.want)
				}
			}
			if len(seen) != 3 {
				t.Errorf("requests reached %v, want all three nodes", seen)
			}
		})
	}
	if _, err := routeVia(RouteOwner, nodes[:1], om, id); err == nil {
		t.Error("routeVia(owner) on one node = nil error, want one")
	}
	if via, err := routeVia(RouteAny, nodes[:1], nil, id); via != nil || err != nil {
		t.Errorf("routeVia(any) on one node = %v, %v; want nil, nil", via != nil, err)
	}
}

func TestClusterViewOwners(t *testing.T) {
	nodes := []*member{{name: "a"}, {name: "b"}}
	v := clusterView{Members: []clusterMember{
		{Name: "a", SlotsOwned: 3, OwnedRanges: [][2]uint16{{0, 1}, {5, 5}}},
		{Name: "b", SlotsOwned: 16381, OwnedRanges: [][2]uint16{{2, 4}, {6, 16383}}},
		{Name: "gone", SlotsOwned: 0},
	}}
	om, err := v.owners(nodes)
	if err != nil {
		t.Fatal(err)
	}
	for s, want := range map[int]int8{0: 0, 1: 0, 2: 1, 4: 1, 5: 0, 6: 1, 16383: 1} {
		if om[s] != want {
			t.Errorf("owner of slot %d = %d, want %d", s, om[s], want)
		}
	}
	if v.owned("b") != 16381 || v.owned("gone") != 0 || v.owned("nobody") != 0 {
		t.Errorf("owned = %d, %d, %d; want 16381, 0, 0", v.owned("b"), v.owned("gone"), v.owned("nobody"))
	}
	v.Members = append(v.Members, clusterMember{Name: "stranger", SlotsOwned: 1, OwnedRanges: [][2]uint16{{7, 7}}})
	if _, err := v.owners(nodes); err == nil || !strings.Contains(err.Error(), "stranger") {
		t.Errorf("owners with an unknown owning member = %v, want an error naming it", err)
	}
}

func TestAgreed(t *testing.T) {
	m := func(state, status string) clusterMember {
		return clusterMember{Name: "x", State: state, Status: status}
	}
	ok := clusterView{TableVersion: 1, Settled: true, Members: []clusterMember{m("active", "alive"), m("active", "alive")}}
	with := func(f func(*clusterView)) clusterView {
		v := ok
		v.Members = slices.Clone(ok.Members)
		f(&v)
		return v
	}
	tests := []struct {
		name  string
		views []clusterView
		want  bool
	}{
		{"all agree", []clusterView{ok, ok}, true},
		{"no views", nil, false},
		{"another table", []clusterView{ok, with(func(v *clusterView) { v.TableVersion = 2 })}, false},
		{"not settled", []clusterView{ok, with(func(v *clusterView) { v.Settled = false })}, false},
		{"a member missing", []clusterView{ok, with(func(v *clusterView) { v.Members = v.Members[:1] })}, false},
		{"a member joining", []clusterView{ok, with(func(v *clusterView) { v.Members[1] = m("joining", "alive") })}, false},
		{"a member dead", []clusterView{with(func(v *clusterView) { v.Members[0] = m("active", "dead") }), ok}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := agreed(tt.views, 2); got != tt.want {
				t.Errorf("agreed = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestMetricSum(t *testing.T) {
	body := `# HELP chime_forwarded_requests_total API requests forwarded.
# TYPE chime_forwarded_requests_total counter
chime_forwarded_requests_total{result="error"} 3
chime_forwarded_requests_total{result="ok"} 5000
chime_forwarded_requests_total_other 99
chime_fires_total{result="success"} 7
`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(body))
	}))
	defer srv.Close()
	api := newAPIClient(srv.URL, "", 1)
	defer api.close()
	if got, ok := metricSum(t.Context(), api, metricForwarded); got != 5003 || !ok {
		t.Errorf("metricSum = %d, %v; want 5003, true", got, ok)
	}
	if got, ok := metricSum(t.Context(), api, "chime_missing_total"); got != 0 || !ok {
		t.Errorf("metricSum(missing) = %d, %v; want 0, true", got, ok)
	}
	nodes := []*member{{api: api}, {api: api}}
	if got, ok := forwardedTotal(t.Context(), nodes); got != 10006 || !ok {
		t.Errorf("forwardedTotal over two nodes = %d, %v; want 10006, true", got, ok)
	}
}

func TestFireLedgerWindow(t *testing.T) {
	first := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	dueOf := func(i int) time.Time { return first.Add(time.Duration(i) * 100 * time.Millisecond) }
	l := newFireLedger("p-", 10)
	// Tasks 0..9, due every 100 ms. 3 never arrives, 4 arrives 200 ms
	// late and twice, 9 is not ours (filtered out), the rest 1 ms late.
	for i := range 10 {
		late := time.Millisecond
		switch i {
		case 3:
			continue
		case 4:
			late = 200 * time.Millisecond
			l.observe(fmt.Sprintf("p-%d:1", i), dueOf(i).Add(late+time.Millisecond), true)
		}
		l.observe(fmt.Sprintf("p-%d:1", i), dueOf(i).Add(late), true)
	}
	l.observe("p-5:1", dueOf(5), false)      // not delivered: ignored
	l.observe("other-1:1", dueOf(1), true)   // another run: ignored
	l.observe("p-10:1", dueOf(10), true)     // out of range: ignored
	in := func(i int) bool { return i != 9 } // task 9 belongs to someone else
	event := dueOf(2)
	ws := l.window(dueOf(2), dueOf(10), event, dueOf, in, 100*time.Millisecond)
	want := WindowStats{From: 0, To: 0.8, FromTime: dueOf(2), ToTime: dueOf(10), Tasks: 7, Fired: 6, Missed: 1, Duplicates: 1, Late: 1}
	ws.Lateness = Summary{}
	if ws != want {
		t.Errorf("window = %+v, want %+v", ws, want)
	}
	at, ok := l.firstAfter(func(i int) bool { return i >= 3 })
	if !ok || !at.Equal(dueOf(5).Add(time.Millisecond)) {
		t.Errorf("firstAfter(i ≥ 3) = %v, %v; want task 5's arrival (4 came 200 ms late, after it)", at, ok)
	}
	if _, ok := l.firstAfter(func(i int) bool { return i == 3 }); ok {
		t.Error("firstAfter(task 3) = ok, want none: it never arrived")
	}
}

func TestLayoutServeArgs(t *testing.T) {
	l := layout{dir: "/c", httpBase: 47100, gossipBase: 47200}
	got := strings.Join(l.serveArgs(2, 3, []string{"--tick=5ms"}), " ")
	want := "serve --name n2 --http-addr 127.0.0.1:47101 --gossip-addr 127.0.0.1:47201 --data-dir /c/n2/data --join 127.0.0.1:47200,127.0.0.1:47202 --tick=5ms"
	if got != want {
		t.Errorf("serveArgs(2, 3) =\n%s\nwant (the command line of scripts/cluster.sh)\n%s", got, want)
	}
	if got := strings.Join(l.serveArgs(1, 1, nil), " "); strings.Contains(got, "--join") {
		t.Errorf("serveArgs(1, 1) = %s, want no --join for a cluster of one", got)
	}
	l.gossipBase = 0
	if got, want := strings.Join(l.serveArgs(1, 1, nil), " "), "serve --data-dir /c/n1/data --http-addr 127.0.0.1:47100"; got != want {
		t.Errorf("standalone serveArgs = %s, want %s", got, want)
	}
}

func TestFreePortRun(t *testing.T) {
	base, err := freePortRun(4, true, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if lo := ephemeralLow(); lo > portRunLow+4 && (base < portRunLow || base+4 > lo) {
		t.Errorf("freePortRun = %d, want a run within [%d, %d): below the ephemeral ports", base, portRunLow, lo)
	}
	for p := base; p < base+4; p++ {
		addr := "127.0.0.1:" + strconv.Itoa(p)
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("port %d of the run from %d is not free for TCP: %v", p, base, err)
		}
		ln.Close()
		pc, err := net.ListenPacket("udp", addr)
		if err != nil {
			t.Fatalf("port %d of the run from %d is not free for UDP: %v", p, base, err)
		}
		pc.Close()
	}
	other, err := freePortRun(4, false, base, 4)
	if err != nil {
		t.Fatal(err)
	}
	if other < base+4 && base < other+4 {
		t.Errorf("freePortRun avoiding [%d, %d) = %d, overlapping it", base, base+4, other)
	}
}

func TestWriteMarkdownClusterRun(t *testing.T) {
	r := Result{Workload: "failover", Started: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC),
		Summary: []Row{{Metric: "fires resume", Value: -1, Unit: "s", Text: "never (no replication yet)"}},
		Node:    &NodeStats{CPUSeconds: 3, RSSBytes: 3 << 20},
		Nodes:   []NodeStats{{Name: "n1", PID: 11, CPUSeconds: 1, RSSBytes: 1 << 20}, {Name: "n2", PID: 12, Killed: true, CPUSeconds: 2, RSSBytes: 2 << 20}},
	}
	var b bytes.Buffer
	if err := r.WriteMarkdown(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| fires resume | never (no replication yet) | — | — |",
		"| n1 | 11 | 1 | 1 | 0 | 0 |",
		"| n2 (killed; figures from before the kill) | 12 | 2 | 2 | 0 | 0 |",
		"| **total** | — | 3 | 3 | 0 | 0 |",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, b.String())
		}
	}
}
