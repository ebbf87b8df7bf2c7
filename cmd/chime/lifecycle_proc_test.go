package main

import (
	"fmt"
	"net/http"
	"testing"
	"time"
)

// TestCronEndAtCompletesThenExpires (issue 15) runs a cron task through
// its whole life against a real `chime serve` and real HTTP callbacks: a
// 6-field every-second cron with start_at T0 and end_at T0+3s fires
// exactly at T0..T0+3s (end_at inclusive), never early and never after,
// then is completed with finished_at and expires_at = finished_at +
// retention_ms, and once expires_at has passed it is gone (404) and
// counted in chime_tasks_expired_total. misfire fire_all keeps the four
// fires exact even if the loaded box makes one more than --misfire-grace
// late.
func TestCronEndAtCompletesThenExpires(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	parallelProcs(t, 1)
	rcv := newFireLog(t)
	p := startChime(t, t.TempDir())

	const (
		id        = "cron-life"
		fires     = 4
		retention = 3 * time.Second
	)
	t0 := time.Now().Truncate(time.Second).Add(3 * time.Second)
	endAt := t0.Add((fires - 1) * time.Second)
	var created map[string]any
	if code := postJSON(t, p.url+"/v1/tasks", map[string]any{
		"id": id, "callback_url": rcv.srv.URL,
		"cron": "* * * * * *", "timezone": "UTC", "misfire": "fire_all",
		"start_at":     t0.UTC().Format(time.RFC3339),
		"end_at":       endAt.UTC().Format(time.RFC3339),
		"retention_ms": retention.Milliseconds(),
	}, &created); code != 201 {
		t.Fatalf("create: %d %v", code, created)
	}
	if created["status"] != "scheduled" || created["next_due_at"] != t0.UTC().Format(time.RFC3339) ||
		created["retention_ms"] != float64(retention.Milliseconds()) {
		t.Fatalf("created task: %v; want scheduled, next_due_at %s, retention_ms %d", created, t0.UTC().Format(time.RFC3339), retention.Milliseconds())
	}
	if time.Now().After(t0) {
		t.Logf("warning: the create was acknowledged %v after the first due time", time.Since(t0))
	}
	if n := metricSumOf(t, p.url, "chime_tasks_expired_total"); n != 0 {
		t.Fatalf("chime_tasks_expired_total %v before anything expired, want 0", n)
	}

	// Completed: poll, with a deadline generous for a loaded box.
	var task map[string]any
	deadline := endAt.Add(60 * time.Second)
	for {
		task = nil // a decode into a map keeps the keys the answer omits
		if code := getJSON(t, p.url+"/v1/tasks/"+id, &task); code != 200 {
			t.Fatalf("GET while it runs: %d %v", code, task)
		}
		if task["status"] == "completed" {
			break
		}
		if task["status"] != "scheduled" {
			t.Fatalf("task %v, want scheduled until completed", task)
		}
		if time.Now().After(deadline) {
			t.Fatalf("not completed 60 s after end_at: %v", task)
		}
		time.Sleep(50 * time.Millisecond)
	}
	completedSeen := time.Now()

	// The fires: exactly the occurrences T0..end_at, each at or after its
	// due time, each once.
	rcv.mu.Lock()
	got := append([]fire(nil), rcv.got[id]...)
	rcv.mu.Unlock()
	if len(got) != fires {
		t.Errorf("%d fires, want %d (due %s..%s): %v", len(got), fires, t0.Format(time.RFC3339), endAt.Format(time.RFC3339), got)
	}
	for i, f := range got {
		want := t0.Add(time.Duration(i) * time.Second)
		if !f.due.Equal(want) {
			t.Errorf("fire %d: due %s, want %s", i+1, f.due.Format(time.RFC3339Nano), want.Format(time.RFC3339))
		}
		if f.due.After(endAt) {
			t.Errorf("fire %d due %s, after end_at %s", i+1, f.due.Format(time.RFC3339Nano), endAt.Format(time.RFC3339))
		}
		if f.fireID != fmt.Sprintf("%s:%d", id, i+1) {
			t.Errorf("fire %d: fire id %q, want %s:%d", i+1, f.fireID, id, i+1)
		}
	}
	if dups, early := tally(got); dups > 0 || early > 0 {
		t.Errorf("%d repeated fire ids, %d fires before their due time", dups, early)
	}

	// The completed task: fire_count, nothing due, finished_at after the
	// last fire arrived, expires_at = finished_at + retention_ms.
	if task["fire_count"] != float64(fires) {
		t.Errorf("fire_count %v, want %d", task["fire_count"], fires)
	}
	if nd, ok := task["next_due_at"]; ok {
		t.Errorf("completed task has next_due_at %v: %v", nd, task)
	}
	finished, err1 := time.Parse(time.RFC3339Nano, fmt.Sprint(task["finished_at"]))
	expires, err2 := time.Parse(time.RFC3339Nano, fmt.Sprint(task["expires_at"]))
	if err1 != nil || err2 != nil {
		t.Fatalf("completed task without finished_at/expires_at (%v, %v): %v", err1, err2, task)
	}
	if len(got) > 0 && finished.Before(got[len(got)-1].at) {
		t.Errorf("finished_at %s before the last fire arrived at %s", finished.Format(time.RFC3339Nano), got[len(got)-1].at.Format(time.RFC3339Nano))
	}
	if finished.After(completedSeen) {
		t.Errorf("finished_at %s after the completed status was seen at %s", finished.Format(time.RFC3339Nano), completedSeen.Format(time.RFC3339Nano))
	}
	if d := expires.Sub(finished); d != retention {
		t.Fatalf("expires_at - finished_at = %v, want the task's retention_ms %v", d, retention)
	}

	// Expired: 404 once expires_at has passed, never before it; the task
	// stays completed until then.
	deadline = expires.Add(60 * time.Second)
	for {
		before := time.Now()
		task = nil
		code := getJSON(t, p.url+"/v1/tasks/"+id, &task)
		if code == http.StatusNotFound {
			if before.Before(expires) {
				t.Errorf("404 at %s, before expires_at %s", before.Format(time.RFC3339Nano), expires.Format(time.RFC3339Nano))
			}
			break
		}
		if code != 200 || task["status"] != "completed" {
			t.Fatalf("GET before the expiry: %d %v, want 200 completed", code, task)
		}
		if time.Now().After(deadline) {
			t.Fatalf("task still there 60 s after expires_at %s: %v", expires.Format(time.RFC3339Nano), task)
		}
		time.Sleep(100 * time.Millisecond)
	}
	var body map[string]any
	if code := getJSON(t, p.url+"/v1/tasks/"+id+"/executions", &body); code != http.StatusNotFound {
		t.Errorf("executions after the expiry: %d %v, want 404", code, body)
	}
	// The counter is bumped with the delete; give it a moment anyway.
	deadline = time.Now().Add(10 * time.Second)
	for n := metricSumOf(t, p.url, "chime_tasks_expired_total"); n < 1; n = metricSumOf(t, p.url, "chime_tasks_expired_total") {
		if time.Now().After(deadline) {
			t.Fatalf("chime_tasks_expired_total %v after the expiry, want >= 1", n)
		}
		time.Sleep(100 * time.Millisecond)
	}

	// None after end_at: the receiver still has the same fires, seconds
	// after the completion.
	rcv.mu.Lock()
	n := len(rcv.got[id])
	rcv.mu.Unlock()
	if n != fires {
		t.Errorf("%d fires after the expiry, want still %d", n, fires)
	}
}
