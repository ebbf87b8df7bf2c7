package node

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/chime-scheduler/chime/slots"
	"github.com/chime-scheduler/chime/storage"
)

// TestChains (API.md "Chains"): a fire that finishes with success (after a
// retry) creates its on_success children and not its on_failure ones, one
// that fails for good (retries exhausted) its on_failure ones, a periodic
// task its children at every fire (ids with the fire seq), nested chains
// their grandchildren; each child exactly once, due its delay_ms after the
// parent's fire finished, with the parent's response as payload when it
// asks for it, and linked both ways (parent_id, parent_fire_id; the
// finishing execution's children).
func TestChains(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rcv := newReceiver(t)
		rcv.setRespond(func(h hit, n int) int {
			if h.TaskID == "p-fail" || h.TaskID == "p-ok" && n == 1 {
				return 500
			}
			return 200
		})
		tn := startNode(t, nil)
		cb := rcv.url("/cb")
		t0 := time.Now().Truncate(time.Second).Add(time.Second)
		at := t0.UTC().Format(time.RFC3339Nano)
		child := func(extra string) string {
			if !strings.HasPrefix(extra, `,"delay_ms"`) {
				extra = `,"delay_ms":0` + extra
			}
			return `{"callback_url":"` + cb + `"` + extra + `}`
		}
		create := func(body string) {
			t.Helper()
			var got map[string]any
			if code := tn.do(t, "POST", "/v1/tasks", body, &got); code != 201 {
				t.Fatalf("create %s: %d %v", body, code, got)
			}
		}
		create(`{"id":"p-ok","callback_url":"` + cb + `","due_at":"` + at + `","max_retries":1,` +
			`"on_success":[` + child(`,"delay_ms":1000,"payload_from_parent":true`) + `,` + child(`,"id":"given-b","payload":{"b":1}`) + `],` +
			`"on_failure":[` + child(`,"id":"never"`) + `]}`)
		create(`{"id":"p-fail","callback_url":"` + cb + `","due_at":"` + at + `","max_retries":2,` +
			`"on_success":[` + child(`,"id":"never2"`) + `],` +
			`"on_failure":[` + child(`,"on_success":[`+child("")+`]`) + `]}`)
		create(`{"id":"p-every","callback_url":"` + cb + `","every_ms":1000,"start_at":"` + at + `","max_runs":3,` +
			`"on_success":[` + child("") + `]}`)

		// p-ok.1.0 is created after p-ok's retry and due a second later.
		time.Sleep(time.Until(t0.Add(40 * time.Second)))
		per := map[string][]hit{}
		for _, h := range rcv.hits() {
			per[h.TaskID] = append(per[h.TaskID], h)
		}
		wantOnce := []string{"p-ok.1.0", "given-b", "p-fail.1.0", "p-fail.1.0.1.0", "p-every.1.0", "p-every.2.0", "p-every.3.0"}
		for _, id := range wantOnce {
			if n := len(per[id]); n != 1 {
				t.Errorf("child %s fired %d times, want once", id, n)
			}
		}
		for _, id := range []string{"never", "never2", "p-every.4.0"} {
			if n := len(per[id]); n != 0 {
				t.Errorf("%s fired %d times, want never", id, n)
			}
		}
		var all []string
		for id := range per {
			all = append(all, id)
		}
		slices.Sort(all)
		if want := append([]string{"p-every", "p-fail", "p-ok"}, wantOnce...); len(all) != len(want) {
			t.Errorf("tasks that fired: %v, want %v", all, want)
		}

		// p-ok.1.0: due its delay_ms after p-ok's fire finished, with p-ok's
		// answer as its payload, linked to p-ok's fire.
		var parent struct {
			LastFire struct {
				FireID     string `json:"fire_id"`
				FinishedAt string `json:"finished_at"`
				Attempts   int    `json:"attempts"`
			} `json:"last_fire"`
			Pending []string `json:"pending_children"`
		}
		if code := tn.do(t, "GET", "/v1/tasks/p-ok", nil, &parent); code != 200 || parent.LastFire.Attempts != 2 || len(parent.Pending) != 0 {
			t.Fatalf("GET p-ok: %d %+v, want its fire finished after 2 attempts, no pending children", code, parent)
		}
		finished, err := time.Parse(time.RFC3339Nano, parent.LastFire.FinishedAt)
		if err != nil {
			t.Fatal(err)
		}
		if h := per["p-ok.1.0"]; len(h) == 1 {
			if !h[0].Due.Equal(finished.Add(time.Second)) {
				t.Errorf("p-ok.1.0 due %v, want 1 s after its parent's fire finished (%v)", h[0].Due, finished)
			}
			if string(h[0].Body) != `{"ok":true}` {
				t.Errorf("p-ok.1.0 payload %s, want the parent's answer", h[0].Body)
			}
		}
		if h := per["given-b"]; len(h) == 1 && string(h[0].Body) != `{"b":1}` {
			t.Errorf("given-b payload %s, want its own", h[0].Body)
		}
		var kid struct {
			ParentID   string `json:"parent_id"`
			ParentFire string `json:"parent_fire_id"`
		}
		if code := tn.do(t, "GET", "/v1/tasks/p-ok.1.0", nil, &kid); code != 200 || kid.ParentID != "p-ok" || kid.ParentFire != "p-ok:1" {
			t.Errorf("GET p-ok.1.0: %d %+v, want parent p-ok, fire p-ok:1", code, kid)
		}
		if code := tn.do(t, "GET", "/v1/tasks/p-fail.1.0.1.0", nil, &kid); code != 200 || kid.ParentID != "p-fail.1.0" || kid.ParentFire != "p-fail.1.0:1" {
			t.Errorf("GET p-fail.1.0.1.0: %d %+v, want parent p-fail.1.0", code, kid)
		}

		// The execution that finished each fire names its children.
		for id, want := range map[string][]string{"p-ok": {"p-ok.1.0", "given-b"}, "p-fail": {"p-fail.1.0"}} {
			var ex struct {
				Executions []struct {
					FireID   string   `json:"fire_id"`
					Attempt  int      `json:"attempt"`
					Children []string `json:"children"`
				} `json:"executions"`
			}
			if code := tn.do(t, "GET", "/v1/tasks/"+id+"/executions", nil, &ex); code != 200 {
				t.Fatalf("executions of %s: %d", id, code)
			}
			var got []string
			for _, e := range ex.Executions {
				got = append(got, fmt.Sprintf("%d:%s", e.Attempt, strings.Join(e.Children, ",")))
			}
			last := len(ex.Executions) // attempts: the finishing one is the last
			wantLast := fmt.Sprintf("%d:%s", last, strings.Join(want, ","))
			if !slices.Contains(got, wantLast) || slices.ContainsFunc(got, func(s string) bool { return !strings.HasSuffix(s, ":") && s != wantLast }) {
				t.Errorf("executions of %s (attempt:children): %v, want %s on the last attempt only", id, got, wantLast)
			}
		}
	})
}

