package node

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/chime-scheduler/chime/slots"
)

// The flow limiter's tests (API.md "Flow keys"): a key with parallelism 2
// and rate 10 per second against a receiver that measures what it gets,
// in fake time (a synctest bubble), where a send and its arrival are the
// same instant: never more than 2 callbacks of the key in flight at the
// receiver, never more than 10 arriving in any 1 s window [t, t+1s), none
// before its due time, every one delivered once, in due order; on one
// node, on a 3-node cluster through a node that does not own the key, and
// across a handover of the key's slot.

const (
	flowPar    = 2
	flowRate   = 10
	flowPeriod = time.Second
)

// flowCall is one callback the flow receiver got: when it arrived, when
// its answer was written, and its headers.
type flowCall struct {
	task, fire, node string
	attempt          int
	due, at, end     time.Time
}

// flowReceiver answers callbacks after a delay per task (slow ones make
// parallelism the binding limit, fast ones the rate) and records them.
type flowReceiver struct {
	mu    sync.Mutex
	calls []flowCall
	delay func(task string) time.Duration
	fail  map[string]int // task -> attempts to answer 500 first
	seen  map[string]int
}

func (r *flowReceiver) serve(w http.ResponseWriter, req *http.Request) {
	h := req.Header
	c := flowCall{task: h.Get("X-Chime-Task-Id"), fire: h.Get("X-Chime-Fire-Id"), node: h.Get("X-Chime-Node"), at: time.Now()}
	c.attempt, _ = strconv.Atoi(h.Get("X-Chime-Attempt"))
	c.due, _ = time.Parse(time.RFC3339Nano, h.Get("X-Chime-Due-At"))
	r.mu.Lock()
	d := r.delay(c.task)
	r.seen[c.task]++
	status := http.StatusOK
	if r.seen[c.task] <= r.fail[c.task] {
		status = http.StatusInternalServerError
	}
	r.mu.Unlock()
	time.Sleep(d)
	c.end = time.Now()
	r.mu.Lock()
	r.calls = append(r.calls, c)
	r.mu.Unlock()
	w.WriteHeader(status)
}

func (r *flowReceiver) all() []flowCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.calls)
}

func newFlowReceiver() *flowReceiver {
	return &flowReceiver{fail: map[string]int{}, seen: map[string]int{},
		delay: func(task string) time.Duration {
			// Every seventh task is slow: 700 ms holds a parallelism
			// slot long enough to bind; the others answer in 20 ms, and
			// the rate binds.
			if n, _ := strconv.Atoi(task[len(task)-2:]); n%7 == 0 {
				return 700 * time.Millisecond
			}
			return 20 * time.Millisecond
		}}
}

// checkFlowCalls checks the calls of the key's tasks (ids, each due at
// dues[id]) against the limits, and returns what is wrong. inOrder also
// asks that the first attempts arrive in due order.
func checkFlowCalls(calls []flowCall, ids []string, dues map[string]time.Time, inOrder bool) []string {
	var bad []string
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	var mine []flowCall
	for _, c := range calls {
		if want[c.task] {
			mine = append(mine, c)
		}
	}
	// In arrival order; calls sent at the same instant in due order.
	slices.SortStableFunc(mine, func(a, b flowCall) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return a.due.Compare(b.due)
	})
	// In flight: the most calls whose [at, end) overlap.
	type ev struct {
		at time.Time
		d  int
	}
	var evs []ev
	for _, c := range mine {
		evs = append(evs, ev{c.at, 1}, ev{c.end, -1})
	}
	slices.SortStableFunc(evs, func(a, b ev) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return a.d - b.d // an end before a start at the same instant
	})
	cur, peak := 0, 0
	for _, e := range evs {
		cur += e.d
		peak = max(peak, cur)
	}
	if peak > flowPar {
		bad = append(bad, fmt.Sprintf("%d callbacks in flight at once, limit %d", peak, flowPar))
	}
	// Rate: the calls arriving in [at_i, at_i + period).
	for i := range mine {
		n := 0
		for j := i; j < len(mine) && mine[j].at.Sub(mine[i].at) < flowPeriod; j++ {
			n++
		}
		if n > flowRate {
			bad = append(bad, fmt.Sprintf("%d calls in the second from %s, limit %d", n, sinceEpoch(mine[i].at), flowRate))
			break
		}
	}
	delivered := map[string]int{}
	var lastDue time.Time
	for _, c := range mine {
		if c.at.Before(dues[c.task]) || c.at.Before(c.due) {
			bad = append(bad, fmt.Sprintf("%s early: at %s, due %s", c.fire, sinceEpoch(c.at), sinceEpoch(dues[c.task])))
		}
		delivered[c.task]++
		if inOrder && c.attempt == 1 {
			if c.due.Before(lastDue) {
				bad = append(bad, fmt.Sprintf("%s (due %s) after a fire due %s: not in due order", c.fire, sinceEpoch(c.due), sinceEpoch(lastDue)))
			}
			lastDue = c.due
		}
	}
	for _, id := range ids {
		if delivered[id] == 0 {
			bad = append(bad, id+" never delivered")
		}
	}
	return bad
}

