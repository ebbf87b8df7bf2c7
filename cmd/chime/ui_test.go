package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/chime-scheduler/chime/node"
	"github.com/chime-scheduler/chime/node/dashboard"
	"github.com/chime-scheduler/chime/ring"
	"github.com/chime-scheduler/chime/ui"
)

// The real-browser test of the dashboard: headless Chromium, driven with
// chromedp, against a real in-process node, a cluster of three chime
// processes (ui_cluster_test.go) and a fake five-node snapshot. It skips when
// /usr/bin/chromium is missing, unless CHIME_REQUIRE_BROWSER=1 (CI), and
// saves docs/dashboard.png (one node) and docs/dashboard-cluster.png when
// CHIME_SCREENSHOT=1.

const chromiumPath = "/usr/bin/chromium"

// browserTimeout bounds each step that waits for the page.
const browserTimeout = 15 * time.Second

// newBrowser starts headless Chromium with a fresh profile; it is stopped
// at cleanup.
func newBrowser(t *testing.T) context.Context {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		if os.Getenv("CHIME_REQUIRE_BROWSER") == "1" {
			t.Fatalf("CHIME_REQUIRE_BROWSER=1 but %s is missing: %v", chromiumPath, err)
		}
		t.Skipf("no browser: %v (apt-get install -y chromium)", err)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1440, 1000),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-default-apps", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("force-color-profile", "srgb"), // canvas pixels read back exactly
		chromedp.Flag("hide-scrollbars", true),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	bctx, cancelBrowser := chromedp.NewContext(actx, chromedp.WithErrorf(t.Logf))
	t.Cleanup(func() {
		cancelBrowser()
		cancelAlloc()
	})
	// The first Run starts the browser; it lives as long as bctx.
	if err := chromedp.Do(bctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return bctx
}

// tab is one browser tab with its console collected.
type tab struct {
	ctx  context.Context
	mu   sync.Mutex
	msgs []chromedp.ConsoleMessage // guarded by mu: errors, warnings, exceptions
}

// newTab opens a tab in the browser and records its console errors,
// warnings and exceptions until cleanup.
func newTab(t *testing.T, browser context.Context) *tab {
	t.Helper()
	ctx, cancel := chromedp.NewContext(browser)
	tb := &tab{ctx: ctx}
	msgs := chromedp.Console(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for m, err := range msgs {
			if err != nil {
				return
			}
			if m.IsException() || m.Type == chromedp.ConsoleError || m.Type == chromedp.ConsoleWarning {
				tb.mu.Lock()
				tb.msgs = append(tb.msgs, m)
				tb.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return tb
}

// problems returns the console messages that are not allowed by allow.
func (tb *tab) problems(allow func(chromedp.ConsoleMessage) bool) []string {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	var out []string
	for _, m := range tb.msgs {
		if allow == nil || !allow(m) {
			out = append(out, fmt.Sprintf("%s (%s:%d)", m, m.URL, m.Line))
		}
	}
	return out
}

// do runs steps with the step timeout.
func (tb *tab) do(t *testing.T, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, browserTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("%s: %v\nconsole: %v", what, err, tb.problems(nil))
	}
}

// eval evaluates a JavaScript expression into T.
func eval[T any](t *testing.T, tb *tab, expr string) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, browserTimeout)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluate %q: %v", expr, err)
	}
	return v
}

// waitJS waits until the expression is truthy in the page.
func waitJS(t *testing.T, tb *tab, what, expr string) {
	t.Helper()
	tb.do(t, "wait for "+what, func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
		_, err := chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingInterval(50*time.Millisecond),
			chromedp.WithPollingTimeout(browserTimeout))(ctx, tg)
		return chromedp.Void{}, err
	})
}

// slotColors reads the slot map canvas back: the distinct colours of its
// pixels, and the owner colours its legend shows.
type slotColors struct {
	Pixels map[string]int `json:"pixels"`
	Legend []string       `json:"legend"`
}

