package node

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/chime-scheduler/chime/client/signature"
	"github.com/chime-scheduler/chime/node/firing"
	"github.com/chime-scheduler/chime/node/metrics"
	"github.com/chime-scheduler/chime/slots"
	"github.com/chime-scheduler/chime/storage"
)

// noticeJSON is the body of a result callback (API.md "Result callbacks").
type noticeJSON struct {
	TaskID     string `json:"task_id"`
	FireID     string `json:"fire_id"`
	DueAt      string `json:"due_at"`
	Status     string `json:"status"`
	Attempts   int    `json:"attempts"`
	StatusCode int    `json:"status_code"`
	Response   string `json:"response"`
	FinishedAt string `json:"finished_at"`
}

func decodeNotice(t *testing.T, h hit) noticeJSON {
	t.Helper()
	var n noticeJSON
	dec := json.NewDecoder(strings.NewReader(string(h.Body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&n); err != nil {
		t.Fatalf("notice body %s: %v", h.Body, err)
	}
	return n
}

// TestResultCallbacks (API.md "Result callbacks"): a fire that succeeds
// POSTs once to success_url, one that fails for good (after its retry) once
// to failure_url, each with the fire's summary, its fire id in
// X-Chime-Fire-Id and signed like a callback; a success_url that fails
// twice gets the same notice again (same fire id, next attempt) until it
// answers 2xx, then no more, while the periodic task's next fires are not
// delayed, and every fire of it is notified once.
func TestResultCallbacks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		key := []byte("0123456789abcdef0123")
		rcv, okRcv, koRcv, flaky := newReceiver(t), newReceiver(t), newReceiver(t), newReceiver(t)
		rcv.setRespond(func(h hit, n int) int {
			if h.TaskID == "ko" || h.TaskID == "ok" && n == 1 {
				return 500
			}
			return 200
		})
		flaky.setRespond(func(h hit, n int) int {
			if n <= 2 {
				return 503
			}
			return 200
		})
		tn := startNode(t, func(c *Config) { c.Dispatch.SigningKey = key })
		t0 := time.Now().Truncate(time.Second).Add(time.Second)
		at := t0.UTC().Format(time.RFC3339Nano)
		for _, body := range []map[string]any{
			{"id": "ok", "callback_url": rcv.url("/cb"), "due_at": at, "max_retries": 1, "success_url": okRcv.url("/s"), "failure_url": koRcv.url("/f")},
			{"id": "ko", "callback_url": rcv.url("/cb"), "due_at": at, "max_retries": 1, "success_url": okRcv.url("/s"), "failure_url": koRcv.url("/f")},
			{"id": "every", "callback_url": rcv.url("/cb"), "every_ms": 1000, "start_at": at, "max_runs": 3, "success_url": flaky.url("/s")},
		} {
			var got map[string]any
			if code := tn.do(t, "POST", "/v1/tasks", body, &got); code != 201 {
				t.Fatalf("create %v: %d %v", body, code, got)
			}
			if got["success_url"] != body["success_url"] {
				t.Errorf("created task echoes success_url %v, want %v", got["success_url"], body["success_url"])
			}
		}
		time.Sleep(time.Until(t0.Add(60 * time.Second)))

		check := func(rc *receiver, name, id string, want noticeJSON) {
			t.Helper()
			hs := rc.hits()
			if len(hs) != 1 {
				t.Fatalf("%s got %d notices (%v), want 1", name, len(hs), fireIDs(hs))
			}
			h := hs[0]
			n := decodeNotice(t, h)
			if h.TaskID != id || h.FireID != want.FireID || n.TaskID != id || n.FireID != want.FireID || n.Status != want.Status ||
				n.Attempts != want.Attempts || n.StatusCode != want.StatusCode || n.Response != want.Response || n.DueAt != at {
				t.Errorf("%s notice %+v headers task %q fire %q, want %+v due %s", name, n, h.TaskID, h.FireID, want, at)
			}
			if v := signature.Verify(h.Header.Get("X-Chime-Signature"), h.FireID, h.Body, [][]byte{key}, time.Now(), time.Hour); v != signature.Valid {
				t.Errorf("%s notice signature: %v", name, v)
			}
			fin, err := time.Parse(time.RFC3339Nano, n.FinishedAt)
			if err != nil || fin.Before(t0) || fin.After(h.At) {
				t.Errorf("%s notice finished_at %q, want between the due time and its delivery", name, n.FinishedAt)
			}
		}
		check(okRcv, "success_url", "ok", noticeJSON{FireID: "ok:1", Status: "success", Attempts: 2, StatusCode: 200, Response: `{"ok":true}`})
		check(koRcv, "failure_url", "ko", noticeJSON{FireID: "ko:1", Status: "failure", Attempts: 2, StatusCode: 500, Response: `{"ok":true}`})

		// The flaky receiver: every:1 three times (503, 503, 200) with the
		// same fire id, then every:2 and every:3 once each.
		hs := flaky.hits()
		var ids []string
		for i, h := range hs {
			ids = append(ids, h.FireID)
			n := decodeNotice(t, h)
			if n.FireID != h.FireID || n.Status != "success" || n.Attempts != 1 || n.TaskID != "every" {
				t.Errorf("flaky notice %d: %+v (fire id header %s)", i, n, h.FireID)
			}
		}
		if got, want := strings.Join(ids, " "), "every:1 every:1 every:1 every:2 every:3"; got != want {
			t.Errorf("flaky receiver got notices %s, want %s", got, want)
		}
		if len(hs) >= 3 {
			for i, h := range hs[:3] {
				if h.Attempt != i+1 {
					t.Errorf("every:1 notice %d has X-Chime-Attempt %d, want %d", i, h.Attempt, i+1)
				}
			}
		}
		// The periodic task's fires are on time, notices pending or not.
		var fires int
		for _, h := range rcv.hits() {
			if h.TaskID != "every" {
				continue
			}
			fires++
			if late := h.At.Sub(h.Due); late > tn.lateBound() {
				t.Errorf("fire %s started %v late, want at most %v", h.FireID, late, tn.lateBound())
			}
		}
		if fires != 3 {
			t.Errorf("every fired %d times, want 3", fires)
		}
		for _, id := range []string{"ok", "ko", "every"} {
			var got map[string]any
			if code := tn.do(t, "GET", "/v1/tasks/"+id, nil, &got); code != 200 || got["pending_notices"] != nil {
				t.Errorf("GET %s: %d, pending_notices %v, want none", id, code, got["pending_notices"])
			}
		}
		if m := tn.metricsText(t); !strings.Contains(m, "chime_result_callbacks_delivered_total 5") {
			t.Errorf("metrics: want chime_result_callbacks_delivered_total 5 in\n%s", grepLines(m, "result_callbacks"))
		}
	})
}

