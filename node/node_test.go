package node

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/chime-scheduler/chime/node/httpapi"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/chime-scheduler/chime/node/dashboard"
	"github.com/chime-scheduler/chime/slots"
)

// End-to-end tests: an in-process node with a real Pebble store on disk and
// an HTTP receiver, on the single-node harness (harness_test.go). Those
// about time run in a testing/synctest bubble: they assert behaviour (who
// fired, how often) and time exactly where fake time allows it — never
// early to the nanosecond, never later than lateBound, backoff and
// Retry-After within their bounds — and a slow machine only makes them
// take longer, since the node's work takes no fake time.

func TestOneShotTasksFireExactlyOnceNeverEarly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tn := startNode(t, nil)
		rcv := newReceiver(t)
		const n = 2000
		base := time.Now().Add(500 * time.Millisecond)
		tasks := make([]map[string]any, n)
		dues := make(map[string]time.Time, n)
		for i := range tasks {
			id := fmt.Sprintf("once-%04d", i)
			due := base.Add(time.Duration(i) * time.Millisecond) // 2,000 tasks over 2 s
			dues[id] = due
			tasks[i] = map[string]any{"id": id, "callback_url": rcv.url("/cb"), "due_at": due.UTC().Format(time.RFC3339Nano)}
		}
		var res struct {
			Results []httpapi.BatchResult `json:"results"`
		}
		for i := 0; i < n; i += 1000 {
			if code := tn.do(t, "POST", "/v1/tasks:batch", map[string]any{"tasks": tasks[i : i+1000]}, &res); code != 200 {
				t.Fatalf("batch: status %d", code)
			}
			for _, r := range res.Results {
				if r.Status != 201 {
					t.Fatalf("batch result %+v, want status 201", r)
				}
			}
		}
		rcv.waitHits(t, 60*time.Second, func(hs []hit) bool { return len(hs) >= n })
		time.Sleep(300 * time.Millisecond) // any duplicate would arrive now
		hits := rcv.hits()
		seen := make(map[string]int)
		for _, h := range hits {
			seen[h.FireID]++
			due, ok := dues[h.TaskID]
			if !ok {
				t.Fatalf("callback for unknown task %q", h.TaskID)
			}
			if h.At.Before(due) {
				t.Errorf("task %s fired at %v, %v before its due time", h.TaskID, h.At, due.Sub(h.At))
			}
			if late := h.At.Sub(due); late > tn.lateBound() {
				t.Errorf("task %s fired %v after its due time, want at most %v", h.TaskID, late, tn.lateBound())
			}
			if !h.Due.Equal(due) {
				t.Errorf("task %s: X-Chime-Due-At %v, want %v", h.TaskID, h.Due, due)
			}
			if h.FireID != h.TaskID+":1" || h.Attempt != 1 {
				t.Errorf("task %s: fire id %q attempt %d, want %s:1 attempt 1", h.TaskID, h.FireID, h.Attempt, h.TaskID)
			}
		}
		if len(hits) != n || len(seen) != n {
			t.Fatalf("got %d callbacks for %d distinct fires, want %d exactly once each", len(hits), len(seen), n)
		}
		var task map[string]any
		tn.do(t, "GET", "/v1/tasks/once-0000", nil, &task)
		if task["status"] != "done" || task["fire_count"] != float64(1) {
			t.Errorf("after its fire the task is %v with fire_count %v, want done and 1", task["status"], task["fire_count"])
		}
	})
}

func TestPeriodicTaskDoesNotDrift(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tn := startNode(t, nil)
		rcv := newReceiver(t)
		// The callback takes 120 ms of a 200 ms period: a scheduler that computed
		// the next due from completion would drift by 120 ms a fire.
		rcv.setRespond(func(hit, int) int { time.Sleep(120 * time.Millisecond); return 200 })
		start := time.Now().Add(300 * time.Millisecond).UTC().Truncate(time.Millisecond)
		code := tn.do(t, "POST", "/v1/tasks", map[string]any{
			"id": "tick", "callback_url": rcv.url("/p"), "every_ms": 200, "start_at": start.Format(time.RFC3339Nano),
		}, nil)
		if code != 201 {
			t.Fatalf("create: %d", code)
		}
		hits := rcv.waitHits(t, 30*time.Second, func(hs []hit) bool { return len(hs) >= 6 })
		for i, h := range hits[:6] {
			wantDue := start.Add(time.Duration(i) * 200 * time.Millisecond)
			if !h.Due.Equal(wantDue) {
				t.Errorf("fire %d: due %v, want %v (drift %v)", i+1, h.Due, wantDue, h.Due.Sub(wantDue))
			}
			if want := fmt.Sprintf("tick:%d", i+1); h.FireID != want {
				t.Errorf("fire %d: id %q, want %q", i+1, h.FireID, want)
			}
			if h.At.Before(h.Due) {
				t.Errorf("fire %d arrived %v before due", i+1, h.Due.Sub(h.At))
			}
			if late := h.At.Sub(h.Due); late > tn.lateBound() {
				t.Errorf("fire %d arrived %v after due, want at most %v", i+1, late, tn.lateBound())
			}
		}
	})
}

func TestRetriesFollowBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tn := startNode(t, nil)
		rcv := newReceiver(t)
		rcv.setRespond(func(h hit, n int) int {
			if n < 3 {
				return http.StatusInternalServerError
			}
			return http.StatusOK
		})
		tn.do(t, "POST", "/v1/tasks", map[string]any{"id": "flaky", "callback_url": rcv.url("/f"), "delay_ms": 0, "max_retries": 3}, nil)
		hits := rcv.waitHits(t, 30*time.Second, func(hs []hit) bool { return len(hs) >= 3 })
		for i, h := range hits {
			if h.FireID != "flaky:1" || h.Attempt != i+1 {
				t.Errorf("hit %d: fire %q attempt %d, want flaky:1 attempt %d", i, h.FireID, h.Attempt, i+1)
			}
		}
		// Backoff 1 s then 2 s, each with ±20 % jitter; the retry is sent
		// at most lateBound after its time.
		for i, d := range []time.Duration{time.Second, 2 * time.Second} {
			lo, hi := d*8/10, d*12/10+tn.lateBound()
			if gap := hits[i+1].At.Sub(hits[i].At); gap < lo || gap > hi {
				t.Errorf("gap before attempt %d = %v, want within [%v, %v]", i+2, gap, lo, hi)
			}
		}
		waitTask(t, tn, "flaky", func(task map[string]any) bool { return task["status"] == "done" })
		var ex struct {
			Executions []map[string]any `json:"executions"`
		}
		tn.do(t, "GET", "/v1/tasks/flaky/executions", nil, &ex)
		if len(ex.Executions) != 3 {
			t.Fatalf("executions = %d, want 3", len(ex.Executions))
		}
		if ex.Executions[0]["attempt"] != float64(3) || ex.Executions[0]["status_code"] != float64(200) {
			t.Errorf("newest execution %v, want attempt 3 with 200", ex.Executions[0])
		}
		if ex.Executions[2]["status_code"] != float64(500) || !strings.Contains(fmt.Sprint(ex.Executions[2]["result"]), "ok") {
			t.Errorf("oldest execution %v, want 500 with the response body kept", ex.Executions[2])
		}
	})
}

func TestRetryAfterIsRespected(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tn := startNode(t, nil)
		rcv := newReceiver(t)
		rcv.setRespond(func(_ hit, n int) int {
			if n == 1 {
				return http.StatusServiceUnavailable
			}
			return http.StatusOK
		})
		rcv.setRetryAfter("3")
		tn.do(t, "POST", "/v1/tasks", map[string]any{"id": "ra", "callback_url": rcv.url("/ra"), "delay_ms": 0}, nil)
		hits := rcv.waitHits(t, 30*time.Second, func(hs []hit) bool { return len(hs) >= 2 })
		if gap := hits[1].At.Sub(hits[0].At); gap < 3*time.Second || gap > 3*time.Second+tn.lateBound() {
			t.Errorf("retry came %v after a Retry-After: 3, want within [3s, 3s+%v]", gap, tn.lateBound())
		}
	})
}

