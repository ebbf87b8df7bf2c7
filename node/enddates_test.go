package node

import (
	"slices"
	"testing"
	"testing/synctest"
	"time"
)

// TestEndAtAndMaxRuns (API.md "End dates and run limits"): a periodic task
// with max_runs fires exactly that many scheduled times (a manual trigger
// is not counted, a failed fire is) and one with end_at fires at every
// occurrence up to and including end_at; then each is completed, fires no
// more, and cannot be resumed (a PUT starts it again); nor can an inactive
// task whose runs are used up.
func TestEndAtAndMaxRuns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rcv := newReceiver(t)
		rcv.setRespond(func(h hit, _ int) int {
			switch h.TaskID {
			case "fails":
				return 500
			case "gone":
				return 410
			}
			return 200
		})
		tn := startNode(t, nil)
		t0 := time.Now().Truncate(time.Second).Add(time.Second)
		at := func(d time.Duration) string { return t0.Add(d).UTC().Format(time.RFC3339Nano) }
		create := func(id, extra string) {
			t.Helper()
			var got map[string]any
			body := `{"id":"` + id + `","callback_url":"` + rcv.url("/cb") + `","every_ms":1000,"start_at":"` + at(0) + `"` + extra + `}`
			if code := tn.do(t, "POST", "/v1/tasks", body, &got); code != 201 || got["status"] != "scheduled" {
				t.Fatalf("create %s: %d %v", id, code, got)
			}
		}
		create("runs", `,"max_runs":3`)
		create("fails", `,"max_runs":2,"max_retries":0`)
		create("end", `,"end_at":"`+at(2500*time.Millisecond)+`"`)
		create("gone", `,"max_runs":1`)                     // 410 on its only run: inactive, and resume is 409
		create("edge", `,"end_at":"`+at(2*time.Second)+`"`) // inclusive: due == end_at fires
		// A manual trigger is an extra fire, not one of the max_runs.
		if code := tn.do(t, "POST", "/v1/tasks/runs/trigger", nil, nil); code != 202 {
			t.Fatalf("trigger: %d", code)
		}

		time.Sleep(time.Until(t0.Add(10 * time.Second)))
		dues := map[string][]time.Duration{}
		for _, h := range rcv.hits() {
			dues[h.TaskID] = append(dues[h.TaskID], h.Due.Sub(t0))
		}
		want := map[string][]time.Duration{
			"runs":  {0, time.Second, 2 * time.Second},
			"fails": {0, time.Second},
			"end":   {0, time.Second, 2 * time.Second},
			"edge":  {0, time.Second, 2 * time.Second},
			"gone":  {0},
		}
		for id, w := range want {
			got := dues[id]
			if id == "runs" {
				// The trigger's fire (due when it was asked, before t0) comes first.
				if len(got) == 0 || got[0] >= 0 {
					t.Errorf("runs: fires due at %v, want the trigger's first", got)
					continue
				}
				got = got[1:]
			}
			if !slices.Equal(got, w) {
				t.Errorf("%s: scheduled fires due at %v after t0, want %v", id, got, w)
			}
		}
		wantRuns := map[string]float64{"runs": 3, "fails": 2}
		for _, id := range []string{"runs", "fails", "end", "edge"} {
			var got map[string]any
			if code := tn.do(t, "GET", "/v1/tasks/"+id, nil, &got); code != 200 || got["status"] != "completed" || got["next_due_at"] != nil {
				t.Errorf("%s: %d %v, want completed with no next_due_at", id, code, got)
			}
			if w, ok := wantRuns[id]; ok && got["runs"] != w {
				t.Errorf("%s: runs %v, want %v", id, got["runs"], w)
			}
			var eb errorBody
			if code := tn.do(t, "POST", "/v1/tasks/"+id+"/resume", nil, &eb); code != 409 {
				t.Errorf("resume %s: %d %+v, want 409 (completed is final)", id, code, eb.Error)
			}
		}
		var got map[string]any
		if code := tn.do(t, "GET", "/v1/tasks/gone", nil, &got); code != 200 || got["status"] != "inactive" || got["runs"] != 1.0 {
			t.Errorf("gone: %d %v, want inactive with runs 1", code, got)
		}
		var eb errorBody
		if code := tn.do(t, "POST", "/v1/tasks/gone/resume", nil, &eb); code != 409 {
			t.Errorf("resume gone (max_runs used up): %d %+v, want 409", code, eb.Error)
		}
		// A PUT makes a completed task a new scheduled one: runs count again.
		n := len(rcv.hits())
		put := `{"callback_url":"` + rcv.url("/cb") + `","every_ms":1000,"max_runs":1}`
		if code := tn.do(t, "PUT", "/v1/tasks/runs", put, &got); code != 200 || got["status"] != "scheduled" || got["runs"] != 0.0 {
			t.Fatalf("replace completed: %d %v, want 200 scheduled with runs 0", code, got)
		}
		time.Sleep(5 * time.Second)
		if hs := rcv.hits()[n:]; len(hs) != 1 || hs[0].TaskID != "runs" {
			t.Errorf("after the replace: fires %v, want one of runs", fireIDs(hs))
		}
		if code := tn.do(t, "GET", "/v1/tasks/runs", nil, &got); code != 200 || got["status"] != "completed" || got["runs"] != 1.0 {
			t.Errorf("replaced runs: %d %v, want completed with runs 1", code, got)
		}
		var list struct {
			Tasks []map[string]any `json:"tasks"`
		}
		if code := tn.do(t, "GET", "/v1/tasks?status=completed", nil, &list); code != 200 || len(list.Tasks) != 4 {
			t.Errorf("list ?status=completed: %d, %d tasks, want 4", code, len(list.Tasks))
		}
	})
}