// TestResultCallbacksSurviveRestart: a notice not yet delivered when the
// node stops is delivered after its restart, with the same fire id, and
// the fire is not repeated.
func TestResultCallbacksSurviveRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rcv, nrcv := newReceiver(t), newReceiver(t)
		nrcv.setRespond(func(h hit, n int) int { return 500 })
		tn := startNode(t, nil)
		if code := tn.do(t, "POST", "/v1/tasks", map[string]any{"id": "r", "callback_url": rcv.url("/cb"), "delay_ms": 0,
			"failure_url": nrcv.url("/f"), "success_url": nrcv.url("/s")}, nil); code != 201 {
			t.Fatalf("create: %d", code)
		}
		nrcv.waitHits(t, 10*time.Second, func(hs []hit) bool { return len(hs) >= 1 })
		var got map[string]any
		if code := tn.do(t, "GET", "/v1/tasks/r", nil, &got); code != 200 || got["pending_notices"] != float64(1) {
			t.Fatalf("before the restart: %d, pending_notices %v, want 1", code, got["pending_notices"])
		}
		cfg := tn.cfg
		tn.stop(t)
		nrcv.setRespond(func(h hit, n int) int { return 200 })
		tn2 := restartNode(t, cfg)
		nrcv.waitHits(t, 10*time.Second, func(hs []hit) bool { return len(hs) >= 2 })
		time.Sleep(5 * time.Second)
		hs := nrcv.hits()
		if len(hs) != 2 || hs[1].FireID != "r:1" || decodeNotice(t, hs[1]).Status != "success" {
			t.Errorf("notices %v, want r:1 twice (the second after the restart), success", fireIDs(hs))
		}
		if n := len(rcv.hits()); n != 1 {
			t.Errorf("task fired %d times, want once", n)
		}
		got = nil
		if code := tn2.do(t, "GET", "/v1/tasks/r", nil, &got); code != 200 || got["pending_notices"] != nil {
			t.Errorf("after the restart: %d, pending_notices %v, want none", code, got["pending_notices"])
		}
	})
}