func TestGoneEndpointDeactivatesPeriodicTask(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tn := startNode(t, nil)
		rcv := newReceiver(t)
		rcv.setRespond(func(hit, int) int { return http.StatusNotFound })
		tn.do(t, "POST", "/v1/tasks", map[string]any{"id": "gone", "callback_url": rcv.url("/g"), "every_ms": 100, "max_retries": 5}, nil)
		task := waitTask(t, tn, "gone", func(task map[string]any) bool { return task["status"] == "inactive" })
		time.Sleep(500 * time.Millisecond)
		if hs := rcv.hits(); len(hs) != 1 {
			t.Errorf("a 404 periodic task was called %d times, want once (no retry, no further fire)", len(hs))
		}
		if lf, _ := task["last_fire"].(map[string]any); lf == nil || lf["status_code"] != float64(404) {
			t.Errorf("last_fire = %v, want status_code 404", task["last_fire"])
		}
		// A one-shot task whose endpoint is gone fails.
		tn.do(t, "POST", "/v1/tasks", map[string]any{"id": "gone-once", "callback_url": rcv.url("/g"), "delay_ms": 0}, nil)
		waitTask(t, tn, "gone-once", func(task map[string]any) bool { return task["status"] == "failed" })
	})
}

func TestMaxFailsDeactivates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tn := startNode(t, nil)
		rcv := newReceiver(t)
		rcv.setRespond(func(hit, int) int { return http.StatusInternalServerError })
		tn.do(t, "POST", "/v1/tasks", map[string]any{"id": "mf", "callback_url": rcv.url("/m"), "every_ms": 100, "max_retries": 0, "max_fails": 3}, nil)
		task := waitTask(t, tn, "mf", func(task map[string]any) bool { return task["status"] == "inactive" })
		if task["fail_count"] != float64(3) {
			t.Errorf("fail_count = %v, want 3", task["fail_count"])
		}
		if hs := rcv.hits(); len(hs) != 3 {
			t.Errorf("callbacks = %d, want 3", len(hs))
		}
	})
}

func TestPauseResumeTriggerDelete(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tn := startNode(t, nil)
		rcv := newReceiver(t)
		tn.do(t, "POST", "/v1/tasks", map[string]any{"id": "p", "callback_url": rcv.url("/p"), "delay_ms": 600}, nil)
		var task map[string]any
		if code := tn.do(t, "POST", "/v1/tasks/p/pause", nil, &task); code != 200 || task["status"] != "paused" {
			t.Fatalf("pause: %d %v", code, task["status"])
		}
		time.Sleep(time.Second)
		if hs := rcv.hits(); len(hs) != 0 {
			t.Fatalf("a paused task fired %d times", len(hs))
		}
		// Trigger fires once now, even while paused, and leaves the schedule alone.
		if code := tn.do(t, "POST", "/v1/tasks/p/trigger", nil, nil); code != 202 {
			t.Fatalf("trigger: %d", code)
		}
		rcv.waitHits(t, 10*time.Second, func(hs []hit) bool { return len(hs) == 1 })
		waitTask(t, tn, "p", func(task map[string]any) bool { return task["fire_count"] == float64(1) })
		if code := tn.do(t, "POST", "/v1/tasks/p/resume", nil, &task); code != 200 || task["status"] != "scheduled" {
			t.Fatalf("resume: %d %v", code, task["status"])
		}
		// Its due time passed while paused: it fires now (one-shots always fire).
		hs := rcv.waitHits(t, 10*time.Second, func(hs []hit) bool { return len(hs) == 2 })
		if hs[0].FireID != "p:1" || hs[1].FireID != "p:2" {
			t.Errorf("fire ids %q, %q, want p:1, p:2", hs[0].FireID, hs[1].FireID)
		}
		waitTask(t, tn, "p", func(task map[string]any) bool { return task["status"] == "done" })
		if code := tn.do(t, "DELETE", "/v1/tasks/p", nil, nil); code != 204 {
			t.Fatalf("delete: %d", code)
		}
		if code := tn.do(t, "GET", "/v1/tasks/p", nil, nil); code != 404 {
			t.Fatalf("get after delete: %d, want 404", code)
		}
		if code := tn.do(t, "GET", "/v1/tasks/p/executions", nil, nil); code != 404 {
			t.Fatalf("executions after delete: %d, want 404", code)
		}
		// A deleted task does not fire.
		tn.do(t, "POST", "/v1/tasks", map[string]any{"id": "d", "callback_url": rcv.url("/d"), "delay_ms": 300}, nil)
		tn.do(t, "DELETE", "/v1/tasks/d", nil, nil)
		time.Sleep(800 * time.Millisecond)
		for _, h := range rcv.hits() {
			if h.TaskID == "d" {
				t.Fatal("a deleted task fired")
			}
		}
	})
}

