package client_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chime-scheduler/chime/client"
	"github.com/chime-scheduler/chime/node"
)

// newNodeClient is a client of the shared test node.
func newNodeClient(t *testing.T, opts ...client.Option) *client.Client {
	t.Helper()
	c, err := client.New([]string{nodeAddr}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestNodeTaskCalls(t *testing.T) {
	c := newNodeClient(t)
	ctx := t.Context()
	retries := 0
	in := client.Task{ID: "calls-1", CallbackURL: "http://" + nodeAddr + "/v1/test/callback", Every: time.Hour, MaxRetries: &retries,
		Labels: map[string]string{"team": "a"}, Payload: json.RawMessage(`{"n":1}`)}
	got, created, err := c.Put(ctx, in)
	if err != nil || !created {
		t.Fatalf("Put = %v, %v, want created", created, err)
	}
	if got.ID != in.ID || got.Every != time.Hour || got.MaxRetries == nil || *got.MaxRetries != 0 || got.Status != client.StatusScheduled ||
		got.Owner != "sdk-test" || got.NextDueAt.IsZero() || got.CreatedAt.IsZero() || string(got.Payload) != `{"n":1}` || got.Labels["team"] != "a" {
		t.Errorf("Put answered %+v", got)
	}
	if _, created, err := c.Put(ctx, in); err != nil || created {
		t.Errorf("second Put = %v, %v, want replaced", created, err)
	}
	if got, err := c.Get(ctx, in.ID); err != nil || got.ID != in.ID || got.Misfire != client.MisfireFireOnce {
		t.Errorf("Get = %+v, %v", got, err)
	}
	if got, err := c.Pause(ctx, in.ID); err != nil || got.Status != client.StatusPaused {
		t.Errorf("Pause = %s, %v", got.Status, err)
	}
	if got, err := c.Resume(ctx, in.ID); err != nil || got.Status != client.StatusScheduled {
		t.Errorf("Resume = %s, %v", got.Status, err)
	}
	if _, err := c.Trigger(ctx, in.ID); err != nil {
		t.Errorf("Trigger: %v", err)
	}
	// The trigger fires the node's own test receiver: wait for the record.
	var exs []client.Execution
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if exs, err = c.Executions(ctx, in.ID, 10); err != nil || len(exs) > 0 {
			break
		}
	}
	if err != nil || len(exs) == 0 || !strings.HasPrefix(exs[0].FireID, in.ID+":") || exs[0].Attempt != 1 || exs[0].StatusCode != 200 {
		t.Errorf("Executions = %+v, %v, want the trigger's attempt", exs, err)
	}
	if err := c.Delete(ctx, in.ID); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, in.ID); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("second Delete = %v, want ErrNotFound", err)
	}
	if _, err := c.Executions(ctx, in.ID, 1); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("Executions of a deleted task = %v, want ErrNotFound", err)
	}
	// A create without an id gets one.
	got, err = c.Create(ctx, client.Task{CallbackURL: "https://example.com/hook", Delay: time.Hour})
	if err != nil || len(got.ID) != 26 {
		t.Errorf("Create without id = %q, %v, want a ULID", got.ID, err)
	}
	_ = c.Delete(ctx, got.ID)
}

