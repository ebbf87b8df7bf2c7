package node

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/chime-scheduler/chime/slots"
	"github.com/chime-scheduler/chime/storage"
)

// TestRetention (API.md "Retention"): a final task is deleted with its
// executions once its retention has passed since it became final: its own
// retention_ms, else the node's Retention; retention_ms 0 keeps it; a task
// replaced (PUT) before its expiry is scheduled again and is not deleted by
// its old expiry entry; a resumed inactive one neither.
func TestRetention(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rcv := newReceiver(t)
		tn := startNode(t, func(c *Config) { c.Retention = 5 * time.Second })
		t0 := time.Now()
		// "inactive" (every 1 s from t0+1s) is gone (410) at its first
		// fire, resumed at 1.5 s, fires fine at 2 and 3 s and is gone
		// again at 4 s: inactive anew, it expires 2 s after that.
		rcv.setRespond(func(h hit, _ int) int {
			if h.TaskID == "inactive" && (h.Due.Before(t0.Add(1500*time.Millisecond)) || h.Due.After(t0.Add(3500*time.Millisecond))) {
				return 410
			}
			return 200
		})
		at := func(d time.Duration) { time.Sleep(time.Until(t0.Add(d))) }
		create := func(id, extra string) {
			t.Helper()
			body := `{"id":"` + id + `","callback_url":"` + rcv.url("/cb") + `","delay_ms":100` + extra + `}`
			if code := tn.do(t, "POST", "/v1/tasks", body, nil); code != 201 {
				t.Fatalf("create %s: %d", id, code)
			}
		}
		create("once", `,"retention_ms":2000`)
		create("keep", `,"retention_ms":0`)
		create("revive", `,"retention_ms":2000`)
		create("default", ``)
		body := `{"id":"inactive","callback_url":"` + rcv.url("/cb") + `","every_ms":1000,"retention_ms":2000}`
		if code := tn.do(t, "POST", "/v1/tasks", body, nil); code != 201 {
			t.Fatalf("create inactive: %d", code)
		}
		get := func(id string) (int, map[string]any) {
			t.Helper()
			var got map[string]any
			code := tn.do(t, "GET", "/v1/tasks/"+id, nil, &got)
			return code, got
		}
		gone := func(id string) {
			t.Helper()
			if code, got := get(id); code != 404 {
				t.Errorf("%s: GET %d %v, want 404 (expired)", id, code, got)
			}
			if code := tn.do(t, "GET", "/v1/tasks/"+id+"/executions", nil, nil); code != 404 {
				t.Errorf("%s: GET executions %d, want 404", id, code)
			}
			if ex, err := tn.store.Executions(slots.Of(id), id, 0); err != nil || len(ex) != 0 {
				t.Errorf("%s: %d executions left in the store (%v), want none", id, len(ex), err)
			}
		}
		present := func(id, status string) map[string]any {
			t.Helper()
			code, got := get(id)
			if code != 200 || got["status"] != status {
				t.Errorf("%s: GET %d %v, want 200 %s", id, code, got, status)
			}
			return got
		}

		at(1500 * time.Millisecond)
		for _, id := range []string{"once", "keep", "revive", "default"} {
			got := present(id, "done")
			fin, _ := time.Parse(time.RFC3339Nano, asString(got["finished_at"]))
			exp, _ := time.Parse(time.RFC3339Nano, asString(got["expires_at"]))
			want := map[string]time.Duration{"once": 2 * time.Second, "revive": 2 * time.Second, "default": 5 * time.Second}[id]
			if fin.IsZero() || want != 0 && exp.Sub(fin) != want || want == 0 && got["expires_at"] != nil {
				t.Errorf("%s: finished_at %v expires_at %v, want expiry %v after finish", id, got["finished_at"], got["expires_at"], want)
			}
			if code := tn.do(t, "GET", "/v1/tasks/"+id+"/executions", nil, nil); code != 200 {
				t.Errorf("%s: executions %d, want 200", id, code)
			}
		}
		// retention_ms is echoed as given, 0 included, and absent when not.
		for id, want := range map[string]any{"once": 2000.0, "keep": 0.0, "default": nil} {
			if _, got := get(id); got["retention_ms"] != want {
				t.Errorf("%s: retention_ms %v, want %v", id, got["retention_ms"], want)
			}
		}
		present("inactive", "inactive") // 410 on its first fire
		// Revived before their expiry: a new definition, and a resume.
		body = `{"callback_url":"` + rcv.url("/cb") + `","delay_ms":4500,"retention_ms":2000}`
		if code := tn.do(t, "PUT", "/v1/tasks/revive", body, nil); code != 200 && code != 201 {
			t.Fatalf("put revive: %d", code)
		}
		if code := tn.do(t, "POST", "/v1/tasks/inactive/resume", nil, nil); code != 200 {
			t.Fatalf("resume inactive: %d", code)
		}

		at(3500 * time.Millisecond)
		gone("once")
		present("keep", "done")
		if got := present("revive", "scheduled"); got["finished_at"] != nil || got["expires_at"] != nil {
			t.Errorf("revive: a revived task still shows finished_at/expires_at: %v", got)
		}
		if got := present("inactive", "scheduled"); got["finished_at"] != nil || got["expires_at"] != nil {
			t.Errorf("inactive: a resumed task still shows finished_at/expires_at: %v", got)
		}
		present("default", "done")

		at(5500 * time.Millisecond)
		gone("default")
		got := present("inactive", "inactive")
		if fin, _ := time.Parse(time.RFC3339Nano, asString(got["finished_at"])); fin.Before(t0.Add(4 * time.Second)) {
			t.Errorf("inactive again: finished_at %v, want its second stop (t0+4s), not its first", got["finished_at"])
		}
		present("revive", "scheduled") // fires at 6 s

		at(7 * time.Second)
		present("revive", "done")

		at(9 * time.Second)
		gone("revive")
		present("keep", "done")
		gone("inactive")
		if m := tn.metricsText(t); !strings.Contains(m, "chime_tasks_expired_total 4\n") {
			t.Errorf("metrics: want chime_tasks_expired_total 4 in:\n%s", grepLines(m, "expired"))
		}
	})
}

