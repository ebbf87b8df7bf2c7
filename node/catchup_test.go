package node

import (
	"testing"
	"testing/synctest"
	"time"
)

// TestFireAllBoundedByMaxCatchup (API.md "Catch-up and backfill"): after
// downtime, misfire fire_all fires only the max_catchup most recent missed
// occurrences, one after another, and counts the earlier ones in the
// task's skipped_fires.
func TestFireAllBoundedByMaxCatchup(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rcv := newReceiver(t)
		tn := startNode(t, nil)
		t0 := time.Now().Truncate(time.Second).Add(time.Second)
		tn.do(t, "POST", "/v1/tasks", map[string]any{"id": "fa", "callback_url": rcv.url("/fa"), "every_ms": 1000,
			"start_at": t0.UTC().Format(time.RFC3339Nano), "misfire": "fire_all", "max_catchup": 3}, nil)
		before := rcv.waitHits(t, 10*time.Second, func(hs []hit) bool { return len(hs) >= 2 })
		cfg := tn.cfg
		tn.stop(t)
		nBefore := len(rcv.hits())
		lastDue := rcv.hits()[nBefore-1].Due
		_ = before
		time.Sleep(20 * time.Second) // about 20 occurrences missed
		restart := time.Now()
		tn2 := restartNode(t, cfg)
		hs := rcv.waitHits(t, 20*time.Second, func(hs []hit) bool { return len(hs) >= nBefore+5 })
		after := hs[nBefore:]
		caught := 0
		for i, h := range after {
			if i > 0 && h.Due.Sub(after[i-1].Due) != time.Second {
				t.Fatalf("fires after the restart due at %v then %v, want consecutive occurrences", after[i-1].Due, h.Due)
			}
			if h.Due.Before(restart) {
				caught++
			}
		}
		if caught != 3 {
			t.Errorf("%d missed occurrences fired, want max_catchup 3", caught)
		}
		wantSkipped := float64(after[0].Due.Sub(lastDue)/time.Second - 1)
		task := waitTask(t, tn2, "fa", func(map[string]any) bool { return true })
		if task["skipped_fires"] != wantSkipped || wantSkipped < 10 {
			t.Errorf("skipped_fires %v, want %v (the occurrences between %v and %v)", task["skipped_fires"], wantSkipped, lastDue, after[0].Due)
		}
		if task["max_catchup"] != float64(3) {
			t.Errorf("max_catchup %v, want 3", task["max_catchup"])
		}
	})
}

// TestTriggerDueAt: a trigger with a due_at sends it as X-Chime-Due-At; one
// without sends the request time, as before.
func TestTriggerDueAt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rcv := newReceiver(t)
		tn := startNode(t, nil)
		tn.do(t, "POST", "/v1/tasks", map[string]any{"id": "tr", "callback_url": rcv.url("/tr"), "every_ms": 3600000}, nil)
		due := time.Now().Add(-30 * 24 * time.Hour).Add(890).UTC()
		if code := tn.do(t, "POST", "/v1/tasks/tr/trigger", map[string]any{"due_at": due.Format(time.RFC3339Nano)}, nil); code != 202 {
			t.Fatalf("trigger with due_at: %d", code)
		}
		asked := time.Now()
		if code := tn.do(t, "POST", "/v1/tasks/tr/trigger", nil, nil); code != 202 {
			t.Fatalf("trigger: %d", code)
		}
		hs := rcv.waitHits(t, 10*time.Second, func(hs []hit) bool { return len(hs) >= 2 })
		if got := hs[0].Header.Get("X-Chime-Due-At"); got != due.Format(time.RFC3339Nano) {
			t.Errorf("X-Chime-Due-At %q, want %q", got, due.Format(time.RFC3339Nano))
		}
		if !hs[1].Due.Equal(asked) {
			t.Errorf("plain trigger due %v, want its request time %v", hs[1].Due, asked)
		}
		if hs[0].FireID == hs[1].FireID {
			t.Errorf("both triggers have fire id %s", hs[0].FireID)
		}
	})
}