// TestResultCallbacksAddressPolicy: success_url and failure_url are checked
// against the callback address policy at create, like callback_url (400
// naming the field, nothing written), in a batch and in a chain's task too.
func TestResultCallbacksAddressPolicy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rcv := newReceiver(t)
		tn := startNode(t, func(c *Config) { c.Dispatch.CallbackDenyPrivate = true })
		ok := "http://hooks.example/ok"
		for _, tt := range []struct {
			body  map[string]any
			field string
		}{
			{map[string]any{"id": "p1", "callback_url": ok, "delay_ms": 0, "success_url": "http://169.254.169.254/x"}, "success_url"},
			{map[string]any{"id": "p2", "callback_url": ok, "delay_ms": 0, "failure_url": rcv.url("/f")}, "failure_url"},
			{map[string]any{"id": "p3", "callback_url": ok, "delay_ms": 0, "on_success": []any{
				map[string]any{"callback_url": ok, "delay_ms": 0, "failure_url": "http://localhost:9/"}}}, "on_success[0].failure_url"},
		} {
			var eb errorBody
			code := tn.do(t, "POST", "/v1/tasks", tt.body, &eb)
			if code != 400 || eb.Error.Field != tt.field || !strings.Contains(eb.Error.Message, "callback address denied") {
				t.Errorf("create %v: %d %+v, want 400 on %s", tt.body, code, eb.Error, tt.field)
			}
			if code := tn.do(t, "GET", "/v1/tasks/"+tt.body["id"].(string), nil, nil); code != 404 {
				t.Errorf("refused task %v: GET %d, want 404", tt.body["id"], code)
			}
		}
		var br struct {
			Results []struct {
				Status int    `json:"status"`
				Error  *Error `json:"error"`
			} `json:"results"`
		}
		batch := map[string]any{"tasks": []map[string]any{{"callback_url": ok, "delay_ms": 0, "success_url": "http://[fe80::1]/"}}}
		if code := tn.do(t, "POST", "/v1/tasks:batch", batch, &br); code != 200 || len(br.Results) != 1 ||
			br.Results[0].Status != 400 || br.Results[0].Error == nil || br.Results[0].Error.Field != "success_url" {
			t.Errorf("batch with a link-local success_url: %d %+v, want its item refused 400 on success_url", code, br)
		}
	})
}

// TestAddNoticeBound: a task keeps at most maxNotices pending result
// callbacks; a newer one drops the oldest, counted; no URL, no notice.
func TestAddNoticeBound(t *testing.T) {
	m := metrics.New(metrics.Gauges{})
	w := &writer{writerDeps: writerDeps{metrics: m, log: slog.New(slog.DiscardHandler)}}
	tk := &storage.Task{ID: "b", Spec: storage.Spec{SuccessURL: "http://x/s"}}
	for seq := uint64(1); seq <= maxNotices+3; seq++ {
		tk.LastFire = &storage.LastFire{FireID: firing.FireID("b", seq), Attempts: 1, StatusCode: 200}
		w.addNotice(tk, seq, false, int64(seq))
		w.addNotice(tk, seq, true, int64(seq)) // no failure_url: nothing
	}
	if len(tk.Notices) != maxNotices || tk.Notices[0].Seq != 4 || tk.Notices[maxNotices-1].Seq != maxNotices+3 {
		t.Fatalf("notices %d, first seq %d, want %d from seq 4", len(tk.Notices), tk.Notices[0].Seq, maxNotices)
	}
	if got := testutil.ToFloat64(m.NoticesDropped.WithLabelValues("overflow")); got != 3 {
		t.Errorf("overflow drops counted %v, want 3", got)
	}
}