func TestNodeErrors(t *testing.T) {
	c := newNodeClient(t)
	ctx := t.Context()
	_, err := c.Create(ctx, client.Task{ID: "errors-1", CallbackURL: "https://example.com/hook", Cron: "not cron"})
	var e *client.Error
	if !errors.As(err, &e) || !errors.Is(err, client.ErrInvalid) || e.Status != 400 || e.Code != "invalid_argument" || e.Field != "cron" || e.Message == "" {
		t.Errorf("invalid cron: %#v, want a 400 on cron", err)
	}
	if _, err := c.Get(ctx, "no-such-task"); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("Get of nothing = %v, want ErrNotFound", err)
	}
	if _, err := c.Get(ctx, "bad id with spaces"); !errors.Is(err, client.ErrInvalid) {
		t.Errorf("Get of a bad id = %v, want ErrInvalid", err)
	}
	in := client.Task{ID: "errors-2", CallbackURL: "https://example.com/hook", Delay: time.Hour}
	if _, err := c.Create(ctx, in); err != nil {
		t.Fatal(err)
	}
	defer c.Delete(ctx, in.ID)
	if _, err := c.Create(ctx, in); !errors.Is(err, client.ErrConflict) {
		t.Errorf("second Create = %v, want ErrConflict", err)
	}
	if _, _, err := c.Put(ctx, client.Task{CallbackURL: "https://example.com/hook"}); !errors.Is(err, client.ErrInvalid) {
		t.Errorf("Put without id = %v, want ErrInvalid", err)
	}
}

func TestNodeTokens(t *testing.T) {
	addr := startTestNode(t, func(c *node.Config) { c.APIToken, c.ReadToken = "full-token", "read-token" })
	ctx := t.Context()
	for _, tt := range []struct {
		token string
		want  error
	}{{"", client.ErrUnauthorized}, {"wrong", client.ErrUnauthorized}, {"read-token", client.ErrUnauthorized}, {"full-token", nil}} {
		c, err := client.New([]string{addr}, client.WithToken(tt.token))
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Create(ctx, client.Task{ID: "tokens-" + tt.token, CallbackURL: "https://example.com/hook", Delay: time.Hour})
		if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
			t.Errorf("token %q: Create = %v, want %v", tt.token, err, tt.want)
		}
	}
	c, _ := client.New([]string{addr}, client.WithToken("read-token"))
	if _, err := c.Get(ctx, "tokens-full-token"); err != nil {
		t.Errorf("the read token reads: %v", err)
	}
}

func TestNodeListPaging(t *testing.T) {
	c := newNodeClient(t)
	ctx := t.Context()
	var want []string
	var tasks []client.Task
	for i := range 25 {
		id := "paging-" + string(rune('a'+i))
		want = append(want, id)
		tasks = append(tasks, client.Task{ID: id, CallbackURL: "https://example.com/hook", Delay: time.Hour,
			Labels: map[string]string{"test": "paging"}, Status: []client.Status{client.StatusScheduled, client.StatusPaused}[i%2]})
	}
	res, err := c.CreateBatch(ctx, tasks)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Status != http.StatusCreated || r.ID != want[i] {
			t.Fatalf("batch result %d = %+v", i, r)
		}
	}
	t.Cleanup(func() {
		for _, id := range want {
			_ = c.Delete(ctx, id)
		}
	})
	var got []string
	for tk, err := range c.List(ctx, client.ListFilter{LabelKey: "test", LabelValue: "paging", PageSize: 4}) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, tk.ID)
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("List = %q, want %q", got, want)
	}
	paused := 0
	for tk, err := range c.List(ctx, client.ListFilter{Status: client.StatusPaused, LabelKey: "test", LabelValue: "paging", PageSize: 3}) {
		if err != nil || tk.Status != client.StatusPaused {
			t.Fatalf("List paused: %+v, %v", tk, err)
		}
		paused++
	}
	if paused != 12 {
		t.Errorf("List paused: %d tasks, want 12", paused)
	}
	// Stopping early stops.
	n := 0
	for range c.List(ctx, client.ListFilter{LabelKey: "test", LabelValue: "paging", PageSize: 2}) {
		if n++; n == 3 {
			break
		}
	}
	// A bad filter is one error.
	errs := 0
	for _, err := range c.List(ctx, client.ListFilter{Status: "nope"}) {
		if !errors.Is(err, client.ErrInvalid) {
			t.Errorf("List with a bad status: %v, want ErrInvalid", err)
		}
		errs++
	}
	if errs != 1 {
		t.Errorf("List with a bad status yielded %d times, want 1", errs)
	}
}