// flowKey names the key of a test; flowIDs its tasks' ids ("{key}f-NN").
func flowIDs(key string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("{%s}f-%02d", key, i)
	}
	return out
}

var flowLimits = map[string]any{"rate": flowRate, "period_ms": flowPeriod.Milliseconds(), "parallelism": flowPar}

// TestFlowLimits: on one node, 45 one-shot tasks of one key due within
// 0.9 s (so they queue) and a retry among them, next to tasks of another
// key and tasks without one. The key's calls keep both limits, in due
// order, none early, all delivered; the task that failed once used one
// retry only (held fires spend none); the other tasks are not held back.
// GET /v1/flows/{key} shows the queue while it lasts.
func TestFlowLimits(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		fr := newFlowReceiver()
		tn := startNode(t, nil)
		addr := tn.tnet.newAddr()
		srv := servePipe(tn.tnet.pn.listen(addr), http.HandlerFunc(fr.serve))
		defer srv.close()
		cb := "http://" + addr + "/cb"
		if code := tn.do(t, "PUT", "/v1/flows/k1", flowLimits, nil); code != http.StatusCreated {
			t.Fatalf("PUT flow: %d", code)
		}
		ids := flowIDs("k1", 45)
		fr.fail[ids[7]] = 1 // fails once, then succeeds
		t0 := time.Now().Truncate(time.Second).Add(2 * time.Second)
		dues := map[string]time.Time{}
		for i, id := range ids {
			due := t0.Add(time.Duration(i) * 20 * time.Millisecond)
			dues[id] = due
			// Created in reverse so creation order says nothing.
			_ = i
		}
		for i := len(ids) - 1; i >= 0; i-- {
			id := ids[i]
			body := map[string]any{"id": id, "callback_url": cb, "due_at": dues[id].Format(time.RFC3339Nano), "flow_key": "k1", "max_retries": 1}
			if code := tn.do(t, "POST", "/v1/tasks", body, nil); code != http.StatusCreated {
				t.Fatalf("create %s: %d", id, code)
			}
		}
		// Neighbours: no key, and a key without limits, due at t0 too.
		for _, b := range []map[string]any{
			{"id": "free-00", "callback_url": cb, "due_at": t0.Format(time.RFC3339Nano)},
			{"callback_url": cb, "due_at": t0.Format(time.RFC3339Nano), "flow_key": "other"},
		} {
			if code := tn.do(t, "POST", "/v1/tasks", b, nil); code != http.StatusCreated {
				t.Fatalf("create neighbour: %d", code)
			}
		}
		sleepUntil(t0.Add(1500 * time.Millisecond))
		var st struct {
			InFlight  *int   `json:"in_flight"`
			RateCount *int   `json:"rate_count"`
			Waiting   *int   `json:"waiting"`
			Oldest    string `json:"oldest_waiting_due"`
			Rate      int    `json:"rate"`
		}
		if code := tn.do(t, "GET", "/v1/flows/k1", nil, &st); code != http.StatusOK || st.InFlight == nil || st.Waiting == nil {
			t.Fatalf("GET flow: %d %+v", code, st)
		}
		if *st.InFlight > flowPar || *st.RateCount > flowRate || *st.Waiting < 20 || st.Oldest == "" || st.Rate != flowRate {
			t.Errorf("flow state mid-run = in_flight %d, rate_count %d, waiting %d, oldest %q; want <= 2, <= 10, >= 20, set",
				*st.InFlight, *st.RateCount, *st.Waiting, st.Oldest)
		}
		sleepUntil(t0.Add(15 * time.Second))
		calls := fr.all()
		for _, b := range checkFlowCalls(calls, ids, dues, true) {
			t.Error(b)
		}
		// 46 calls of the key (one retry) take at least 4.5 s at 10 per
		// second; as soon as the limits allow, well within 7 s.
		var last time.Time
		for _, c := range calls {
			if slices.Contains(ids, c.task) && c.at.After(last) {
				last = c.at
			}
		}
		if d := last.Sub(t0); d < 4*time.Second || d > 7*time.Second {
			t.Errorf("the key's last call %v after t0; want 4-7 s (limits binding, no dawdling)", d)
		}
		for _, c := range calls {
			if !slices.Contains(ids, c.task) {
				if late := c.at.Sub(t0); late > tn.lateBound() {
					t.Errorf("%s (not of the key) %v late: held back by the key", c.fire, late)
				}
			}
			if c.task == ids[7] && c.attempt > 2 || c.task != ids[7] && c.attempt > 1 {
				t.Errorf("%s attempt %d: a held fire spent a retry", c.fire, c.attempt)
			}
		}
		for _, id := range ids {
			var got struct {
				Status  string `json:"status"`
				FlowKey string `json:"flow_key"`
			}
			if code := tn.do(t, "GET", "/v1/tasks/"+pathEscape(id), nil, &got); code != 200 || got.Status != "done" || got.FlowKey != "k1" {
				t.Errorf("%s: %d %+v, want done with flow_key k1", id, code, got)
			}
		}
		st.Oldest = ""
		if code := tn.do(t, "GET", "/v1/flows/k1", nil, &st); code != http.StatusOK || *st.InFlight != 0 || *st.Waiting != 0 || st.Oldest != "" {
			t.Errorf("flow state at the end: %d in_flight %d waiting %d oldest %q", code, *st.InFlight, *st.Waiting, st.Oldest)
		}
	})
}