const readSlotColors = `(() => {
	const c = document.getElementById('slotmap');
	const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
	const pixels = {};
	for (let i = 0; i < d.length; i += 4) {
		const k = '#' + [d[i], d[i + 1], d[i + 2]].map((v) => v.toString(16).padStart(2, '0')).join('');
		pixels[k] = (pixels[k] || 0) + 1;
	}
	const legend = [...document.querySelectorAll('#slot-legend li[data-owner] .swatch')].map((s) => s.dataset.color);
	return {pixels, legend};
})()`

// The slot map's marker colours (app.js UNDER_RGB, UNAVAIL_RGB).
const (
	underColor   = "#f5b83d"
	unavailColor = "#f0545c"
	stalledColor = "#960028"
)

func TestDashboardInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser")
	}
	browser := newBrowser(t)
	t.Run("real node", func(t *testing.T) { testRealNode(t, browser) })
	t.Run("three-node cluster", func(t *testing.T) { testCluster(t, browser) })
	t.Run("five members with token", func(t *testing.T) { testFiveMembers(t, browser) })
	t.Run("failures", func(t *testing.T) { testFailures(t, browser) })
	t.Run("circuit", func(t *testing.T) { testCircuit(t, browser) })
}

// testCircuit: a callback host whose circuit breaker opened shows in the
// callback table as open with its held fires, and the opening is in the
// timeline.
func testCircuit(t *testing.T, browser context.Context) {
	d := startDashNodeWith(t, "chime-circuit", func(c *node.Config) {
		c.Breaker.MinAttempts, c.Breaker.Probe, c.Breaker.ProbeMax = 5, time.Hour, time.Hour // stays open
	})
	failing := d.srv.URL + "/v1/test/callback?status=500"
	create := func(id string) {
		if code := postJSON(t, d.srv.URL+"/v1/tasks", map[string]any{
			"id": id, "delay_ms": 1, "max_retries": 0, "callback_url": failing}, nil); code != http.StatusCreated {
			t.Fatalf("create %s = %d, want 201", id, code)
		}
	}
	var st struct {
		Callbacks struct {
			Circuits []struct {
				State string `json:"state"`
				Held  int    `json:"held"`
			} `json:"circuits"`
		} `json:"callbacks"`
	}
	wait := func(what string, cond func() bool) {
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			getJSON(t, d.srv.URL+"/v1/stats", &st)
			if cond() {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: not after 10s: %+v", what, st.Callbacks)
			}
		}
	}
	for i := range 5 {
		create(fmt.Sprintf("cb-fail-%d", i))
	}
	wait("the circuit opens", func() bool { return len(st.Callbacks.Circuits) == 1 })
	for i := range 3 {
		create(fmt.Sprintf("cb-held-%d", i))
	}
	wait("3 fires held", func() bool { return len(st.Callbacks.Circuits) == 1 && st.Callbacks.Circuits[0].Held == 3 })
	tb := newTab(t, browser)
	tb.do(t, "open the dashboard", chromedp.Navigate(d.srv.URL+"/ui/"))
	row := `[...document.querySelectorAll('#hosts tbody tr')].find((r) => r.cells[6] && r.cells[6].textContent === 'open')`
	waitJS(t, tb, "the open circuit in the callback table", row+` !== undefined`)
	if held := eval[string](t, tb, row+`.cells[7].textContent`); held != "3" {
		t.Errorf("held %q, want 3", held)
	}
	waitJS(t, tb, "the opening in the timeline", `[...document.querySelectorAll('#events li')].some((li) => li.textContent.includes('circuit of ') && li.textContent.includes('opened'))`)
	if p := tb.problems(nil); len(p) > 0 {
		t.Errorf("console errors:\n%s", strings.Join(p, "\n"))
	}
}