// noticeRecorder is a result callback receiver on a fault cluster's
// network: it records every notice and answers 500 until ok is set.
type noticeRecorder struct {
	mu  sync.Mutex
	ok  bool
	got []struct {
		fire   fire
		status int
		body   []byte
	}
}

func (r *noticeRecorder) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	h := req.Header
	f := fire{TaskID: h.Get("X-Chime-Task-Id"), FireID: h.Get("X-Chime-Fire-Id"), Node: h.Get("X-Chime-Node"), At: time.Now()}
	f.Attempt, _ = strconv.Atoi(h.Get("X-Chime-Attempt"))
	r.mu.Lock()
	status := http.StatusInternalServerError
	if r.ok {
		status = http.StatusOK
	}
	r.got = append(r.got, struct {
		fire   fire
		status int
		body   []byte
	}{f, status, body})
	r.mu.Unlock()
	w.WriteHeader(status)
}

// TestFaultResultCallbackFailover: the owner of a task's slot crashes
// while the task's result callback is failing (the notice recorded with
// the fire's outcome and replicated to the follower): the slot's next
// owner delivers it, with the same fire id, and the task does not fire
// again.
func TestFaultResultCallbackFailover(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c := newFaultCluster(t, 3, 31)
		const addr = "10.0.9.10:80"
		nr := &noticeRecorder{}
		srv := servePipe(c.hnet.listen(addr), http.HandlerFunc(nr.serve))
		defer srv.close()
		id := ids("rcb", 1, c.table(0), func(o, f string) bool { return o == "n2" && f == "n3" })[0]
		due := time.Now().Add(time.Second)
		body := map[string]any{"callback_url": faultCallbackURL, "due_at": due.Format(time.RFC3339Nano), "success_url": "http://" + addr + "/ok"}
		if code, _ := c.send(c.pick(), http.MethodPut, "/v1/tasks/"+id, body, http.StatusCreated, http.StatusOK); code != http.StatusCreated && code != http.StatusOK {
			t.Fatalf("create %s: %d", id, code)
		}
		c.mu.Lock()
		c.acked[id] = due
		c.mu.Unlock()
		waitFor(t, 30*time.Second, "n2's first notice, refused", func() bool {
			nr.mu.Lock()
			defer nr.mu.Unlock()
			return len(nr.got) > 0
		})
		waitFor(t, 5*time.Second, "n3's copy of the task with its pending notice", func() bool {
			p, err := c.nodes[2].n.store.Get(slots.Of(id), id)
			return err == nil && len(p.Notices) == 1 && p.LastFire != nil
		})
		c.crash(1)
		nr.mu.Lock()
		nr.ok = true
		nr.mu.Unlock()
		c.settle(time.Now().Add(faultsSettle))
		time.Sleep(10 * time.Second)
		report(t, c.check(checkOpts{}))

		nr.mu.Lock()
		got := slices.Clone(nr.got)
		nr.mu.Unlock()
		delivered := 0
		for _, g := range got {
			if g.fire.FireID != id+":1" || g.fire.TaskID != id {
				t.Errorf("notice %v, want fire %s:1", g.fire, id)
			}
			if g.status == http.StatusOK {
				delivered++
				if g.fire.Node == "n2" {
					t.Errorf("notice delivered by n2 after it crashed: %v", g.fire)
				}
				var n noticeJSON
				if err := json.Unmarshal(g.body, &n); err != nil || n.FireID != id+":1" || n.Status != "success" {
					t.Errorf("delivered notice body %s (%v)", g.body, err)
				}
			}
		}
		if delivered != 1 {
			t.Errorf("notice delivered %d times (%d tries), want once", delivered, len(got))
		}
		fires := 0
		for _, f := range c.rcv.all() {
			if f.TaskID == id {
				fires++
			}
		}
		if fires != 1 {
			t.Errorf("%s fired %d times, want once (its outcome was replicated)", id, fires)
		}
		var p struct {
			Pending int    `json:"pending_notices"`
			Owner   string `json:"owner"`
		}
		code, data := c.get(c.up()[0], "/v1/tasks/"+id)
		if code != http.StatusOK || json.Unmarshal(data, &p) != nil || p.Pending != 0 || p.Owner == "n2" {
			t.Errorf("GET %s: %d %s, want no pending notice, a new owner", id, code, data)
		}
	})
}