// pathEscape percent-encodes an id's braces for a path.
func pathEscape(id string) string {
	out := make([]byte, 0, len(id)+8)
	for i := 0; i < len(id); i++ {
		switch id[i] {
		case '{':
			out = append(out, "%7B"...)
		case '}':
			out = append(out, "%7D"...)
		default:
			out = append(out, id[i])
		}
	}
	return string(out)
}

// flowClusterKey returns a key whose slot n2 owns and n3 follows in c's
// table.
func flowClusterKey(c *faultCluster) string {
	tb := c.table(0)
	for i := 0; ; i++ {
		k := "key" + strconv.Itoa(i)
		o, _ := tb.Owner(slots.Of(k))
		f, _ := tb.Follower(slots.Of(k))
		if o.Name == "n2" && f.Name == "n3" {
			return k
		}
	}
}

// runFlowCluster defines the key's limits and creates its tasks through
// n1 (which does not own the key), due from t0 every 20 ms, and returns
// the ids and due times.
func runFlowCluster(t *testing.T, c *faultCluster, key, cb string, n int, t0 time.Time) ([]string, map[string]time.Time) {
	// Through n1 first (then the next nodes: an internal call may be lost).
	if code, _ := c.send(0, http.MethodPut, "/v1/flows/"+key, flowLimits, http.StatusCreated, http.StatusOK); code/100 != 2 {
		t.Fatalf("PUT flow via n1: %d", code)
	}
	ids := flowIDs(key, n)
	dues := map[string]time.Time{}
	for i, id := range ids {
		dues[id] = t0.Add(time.Duration(i) * 20 * time.Millisecond)
		body := map[string]any{"callback_url": cb, "due_at": dues[id].Format(time.RFC3339Nano), "flow_key": key}
		if code, _ := c.send(0, http.MethodPut, "/v1/tasks/"+pathEscape(id), body, http.StatusCreated, http.StatusOK); code/100 != 2 {
			t.Fatalf("create %s via n1: %d", id, code)
		}
	}
	return ids, dues
}