// testFailures: a task whose callback fails shows in the Failures view
// (task, status, the answer's first bytes), and its Retry button fires it
// again as a new fire, which the view shows after a refresh.
func testFailures(t *testing.T, browser context.Context) {
	d := startDashNode(t, "chime-fail", "")
	tb := newTab(t, browser)
	failing := d.srv.URL + "/v1/test/callback?status=500"
	if code := postJSON(t, d.srv.URL+"/v1/tasks", map[string]any{
		"id": "ui-fail", "delay_ms": 1, "max_retries": 0, "callback_url": failing}, nil); code != http.StatusCreated {
		t.Fatalf("create = %d, want 201", code)
	}
	// Executions of the task, newest first, as the API lists them.
	failed := func() []string {
		var page struct {
			Executions []struct {
				FireID string `json:"fire_id"`
			} `json:"executions"`
		}
		getJSON(t, d.srv.URL+"/v1/executions?status=failed&task_id=ui-fail", &page)
		var out []string
		for _, e := range page.Executions {
			out = append(out, e.FireID)
		}
		return out
	}
	status := func() string {
		var tk struct {
			Status string `json:"status"`
		}
		getJSON(t, d.srv.URL+"/v1/tasks/ui-fail", &tk)
		return tk.Status
	}
	for deadline := time.Now().Add(10 * time.Second); status() != "failed"; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the task did not fail")
		}
	}
	first := failed()
	if len(first) != 1 {
		t.Fatalf("failed executions %v, want one", first)
	}
	tb.do(t, "open the failures view", chromedp.Navigate(d.srv.URL+"/ui/#failures"))
	row := `document.querySelector('#failures tbody tr[data-id="ui-fail"]')`
	waitJS(t, tb, "the failed execution", row+` !== null`)
	cells := eval[[]string](t, tb, `[...`+row+`.cells].map((c) => c.textContent)`)
	if len(cells) < 6 || cells[1] != first[0] || cells[4] != "500" || !strings.Contains(cells[5], `"fire_id":"`+first[0]+`"`) {
		t.Errorf("row %q", cells)
	}
	tb.do(t, "retry", chromedp.Click(chromedp.CSS(`#failures tbody tr[data-id="ui-fail"] button[data-retry]`)))
	waitJS(t, tb, "the retry's message", `document.getElementById('fail-msg').textContent.startsWith('Retried ui-fail')`)
	var again []string
	for deadline := time.Now().Add(10 * time.Second); len(again) < 2; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no second failed execution after the retry: %v", again)
		}
		again = failed()
	}
	if again[0] == first[0] || again[1] != first[0] {
		t.Fatalf("executions after the retry %v, want a new fire before %s", again, first[0])
	}
	tb.do(t, "refresh", chromedp.Click(chromedp.CSS(`#fail-refresh`)))
	waitJS(t, tb, "the new fire in the view",
		`document.querySelector('#failures tbody tr[data-id="ui-fail"]').dataset.fire === '`+again[0]+`' && document.querySelectorAll('#failures tbody tr').length === 2`)
	if p := tb.problems(nil); len(p) > 0 {
		t.Errorf("console errors:\n%s", strings.Join(p, "\n"))
	}
}

