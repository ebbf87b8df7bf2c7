package node

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/chime-scheduler/chime/slots"
	"github.com/chime-scheduler/chime/storage"
)

// ackHits splits the hits of task id into its callbacks and its ACKs
// (X-Chime-Ack: 1).
func ackHits(hs []hit, id string) (cbs, acks []hit) {
	for _, h := range hs {
		if h.TaskID != id {
			continue
		}
		if h.Header.Get("X-Chime-Ack") == "1" {
			acks = append(acks, h)
		} else {
			cbs = append(cbs, h)
		}
	}
	return cbs, acks
}

// taskExecs returns the executions of task id.
func taskExecs(t *testing.T, tn *testNode, id string) []map[string]any {
	t.Helper()
	var ex struct {
		Executions []map[string]any `json:"executions"`
	}
	if code := tn.do(t, "GET", "/v1/tasks/"+id+"/executions", nil, &ex); code != 200 {
		t.Fatalf("executions of %s: %d", id, code)
	}
	return ex.Executions
}

// TestAckPhase (API.md "The ACK phase"): after its callback's 2xx a
// one-shot task with an ack_url awaits its ACK; ack_delay_ms later (never
// earlier) Chime POSTs the ack_url with the same body, fire id and
// X-Chime-Ack: 1. A 2xx makes it done and only then starts its chain; an
// ACK that keeps failing is retried ack_retries times, then the task is
// failed with reason ack. The executions show the ACK attempts (phase ack).
func TestAckPhase(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rcv := newReceiver(t)
		rcv.setRespond(func(h hit, _ int) int {
			if h.TaskID == "nack" && h.Header.Get("X-Chime-Ack") == "1" {
				return 503
			}
			return 200
		})
		tn := startNode(t, nil)
		create := func(body string) {
			t.Helper()
			var got map[string]any
			if code := tn.do(t, "POST", "/v1/tasks", body, &got); code != 201 {
				t.Fatalf("create %s: %d %v", body, code, got)
			}
		}
		create(`{"id":"ok","callback_url":"` + rcv.url("/cb") + `","delay_ms":0,"payload":{"n":1},"ack_url":"` + rcv.url("/ack") +
			`","ack_delay_ms":2000,"on_success":[{"id":"ok-child","callback_url":"` + rcv.url("/child") + `","delay_ms":0}]}`)
		create(`{"id":"nack","callback_url":"` + rcv.url("/cb") + `","delay_ms":0,"ack_url":"` + rcv.url("/ack") +
			`","ack_delay_ms":500,"ack_retries":2,"on_failure":[{"id":"nack-child","callback_url":"` + rcv.url("/child") + `","delay_ms":0}]}`)
		// A periodic task cannot have an ACK phase.
		var e map[string]map[string]any
		if code := tn.do(t, "POST", "/v1/tasks", `{"id":"p","callback_url":"`+rcv.url("/cb")+`","every_ms":1000,"ack_url":"`+rcv.url("/ack")+`"}`, &e); code != 400 || e["error"]["field"] != "ack_url" {
			t.Errorf("ack_url on every_ms: %d %v, want 400 on ack_url", code, e)
		}

		// Between the callback and its ACK the task awaits it.
		rcv.waitHits(t, 5*time.Second, func(hs []hit) bool { cbs, _ := ackHits(hs, "ok"); return len(cbs) == 1 })
		task := waitTask(t, tn, "ok", func(m map[string]any) bool { return m["status"] == "awaiting_ack" })
		if task["next_ack_at"] == nil || task["ack_url"] != rcv.url("/ack") || task["ack_delay_ms"] != float64(2000) || task["ack_retries"] != float64(3) {
			t.Errorf("awaiting task %v, want next_ack_at and the ack fields (retries default 3)", task)
		}

		time.Sleep(20 * time.Second)
		hs := rcv.hits()
		cbs, acks := ackHits(hs, "ok")
		if len(cbs) != 1 || len(acks) != 1 {
			t.Fatalf("ok: %d callbacks, %d ACKs; want 1 and 1", len(cbs), len(acks))
		}
		cb, ack := cbs[0], acks[0]
		if ack.FireID != cb.FireID || ack.FireID != "ok:1" || string(ack.Body) != string(cb.Body) || string(ack.Body) != `{"n":1}` ||
			ack.Attempt != 1 || !ack.Due.Equal(cb.Due) {
			t.Errorf("ACK %+v, want the callback's fire id, due, body and attempt 1 (callback %+v)", ack, cb)
		}
		if d := ack.At.Sub(cb.At); d < 2*time.Second || d > 2*time.Second+tn.lateBound()+time.Second {
			t.Errorf("ACK %v after the callback, want ack_delay_ms 2s (never early)", d)
		}
		var child []hit
		for _, h := range hs {
			if h.TaskID == "ok-child" {
				child = append(child, h)
			}
		}
		if len(child) != 1 || child[0].At.Before(ack.At) {
			t.Errorf("on_success child hits %v, want one, after the ACK at %v", child, ack.At)
		}
		task = waitTask(t, tn, "ok", func(m map[string]any) bool { return m["status"] != "awaiting_ack" })
		if task["status"] != "done" || task["fail_reason"] != nil || task["next_ack_at"] != nil {
			t.Errorf("ok: %v, want done", task)
		}
		ex := taskExecs(t, tn, "ok")
		phases := map[any]int{}
		for _, x := range ex {
			phases[x["phase"]]++
			if x["fire_id"] != "ok:1" || x["attempt"] != float64(1) {
				t.Errorf("ok execution %v, want fire ok:1 attempt 1", x)
			}
		}
		if len(ex) != 2 || phases[nil] != 1 || phases["ack"] != 1 {
			t.Errorf("ok executions %v, want the callback and one ACK (phase ack)", ex)
		}

		// nack: the callback, then 1 + ack_retries ACK attempts, all failing.
		cbs, acks = ackHits(hs, "nack")
		if len(cbs) != 1 || len(acks) != 3 {
			t.Fatalf("nack: %d callbacks, %d ACKs; want 1 and 3 (1 + ack_retries)", len(cbs), len(acks))
		}
		for i, a := range acks {
			if a.Attempt != i+1 || a.FireID != "nack:1" {
				t.Errorf("nack ACK %d: fire %s attempt %d, want nack:1 attempt %d", i, a.FireID, a.Attempt, i+1)
			}
		}
		if d := acks[0].At.Sub(cbs[0].At); d < 500*time.Millisecond {
			t.Errorf("nack: first ACK %v after the callback, want at least ack_delay_ms 500ms", d)
		}
		if d := acks[1].At.Sub(acks[0].At); d < 800*time.Millisecond {
			t.Errorf("nack: ACK retry %v after the first, want the usual backoff (1s ±20%%)", d)
		}
		task = waitTask(t, tn, "nack", func(m map[string]any) bool { return m["status"] == "failed" })
		if task["fail_reason"] != "ack" || task["fire_count"] != float64(1) || task["finished_at"] == nil {
			t.Errorf("nack: %v, want failed with fail_reason ack, its callback counted, finished", task)
		}
		ex = taskExecs(t, tn, "nack")
		acksSeen := 0
		for _, x := range ex {
			if x["phase"] == "ack" {
				acksSeen++
				if x["status_code"] != float64(503) {
					t.Errorf("nack ACK execution %v, want 503", x)
				}
			}
		}
		if len(ex) != 4 || acksSeen != 3 {
			t.Errorf("nack executions %v, want the callback and 3 ACK attempts", ex)
		}
		var nchild int
		for _, h := range hs {
			if h.TaskID == "nack-child" {
				nchild++
			}
		}
		if nchild != 1 {
			t.Errorf("nack: on_failure child fired %d times, want once", nchild)
		}
		// Fire lateness counts the first attempts of the 4 fires (2 tasks, 2
		// children), not the ACKs, late by their ack_delay_ms on purpose.
		m := tn.metricsText(t)
		for _, want := range []string{"chime_fire_lateness_seconds_count 4\n", `chime_fire_start_lag_seconds_count{stage="loop"} 4` + "\n"} {
			if !strings.Contains(m, want) {
				t.Errorf("metrics lack %q", want)
			}
		}
	})
}