func TestRestartKeepsTasksAndFiresOverdue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tn := startNode(t, nil)
		rcv := newReceiver(t)
		tn.do(t, "POST", "/v1/tasks", map[string]any{"id": "later", "callback_url": rcv.url("/l"), "delay_ms": 700}, nil)
		cfg := tn.cfg
		tn.stop(t)
		time.Sleep(time.Second) // due while the node is down
		tn2 := restartNode(t, cfg)
		hs := rcv.waitHits(t, 10*time.Second, func(hs []hit) bool { return len(hs) >= 1 })
		if hs[0].FireID != "later:1" {
			t.Errorf("fire id %q, want later:1", hs[0].FireID)
		}
		waitTask(t, tn2, "later", func(task map[string]any) bool { return task["status"] == "done" })
		// The restarted node still knows the id exists (its id filter is
		// rebuilt from the store, and must not let a duplicate through).
		if code := tn2.do(t, "POST", "/v1/tasks", map[string]any{"id": "later", "callback_url": rcv.url("/l"), "delay_ms": 700}, nil); code != 409 {
			t.Errorf("create of an existing id after a restart: %d, want 409", code)
		}
	})
}

func TestCallbackContract(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tn := startNode(t, nil)
		rcv := newReceiver(t)
		tn.do(t, "POST", "/v1/tasks", map[string]any{
			"id": "c", "callback_url": rcv.url("/c?x=1"), "delay_ms": 0,
			"payload": map[string]any{"hello": "world"}, "headers": map[string]string{"X-Custom": "yes"},
		}, nil)
		h := rcv.waitHits(t, 10*time.Second, func(hs []hit) bool { return len(hs) == 1 })[0]
		if string(h.Body) != `{"hello":"world"}` {
			t.Errorf("body %q, want the payload", h.Body)
		}
		for k, want := range map[string]string{
			"Content-Type": "application/json", "X-Chime-Task-Id": "c", "X-Chime-Fire-Id": "c:1",
			"X-Chime-Attempt": "1", "X-Custom": "yes",
		} {
			if got := h.Header.Get(k); got != want {
				t.Errorf("header %s = %q, want %q", k, got, want)
			}
		}
		if _, err := time.Parse(time.RFC3339Nano, h.Header.Get("X-Chime-Due-At")); err != nil {
			t.Errorf("X-Chime-Due-At %q: %v", h.Header.Get("X-Chime-Due-At"), err)
		}
	})
}

// waitTask polls GET /v1/tasks/{id} until cond holds.
func waitTask(t *testing.T, tn *testNode, id string, cond func(map[string]any) bool) map[string]any {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var task map[string]any
		tn.do(t, "GET", "/v1/tasks/"+id, nil, &task)
		if cond(task) {
			return task
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s never reached the condition; last %v", id, task)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestBuiltInTestCallback(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tn := startNode(t, nil)
		tn.do(t, "POST", "/v1/tasks", map[string]any{"id": "self", "callback_url": tn.url("/v1/test/callback?status=200"), "delay_ms": 0}, nil)
		task := waitTask(t, tn, "self", func(task map[string]any) bool { return task["status"] == "done" })
		lf, _ := task["last_fire"].(map[string]any)
		if lf == nil || lf["status_code"] != float64(200) || !strings.Contains(fmt.Sprint(lf["result"]), `"fire_id":"self:1"`) {
			t.Errorf("last_fire = %v, want 200 with the echoed fire id", lf)
		}
		var eb errorBody
		if code := tn.do(t, "POST", "/v1/test/callback?status=42", nil, &eb); code != 400 || eb.Error.Field != "status" {
			t.Errorf("bad status: %d %+v", code, eb.Error)
		}
		if code := tn.do(t, "POST", "/v1/test/callback?status=503", nil, nil); code != 503 {
			t.Errorf("chosen status: %d, want 503", code)
		}
	})
}