// testRealNode loads the page from a running node, checks the cluster view,
// creates a task through the form and sees the numbers move.
func testRealNode(t *testing.T, browser context.Context) {
	const name = "chime-ui"
	d := startDashNode(t, name, "")
	tb := newTab(t, browser)

	// A few tasks due over the next hour, for the wheel heatmap.
	var batch []map[string]any
	for i := range 40 {
		batch = append(batch, map[string]any{
			"id": fmt.Sprintf("later-%02d", i), "delay_ms": (90 + 60*(i%30) + 600*(i/30)) * 1000,
			"callback_url": d.srv.URL + "/v1/test/callback", "labels": map[string]string{"team": "billing"},
		})
	}
	if code := postJSON(t, d.srv.URL+"/v1/tasks:batch", map[string]any{"tasks": batch}, nil); code != http.StatusOK {
		t.Fatalf("batch create = %d, want 200", code)
	}

	tb.do(t, "open the dashboard", chromedp.Navigate(d.srv.URL+"/"))
	waitJS(t, tb, "the node row", `document.querySelector('#nodes tbody tr[data-node="`+name+`"]') !== null`)
	if got := eval[int](t, tb, `document.querySelectorAll('#nodes tbody tr').length`); got != 1 {
		t.Errorf("node table has %d rows, want 1", got)
	}
	if got := eval[string](t, tb, `location.pathname`); got != "/ui/" {
		t.Errorf("/ led to %q, want /ui/", got)
	}
	waitJS(t, tb, "the stored-task count", `document.getElementById('k-tasks').textContent === '40'`)

	sc := eval[slotColors](t, tb, readSlotColors)
	if len(sc.Pixels) != 1 || len(sc.Legend) != 1 || sc.Pixels[sc.Legend[0]] != 16384 {
		t.Errorf("slot map pixels %v, legend %v; want all 16384 cells in the one owner's colour", sc.Pixels, sc.Legend)
	}

	// Create a periodic task through the form; it fires at the node's own
	// test receiver.
	tb.do(t, "fill the create form",
		chromedp.Click(chromedp.CSS(`a[data-view="tasks"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#create-form`)),
		chromedp.SetValue(chromedp.CSS(`#create-form input[name="id"]`), "ui-every"),
		chromedp.Click(chromedp.CSS(`#create-form input[name="kind"][value="every"] + span`)),
		chromedp.WaitVisible(chromedp.CSS(`#create-form input[name="every_ms"]`)),
		chromedp.SetValue(chromedp.CSS(`#create-form input[name="every_ms"]`), "200"),
		chromedp.SetValue(chromedp.CSS(`#create-form textarea[name="labels"]`), "team=ui"),
		chromedp.Click(chromedp.CSS(`#c-submit`)),
	)
	waitJS(t, tb, "the task in the list", `document.querySelector('#task-list tbody tr[data-id="ui-every"]') !== null`)
	waitJS(t, tb, "the task's detail", `document.getElementById('d-id').textContent === 'ui-every' && !document.getElementById('d-status').hidden`)
	waitJS(t, tb, "an execution with its response body",
		`[...document.querySelectorAll('#executions tbody pre')].some((p) => p.textContent.includes('"task_id":"ui-every"'))`)
	// Pause and resume from the detail: bodiless POSTs, which the node
	// takes only with Content-Type: application/json (its CSRF guard).
	tb.do(t, "pause", chromedp.Click(chromedp.CSS(`#detail-panel [data-act="pause"]`)))
	waitJS(t, tb, "the task paused", `document.getElementById('d-status').textContent === 'paused'`)
	tb.do(t, "resume", chromedp.Click(chromedp.CSS(`#detail-panel [data-act="resume"]`)))
	waitJS(t, tb, "the task resumed", `document.getElementById('d-status').textContent === 'scheduled'`)

	// Filtering by label finds only the new task.
	tb.do(t, "filter by label",
		chromedp.SetValue(chromedp.CSS(`#f-label`), "team:ui"),
		chromedp.Click(chromedp.CSS(`#filter-form button[type="submit"]`)))
	waitJS(t, tb, "the filtered list", `document.querySelectorAll('#task-list tbody tr').length === 1 && document.getElementById('list-hint').textContent.startsWith('1 shown')`)

	// Back on the cluster view the pushed numbers move: fires/s rises above
	// zero and the stored-task count includes the new task.
	tb.do(t, "back to the cluster view", chromedp.Click(chromedp.CSS(`a[data-view="cluster"]`)))
	seq := eval[string](t, tb, `document.body.dataset.seq`)
	waitJS(t, tb, "fires/s above zero", `parseFloat(document.querySelector('#nodes tbody tr[data-node="`+name+`"] td:nth-child(9)').textContent) > 0`)
	waitJS(t, tb, "41 stored tasks", `document.getElementById('k-tasks').textContent === '41'`)
	waitJS(t, tb, "a later push", `document.body.dataset.seq !== '`+seq+`'`)
	waitJS(t, tb, "the wheel heatmap", `/^[1-9]/.test(document.getElementById('wheel-hint').textContent)`)
	waitJS(t, tb, "the per-URL latency table", `!document.getElementById('urls').hidden && document.querySelector('#urls tbody tr td').textContent.endsWith('/v1/test/callback')`)

	if os.Getenv("CHIME_SCREENSHOT") == "1" {
		// Give the charts some history and the latency view a second host
		// (slower, failing) before taking the picture. Only here: CI does
		// not set CHIME_SCREENSHOT, so the test stays short.
		failing := strings.Replace(d.srv.URL, "127.0.0.1", "localhost", 1) + "/v1/test/callback?status=503&delay_ms=40"
		if code := postJSON(t, d.srv.URL+"/v1/tasks", map[string]any{
			"id": "flaky", "every_ms": 900, "max_retries": 0, "callback_url": failing}, nil); code != http.StatusCreated {
			t.Fatalf("create flaky = %d, want 201", code)
		}
		tb.do(t, "zoom the charts to one minute", chromedp.Click(chromedp.CSS(`#range button[data-min="1"]`)))
		time.Sleep(25 * time.Second)
		ctx, cancel := context.WithTimeout(tb.ctx, browserTimeout)
		defer cancel()
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("screenshot: %v", err)
		}
		path := filepath.Join("..", "..", "docs", "dashboard.png")
		if err := os.WriteFile(path, png, 0o644); err != nil {
			t.Fatalf("save screenshot: %v", err)
		}
		t.Logf("saved %s (%d bytes)", path, len(png))
	}
	if p := tb.problems(nil); len(p) > 0 {
		t.Errorf("console errors:\n%s", strings.Join(p, "\n"))
	}
}