// TestFaultChainCrashBeforeChildren: the owner of a parent's slot crashes
// after the parent's fire finished (the outcome, with its pending
// children, written) and before it created any child: "replicated", once
// its follower has the outcome and the pending children (the next owner
// resumes them from its copy); "local", at once (the next owner may not
// have the outcome and repeats the fire, with the same fire id, so the
// same child ids). Either way each child exists exactly once (ids
// <parent>.1.<i>, linked to the parent's fire), fires exactly once, and
// the parent is left with none pending.
func TestFaultChainCrashBeforeChildren(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		replicated bool
		seed       uint64
	}{{"replicated", true, 21}, {"local", false, 22}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) { faultChainCrash(t, tc.replicated, tc.seed) })
		})
	}
}

func faultChainCrash(t *testing.T, replicated bool, seed uint64) {
	c := newFaultCluster(t, 3, seed)
	parent := ids("chain", 1, c.table(0), func(o, f string) bool { return o == "n2" && f == "n3" })[0]
	reached := make(chan string, 1)
	// n2 "crashes" in its outbox: it abandons the parent's children
	// (creating none) and the test kills it right then.
	c.nodes[1].n.chain.BeforeCreate = func(p *storage.Task) bool {
		select {
		case reached <- p.ID:
		default:
		}
		return false
	}
	const kids = 6
	var children []map[string]any
	for range kids {
		children = append(children, map[string]any{"callback_url": faultCallbackURL, "delay_ms": 300})
	}
	due := time.Now().Add(time.Second)
	body := map[string]any{"callback_url": faultCallbackURL, "due_at": due.Format(time.RFC3339Nano), "on_success": children}
	// 200: a retry after an answer lost on the lossy links (a 503 from the
	// forwarding node) replaced the task the first try created, with the
	// same body.
	if code, _ := c.send(c.pick(), http.MethodPut, "/v1/tasks/"+parent, body, http.StatusCreated, http.StatusOK); code != http.StatusCreated && code != http.StatusOK {
		t.Fatalf("create %s: %d", parent, code)
	}
	c.mu.Lock()
	c.acked[parent] = due
	c.mu.Unlock()
	select {
	case id := <-reached:
		if id != parent {
			t.Fatalf("n2's outbox got %s, want %s", id, parent)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("n2 never handed the parent's children to its outbox")
	}
	if replicated {
		// The follower n3 has the outcome and the pending children.
		waitFor(t, 5*time.Second, "n3's copy of the parent with its pending children", func() bool {
			p, err := c.nodes[2].n.store.Get(slots.Of(parent), parent)
			return err == nil && len(p.Children) == kids && p.LastFire != nil
		})
	}
	c.crash(1)
	c.settle(time.Now().Add(faultsSettle))
	time.Sleep(5 * time.Second) // the children: created after the failover, due 300 ms after the parent's finish
	report(t, c.check(checkOpts{}))

	fired := map[string]int{}
	parentFires := 0
	for _, f := range c.rcv.all() {
		if strings.HasPrefix(f.TaskID, parent+".") {
			fired[f.TaskID]++
		}
		if f.TaskID == parent {
			parentFires++
		}
	}
	if replicated && parentFires != 1 {
		t.Errorf("the parent fired %d times; with its outcome replicated, want once", parentFires)
	}
	owners := map[string]bool{}
	for i := range kids {
		id := fmt.Sprintf("%s.1.%d", parent, i)
		if fired[id] != 1 {
			t.Errorf("child %s fired %d times, want once", id, fired[id])
		}
		delete(fired, id)
		var kid struct {
			ParentFire string `json:"parent_fire_id"`
			FireCount  int    `json:"fire_count"`
			Owner      string `json:"owner"`
		}
		code, data := c.get(c.up()[0], "/v1/tasks/"+id)
		if code != http.StatusOK || json.Unmarshal(data, &kid) != nil || kid.ParentFire != parent+":1" || kid.FireCount != 1 {
			t.Errorf("GET %s: %d %s, want it created by fire %s:1 and fired once", id, code, data, parent)
		}
		owners[kid.Owner] = true
	}
	for id, n := range fired {
		t.Errorf("%s fired %d times: no such child", id, n)
	}
	var p struct {
		Pending []string `json:"pending_children"`
		Owner   string   `json:"owner"`
	}
	code, data := c.get(c.up()[0], "/v1/tasks/"+parent)
	if code != http.StatusOK || json.Unmarshal(data, &p) != nil || len(p.Pending) != 0 || p.Owner == "n2" {
		t.Errorf("GET %s: %d %s, want no pending children, a new owner", parent, code, data)
	}
	t.Logf("the parent fired %d times; children owned by %v", parentFires, owners)
	c.close()
}

// TestChainsSurviveRestart: a node stops after a parent's fire finished
// and before its outbox created the children (it abandons them, as a crash
// would); started again, it finds them pending in the parent's record (its
// wake) and creates each once.
func TestChainsSurviveRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rcv := newReceiver(t)
		reached := make(chan struct{}, 1)
		tn := runNode(t, testConfig(t, "test-node"), func(n *Node) {
			n.chain.BeforeCreate = func(*storage.Task) bool {
				select {
				case reached <- struct{}{}:
				default:
				}
				return false
			}
		})
		kid := map[string]any{"callback_url": rcv.url("/kid"), "delay_ms": 0}
		if code := tn.do(t, "POST", "/v1/tasks", map[string]any{"id": "rp", "callback_url": rcv.url("/p"), "delay_ms": 0,
			"on_success": []any{kid, kid, kid}}, nil); code != 201 {
			t.Fatalf("create: %d", code)
		}
		<-reached
		var p struct {
			Pending []string `json:"pending_children"`
		}
		if code := tn.do(t, "GET", "/v1/tasks/rp", nil, &p); code != 200 || len(p.Pending) != 3 {
			t.Fatalf("before the restart: %d, pending %v, want 3", code, p.Pending)
		}
		cfg := tn.cfg
		tn.stop(t)
		tn2 := restartNode(t, cfg)
		time.Sleep(5 * time.Second)
		per := map[string]int{}
		for _, h := range rcv.hits() {
			per[h.TaskID]++
		}
		for _, id := range []string{"rp", "rp.1.0", "rp.1.1", "rp.1.2"} {
			if per[id] != 1 {
				t.Errorf("%s fired %d times, want once (all: %v)", id, per[id], per)
			}
		}
		p.Pending = nil
		if code := tn2.do(t, "GET", "/v1/tasks/rp", nil, &p); code != 200 || len(p.Pending) != 0 {
			t.Errorf("after the restart: %d, pending %v, want none", code, p.Pending)
		}
	})
}
