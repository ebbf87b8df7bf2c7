package client

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestTaskResultCallbacksJSON: SuccessURL and FailureURL go out as
// success_url and failure_url, come back from an answer with
// pending_notices, and survive MarshalJSON of an answered task and
// ParseTask of a request.
func TestTaskResultCallbacksJSON(t *testing.T) {
	task := Task{ID: "p", CallbackURL: "https://x/p", Delay: time.Second, SuccessURL: "https://x/ok", FailureURL: "https://x/ko"}
	out, err := json.Marshal(task)
	if err != nil {
		t.Fatal(err)
	}
	if want := `"success_url":"https://x/ok","failure_url":"https://x/ko"`; !strings.Contains(string(out), want) {
		t.Errorf("request %s lacks %s", out, want)
	}
	parsed, err := ParseTask(out)
	if err != nil || parsed.SuccessURL != task.SuccessURL || parsed.FailureURL != task.FailureURL {
		t.Errorf("ParseTask(%s) = %+v, %v", out, parsed, err)
	}
	answer := `{"id":"p","callback_url":"https://x/p","delay_ms":1000,"status":"done","slot":1,"timeout_ms":5000,"max_retries":3,` +
		`"fire_count":1,"fail_count":0,"success_url":"https://x/ok","failure_url":"https://x/ko","pending_notices":2}`
	var got Task
	if err := json.Unmarshal([]byte(answer), &got); err != nil {
		t.Fatal(err)
	}
	if got.SuccessURL != "https://x/ok" || got.FailureURL != "https://x/ko" || got.PendingNotices != 2 {
		t.Errorf("answer read as %+v", got)
	}
	again, _ := json.Marshal(got)
	if want := `"pending_notices":2`; !strings.Contains(string(again), want) {
		t.Errorf("answered task rendered %s, lacks %s", again, want)
	}
}