// testFiveMembers serves the dashboard over a fake API with a five-member
// snapshot and a token: the page asks for the token, then shows five rows
// and paints the slot map in five owner colours plus the marker colours.
func testFiveMembers(t *testing.T, browser context.Context) {
	const token = "s3cret"
	snap := fiveMemberSnapshot(t, time.Now())
	dash := ui.NewHandler(snapshotFunc(func() *dashboard.Snapshot {
		s := *snap
		s.Time = time.Now()
		return &s
	}), ui.Options{Token: token, Interval: 500 * time.Millisecond})
	mux := http.NewServeMux()
	mux.Handle("/ui/", dash)
	mux.Handle("/v1/ws", dash)
	mux.HandleFunc("/v1/cluster", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprint(w, `{"error":{"code":"unauthenticated","message":"missing or wrong bearer token"}}`)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"self":"chime-1","members":[],"table_version":1}`)
	})
	// The due load: five rows, chime-5 unavailable.
	mux.HandleFunc("/v1/stats/due", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.Header.Get("Authorization") != "Bearer "+token {
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprint(w, `{"error":{"code":"unauthenticated","message":"missing or wrong bearer token"}}`)
			return
		}
		var rows []string
		for i := 1; i <= 4; i++ {
			hours := make([]string, 24)
			for h := range hours {
				hours[h] = fmt.Sprint((h * i) % 7)
			}
			rows = append(rows, fmt.Sprintf(`{"node":"chime-%d","available":true,"hours":[%s],"minutes":[],"total":1,"overdue":0,"overdue_complete":true,"truncated":false,"keys_scanned":1}`, i, strings.Join(hours, ",")))
		}
		rows = append(rows, `{"node":"chime-5","available":false,"error":"timed out","hours":[],"minutes":[],"total":0,"overdue":0,"overdue_complete":false,"truncated":false,"keys_scanned":0}`)
		fmt.Fprintf(w, `{"from":%q,"hours":24,"by":"node","total":4,"overdue":0,"truncated":false,"unavailable":true,"nodes":[%s]}`,
			time.Now().UTC().Format(time.RFC3339Nano), strings.Join(rows, ","))
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(func() {
		dash.Close()
		srv.Close()
	})

	tb := newTab(t, browser)
	tb.do(t, "open the dashboard and give the token",
		chromedp.Navigate(srv.URL+"/ui/"),
		chromedp.WaitVisible(chromedp.CSS(`#token-input`)),
		chromedp.SetValue(chromedp.CSS(`#token-input`), token),
		chromedp.Click(chromedp.CSS(`#token-form button[type="submit"]`)),
	)
	waitJS(t, tb, "five node rows", `document.querySelectorAll('#nodes tbody tr').length === 5`)
	waitJS(t, tb, "a live connection", `document.getElementById('conn').dataset.state === 'live'`)
	if got := eval[string](t, tb, `sessionStorage.getItem('chime.token')`); got != token {
		t.Errorf("sessionStorage token = %q, want %q", got, token)
	}
	names := eval[[]string](t, tb, `[...document.querySelectorAll('#nodes tbody tr')].map((r) => r.dataset.node)`)
	if want := []string{"chime-1", "chime-2", "chime-3", "chime-4", "chime-5"}; !slices.Equal(names, want) {
		t.Errorf("node rows %v, want %v", names, want)
	}

	sc := eval[slotColors](t, tb, readSlotColors)
	owners := 0
	for c, n := range sc.Pixels {
		switch {
		case c == underColor || c == unavailColor || c == stalledColor:
		case slices.Contains(sc.Legend, c):
			owners++
		default:
			t.Errorf("slot map has %d pixels of %s, which is no owner's or marker's colour", n, c)
		}
	}
	if owners != 5 || len(sc.Legend) != 5 {
		t.Errorf("slot map shows %d owner colours, legend %d; want 5 and 5 (pixels %v)", owners, len(sc.Legend), sc.Pixels)
	}
	if sc.Pixels[unavailColor] != 10 || sc.Pixels[underColor] == 0 {
		t.Errorf("marker pixels: %d unavailable (want 10), %d under-replicated (want > 0)", sc.Pixels[unavailColor], sc.Pixels[underColor])
	}
	if got := eval[string](t, tb, `document.getElementById('k-slots-sub').textContent`); !strings.Contains(got, "100 under-replicated") ||
		!strings.Contains(got, "7 stalled") {
		t.Errorf("slots card says %q, want 100 under-replicated and 7 stalled", got)
	}
	// The safety net: stalled slots in their own colour, and the Overdue
	// figure red with the members' overdue tasks and stalled slots.
	if sc.Pixels[stalledColor] != 7 {
		t.Errorf("stalled pixels: %d, want 7", sc.Pixels[stalledColor])
	}
	if got := eval[string](t, tb, `document.getElementById('k-overdue').textContent + '|' + document.getElementById('k-overdue').className + '|' + document.getElementById('k-overdue-sub').textContent`); !strings.HasPrefix(got, "42|") ||
		!strings.Contains(got, "bad") || !strings.Contains(got, "7 slot(s) not firing") {
		t.Errorf("overdue card says %q, want 42, red, 7 slot(s) not firing", got)
	}
	// The legend counts each owner's slots from slot_owners; they match the
	// members' slots_owned only if the page indexes members as sent.
	legend := eval[map[string]string](t, tb, `Object.fromEntries([...document.querySelectorAll('#slot-legend li[data-owner]')].map((li) => [li.dataset.owner, li.querySelector('.n').textContent]))`)
	for _, m := range snap.Members {
		if want := fmt.Sprintf("%d", m.SlotsOwned); strings.ReplaceAll(legend[m.Name], ",", "") != want {
			t.Errorf("legend count of %s = %q, want %s", m.Name, legend[m.Name], want)
		}
	}
	for _, slot := range []int{0, 1050, 2005, 16383} {
		owner, st := snap.Members[snap.SlotOwners[slot]].Name, snap.SlotStates[slot]
		want := fmt.Sprintf("slot %d · %s · %s", slot, owner, strings.ReplaceAll(st.String(), "_", "-"))
		got := eval[string](t, tb, fmt.Sprintf(`(() => {
			const c = document.getElementById('slotmap'), r = c.getBoundingClientRect();
			const x = %d %% 128, y = Math.floor(%d / 128);
			c.dispatchEvent(new MouseEvent('mousemove', {clientX: r.left + (x + 0.5) * r.width / 128, clientY: r.top + (y + 0.5) * r.height / 128}));
			return document.getElementById('slot-readout').textContent;
		})()`, slot, slot))
		if got != want {
			t.Errorf("hover over slot %d reads %q, want %q", slot, got, want)
		}
	}

	// The due heatmap: a row per member, the unavailable one says so.
	waitJS(t, tb, "five heatmap rows", `document.querySelectorAll('#due-heat tbody tr').length === 5`)
	if got := eval[string](t, tb, `document.querySelector('#due-heat tr[data-node="chime-5"] td').textContent`); got != "unavailable: timed out" {
		t.Errorf("chime-5's heatmap row says %q", got)
	}
	if got := eval[string](t, tb, `document.querySelector('#due-heat td[data-node="chime-3"][data-hour="2"]').dataset.count`); got != "6" {
		t.Errorf("chime-3's hour 2 = %q, want 6", got)
	}

	// The probe's 401 before the token was given is expected; nothing else.
	allow := func(m chromedp.ConsoleMessage) bool {
		return m.Source == "network" && strings.Contains(m.Text, "401")
	}
	if p := tb.problems(allow); len(p) > 0 {
		t.Errorf("console errors:\n%s", strings.Join(p, "\n"))
	}
}

