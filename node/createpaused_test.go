package node

import (
	"testing"
	"testing/synctest"
	"time"
)

// TestCreatePaused: a task created with "status":"paused" (POST, PUT and
// batch) is stored paused from the start: an overdue one does not fire
// until it is resumed. Any other status is a 400 naming the field.
func TestCreatePaused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rcv := newReceiver(t)
		tn := startNode(t, nil)
		past := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339Nano)
		body := func(extra string) string {
			return `{"callback_url":"` + rcv.url("/cb") + `","due_at":"` + past + `"` + extra + `}`
		}
		var got map[string]any
		if code := tn.do(t, "POST", "/v1/tasks", `{"id":"p1",`+body(`,"status":"paused"`)[1:], &got); code != 201 || got["status"] != "paused" {
			t.Fatalf("create paused: %d %v", code, got)
		}
		if code := tn.do(t, "PUT", "/v1/tasks/p2", body(`,"status":"paused"`), &got); code != 201 || got["status"] != "paused" {
			t.Fatalf("put paused: %d %v", code, got)
		}
		var br struct {
			Results []struct {
				Status int `json:"status"`
			} `json:"results"`
		}
		if code := tn.do(t, "POST", "/v1/tasks:batch", `{"tasks":[{"id":"p3",`+body(`,"status":"paused"`)[1:]+`,{"id":"s1",`+body(`,"status":"scheduled"`)[1:]+`]}`, &br); code != 200 ||
			len(br.Results) != 2 || br.Results[0].Status != 201 || br.Results[1].Status != 201 {
			t.Fatalf("batch: %d %+v", code, br)
		}
		for _, bad := range []string{`"done"`, `"PAUSED"`, `1`} {
			var eb errorBody
			if code := tn.do(t, "POST", "/v1/tasks", body(`,"status":`+bad), &eb); code != 400 || eb.Error.Field != "status" {
				t.Errorf("status %s: %d %+v, want 400 naming status", bad, code, eb.Error)
			}
		}
		// s1 (scheduled, overdue) fires; the paused ones do not.
		rcv.waitHits(t, 10*time.Second, func(hs []hit) bool { return len(hs) >= 1 })
		time.Sleep(300 * time.Millisecond) // a fire of a paused task would arrive now
		if hs := rcv.hits(); len(hs) != 1 || hs[0].FireID != "s1:1" {
			t.Fatalf("fires %v, want s1:1 alone (only the scheduled task)", fireIDs(hs))
		}
		for _, id := range []string{"p1", "p2", "p3"} {
			if code := tn.do(t, "GET", "/v1/tasks/"+id, nil, &got); code != 200 || got["status"] != "paused" {
				t.Errorf("%s: %d %v, want paused", id, code, got)
			}
		}
		if code := tn.do(t, "POST", "/v1/tasks/p1/resume", nil, nil); code != 200 {
			t.Fatalf("resume: %d", code)
		}
		rcv.waitHits(t, 10*time.Second, func(hs []hit) bool { return len(hs) >= 2 })
		time.Sleep(300 * time.Millisecond) // a fire of p2 or p3 would arrive now
		if hs := rcv.hits(); len(hs) != 2 || hs[1].FireID != "p1:1" {
			t.Errorf("fires %v after resuming p1, want s1:1 then p1:1", fireIDs(hs))
		}
	})
}