// TestFaultFlowLimitsCluster: the same limits on a 3-node cluster, the
// flow and its tasks created through n1, which owns neither: the owner
// (n2) enforces them; GET /v1/flows lists the flow from any node.
func TestFaultFlowLimitsCluster(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c := newFaultCluster(t, 3, 41)
		fr := newFlowReceiver()
		const addr = "10.0.9.11:80"
		srv := servePipe(c.hnet.listen(addr), http.HandlerFunc(fr.serve))
		defer srv.close()
		key := flowClusterKey(c)
		t0 := time.Now().Truncate(time.Second).Add(3 * time.Second)
		ids, dues := runFlowCluster(t, c, key, "http://"+addr+"/cb", 40, t0)
		sleepUntil(t0.Add(1500 * time.Millisecond))
		// The state is the owner's, asked through n1.
		var st struct {
			Owner    string `json:"owner"`
			InFlight int    `json:"in_flight"`
			Waiting  int    `json:"waiting"`
		}
		if code, _ := c.send(0, http.MethodGet, "/v1/flows/"+key, nil, http.StatusOK); code != http.StatusOK {
			t.Errorf("GET flow via n1: %d", code)
		} else if code, data := c.get(0, "/v1/flows/"+key); code == http.StatusOK {
			if json.Unmarshal(data, &st) != nil || st.Owner != "n2" || st.InFlight > flowPar || st.Waiting < 10 {
				t.Errorf("GET flow via n1 mid-run: %s; want the owner n2's state, a queue", data)
			}
		}
		sleepUntil(t0.Add(12 * time.Second))
		calls := fr.all()
		for _, b := range checkFlowCalls(calls, ids, dues, true) {
			t.Error(b)
		}
		if t.Failed() {
			for _, cl := range calls {
				t.Logf("%s due %s at %s end %s", cl.fire, sinceEpoch(cl.due), sinceEpoch(cl.at), sinceEpoch(cl.end))
			}
		}
		for _, cl := range calls {
			if cl.node != "n2" {
				t.Errorf("%s sent by %s, want the owner n2", cl.fire, cl.node)
			}
		}
		var page struct {
			Flows []struct {
				Key   string `json:"key"`
				Owner string `json:"owner"`
			} `json:"flows"`
		}
		var code int
		var data []byte
		for range tries { // an internal call may be lost
			if code, data = c.request(2, http.MethodGet, "/v1/flows", nil); code == 200 {
				break
			}
		}
		if code != 200 || json.Unmarshal(data, &page) != nil || len(page.Flows) != 1 || page.Flows[0].Key != key || page.Flows[0].Owner != "n2" {
			t.Errorf("GET /v1/flows via n3: %d %s", code, data)
		}
		// A 404 on a later try means an earlier try's delete ran at the
		// owner and only its answer was lost on the lossy links.
		if code, n := c.send(2, http.MethodDelete, "/v1/flows/"+key, nil, http.StatusNoContent, http.StatusNotFound); code != http.StatusNoContent && (code != http.StatusNotFound || n == 1) {
			t.Errorf("DELETE flow via n3: %d after %d tries", code, n)
		}
		if code, _ := c.send(0, http.MethodGet, "/v1/flows/"+key, nil, http.StatusNotFound); code != http.StatusNotFound {
			t.Errorf("GET flow after its delete: %d, want 404", code)
		}
		c.close()
	})
}

// TestFaultFlowLimitsHandover: the key's owner n2 leaves while its
// queue is long; its follower n3 takes the slot over (the flow
// definition came with it) and the limits hold across: the rate window
// too (the new owner starts nothing of the key in its first period).
func TestFaultFlowLimitsHandover(t *testing.T) {
	t.Parallel()
	flowOwnerLost(t, 43, "10.0.9.12:80", 60, 2500*time.Millisecond, 20*time.Second,
		func(c *faultCluster) { c.stop(1) }) // n2 hands its slots over
}