// TestBackfill: a backfill fires each occurrence of the range once, in
// order, with its own fire id and the occurrence as X-Chime-Due-At; a
// second one while it is pending is 409; one over max_catchup is 400.
func TestBackfill(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rcv := newReceiver(t)
		rcv.setRespond(func(hit, int) int { time.Sleep(time.Second); return 200 })
		tn := startNode(t, nil)
		tn.do(t, "POST", "/v1/tasks", map[string]any{"id": "bf", "callback_url": rcv.url("/bf"), "cron": "0 * * * *", "max_catchup": 5}, nil)
		tn.do(t, "POST", "/v1/tasks", map[string]any{"id": "once", "callback_url": rcv.url("/once"), "delay_ms": 3600000}, nil)
		from := time.Date(2026, 1, 1, 9, 30, 0, 0, time.UTC)
		if time.Now().Before(from) {
			from = time.Now().Add(-48 * time.Hour).Truncate(time.Hour).Add(30 * time.Minute)
		}
		body := func(to time.Duration) map[string]any {
			return map[string]any{"from": from.Format(time.RFC3339), "to": from.Add(to).Format(time.RFC3339)}
		}
		var over map[string]map[string]any
		if code := tn.do(t, "POST", "/v1/tasks/bf/backfill", body(10*time.Hour), &over); code != 400 || over["error"]["field"] != "to" {
			t.Fatalf("backfill over max_catchup: %d %v, want 400 field to", code, over)
		}
		var got map[string]any
		if code := tn.do(t, "POST", "/v1/tasks/bf/backfill", body(5*time.Hour), &got); code != 202 || got["queued"] != float64(5) {
			t.Fatalf("backfill: %d %v, want 202 queued 5", code, got)
		}
		if code := tn.do(t, "POST", "/v1/tasks/bf/backfill", body(time.Hour), nil); code != 409 {
			t.Errorf("second backfill while one is pending: %d, want 409", code)
		}
		var bad map[string]map[string]any
		if code := tn.do(t, "POST", "/v1/tasks/once/backfill", body(time.Hour), &bad); code != 400 || bad["error"]["field"] != "id" {
			t.Errorf("backfill of a one-shot task: %d %v, want 400 field id", code, bad)
		}
		if code := tn.do(t, "POST", "/v1/tasks/bf/trigger", map[string]any{"due_at": "soon"}, &bad); code != 400 || bad["error"]["field"] != "due_at" {
			t.Errorf("trigger with a bad due_at: %d %v, want 400 field due_at", code, bad)
		}
		rcv.waitHits(t, 20*time.Second, func(hs []hit) bool { return len(hs) >= 5 })
		time.Sleep(5 * time.Second)
		hs := rcv.hits()
		if len(hs) != 5 {
			t.Fatalf("%d fires, want 5", len(hs))
		}
		ids := map[string]bool{}
		for i, h := range hs {
			want := from.Add(30*time.Minute + time.Duration(i)*time.Hour)
			if !h.Due.Equal(want) {
				t.Errorf("fire %d due %v, want %v", i, h.Due, want)
			}
			if i > 0 && h.At.Sub(hs[i-1].At) < time.Second {
				t.Errorf("fire %d started %v after the previous one, which takes 1s: fires overlap", i, h.At.Sub(hs[i-1].At))
			}
			if ids[h.FireID] {
				t.Errorf("fire id %s twice", h.FireID)
			}
			ids[h.FireID] = true
		}
		task := waitTask(t, tn, "bf", func(task map[string]any) bool { return task["backfill"] == nil })
		if task["fire_count"] != float64(5) {
			t.Errorf("fire_count %v, want 5", task["fire_count"])
		}
	})
}

// TestBackfillSurvivesRestart: a node stopped in the middle of a backfill
// fires the rest after its restart: every occurrence once, none lost (a
// fire cut off by the stop is repeated with its own fire id only).
func TestBackfillSurvivesRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rcv := newReceiver(t)
		rcv.setRespond(func(hit, int) int { time.Sleep(time.Second); return 200 })
		tn := startNode(t, nil)
		tn.do(t, "POST", "/v1/tasks", map[string]any{"id": "bfr", "callback_url": rcv.url("/bfr"), "every_ms": 60000, "max_catchup": 20}, nil)
		from := time.Now().Add(-24 * time.Hour).Truncate(time.Minute)
		var got map[string]any
		if code := tn.do(t, "POST", "/v1/tasks/bfr/backfill", map[string]any{
			"from": from.Format(time.RFC3339), "to": from.Add(9*time.Minute + 30*time.Second).Format(time.RFC3339)}, &got); code != 202 || got["queued"] != float64(10) {
			t.Fatalf("backfill: %d %v", code, got)
		}
		rcv.waitHits(t, 20*time.Second, func(hs []hit) bool { return len(hs) >= 4 })
		cfg := tn.cfg
		tn.stop(t)
		if n := len(rcv.hits()); n >= 10 {
			t.Fatalf("%d fires before the stop: the backfill was not stopped midway", n)
		}
		time.Sleep(time.Second)
		tn2 := restartNode(t, cfg)
		waitTask(t, tn2, "bfr", func(task map[string]any) bool { return task["backfill"] == nil && task["last_fire"] != nil })
		time.Sleep(5 * time.Second)
		byDue := map[time.Time]map[string]bool{}
		for _, h := range rcv.hits() {
			if h.Due.After(from.Add(10 * time.Minute)) {
				continue // a scheduled fire, not the backfill's
			}
			if byDue[h.Due] == nil {
				byDue[h.Due] = map[string]bool{}
			}
			byDue[h.Due][h.FireID] = true
		}
		for i := range 10 {
			due := from.Add(time.Duration(i) * time.Minute)
			// The grid is the task's (created at its own instant): find
			// the occurrence in minute i.
			var ids map[string]bool
			for d, m := range byDue {
				if !d.Before(due) && d.Before(due.Add(time.Minute)) {
					ids = m
				}
			}
			if len(ids) != 1 {
				t.Errorf("occurrence %d: fire ids %v, want exactly one", i, ids)
			}
		}
		if len(byDue) != 10 {
			t.Errorf("%d occurrences fired, want 10", len(byDue))
		}
	})
}