func TestSnapshot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tn := startNode(t, nil)
		rcv := newReceiver(t)
		for i := range 20 {
			tn.do(t, "POST", "/v1/tasks", map[string]any{"id": fmt.Sprintf("s%d", i), "callback_url": rcv.url("/s"), "delay_ms": 0}, nil)
		}
		tn.do(t, "POST", "/v1/tasks", map[string]any{"id": "later", "callback_url": rcv.url("/s"), "delay_ms": 600000}, nil)
		rcv.waitHits(t, 20*time.Second, func(hs []hit) bool { return len(hs) == 20 })
		for i := range 20 {
			waitTask(t, tn, fmt.Sprintf("s%d", i), func(task map[string]any) bool { return task["status"] == "done" })
		}
		var snap dashboard.Snapshot
		deadline := time.Now().Add(20 * time.Second)
		for {
			if code := tn.do(t, "GET", "/v1/snapshot", nil, &snap); code != 200 {
				t.Fatalf("snapshot: %d", code)
			}
			if len(snap.Members) == 1 && snap.Members[0].TasksStored == 21 && len(snap.Hosts) == 1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("snapshot never showed 21 tasks and one callback host: %+v", snap)
			}
			time.Sleep(50 * time.Millisecond)
		}
		if h := snap.Hosts[0]; h.Host != rcv.url("") || h.Count != 20 || h.P50Ms <= 0 {
			t.Errorf("host latency %+v, want %s with 20 callbacks", h, rcv.url(""))
		}
		total := 0
		for _, c := range snap.Wheel.Counts {
			total += c
		}
		if total != 1 || snap.Wheel.Counts[10] != 1 {
			t.Errorf("heatmap %v, want the one task due in 10 minutes", snap.Wheel.Counts)
		}
		if err := snap.CheckSlotTable(); err != nil || snap.TableVersion != dashboard.SingleTableVersion || len(snap.Events) == 0 {
			t.Errorf("slot table: %v (version %d), events %v", err, snap.TableVersion, snap.Events)
		}
		for i, o := range snap.SlotOwners {
			if o != 0 || snap.SlotStates[i] != dashboard.SlotOK {
				t.Fatalf("slot %d: owner %d state %v, want the node itself and ok", i, o, snap.SlotStates[i])
			}
		}
		tn.do(t, "DELETE", "/v1/tasks/s0", nil, nil)
		tn.do(t, "GET", "/v1/snapshot", nil, &snap)
		if snap.Members[0].TasksStored != 20 {
			t.Errorf("after a delete tasks_stored = %d, want 20", snap.Members[0].TasksStored)
		}
	})
}