// flowOwnerLost runs n tasks of one key on a 3-node cluster (seed) from
// t0 (the next whole second after 3 s), loses the key's owner n2 at
// t0+at (lose), and checks at t0+until that the limits held across
// (checkFlowCalls), every task delivered, and both n2 and its successor
// n3 sent some. The receiver listens on addr.
func flowOwnerLost(t *testing.T, seed uint64, addr string, n int, at, until time.Duration, lose func(*faultCluster)) {
	synctest.Test(t, func(t *testing.T) {
		c := newFaultCluster(t, 3, seed)
		fr := newFlowReceiver()
		srv := servePipe(c.hnet.listen(addr), http.HandlerFunc(fr.serve))
		defer srv.close()
		key := flowClusterKey(c)
		t0 := time.Now().Truncate(time.Second).Add(3 * time.Second)
		ids, dues := runFlowCluster(t, c, key, "http://"+addr+"/cb", n, t0)
		sleepUntil(t0.Add(at))
		lose(c)
		sleepUntil(t0.Add(until))
		calls := fr.all()
		for _, b := range checkFlowCalls(calls, ids, dues, false) {
			t.Error(b)
		}
		by := map[string]int{}
		for _, cl := range calls {
			by[cl.node]++
		}
		if by["n2"] == 0 || by["n3"] == 0 {
			t.Errorf("calls by node %v: want both the lost owner n2 and its successor n3", by)
		}
		c.close()
	})
}

// TestFlowRateSurvivesRestart: a node that restarts within a period of a
// key's rate window does not know what it started before; it starts
// nothing of the key until a period after it came up, so no window holds
// more than the rate (here 5 per 4 s), and the rest go then, none lost.
func TestFlowRateSurvivesRestart(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		fr := newFlowReceiver()
		fr.delay = func(string) time.Duration { return 10 * time.Millisecond }
		tn := startNode(t, nil)
		addr := tn.tnet.newAddr()
		srv := servePipe(tn.tnet.pn.listen(addr), http.HandlerFunc(fr.serve))
		defer srv.close()
		if code := tn.do(t, "PUT", "/v1/flows/r", map[string]any{"rate": 5, "period_ms": 4000}, nil); code != http.StatusCreated {
			t.Fatalf("PUT flow: %d", code)
		}
		t0 := time.Now().Truncate(time.Second).Add(2 * time.Second)
		ids := flowIDs("r", 12)
		for i, id := range ids {
			body := map[string]any{"id": id, "callback_url": "http://" + addr + "/cb", "flow_key": "r",
				"due_at": t0.Add(time.Duration(i) * time.Millisecond).Format(time.RFC3339Nano)}
			if code := tn.do(t, "POST", "/v1/tasks", body, nil); code != http.StatusCreated {
				t.Fatalf("create %s: %d", id, code)
			}
		}
		sleepUntil(t0.Add(500 * time.Millisecond))
		if n := len(fr.all()); n != 5 {
			t.Fatalf("%d calls before the restart, want the rate's 5", n)
		}
		tn.stop(t)
		up := time.Now()
		restartNode(t, tn.cfg)
		sleepUntil(t0.Add(20 * time.Second))
		calls := fr.all()
		slices.SortFunc(calls, func(a, b flowCall) int { return a.at.Compare(b.at) })
		delivered := map[string]bool{}
		for i, c := range calls {
			delivered[c.task] = true
			n := 0
			for _, d := range calls[i:] {
				if d.at.Sub(c.at) < 4*time.Second {
					n++
				}
			}
			if n > 5 {
				t.Errorf("%d calls in the 4 s from %s, limit 5", n, sinceEpoch(c.at))
			}
			if i >= 5 && c.at.Before(up.Add(4*time.Second)) {
				t.Errorf("%s at %s: within a period of the restart at %s", c.fire, sinceEpoch(c.at), sinceEpoch(up))
			}
		}
		if len(delivered) != len(ids) {
			t.Errorf("%d of %d tasks delivered", len(delivered), len(ids))
		}
	})
}

