package node

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/chime-scheduler/chime/node/httpapi"
)

// TestExecLogCluster: on a two-node cluster, GET /v1/executions through
// either node lists the executions of the tasks both nodes own, newest
// first; paging with the cursor returns each exactly once; a failed task
// retried (alone, forwarded to its owner, and in bulk) fires again with a
// new fire id.
func TestExecLogCluster(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newFaultCluster(t, 2, 41)
		defer c.close()
		owned := func(name string) func(o, f string) bool { return func(o, _ string) bool { return o == name } }
		fails := append(ids("fail-a", 3, c.table(0), owned("n1")), ids("fail-b", 3, c.table(0), owned("n2"))...)
		oks := append(ids("ok-a", 2, c.table(0), owned("n1")), ids("ok-b", 2, c.table(0), owned("n2"))...)
		first := time.Now().Add(2 * time.Second)
		for j, id := range append(slices.Clone(fails), oks...) {
			body := map[string]any{"callback_url": faultCallbackURL, "max_retries": 0,
				"due_at": first.Add(time.Duration(j) * 100 * time.Millisecond).Format(time.RFC3339Nano)}
			if code, _ := c.send(j%2, http.MethodPut, "/v1/tasks/"+id, body, http.StatusCreated, http.StatusOK); code != http.StatusCreated && code != http.StatusOK {
				t.Fatalf("create %s: %d", id, code)
			}
		}
		status := func(id string) string {
			code, b := c.get(0, "/v1/tasks/"+id)
			var tr httpapi.TaskResponse
			if code != 200 || json.Unmarshal(b, &tr) != nil {
				return ""
			}
			return tr.Status
		}
		waitFor(t, 20*time.Second, "every task fired", func() bool {
			for _, id := range fails {
				if status(id) != "failed" {
					return false
				}
			}
			for _, id := range oks {
				if status(id) != "done" {
					return false
				}
			}
			return true
		})
		list := func(via int, query string) httpapi.ExecPage {
			t.Helper()
			// The links are lossy: a member's part may get no answer (503),
			// and the client asks again.
			code, b := c.request(via, http.MethodGet, "/v1/executions?"+query, nil)
			for try := 0; retryable(code) && try < 5; try++ {
				time.Sleep(200 * time.Millisecond)
				code, b = c.request(via, http.MethodGet, "/v1/executions?"+query, nil)
			}
			var p httpapi.ExecPage
			if code != 200 || json.Unmarshal(b, &p) != nil {
				t.Fatalf("GET /v1/executions?%s via %d: %d %s", query, via, code, b)
			}
			return p
		}
		newestFirst := func(exs []httpapi.LoggedExecutionResponse) {
			t.Helper()
			for i := 1; i < len(exs); i++ {
				a, _ := time.Parse(time.RFC3339Nano, exs[i-1].FinishedAt)
				b, _ := time.Parse(time.RFC3339Nano, exs[i].FinishedAt)
				if b.After(a) {
					t.Fatalf("execution %d (%s) is newer than %d (%s)", i, exs[i].FinishedAt, i-1, exs[i-1].FinishedAt)
				}
			}
		}
		taskIDs := func(exs []httpapi.LoggedExecutionResponse) []string {
			var out []string
			for _, e := range exs {
				out = append(out, e.TaskID)
			}
			slices.Sort(out)
			return out
		}
		for via := range 2 {
			p := list(via, "status=failed")
			newestFirst(p.Executions)
			if got, want := taskIDs(p.Executions), slices.Sorted(slices.Values(fails)); !slices.Equal(got, want) || p.NextCursor != "" {
				t.Fatalf("via %d: failed executions of %v, want %v (cursor %q)", via, got, want, p.NextCursor)
			}
			for _, e := range p.Executions {
				if e.StatusCode != 500 || e.Result != "broken "+e.FireID {
					t.Fatalf("execution %+v", e)
				}
			}
		}
		all := list(1, "limit=1000")
		if len(all.Executions) != len(fails)+len(oks) {
			t.Fatalf("%d executions, want %d", len(all.Executions), len(fails)+len(oks))
		}
		newestFirst(all.Executions)
		var paged []httpapi.LoggedExecutionResponse
		for q, n := "limit=3", 0; ; n++ {
			p := list(n%2, q)
			paged = append(paged, p.Executions...)
			if p.NextCursor == "" || n > 10 {
				break
			}
			q = "limit=3&cursor=" + p.NextCursor
		}
		if !reflect.DeepEqual(paged, all.Executions) {
			t.Fatalf("paged:\n%v\nwant\n%v", paged, all.Executions)
		}

		// Retry one failed task through the node that does not own it.
		retried := fails[3] // owned by n2
		code, b := c.request(0, http.MethodPost, "/v1/tasks/"+retried+"/retry", nil)
		resent := false
		for try := 0; retryable(code) && try < 5; try++ {
			time.Sleep(200 * time.Millisecond)
			code, b = c.request(0, http.MethodPost, "/v1/tasks/"+retried+"/retry", nil)
			resent = true
		}
		// A resent retry finds the task scheduled if the first one was
		// applied and only its answer was lost.
		if code != http.StatusOK && (!resent || code != http.StatusConflict) {
			t.Fatalf("retry: %d %s", code, b)
		}
		if code, b := c.request(1, http.MethodPost, "/v1/tasks/"+oks[0]+"/retry", nil); code != http.StatusConflict {
			t.Fatalf("retry of a done task: %d %s", code, b)
		}
		fireIDs := func(id string) []string {
			var out []string
			for _, f := range c.rcv.all() {
				if f.TaskID == id && !slices.Contains(out, f.FireID) {
					out = append(out, f.FireID)
				}
			}
			return out
		}
		waitFor(t, 10*time.Second, "the retried task fired again", func() bool { return len(fireIDs(retried)) == 2 })
		// The rest in bulk, by id.
		rest := slices.DeleteFunc(slices.Clone(fails), func(id string) bool { return id == retried })
		// The links are lossy: a task whose retry got no answer (503) is
		// sent again, as a client would.
		todo, done := slices.Clone(rest), 0
		for try := 0; len(todo) > 0; try++ {
			code, b = c.request(1, http.MethodPost, "/v1/tasks:retry", map[string]any{"ids": todo})
			var ans httpapi.RetryAnswer
			if retryable(code) && try < 5 {
				time.Sleep(200 * time.Millisecond)
				continue
			}
			if code != 200 || json.Unmarshal(b, &ans) != nil || try > 5 {
				t.Fatalf("bulk retry: %d %s", code, b)
			}
			done += ans.Retried
			todo = todo[:0]
			for _, r := range ans.Results {
				switch {
				case r.Status == http.StatusServiceUnavailable:
					todo = append(todo, r.ID)
				case r.Status == http.StatusConflict && try > 0:
					done++ // resent: the first retry was applied, its answer lost
				case r.Status != http.StatusOK:
					t.Fatalf("bulk retry: %s", b)
				}
			}
		}
		if done != len(rest) {
			t.Fatalf("bulk retry: %d retried, want %d", done, len(rest))
		}
		waitFor(t, 10*time.Second, "every retried task fired again", func() bool {
			for _, id := range rest {
				if len(fireIDs(id)) != 2 {
					return false
				}
			}
			return true
		})
		waitFor(t, 10*time.Second, "every retry failed", func() bool {
			return len(list(0, "status=failed").Executions) == 2*len(fails)
		})
		p := list(0, fmt.Sprintf("status=failed&task_id=%s", retried))
		if len(p.Executions) != 2 || p.Executions[0].FireID == p.Executions[1].FireID {
			t.Fatalf("executions of %s: %+v", retried, p.Executions)
		}
	})
}