func TestCallbackHost(t *testing.T) {
	tests := map[string]string{
		"http://a.example:8080/x?y": "http://a.example:8080",
		"https://b/":                "https://b",
		"http://c?q":                "http://c",
		"http://d":                  "http://d",
	}
	for in, want := range tests {
		if got := callbackHost(in); got != want {
			t.Errorf("callbackHost(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestCallbackEndpoint(t *testing.T) {
	tests := map[string]string{
		"http://a.example:8080/x?y":       "http://a.example:8080/x",
		"https://b/":                      "https://b/",
		"http://c?q":                      "http://c/",
		"http://d":                        "http://d/",
		"https://u:pw@e/hooks/7#frag":     "https://***@e/hooks/7",
		"http://f/a/b/c?token=secret&x=1": "http://f/a/b/c",
	}
	for in, want := range tests {
		if got := callbackEndpoint(in); got != want {
			t.Errorf("callbackEndpoint(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestOverloadAnswers429AndLosesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tn := startNode(t, smallDispatcher(1, 4))
		rcv := newReceiver(t)
		release := make(chan struct{})
		rcv.setRespond(func(hit, int) int { <-release; return 200 })
		t.Cleanup(func() {
			select {
			case <-release:
			default:
				close(release)
			}
		})
		// Twenty fires due now against an endpoint that does not answer: one
		// runs, four wait at the dispatcher, the rest wait on disk.
		accepted := 0
		for i := range 20 {
			code := tn.do(t, "POST", "/v1/tasks", map[string]any{"id": fmt.Sprintf("o%d", i), "callback_url": rcv.url("/o"), "delay_ms": 0}, nil)
			if code == 201 {
				accepted++
			}
		}
		var eb errorBody
		deadline := time.Now().Add(20 * time.Second)
		for {
			code := tn.do(t, "POST", "/v1/tasks", map[string]any{"callback_url": rcv.url("/o"), "delay_ms": 0}, &eb)
			if code == 429 {
				break
			}
			if code != 201 {
				t.Fatalf("create: %d", code)
			}
			accepted++
			if time.Now().After(deadline) {
				t.Fatal("the dispatcher backlog never filled up to a 429")
			}
			time.Sleep(20 * time.Millisecond)
		}
		if eb.Error.Code != CodeOverloaded {
			t.Errorf("429 body %+v, want code overloaded", eb.Error)
		}
		close(release)
		// Every acknowledged task fires once the endpoint answers again.
		hs := rcv.waitHits(t, 60*time.Second, func(hs []hit) bool { return len(hs) >= accepted })
		seen := map[string]bool{}
		for _, h := range hs {
			seen[h.TaskID] = true
		}
		if len(seen) != accepted {
			t.Errorf("%d distinct tasks fired, want all %d acknowledged", len(seen), accepted)
		}
	})
}

// TestRefusedFireIsNotRunning: a fire the dispatcher refuses (it is
// stopping, or its queue is full) stays in flight on disk but does not count
// as a running callback, or a seal for a handover (a drain) would wait for
// it until its cap; and the loop tries it again.
func TestRefusedFireIsNotRunning(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tn := startNode(t, nil)
		rcv := newReceiver(t)
		tn.disp.Close(context.Background()) // refuses every job from now on
		if code := tn.do(t, "POST", "/v1/tasks", map[string]any{"id": "r1", "callback_url": rcv.url("/r"), "delay_ms": 0}, nil); code != 201 {
			t.Fatalf("create: %d", code)
		}
		s := slots.Of("r1")
		deadline := time.Now().Add(10 * time.Second)
		for testutil.ToFloat64(tn.metrics.FireDeferred) < 2 {
			if time.Now().After(deadline) {
				t.Fatalf("the refused fire was tried %v times in 10 s, want it tried again", testutil.ToFloat64(tn.metrics.FireDeferred))
			}
			time.Sleep(10 * time.Millisecond)
		}
		idle, err := tn.writer.sealCheck([]uint16{s})
		if err != nil {
			t.Fatal(err)
		}
		if len(idle) != 1 {
			t.Errorf("slot %d counts a callback that never started as running: a seal would wait for it", s)
		}
		var task map[string]any
		tn.do(t, "GET", "/v1/tasks/r1", nil, &task)
		if task["status"] != "scheduled" || task["fire_count"] != float64(0) {
			t.Errorf("the refused task is %v with fire_count %v, want still scheduled, not fired", task["status"], task["fire_count"])
		}
	})
}

// TestWaveWaitsInTheReadyLane: more tasks due at one instant than the
// dispatcher takes (MaxQueued + Concurrency) wait in the loop's ready lane
// and go as results free room. None is started and then deferred (which
// read its record again every fireRetryDelay until the wave drained), each
// fires once, none early, and the lane empties.
func TestWaveWaitsInTheReadyLane(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tn := startNode(t, smallDispatcher(2, 4))
		rcv := newReceiver(t)
		rcv.setRespond(func(hit, int) int { time.Sleep(20 * time.Millisecond); return 200 })
		const n = 120
		due := time.Now().Add(3 * time.Second).UTC()
		for i := range n {
			body := map[string]any{"id": fmt.Sprintf("w%d", i), "callback_url": rcv.url("/w"), "due_at": due.Format(time.RFC3339Nano)}
			if code := tn.do(t, "POST", "/v1/tasks", body, nil); code != 201 {
				t.Fatalf("create %d: %d", i, code)
			}
		}
		rcv.waitHits(t, 60*time.Second, func(hs []hit) bool { return len(hs) >= n })
		time.Sleep(2 * time.Second) // room for a duplicate to show
		hs := rcv.hits()
		seen := map[string]int{}
		for _, h := range hs {
			seen[h.TaskID]++
			if h.At.Before(due) {
				t.Errorf("%s fired at %v, before its due time %v", h.TaskID, h.At, due)
			}
		}
		if len(seen) != n || len(hs) != n {
			t.Errorf("%d hits of %d distinct tasks, want each of %d once", len(hs), len(seen), n)
		}
		if d := testutil.ToFloat64(tn.metrics.FireDeferred); d != 0 {
			t.Errorf("%v fire starts deferred, want none: the wave should wait in the ready lane", d)
		}
		if l := testutil.ToFloat64(tn.metrics.ReadyLane); l != 0 {
			t.Errorf("ready lane holds %v after the wave, want 0", l)
		}
	})
}

// smallDispatcher configures a node's dispatcher with workers callbacks at
// once (to any host) and queued waiting, for tests that fill it.
func smallDispatcher(workers, queued int) func(*Config) {
	return func(c *Config) {
		c.Dispatch.Concurrency = workers
		c.Dispatch.PerHost = workers
		c.Dispatch.MaxQueued = queued
	}
}