// TestAckPhaseRestart: a node stopped while its task awaits its ACK
// resumes the ACK phase after a restart (the wake is persisted): the ACK
// comes once, with the same fire id, not before its delay.
func TestAckPhaseRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rcv := newReceiver(t)
		tn := startNode(t, nil)
		body := `{"id":"r","callback_url":"` + rcv.url("/cb") + `","delay_ms":0,"ack_url":"` + rcv.url("/ack") + `","ack_delay_ms":3000}`
		if code := tn.do(t, "POST", "/v1/tasks", body, nil); code != 201 {
			t.Fatalf("create: %d", code)
		}
		waitTask(t, tn, "r", func(m map[string]any) bool { return m["status"] == "awaiting_ack" })
		cfg := tn.cfg
		tn.stop(t)
		time.Sleep(time.Second)
		tn = restartNode(t, cfg)
		if task := waitTask(t, tn, "r", func(m map[string]any) bool { return m["status"] != "" }); task["status"] != "awaiting_ack" {
			t.Errorf("after the restart: %v, want still awaiting_ack", task)
		}
		waitTask(t, tn, "r", func(m map[string]any) bool { return m["status"] == "done" })
		time.Sleep(10 * time.Second)
		cbs, acks := ackHits(rcv.hits(), "r")
		if len(cbs) != 1 || len(acks) != 1 || acks[0].FireID != "r:1" || acks[0].FireID != cbs[0].FireID {
			t.Fatalf("callbacks %v, ACKs %v; want one each, fire r:1", fireIDs(cbs), fireIDs(acks))
		}
		if d := acks[0].At.Sub(cbs[0].At); d < 3*time.Second {
			t.Errorf("ACK %v after the callback, want at least ack_delay_ms 3s across the restart", d)
		}
	})
}

