package client_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chime-scheduler/chime/client"
	"github.com/chime-scheduler/chime/slots"
	"github.com/chime-scheduler/chime/storage"
)

// TestNodeFlowCalls: against a real node, PutFlow creates (201) and
// replaces (200) a flow, a replace removes the limits it leaves out,
// GetFlow answers the definition with its state, DeleteFlow removes it,
// and a missing flow is ErrNotFound as an *Error; a bad limit is the
// node's 400 naming its field.
func TestNodeFlowCalls(t *testing.T) {
	c := newNodeClient(t)
	ctx := t.Context()
	const key = "sdk-flow:calls"
	f, created, err := c.PutFlow(ctx, key, client.FlowLimits{Rate: 10, Period: time.Second, Parallelism: 2})
	if err != nil || !created {
		t.Fatalf("PutFlow = %+v, created %v, %v; want created", f, created, err)
	}
	want := client.FlowLimits{Rate: 10, Period: time.Second, Parallelism: 2}
	if f.Key != key || f.FlowLimits != want || f.Slot != slots.Of(key) || f.Owner != "sdk-test" ||
		f.CreatedAt.IsZero() || f.UpdatedAt.IsZero() || f.State != nil {
		t.Errorf("PutFlow = %+v, want %s with %+v in slot %d on sdk-test, no state", f, key, want, slots.Of(key))
	}

	r, created, err := c.PutFlow(ctx, key, client.FlowLimits{Parallelism: 5})
	if err != nil || created {
		t.Fatalf("PutFlow (replace) = %+v, created %v, %v; want replaced", r, created, err)
	}
	if r.FlowLimits != (client.FlowLimits{Parallelism: 5}) || !r.CreatedAt.Equal(f.CreatedAt) || r.UpdatedAt.Before(f.UpdatedAt) {
		t.Errorf("PutFlow (replace) = %+v, want parallelism 5 only, created at %s", r, f.CreatedAt)
	}

	g, err := c.GetFlow(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if g.Key != key || g.FlowLimits != r.FlowLimits || !g.UpdatedAt.Equal(r.UpdatedAt) || g.State == nil || *g.State != (client.FlowState{}) {
		t.Errorf("GetFlow = %+v (state %+v), want the replaced flow with an empty state", g, g.State)
	}

	_, _, err = c.PutFlow(ctx, key, client.FlowLimits{Rate: 5})
	var e *client.Error
	if !errors.As(err, &e) || !errors.Is(err, client.ErrInvalid) || e.Field != "period_ms" {
		t.Errorf("PutFlow without a period = %v, want the node's 400 on period_ms", err)
	}

	if err := c.DeleteFlow(ctx, key); err != nil {
		t.Fatal(err)
	}
	_, err = c.GetFlow(ctx, key)
	if !errors.Is(err, client.ErrNotFound) || !errors.As(err, &e) || e.Code != "not_found" {
		t.Errorf("GetFlow after DeleteFlow = %v, want ErrNotFound (not_found)", err)
	}
	if err := c.DeleteFlow(ctx, key); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("DeleteFlow of a missing flow = %v, want ErrNotFound", err)
	}
}

