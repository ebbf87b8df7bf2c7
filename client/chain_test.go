package client

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestTaskChainsJSON: a task's chains go out as on_success/on_failure in
// the request shape, payload_from_parent with them; an answer's chains,
// parent link and pending children come back, and an execution's children.
func TestTaskChainsJSON(t *testing.T) {
	task := Task{ID: "p", CallbackURL: "https://x/p", Delay: time.Second,
		OnSuccess: []Task{{CallbackURL: "https://x/a", Delay: 5 * time.Second, PayloadFromParent: true}},
		OnFailure: []Task{{ID: "alert", CallbackURL: "https://x/b", OnSuccess: []Task{{CallbackURL: "https://x/c"}}}},
	}
	out, err := json.Marshal(task)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`"on_success":[{"callback_url":"https://x/a","delay_ms":5000,"payload_from_parent":true}]`,
		`"on_failure":[{"id":"alert","callback_url":"https://x/b","delay_ms":0,"on_success":[{"callback_url":"https://x/c","delay_ms":0}]}]`,
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("request %s lacks %s", out, want)
		}
	}
	answer := `{"id":"p.1.0","callback_url":"https://x/a","delay_ms":5000,"status":"done","slot":1,"timeout_ms":5000,"max_retries":3,` +
		`"fire_count":1,"fail_count":0,"parent_id":"p","parent_fire_id":"p:1","pending_children":["p.1.0.1.0"],` +
		`"on_success":[{"callback_url":"https://x/d","delay_ms":0}]}`
	var got Task
	if err := json.Unmarshal([]byte(answer), &got); err != nil {
		t.Fatal(err)
	}
	if got.ParentID != "p" || got.ParentFireID != "p:1" || !slices.Equal(got.PendingChildren, []string{"p.1.0.1.0"}) ||
		len(got.OnSuccess) != 1 || got.OnSuccess[0].CallbackURL != "https://x/d" {
		t.Errorf("answer read as %+v", got)
	}
	var w executionJSON
	if err := json.Unmarshal([]byte(`{"fire_id":"p:1","attempt":1,"status_code":200,"children":["p.1.0"]}`), &w); err != nil {
		t.Fatal(err)
	}
	if ex := w.execution(); !slices.Equal(ex.Children, []string{"p.1.0"}) {
		t.Errorf("execution children %v, want [p.1.0]", ex.Children)
	}
}