// TestFaultAckOwnerCrash: the owner of a task crashes while the task
// awaits its ACK (the callback answered, the ACK not yet due). The
// follower, which has the awaiting_ack record with its wake, takes the
// slot over and sends the ACK: exactly once, with the same fire id, not
// before ack_delay_ms; the callback is not repeated.
func TestFaultAckOwnerCrash(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c := newFaultCluster(t, 3, 31)
		id := ids("ack", 1, c.table(0), func(o, f string) bool { return o == "n2" && f == "n3" })[0]
		due := time.Now().Add(time.Second)
		body := map[string]any{"callback_url": faultCallbackURL, "due_at": due.Format(time.RFC3339Nano),
			"ack_url": faultCallbackURL, "ack_delay_ms": 6000}
		if code, _ := c.send(c.pick(), http.MethodPut, "/v1/tasks/"+id, body, http.StatusCreated, http.StatusOK); code != http.StatusCreated && code != http.StatusOK {
			t.Fatalf("create %s: %d", id, code)
		}
		// The follower n3 has the record awaiting its ACK.
		waitFor(t, 10*time.Second, "n3's copy awaiting the ACK", func() bool {
			p, err := c.nodes[2].n.store.Get(slots.Of(id), id)
			return err == nil && p != nil && p.Status == storage.StatusAwaitingAck && p.Inflight != nil && p.Inflight.Ack
		})
		c.crash(1)
		c.settle(time.Now().Add(faultsSettle))
		time.Sleep(15 * time.Second)

		var cbs, acks []fire
		for _, f := range c.rcv.all() {
			if f.TaskID != id {
				continue
			}
			if f.Ack {
				acks = append(acks, f)
			} else {
				cbs = append(cbs, f)
			}
		}
		if len(cbs) != 1 || cbs[0].Node != "n2" {
			t.Fatalf("callbacks %v, want one, from n2", cbs)
		}
		if len(acks) != 1 {
			t.Fatalf("ACKs %v, want exactly one", acks)
		}
		a := acks[0]
		if a.FireID != id+":1" || a.FireID != cbs[0].FireID || a.Node == "n2" || a.Attempt != 1 {
			t.Errorf("ACK %v (attempt %d), want fire %s:1, attempt 1, from the new owner", a, a.Attempt, id)
		}
		if d := a.At.Sub(cbs[0].At); d < 6*time.Second {
			t.Errorf("ACK %v after the callback, want at least ack_delay_ms 6s", d)
		}
		var got struct {
			Status string `json:"status"`
			Owner  string `json:"owner"`
		}
		code, data := c.get(c.up()[0], "/v1/tasks/"+id)
		if code != http.StatusOK || json.Unmarshal(data, &got) != nil || got.Status != "done" || got.Owner == "n2" {
			t.Errorf("GET %s: %d %s, want done at a new owner", id, code, data)
		}
		c.close()
	})
}