// TestNodeFlowState: GetFlow answers the limiter's state on the owner: a
// callback of the key in flight, a second fire held by parallelism 1
// (with its due time); when the first answers, the second goes.
func TestNodeFlowState(t *testing.T) {
	c := newNodeClient(t)
	ctx := t.Context()
	const key = "sdk-flow:state"
	release := make(chan struct{})
	var calls atomic.Int32
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer receiver.Close()
	unblock := sync.OnceFunc(func() { close(release) })
	defer unblock() // before receiver.Close, which waits for the callbacks
	if _, _, err := c.PutFlow(ctx, key, client.FlowLimits{Parallelism: 1}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.DeleteFlow(context.Background(), key) }) // t.Context() has ended by then
	timeout := 30 * time.Second
	for i := range 2 {
		_, err := c.Create(ctx, client.Task{CallbackURL: receiver.URL, FlowKey: key, Delay: time.Duration(i) * time.Millisecond, Timeout: timeout})
		if err != nil {
			t.Fatal(err)
		}
	}
	// In flight counts from the attempt's start: wait for the call too.
	st := waitFlowState(t, c, key, func(s client.FlowState) bool { return s.InFlight == 1 && s.Waiting == 1 && calls.Load() == 1 })
	if st.OldestWaitingDue.IsZero() || time.Since(st.OldestWaitingDue) > time.Minute || time.Until(st.OldestWaitingDue) > 0 {
		t.Errorf("state %+v, want the waiting fire's due time", st)
	}
	time.Sleep(50 * time.Millisecond)
	if n := calls.Load(); n != 1 {
		t.Fatalf("%d calls with parallelism 1 and the first in flight, want 1", n)
	}
	unblock()
	waitFlowState(t, c, key, func(s client.FlowState) bool { return s.InFlight == 0 && s.Waiting == 0 && calls.Load() == 2 })
}

// waitFlowState polls GetFlow(key) until ok holds of its state, for at
// most 10 s, and returns that state.
func waitFlowState(t *testing.T, c *client.Client, key string, ok func(client.FlowState) bool) client.FlowState {
	t.Helper()
	var last client.Flow
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		f, err := c.GetFlow(t.Context(), key)
		if err != nil {
			t.Fatal(err)
		}
		if f.State == nil {
			t.Fatalf("GetFlow(%s) = %+v without a state", key, f)
		}
		if last = f; ok(*f.State) {
			return *f.State
		}
	}
	t.Fatalf("GetFlow(%s): state %+v after 10 s", key, last.State)
	return client.FlowState{}
}