func asString(v any) string {
	s, _ := v.(string)
	return s
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestFaultRetentionFailover: tasks of slots n2 owns fire and become done,
// with their expiry (the nodes' Retention after they finished) in the due
// index, replicated to their followers. n2 crashes: its followers take the
// slots over and expire the tasks at that time, not before. Then no live
// node holds a task record or an execution of them: the new owner deleted
// them through its writer, and that delete reached its own follower.
func TestFaultRetentionFailover(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		const retention = 15 * time.Second
		c := newFaultCluster(t, 3, 41, func(cfg *Config) { cfg.Retention = retention })
		first := time.Now().Add(500 * time.Millisecond)
		list := ids("ret", 20, c.table(0), ownedBy("n2"))
		if n := c.create(list, first, 50*time.Millisecond); n != len(list) {
			t.Fatalf("%d of %d creates acknowledged", n, len(list))
		}
		// GET through n1 (never crashed), again while the lossy links or
		// the failover leave it undecided.
		get := func(id string) (code int, body []byte) {
			for range 20 {
				if code, body = c.request(0, "GET", "/v1/tasks/"+id, nil); !retryable(code) {
					break
				}
				time.Sleep(200 * time.Millisecond)
			}
			return code, body
		}
		sleepUntil(first.Add(2 * time.Second))
		var earliest, latest time.Time
		for _, id := range list {
			code, body := get(id)
			var got struct {
				Status     string `json:"status"`
				FinishedAt string `json:"finished_at"`
				ExpiresAt  string `json:"expires_at"`
			}
			_ = json.Unmarshal(body, &got)
			fin, _ := time.Parse(time.RFC3339Nano, got.FinishedAt)
			exp, _ := time.Parse(time.RFC3339Nano, got.ExpiresAt)
			if code != 200 || got.Status != "done" || exp.Sub(fin) != retention {
				t.Fatalf("%s before the crash: %d %+v, want done expiring %v after it finished", id, code, got, retention)
			}
			latest = maxTime(latest, exp)
			if earliest.IsZero() || exp.Before(earliest) {
				earliest = exp
			}
			// The follower holds the record with its expiry: that is what
			// the next owner expires it from.
			f, _ := c.table(0).Follower(slots.Of(id))
			fi := slices.IndexFunc(c.nodes, func(fn *faultNode) bool { return fn.name == f.Name })
			if rec, err := c.nodes[fi].n.store.Get(slots.Of(id), id); err != nil || rec.ExpireAt != exp.UnixNano() || rec.Wake() != rec.ExpireAt {
				t.Fatalf("%s on follower %s: %+v %v, want the expiry %v as its wake", id, f.Name, rec, err, exp)
			}
		}
		c.crash(1)
		// The followers own the slots after a failure detection (~5 s),
		// well before the expiry: the tasks are still there. (The fires
		// were 50 ms apart, so their expiries spread over a second: the
		// check starts a second before the earliest one; from the latest
		// one it was flaky, as early tasks expired during its retries.)
		sleepUntil(earliest.Add(-time.Second))
		for _, id := range list {
			if code, body := get(id); code != 200 {
				t.Errorf("%s before its expiry, after the failover: %d %s, want 200", id, code, body)
			}
		}
		sleepUntil(latest.Add(2 * time.Second))
		var expired float64
		for _, i := range c.up() {
			n := c.nodes[i].n
			expired += testutil.ToFloat64(n.metrics.Expired)
			for _, id := range list {
				if _, err := n.store.Get(slots.Of(id), id); !errors.Is(err, storage.ErrNotFound) {
					t.Errorf("%s: %s still holds the task after its expiry (%v)", c.nodes[i].name, id, err)
				}
				if ex, err := n.store.Executions(slots.Of(id), id, 0); err != nil || len(ex) != 0 {
					t.Errorf("%s: %s still holds %d executions after its expiry (%v)", c.nodes[i].name, id, len(ex), err)
				}
			}
		}
		for _, id := range list {
			if code, body := get(id); code != 404 {
				t.Errorf("%s after its expiry: %d %s, want 404", id, code, body)
			}
		}
		if expired != float64(len(list)) {
			t.Errorf("chime_tasks_expired_total summed over the live nodes: %v, want %d", expired, len(list))
		}
		report(t, c.check(checkOpts{}))
		c.close()
	})
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