// TestAckURLAddressPolicy: ack_url is checked by the callback address
// policy at create like callback_url (400 on ack_url, nothing written),
// also in a chain's task.
func TestAckURLAddressPolicy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tn := startNode(t, func(c *Config) { c.Dispatch.CallbackDenyPrivate = true })
		for _, tc := range []struct {
			body  map[string]any
			field string
		}{
			{map[string]any{"id": "a1", "callback_url": "http://hooks.test/cb", "delay_ms": 0, "ack_url": "http://127.0.0.1:9/ack"}, "ack_url"},
			{map[string]any{"id": "a2", "callback_url": "http://hooks.test/cb", "delay_ms": 0, "on_success": []any{
				map[string]any{"callback_url": "http://hooks.test/c", "delay_ms": 0, "ack_url": "http://169.254.169.254/ack"}}}, "on_success[0].ack_url"},
		} {
			var eb errorBody
			code := tn.do(t, "POST", "/v1/tasks", tc.body, &eb)
			if code != http.StatusBadRequest || eb.Error.Field != tc.field || !strings.Contains(eb.Error.Message, "callback address denied") {
				t.Errorf("create %v: %d %+v, want 400 on %s", tc.body, code, eb.Error, tc.field)
			}
			if code := tn.do(t, "GET", "/v1/tasks/"+tc.body["id"].(string), nil, nil); code != http.StatusNotFound {
				t.Errorf("GET %s after a refused create: %d, want 404", tc.body["id"], code)
			}
		}
	})
}

// TestAckPhaseChainPayloadAndRetry: the on_success child of a fire with an
// ACK phase takes the callback's answer (payload_from_parent), not the
// ACK's; an awaiting_ack task cannot be paused; a task failed by its ACK
// can be retried: a new fire, reason cleared, callback then ACK again.
func TestAckPhaseChainPayloadAndRetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tnet := netOf(t)
		addr := tnet.newAddr()
		var mu sync.Mutex
		bodies := map[string][]string{} // task id → bodies received
		ackFail := true
		srv := servePipe(tnet.pn.listen(addr), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			id, ack := r.Header.Get("X-Chime-Task-Id"), r.Header.Get("X-Chime-Ack") == "1"
			mu.Lock()
			bodies[id] = append(bodies[id], string(b))
			fail := ack && id == "retry" && ackFail
			mu.Unlock()
			switch {
			case fail:
				w.WriteHeader(500)
			case ack:
				_, _ = io.WriteString(w, `{"from":"ack"}`)
			default:
				_, _ = io.WriteString(w, `{"from":"callback"}`)
			}
		}))
		t.Cleanup(srv.close)
		base := "http://" + addr
		tn := startNode(t, nil)
		for _, body := range []string{
			`{"id":"p","callback_url":"` + base + `/cb","delay_ms":0,"ack_url":"` + base + `/ack","ack_delay_ms":1000,` +
				`"on_success":[{"id":"p-child","callback_url":"` + base + `/child","delay_ms":0,"payload_from_parent":true}]}`,
			`{"id":"retry","callback_url":"` + base + `/cb","delay_ms":0,"ack_url":"` + base + `/ack","ack_delay_ms":1000,"ack_retries":0}`,
		} {
			if code := tn.do(t, "POST", "/v1/tasks", body, nil); code != 201 {
				t.Fatalf("create %s: %d", body, code)
			}
		}
		waitTask(t, tn, "p", func(m map[string]any) bool { return m["status"] == "awaiting_ack" })
		if code := tn.do(t, "POST", "/v1/tasks/p/pause", nil, nil); code != http.StatusConflict {
			t.Errorf("pause an awaiting_ack task: %d, want 409", code)
		}
		waitTask(t, tn, "p", func(m map[string]any) bool { return m["status"] == "done" })
		waitFor(t, 10*time.Second, "the child's fire", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(bodies["p-child"]) > 0
		})
		mu.Lock()
		if got := bodies["p-child"]; len(got) != 1 || got[0] != `{"from":"callback"}` {
			t.Errorf("child payloads %q, want the callback's answer", got)
		}
		mu.Unlock()

		task := waitTask(t, tn, "retry", func(m map[string]any) bool { return m["status"] == "failed" })
		if task["fail_reason"] != "ack" {
			t.Fatalf("retry: %v, want failed by its ack", task)
		}
		mu.Lock()
		ackFail = false
		mu.Unlock()
		var got map[string]any
		if code := tn.do(t, "POST", "/v1/tasks/retry/retry", nil, &got); code != 200 || got["status"] != "scheduled" || got["fail_reason"] != nil {
			t.Fatalf("retry: %d %v, want scheduled without fail_reason", code, got)
		}
		waitTask(t, tn, "retry", func(m map[string]any) bool { return m["status"] == "done" })
		mu.Lock()
		if n := len(bodies["retry"]); n != 4 { // callback, failed ACK, callback, ACK
			t.Errorf("retry: %d requests, want 4", n)
		}
		mu.Unlock()
	})
}