// TestFlowKeyFilters: GET /v1/executions?flow_key= lists the executions of
// the key's tasks only (not those of a task with the key's hash tag but no
// flow_key, nor another key's), GET /v1/tasks?flow_key= its tasks, and
// POST /v1/tasks:retry with a flow_key filter retries the key's failed
// tasks only.
func TestFlowKeyFilters(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		rcv := newReceiver(t)
		rcv.setRespond(func(h hit, _ int) int {
			if strings.Contains(h.TaskID, "fail") {
				return 500
			}
			return 200
		})
		tn := startNode(t, nil)
		due := time.Now().Add(time.Second).Format(time.RFC3339Nano)
		for _, c := range []struct{ id, key string }{
			{"{k}fail-1", "k"}, {"{k}fail-2", "k"}, {"{k}fail-3", "k"}, {"{k}ok-1", "k"},
			{"{j}fail-1", "j"}, {"{k}fail-nokey", ""},
		} {
			body := map[string]any{"id": c.id, "callback_url": rcv.url("/cb"), "due_at": due, "max_retries": 0}
			if c.key != "" {
				body["flow_key"] = c.key
			}
			if code := tn.do(t, "POST", "/v1/tasks", body, nil); code != 201 {
				t.Fatalf("create %s: %d", c.id, code)
			}
		}
		time.Sleep(5 * time.Second)
		tasksOf := func(path string, field string) []string {
			t.Helper()
			var page map[string]json.RawMessage
			if code := tn.do(t, "GET", path, nil, &page); code != 200 {
				t.Fatalf("GET %s: %d", path, code)
			}
			var list []map[string]any
			if err := json.Unmarshal(page[field], &list); err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, e := range list {
				id, _ := e["task_id"].(string)
				if id == "" {
					id, _ = e["id"].(string)
				}
				out = append(out, id)
			}
			slices.Sort(out)
			return out
		}
		if got := tasksOf("/v1/executions?flow_key=k&status=failed", "executions"); !slices.Equal(got, []string{"{k}fail-1", "{k}fail-2", "{k}fail-3"}) {
			t.Errorf("failed executions of k: %v", got)
		}
		if got := tasksOf("/v1/executions?flow_key=k", "executions"); len(got) != 4 {
			t.Errorf("executions of k: %v, want 4", got)
		}
		if got := tasksOf("/v1/tasks?flow_key=k", "tasks"); !slices.Equal(got, []string{"{k}fail-1", "{k}fail-2", "{k}fail-3", "{k}ok-1"}) {
			t.Errorf("tasks of k: %v", got)
		}
		var ans struct {
			Retried int `json:"retried"`
		}
		if code := tn.do(t, "POST", "/v1/tasks:retry", map[string]any{"status": "failed", "flow_key": "k"}, &ans); code != 200 || ans.Retried != 3 {
			t.Fatalf("retry flow_key k: %d %+v", code, ans)
		}
		time.Sleep(3 * time.Second)
		n := map[string]int{}
		for _, h := range rcv.hits() {
			n[h.TaskID]++
		}
		for id, want := range map[string]int{"{k}fail-1": 2, "{k}fail-2": 2, "{k}fail-3": 2, "{k}ok-1": 1, "{j}fail-1": 1, "{k}fail-nokey": 1} {
			if n[id] != want {
				t.Errorf("%s fired %d times, want %d", id, n[id], want)
			}
		}
	})
}

// TestFaultFlowLimitsFailover: the key's owner n2 crashes while its
// queue is long; n3 takes the slot over once n2 is declared dead, with
// the replicated flow definition, and holds the limits (its first period
// included); every task is delivered, the ones n2 had in flight repeated
// with their fire id.
func TestFaultFlowLimitsFailover(t *testing.T) {
	t.Parallel()
	flowOwnerLost(t, 47, "10.0.9.13:80", 50, 2*time.Second, 40*time.Second,
		func(c *faultCluster) { c.crash(1) })
}
