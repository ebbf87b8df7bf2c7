package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/chime-scheduler/chime/node/dashboard"
	"github.com/chime-scheduler/chime/slots"
)

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

// waitSnapshot polls the snapshot of the node at url until cond holds,
// failing after 30 s with the last snapshot's members. A member's wheel
// heatmap is rescanned at most every 15 s (the dashboard's heatmapRefresh),
// so its counts may lag that long behind a create; every other figure is
// fresh in each snapshot unless the member missed its 500 ms fetch.
func waitSnapshot(t *testing.T, url, what string, cond func(*dashboard.Snapshot) bool) *dashboard.Snapshot {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
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

// createTasks creates tasks through url in batches. A slot whose owner
// does not serve it at the moment answers 503: while a new owner takes it
// over after a membership change (startCluster and joinNode return only
// once every node has), or for a moment when its owner's lease lapsed on
// a busy machine. Those tasks are sent again, and a 409 then means an
// earlier attempt was stored after all (503 is not an acknowledgement
// either way).
func createTasks(t *testing.T, url string, left []map[string]any) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
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
			t.Fatalf("%d tasks still answered 503 after 30 s", len(left))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitWritable waits until the slot of task id takes writes (see
// createTasks: its owner serves it) by creating and deleting that task, so
// that a create through the dashboard's form, which is not retried, lands.
func waitWritable(t *testing.T, url, id string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
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

// TestClusterSnapshot: in a cluster of three chime processes, the snapshot
// of any node lists all three with their own stats (tasks stored on each
// add up to what was created), the slot table of the shared view, the
// cluster's wheel, and joins on the timeline; a node that leaves (SIGTERM:
// it drains, then leaves) stays listed as left, stale, owning nothing, and
// its leave is on the timeline. It only waits for what it reads, so it
// runs in the parallel phase.
func TestClusterSnapshot(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	parallelProcs(t, 3)
	procs := startCluster(t, 3)
	url := procs[0].url
	version, err := readTableVersion(url)
	if err != nil {
		t.Fatal(err)
	}
	createSpread(t, url, 30, 5*time.Minute)

	s := waitSnapshot(t, url, "30 tasks over three fresh members", func(s *dashboard.Snapshot) bool {
		var stored int64
		for _, m := range s.Members {
			// startCluster returned once every member was ready (active,
			// its slots taken over); a row is stale while its member
			// misses the 500 ms fetch of a snapshot.
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
	// now, as of its last heatmap scan (waitSnapshot); a slot whose owner
	// stops firing for a moment (a lapsed lease on a busy machine) is out
	// of it until it fires again.
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

	procs[2].signal(t, syscall.SIGTERM) // n3 drains and leaves
	if code := procs[2].cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("n3 exited with %d after SIGTERM, want 0", code)
	}
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

// testCluster loads the dashboard from n1 of a cluster of three chime
// processes: three rows, the slot map in three owner colours, totals over
// all three, a task created through the form (it lands on its slot's
// owner, forwarded) in the list, numbers moving with the pushes; then a
// fourth node joins and leaves (SIGTERM), and its row stays, greyed, out of
// the totals.
func testCluster(t *testing.T, browser context.Context) {
	procs := startCluster(t, 3)
	url := procs[0].url
	createSpread(t, url, 30, 5*time.Minute)
	tb := newTab(t, browser)

	tb.do(t, "open the dashboard", chromedp.Navigate(url+"/ui/"))
	waitJS(t, tb, "three node rows", `document.querySelectorAll('#nodes tbody tr').length === 3`)
	// A member that misses the 500 ms fetch of one push shows stale until
	// the next; on a busy machine that happens.
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
	cv, err := getClusterRanges(url)
	if err != nil {
		t.Fatal(err)
	}
	if owner, stored := slotOwners(cv)[slots.Of("ui-cluster")], taskOwner(t, url, "ui-cluster"); stored != owner {
		t.Errorf("the form's task is stored on %q, its slot's owner is %q", stored, owner)
	}

	tb.do(t, "back to the cluster view", chromedp.Click(chromedp.CSS(`a[data-view="cluster"]`)))
	seq := eval[string](t, tb, `document.body.dataset.seq`)
	waitJS(t, tb, "cluster fires/s above zero", `parseFloat(document.querySelector('#nodes tfoot td:nth-child(9)').textContent) > 0`)
	waitJS(t, tb, "31 stored tasks", `document.getElementById('k-tasks').textContent === '31'`)
	waitJS(t, tb, "a later push", `document.body.dataset.seq !== '`+seq+`'`)
	waitJS(t, tb, "joins on the timeline", `[...document.querySelectorAll('#events li.k-join .text')].some((e) => e.textContent.startsWith('n3 joined'))`)

	// A fourth node joins, then leaves: its row stays, greyed, and the
	// totals cover the three live nodes.
	n4 := joinNode(t, procs)[3]
	waitJS(t, tb, "four live rows", `document.querySelectorAll('#nodes tbody tr[data-status="alive"]').length === 4`)
	n4.signal(t, syscall.SIGTERM)
	if code := n4.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("n4 exited with %d after SIGTERM, want 0", code)
	}
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

// taskOwner reads task id through the node at url and returns the member
// that answered it ("owner" in the answer, which is the slot's owner that
// stores it).
func taskOwner(t *testing.T, url, id string) string {
	t.Helper()
	resp, err := http.Get(url + "/v1/tasks/" + id)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var tk struct {
		Owner string `json:"owner"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&tk); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/tasks/%s = %d, decode: %v", id, resp.StatusCode, err)
	}
	return tk.Owner
}