// snapshotFunc adapts a func to ui.API.
type snapshotFunc func() *dashboard.Snapshot

func (f snapshotFunc) Snapshot(context.Context) (any, error) { return f(), nil }

// fiveMemberSnapshot is a dashboard.Snapshot of five members (listed chime-5
// first) whose slot table comes from ring.Assign (rendezvous hashing, so as
// fragmented as a real cluster's: about 13,000 runs of one owner), with
// slots 1000-1099 under-replicated, 2000-2009 unavailable and 3000-3006
// stalled (on its second member, with 42 overdue tasks).
func fiveMemberSnapshot(t *testing.T, now time.Time) *dashboard.Snapshot {
	t.Helper()
	var members []ring.Member
	for i := 1; i <= 5; i++ {
		members = append(members, ring.Member{Name: fmt.Sprintf("chime-%d", i), HTTPAddr: fmt.Sprintf("127.0.0.1:%d", 7070+i)})
	}
	table := ring.Assign(members, ring.NumSlots)
	s := &dashboard.Snapshot{Time: now, Self: "chime-1"}
	counts := table.Counts()
	index := make(map[string]byte)
	// Members go out in reverse name order, so the page must index
	// slot_owners by the snapshot's order, not by its sorted table rows.
	for i, m := range slices.Backward(members) {
		index[m.Name] = byte(len(s.Members))
		s.Members = append(s.Members, dashboard.MemberSnapshot{
			Name: m.Name, State: "active", HTTPAddr: m.HTTPAddr, GossipAddr: fmt.Sprintf("127.0.0.1:%d", 7946+i),
			SlotsOwned: counts[m.Name].Owned, SlotsFollowing: counts[m.Name].Following,
			TasksStored: int64(20000 + 1000*i), WheelTasks: 300 + 10*i, FiresPerSec: float64(100 + 5*i),
			CreatesPerSec: 40, LatenessP50Ms: 2, LatenessP99Ms: float64(9 + i), CPUPercent: 18,
			RSSBytes: 120 << 20, Goroutines: 540, DiskBytes: 48 << 20, UptimeSeconds: 7200,
		})
	}
	owners := make([]byte, ring.NumSlots)
	states := make([]dashboard.SlotState, ring.NumSlots)
	for slot := range owners {
		owner, _ := table.Owner(uint16(slot))
		owners[slot] = index[owner.Name]
		switch {
		case slot >= 1000 && slot < 1100:
			states[slot] = dashboard.SlotUnderReplicated
		case slot >= 2000 && slot < 2010:
			states[slot] = dashboard.SlotUnavailable
		case slot >= 3000 && slot < 3007:
			states[slot] = dashboard.SlotStalled
		}
	}
	s.Members[1].TasksOverdue, s.Members[1].SlotsStalled = 42, 7
	if err := s.SetSlotTable(7, owners, states); err != nil {
		t.Fatalf("SetSlotTable: %v", err)
	}
	s.Events = []dashboard.Event{
		{Time: now.Add(-2 * time.Minute), Kind: "start", Text: "node chime-1 started"},
		{Time: now.Add(-90 * time.Second), Kind: "join", Text: "chime-5 joined; 3277 slots move"},
	}
	s.Wheel = dashboard.WheelHeatmap{Start: now.Truncate(time.Minute), BucketSeconds: 60, Counts: make([]int, 60)}
	for i := range s.Wheel.Counts {
		s.Wheel.Counts[i] = 200 + 10*(i%7)
	}
	s.Wheel.Counts[12] = 5000
	s.Hosts = []dashboard.HostLatency{
		{Host: "https://billing.internal", Count: 52000, P50Ms: 4, P90Ms: 11, P99Ms: 40},
		{Host: "https://hooks.example.com", Count: 9000, P50Ms: 35, P90Ms: 80, P99Ms: 310},
	}
	return s
}