// TestNodeFlowsPaging: Flows and FlowsPage list a node's flows in (slot,
// key) order; with limit 1, three flows take three pages, each cursor
// going on after the last flow.
func TestNodeFlowsPaging(t *testing.T) {
	c, err := client.New([]string{startTestNode(t, nil)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	keys := []string{"page-a", "page-b", "page-c"}
	for i, k := range keys {
		if _, _, err := c.PutFlow(ctx, k, client.FlowLimits{Parallelism: i + 1}); err != nil {
			t.Fatal(err)
		}
	}
	slices.SortFunc(keys, func(a, b string) int {
		if sa, sb := slots.Of(a), slots.Of(b); sa != sb {
			return int(sa) - int(sb)
		}
		return strings.Compare(a, b)
	})
	var paged []string
	cursor := ""
	for pages := 1; ; pages++ {
		flows, next, err := c.FlowsPage(ctx, 1, cursor)
		if err != nil {
			t.Fatal(err)
		}
		if len(flows) > 1 || pages > 4 {
			t.Fatalf("page %d has %d flows (limit 1), next %q", pages, len(flows), next)
		}
		for _, f := range flows {
			if f.State != nil || f.Parallelism == 0 {
				t.Errorf("listed %+v: want its limits, no state", f)
			}
			paged = append(paged, f.Key)
		}
		if next == "" {
			break
		}
		cursor = next
	}
	if !slices.Equal(paged, keys) {
		t.Errorf("pages listed %q, want %q", paged, keys)
	}
	var all []string
	for f, err := range c.Flows(ctx) {
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, f.Key)
	}
	if !slices.Equal(all, keys) {
		t.Errorf("Flows listed %q, want %q", all, keys)
	}
	if _, _, err := c.FlowsPage(ctx, 1, "bogus"); !errors.Is(err, client.ErrInvalid) {
		t.Errorf("FlowsPage with a bad cursor = %v, want ErrInvalid", err)
	}
}

// TestFlowKeyRefusedLocally: a key the node would refuse is refused
// before any request, with the node's error (400 invalid_argument, field
// key).
func TestFlowKeyRefusedLocally(t *testing.T) {
	fc, c := newHalves(t)
	ctx := t.Context()
	for _, key := range []string{"", strings.Repeat("k", 129), "a/b", "{tag}", "a b", "ключ"} {
		errs := []error{
			func() error { _, _, err := c.PutFlow(ctx, key, client.FlowLimits{Parallelism: 1}); return err }(),
			func() error { _, err := c.GetFlow(ctx, key); return err }(),
			c.DeleteFlow(ctx, key),
		}
		for i, err := range errs {
			var e *client.Error
			if !errors.As(err, &e) || !errors.Is(err, client.ErrInvalid) || e.Status != 400 || e.Code != "invalid_argument" || e.Field != "key" {
				t.Errorf("call %d with key %q = %v, want 400 invalid_argument on key", i, key, err)
			}
		}
	}
	for i := range fc.nodes {
		if got := fc.nodes[i].taken(true); len(got) != 0 {
			t.Errorf("n%d got %q for invalid keys, want no request", i, got)
		}
	}
	if !client.ValidFlowKey(strings.Repeat("k", 128)) || !client.ValidFlowKey("a.b_c~d:e-F9") {
		t.Error("ValidFlowKey refuses a valid key")
	}
}

// TestFlowRoutingToTheOwner: with a slot map, PutFlow, GetFlow and
// DeleteFlow go to the owner of the key's slot (never through the seed),
// Flows to the seed.
func TestFlowRoutingToTheOwner(t *testing.T) {
	fc, c := newHalves(t)
	ctx := t.Context()
	for _, fn := range fc.nodes {
		fn.handle = func(w http.ResponseWriter, r *http.Request) {
			switch {
			case r.URL.Path == "/v1/flows":
				_, _ = w.Write([]byte(`{"flows":[],"next_cursor":""}`))
			case r.Method == http.MethodDelete:
				w.WriteHeader(http.StatusNoContent)
			default:
				w.WriteHeader(map[bool]int{true: http.StatusCreated, false: http.StatusOK}[r.Method == http.MethodPut])
				_, _ = w.Write([]byte(`{"key":"k","parallelism":1,"slot":1}`))
			}
		}
	}
	low, high := idIn(0, half), idIn(half, slots.Count) // no braces: a flow key's slot is slots.Of(key)
	for _, key := range []string{low, high} {
		if _, created, err := c.PutFlow(ctx, key, client.FlowLimits{Parallelism: 1}); err != nil || !created {
			t.Fatalf("PutFlow(%s) = created %v, %v", key, created, err)
		}
		if _, err := c.GetFlow(ctx, key); err != nil {
			t.Fatal(err)
		}
		if err := c.DeleteFlow(ctx, key); err != nil {
			t.Fatal(err)
		}
	}
	for _, err := range c.Flows(ctx) {
		if err != nil {
			t.Fatal(err)
		}
	}
	calls := func(key string) []string {
		return []string{"PUT /v1/flows/" + key, "GET /v1/flows/" + key, "DELETE /v1/flows/" + key}
	}
	if got, want := fc.nodes[0].taken(true), calls(low); !slices.Equal(got, want) {
		t.Errorf("n0 (owner of the low half) got %q, want %q", got, want)
	}
	if got, want := fc.nodes[1].taken(true), calls(high); !slices.Equal(got, want) {
		t.Errorf("n1 (owner of the high half) got %q, want %q", got, want)
	}
	if got, want := fc.nodes[2].taken(true), []string{"GET /v1/cluster/slots", "GET /v1/flows"}; !slices.Equal(got, want) {
		t.Errorf("the seed n2 got %q, want the slot map's load and the listing", got)
	}
}

// TestValidFlowKeyMatchesNode: the SDK's key check is the node's
// (storage.ValidFlowKey), byte for byte and at the length bounds.
func TestValidFlowKeyMatchesNode(t *testing.T) {
	keys := []string{"", strings.Repeat("k", 128), strings.Repeat("k", 129)}
	for b := range 256 {
		keys = append(keys, "a"+string([]byte{byte(b)})+"z")
	}
	for _, k := range keys {
		if got, want := client.ValidFlowKey(k), storage.ValidFlowKey(k); got != want {
			t.Errorf("ValidFlowKey(%q) = %v, the node says %v", k, got, want)
		}
	}
}
