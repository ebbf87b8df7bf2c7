package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/chime-scheduler/chime/node"
	"github.com/chime-scheduler/chime/node/dashboard"
	"github.com/chime-scheduler/chime/ring/gossip"
)

// dashCluster is k in-process cluster members n1…nk, each a real node with
// a real HTTP server on 127.0.0.1 serving newHTTPHandler (as `chime serve`
// does), gossiping with real memberlist over loopback UDP and TCP.
type dashCluster struct {
	t      *testing.T
	nodes  []*dashNode
	gossip []string // gossip address of each node
}

// clusterSecret signs the calls between the test cluster's nodes.
const clusterSecret = "dash-cluster-secret"

// startDashCluster starts k members that join each other and waits until
// every one sees all k alive and active, the same slot table, settled.
// Every node is closed at cleanup (a graceful leave each).
func startDashCluster(t *testing.T, k int) *dashCluster {
	t.Helper()
	c := &dashCluster{t: t}
	for _, p := range freeGossipPorts(t, k) {
		c.gossip = append(c.gossip, "127.0.0.1:"+strconv.Itoa(p))
	}
	for i := range k {
		c.start(i, c.gossip)
	}
	c.waitSettled(k)
	return c
}

// start starts member i (named n<i+1>) gossiping on c.gossip[i] and joining
// the other addresses of join.
func (c *dashCluster) start(i int, join []string) *dashNode {
	t := c.t
	t.Helper()
	srv := httptest.NewUnstartedServer(nil) // listening: its address goes into the config
	cfg := node.DefaultConfig()
	cfg.Name = fmt.Sprintf("n%d", i+1)
	cfg.DataDir = t.TempDir()
	cfg.HTTPAddr = srv.Listener.Addr().String()
	log := slog.New(slog.NewTextHandler(testLogWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	cfg.Logger = log
	g := gossip.DefaultLocalConfig()
	host, port, _ := strings.Cut(c.gossip[i], ":")
	g.BindAddr = host
	g.BindPort, _ = strconv.Atoi(port)
	cc := node.DefaultClusterConfig(g)
	cc.Secret = []byte(clusterSecret)
	for _, a := range join {
		if a != c.gossip[i] {
			cc.Join = append(cc.Join, a)
		}
	}
	cfg.Cluster = &cc
	n, err := node.New(cfg)
	if err != nil {
		t.Fatalf("node.New(%s): %v", cfg.Name, err)
	}
	if err := n.Start(); err != nil {
		t.Fatalf("Start %s: %v", cfg.Name, err)
	}
	h := newHTTPHandler(n, "", "", log)
	d := &dashNode{n: n, srv: srv, h: h}
	srv.Config.Handler = h
	srv.Start()
	t.Cleanup(func() { stopDashNode(t, d) })
	for len(c.nodes) <= i {
		c.nodes = append(c.nodes, nil)
	}
	c.nodes[i] = d
	return d
}

// stopDashNode closes a node (it drains and leaves the cluster), then its
// dashboard and server, in chime serve's order: the drain's handovers need
// the node's internal endpoints. Idempotent.
func stopDashNode(t *testing.T, d *dashNode) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := d.n.Close(ctx); err != nil {
		t.Errorf("close node: %v", err)
	}
	d.h.(*httpHandler).Close()
	d.srv.Close()
}

// waitSettled waits until every running node reports k members alive and
// active in one settled table, the same on all.
func (c *dashCluster) waitSettled(k int) uint64 {
	t := c.t
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		versions := map[uint64]bool{}
		ok := true
		var last string
		for i, d := range c.nodes {
			cv, err := getCluster(d.srv.URL)
			live := 0
			for _, m := range cv.Members {
				if m.Status == "alive" && m.State == "active" {
					live++
				}
			}
			if err != nil || !cv.Settled || live != k || len(cv.Members) != k {
				ok = false
				last = fmt.Sprintf("n%d: %d members, %d alive and active, settled %v, err %v", i+1, len(cv.Members), live, cv.Settled, err)
			}
			versions[cv.TableVersion] = true
		}
		if ok && len(versions) == 1 {
			for v := range versions {
				return v
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("cluster of %d did not settle in 30 s: versions %v; last: %s", k, versions, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// getSnapshot reads GET /v1/snapshot of the node at url.
func getSnapshot(t *testing.T, url string) *dashboard.Snapshot {
	t.Helper()
	resp, err := http.Get(url + "/v1/snapshot")
	if err != nil {
		t.Fatalf("GET /v1/snapshot: %v", err)
	}
	defer resp.Body.Close()
	var s dashboard.Snapshot
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/snapshot = %d, decode: %v", resp.StatusCode, err)
	}
	if err := s.CheckSlotTable(); err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	return &s
}

// waitSnapshot polls n's snapshot until cond holds, failing after 20 s
// with the last snapshot's members.
func waitSnapshot(t *testing.T, url, what string, cond func(*dashboard.Snapshot) bool) *dashboard.Snapshot {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		s := getSnapshot(t, url)
		if cond(s) {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s; members %+v", what, s.Members)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// createSpread creates tasks t-00… through url: the node forwards each to
// its slot's owner, so every member gets some.
func createSpread(t *testing.T, url string, count int, delay time.Duration) {
	t.Helper()
	var tasks []map[string]any
	for i := range count {
		tasks = append(tasks, map[string]any{
			"id": fmt.Sprintf("t-%02d", i), "delay_ms": (delay + time.Duration(i%20)*time.Minute).Milliseconds(),
			"callback_url": url + "/v1/test/callback", "labels": map[string]string{"team": "billing"},
		})
	}
	createTasks(t, url, tasks)
}

// createTasks creates tasks through url in batches. A slot whose new owner
// is still taking it over (a handover per slot after each join; seconds
// with -race and three nodes in one process) answers 503; those tasks are
// sent again, and a 409 then means an earlier attempt was stored after all
// (503 is not an acknowledgement either way).
func createTasks(t *testing.T, url string, left []map[string]any) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	retried := map[any]bool{}
	for len(left) > 0 {
		var res struct {
			Results []struct {
				Status int `json:"status"`
			} `json:"results"`
		}
		if code := postJSON(t, url+"/v1/tasks:batch", map[string]any{"tasks": left}, &res); code != http.StatusOK || len(res.Results) != len(left) {
			t.Fatalf("batch create = %d with %d results, want 200 with %d", code, len(res.Results), len(left))
		}
		var again []map[string]any
		for i, r := range res.Results {
			switch r.Status {
			case http.StatusCreated:
			case http.StatusConflict:
				if !retried[left[i]["id"]] {
					t.Fatalf("batch task %v: status 409 on the first attempt", left[i]["id"])
				}
			case http.StatusServiceUnavailable:
				retried[left[i]["id"]] = true
				again = append(again, left[i])
			default:
				t.Fatalf("batch task %v: status %d, want 201", left[i]["id"], r.Status)
			}
		}
		if left = again; len(left) > 0 && time.Now().After(deadline) {
			t.Fatalf("%d tasks still answered 503 after 60 s", len(left))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitWritable waits until the slot of task id takes writes (its owner has
// taken it over: see createTasks) by creating and deleting that task.
func waitWritable(t *testing.T, url, id string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		code := postJSON(t, url+"/v1/tasks", map[string]any{"id": id, "delay_ms": 3_600_000, "callback_url": url + "/v1/test/callback"}, nil)
		if code == http.StatusCreated {
			break
		}
		if code != http.StatusServiceUnavailable || time.Now().After(deadline) {
			t.Fatalf("probe create %s = %d, want 201 (503 only for a while)", id, code)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for {
		req, err := http.NewRequest(http.MethodDelete, url+"/v1/tasks/"+id, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
		code := statusCode(resp)
		if err == nil && code == http.StatusNoContent {
			return
		}
		// 503 is the API's "retry": a slot's owner may stop firing and
		// writing for a moment (a lapsed lease under load), as for the create.
		if err != nil || code != http.StatusServiceUnavailable || time.Now().After(deadline) {
			t.Fatalf("delete probe %s: %v, status %d", id, err, code)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestClusterSnapshotInProcess: in a real three-node cluster, the snapshot
// of any node lists all three with their own stats (tasks stored on each
// add up to what was created), the slot table of the shared view, the
// cluster's wheel, and joins on the timeline; a node that leaves stays
// listed as left, stale, owning nothing, and its leave is on the timeline.
func TestClusterSnapshotInProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-node cluster")
	}
	c := startDashCluster(t, 3)
	version := c.waitSettled(3)
	url := c.nodes[0].srv.URL
	createSpread(t, url, 30, 5*time.Minute)

	s := waitSnapshot(t, url, "30 tasks over three fresh members", func(s *dashboard.Snapshot) bool {
		var stored int64
		for _, m := range s.Members {
			// A member shows "loading" until it is ready: it has taken
			// over every slot the table gives it (handovers take seconds
			// with -race and three nodes in one process).
			if m.Stale || m.TasksStored < 0 || m.State != "active" {
				return false
			}
			stored += m.TasksStored
		}
		return len(s.Members) == 3 && stored == 30
	})
	if s.TableVersion != version {
		t.Errorf("table_version = %d, want %d as GET /v1/cluster", s.TableVersion, version)
	}
	owned := make([]int, len(s.Members))
	for _, o := range s.SlotOwners {
		owned[o]++
	}
	for i, m := range s.Members {
		if m.Name != fmt.Sprintf("n%d", i+1) || m.Status != "alive" || m.State != "active" || m.SlotsOwned != owned[i] || owned[i] == 0 || m.TasksStored == 0 {
			t.Errorf("member %d = %+v (%d slots in slot_owners), want n%d alive, active, owning its slots, storing tasks", i, m, owned[i], i+1)
		}
	}
	// Each member's wheel holds the pending fires of the slots it fires
	// now; a slot whose owner stops firing for a moment (a lease its
	// follower's late ack let lapse, under -race with three nodes in one
	// process) is out of it until it fires again.
	wheelStart := time.Now()
	ws := waitSnapshot(t, url, "30 pending fires in the cluster's wheel", func(s *dashboard.Snapshot) bool {
		var pending int
		for _, v := range s.Wheel.Counts {
			pending += v
		}
		return pending == 30
	})
	t.Logf("the cluster's wheel showed the 30 pending fires after %v", time.Since(wheelStart).Round(time.Millisecond))
	if ws.TableVersion != version {
		t.Errorf("table_version = %d then, want %d", ws.TableVersion, version)
	}
	for _, want := range []string{"n2 joined", "n3 joined"} {
		if !slices.ContainsFunc(s.Events, func(e dashboard.Event) bool { return e.Kind == "join" && strings.HasPrefix(e.Text, want) }) {
			t.Errorf("no %q event in %+v", want, s.Events)
		}
	}

	stopDashNode(t, c.nodes[2]) // n3 leaves
	s = waitSnapshot(t, url, "n3 left", func(s *dashboard.Snapshot) bool {
		return len(s.Members) == 3 && s.Members[2].Status == "left" && s.TableVersion != version
	})
	if m := s.Members[2]; !m.Stale || m.SlotsOwned != 0 || m.TasksStored <= 0 {
		t.Errorf("n3 after leaving = %+v, want stale, owning nothing, with its last task count", m)
	}
	if !slices.ContainsFunc(s.Events, func(e dashboard.Event) bool { return e.Kind == "leave" && strings.HasPrefix(e.Text, "n3 left") }) {
		t.Errorf("no leave event for n3 in %+v", s.Events)
	}
}

// testCluster loads the dashboard from n1 of a real three-node cluster:
// three rows, the slot map in three owner colours, totals over all three,
// a task created through the form (it lands on its slot's owner, forwarded)
// in the list, numbers moving with the pushes; then a fourth node joins and
// leaves, and its row stays, greyed, out of the totals.
func testCluster(t *testing.T, browser context.Context) {
	c := startDashCluster(t, 3)
	url := c.nodes[0].srv.URL
	createSpread(t, url, 30, 5*time.Minute)
	tb := newTab(t, browser)

	tb.do(t, "open the dashboard", chromedp.Navigate(url+"/ui/"))
	waitJS(t, tb, "three node rows", `document.querySelectorAll('#nodes tbody tr').length === 3`)
	// A member that misses the 500 ms fetch of one push shows stale until
	// the next; under -race on a busy machine that happens.
	waitJS(t, tb, "three fresh node rows", `[...document.querySelectorAll('#nodes tbody tr')].every((r) => r.dataset.stale === '0')`)
	names := eval[[]string](t, tb, `[...document.querySelectorAll('#nodes tbody tr')].map((r) => r.dataset.node + ':' + r.dataset.status + ':' + r.dataset.stale)`)
	if want := []string{"n1:alive:0", "n2:alive:0", "n3:alive:0"}; !slices.Equal(names, want) {
		t.Errorf("node rows %v, want %v", names, want)
	}
	waitJS(t, tb, "30 stored tasks over the three nodes", `document.getElementById('k-tasks').textContent === '30'`)
	if got := eval[string](t, tb, `document.querySelector('#nodes tfoot td').textContent`); got != "Cluster · 3 nodes" {
		t.Errorf("totals row says %q, want Cluster · 3 nodes", got)
	}

	// Slots mid-move or under-replicated (a lapsed lease under load) show
	// in a state colour for a moment: wait for a map of owners only.
	sc := eval[slotColors](t, tb, readSlotColors)
	for deadline := time.Now().Add(browserTimeout); len(sc.Pixels) > 3 && time.Now().Before(deadline); {
		time.Sleep(200 * time.Millisecond)
		sc = eval[slotColors](t, tb, readSlotColors)
	}
	total := 0
	for col, n := range sc.Pixels {
		if !slices.Contains(sc.Legend, col) {
			t.Errorf("slot map has %d pixels of %s, no owner's colour (legend %v)", n, col, sc.Legend)
		}
		total += n
	}
	if len(sc.Pixels) != 3 || len(sc.Legend) != 3 || total != 16384 {
		t.Errorf("slot map pixels %v, legend %v; want 16384 cells in 3 owner colours", sc.Pixels, sc.Legend)
	}

	waitWritable(t, url, "ui-cluster")
	tb.do(t, "open the tasks view",
		chromedp.Click(chromedp.CSS(`a[data-view="tasks"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#create-form`)))
	// The cluster-wide listing arrives after the view shows; its rows push
	// the form down, and a click computed before that lands elsewhere.
	waitJS(t, tb, "the task list", `document.querySelectorAll('#task-list tbody tr').length === 30`)
	tb.do(t, "set the id", chromedp.SetValue(chromedp.CSS(`#create-form input[name="id"]`), "ui-cluster"))
	tb.do(t, "choose every", chromedp.Click(chromedp.CSS(`#create-form input[name="kind"][value="every"] + span`)))
	tb.do(t, "see every_ms", chromedp.WaitVisible(chromedp.CSS(`#create-form input[name="every_ms"]`)))
	tb.do(t, "set every_ms", chromedp.SetValue(chromedp.CSS(`#create-form input[name="every_ms"]`), "200"))
	tb.do(t, "submit the create form", chromedp.Click(chromedp.CSS(`#c-submit`)))
	waitJS(t, tb, "the task in the list", `document.querySelector('#task-list tbody tr[data-id="ui-cluster"]') !== null`)
	waitJS(t, tb, "an execution", `[...document.querySelectorAll('#executions tbody pre')].some((p) => p.textContent.includes('"task_id":"ui-cluster"'))`)

	tb.do(t, "back to the cluster view", chromedp.Click(chromedp.CSS(`a[data-view="cluster"]`)))
	seq := eval[string](t, tb, `document.body.dataset.seq`)
	waitJS(t, tb, "cluster fires/s above zero", `parseFloat(document.querySelector('#nodes tfoot td:nth-child(9)').textContent) > 0`)
	waitJS(t, tb, "31 stored tasks", `document.getElementById('k-tasks').textContent === '31'`)
	waitJS(t, tb, "a later push", `document.body.dataset.seq !== '`+seq+`'`)
	waitJS(t, tb, "joins on the timeline", `[...document.querySelectorAll('#events li.k-join .text')].some((e) => e.textContent.startsWith('n3 joined'))`)

	// A fourth node joins, then leaves: its row stays, greyed, and the
	// totals cover the three live nodes.
	c.gossip = append(c.gossip, "127.0.0.1:"+strconv.Itoa(freeGossipPorts(t, 1)[0]))
	n4 := c.start(3, c.gossip)
	c.waitSettled(4)
	waitJS(t, tb, "four live rows", `document.querySelectorAll('#nodes tbody tr[data-status="alive"]').length === 4`)
	stopDashNode(t, n4)
	c.nodes = c.nodes[:3]
	waitJS(t, tb, "n4 greyed as left", `(() => {
		const r = document.querySelector('#nodes tbody tr[data-node="n4"]');
		return r !== null && r.dataset.status === 'left' && r.classList.contains('down');
	})()`)
	waitJS(t, tb, "totals over the live nodes", `document.querySelector('#nodes tfoot td').textContent === 'Cluster · 3 nodes live of 4'`)
	waitJS(t, tb, "the leave on the timeline", `[...document.querySelectorAll('#events li.k-leave .text')].some((e) => e.textContent.startsWith('n4 left'))`)
	waitJS(t, tb, "a three-owner slot map", `document.querySelectorAll('#slot-legend li[data-owner]').length === 3`)

	if os.Getenv("CHIME_SCREENSHOT") == "1" {
		// Give every node periodic work and the charts some history before
		// taking the picture. Only here: CI does not set CHIME_SCREENSHOT.
		var ticks []map[string]any
		for i := range 24 {
			ticks = append(ticks, map[string]any{"id": fmt.Sprintf("tick-%02d", i), "every_ms": 300 + 40*i, "callback_url": url + "/v1/test/callback"})
		}
		failing := strings.Replace(url, "127.0.0.1", "localhost", 1) + "/v1/test/callback?status=503&delay_ms=40"
		ticks = append(ticks, map[string]any{"id": "flaky", "every_ms": 900, "max_retries": 0, "callback_url": failing})
		createTasks(t, url, ticks)
		tb.do(t, "zoom the charts to one minute", chromedp.Click(chromedp.CSS(`#range button[data-min="1"]`)))
		time.Sleep(25 * time.Second)
		ctx, cancel := context.WithTimeout(tb.ctx, browserTimeout)
		defer cancel()
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("screenshot: %v", err)
		}
		path := filepath.Join("..", "..", "docs", "dashboard-cluster.png")
		if err := os.WriteFile(path, png, 0o644); err != nil {
			t.Fatalf("save screenshot: %v", err)
		}
		t.Logf("saved %s (%d bytes)", path, len(png))
	}
	if p := tb.problems(nil); len(p) > 0 {
		t.Errorf("console errors:\n%s", strings.Join(p, "\n"))
	}
}
