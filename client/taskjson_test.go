package client_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/chime-scheduler/chime/client"
)

// sameJSON reports whether a and b hold the same JSON value.
func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatalf("%s: %v", a, err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return reflect.DeepEqual(x, y)
}

func TestTaskJSONRoundTrip(t *testing.T) {
	// A task answer as a node renders it (node/httpapi/taskjson.go).
	answer := `{"id":"t1","callback_url":"http://127.0.0.1:9/cb","cron":"*/5 * * * *","timezone":"Europe/Berlin",
		"payload":{"a":[1,2]},"headers":{"X-A":"1"},"timeout_ms":5000,"max_retries":0,"misfire":"skip","max_fails":3,
		"end_at":"2030-02-01T00:00:00Z","max_runs":10,"runs":4,
		"labels":{"team":"ops"},"slot":0,"status":"paused","next_due_at":"2030-01-01T00:05:00Z",
		"created_at":"2029-12-31T00:00:00Z","updated_at":"2029-12-31T00:00:00.5Z","fire_count":0,"fail_count":1,"owner":"n2",
		"last_fire":{"fire_id":"t1:7","due_at":"2030-01-01T00:00:00Z","finished_at":"2030-01-01T00:00:01Z",
		"attempts":2,"status_code":500,"error":"boom","result":"oops"}}`
	var task client.Task
	if err := json.Unmarshal([]byte(answer), &task); err != nil {
		t.Fatal(err)
	}
	if task.Status != client.StatusPaused || task.Timeout != 5*time.Second || task.LastFire == nil || task.FailCount != 1 ||
		task.MaxRuns != 10 || task.Runs != 4 || !task.EndAt.Equal(time.Date(2030, 2, 1, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("decoded %+v", task)
	}
	out, err := json.Marshal(task)
	if err != nil {
		t.Fatal(err)
	}
	if !sameJSON(t, out, []byte(answer)) {
		t.Errorf("Marshal = %s\nwant the answer %s", out, answer)
	}

	// runs 0 is answered with max_runs, and rendered so.
	out, err = json.Marshal(client.Task{CallbackURL: "http://h/cb", Every: time.Second, MaxRuns: 2, Status: client.StatusScheduled})
	if err != nil || !strings.Contains(string(out), `"runs":0`) {
		t.Errorf("Marshal with max_runs = %s, %v; want runs 0", out, err)
	}

	// Without a status, a task renders as its request.
	out, err = json.Marshal(client.Task{CallbackURL: "http://h/cb", Delay: 0})
	if err != nil || !sameJSON(t, out, []byte(`{"callback_url":"http://h/cb","delay_ms":0}`)) {
		t.Errorf("Marshal of a request = %s, %v", out, err)
	}

	ex := client.Execution{FireID: "t1:1", DueAt: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC), Attempt: 1, StatusCode: 200, Result: "ok"}
	out, err = json.Marshal(ex)
	if err != nil || !sameJSON(t, out, []byte(`{"fire_id":"t1:1","due_at":"2030-01-01T00:00:00Z","attempt":1,"status_code":200,"result":"ok"}`)) {
		t.Errorf("Marshal of an execution = %s, %v", out, err)
	}
}

func TestParseTask(t *testing.T) {
	task, err := client.ParseTask([]byte(`{"id":"a","callback_url":"http://h/cb","due_at":"2030-01-01T01:00:00+01:00",
		"payload":"hi","status":"paused","slot":7,"fire_count":3}`))
	if err != nil {
		t.Fatal(err)
	}
	if !task.DueAt.Equal(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)) || task.Status != client.StatusPaused || string(task.Payload) != `"hi"` {
		t.Errorf("ParseTask = %+v", task)
	}
	task, err = client.ParseTask([]byte(`{"callback_url":"http://h/cb","every_ms":1000,"end_at":"2030-01-02T01:00:00+01:00","max_runs":3}`))
	if err != nil || !task.EndAt.Equal(time.Date(2030, 1, 2, 0, 0, 0, 0, time.UTC)) || task.MaxRuns != 3 {
		t.Errorf("ParseTask with end_at and max_runs = %+v, %v", task, err)
	}
	if task, err := client.ParseTask([]byte(`{"callback_url":"http://h/cb","delay_ms":0,"every_ms":null}`)); err != nil || task.Delay != 0 {
		t.Errorf("ParseTask of a delay 0 = %+v, %v", task, err)
	}
	for _, tt := range []struct{ body, want string }{
		{`{"callback_url":"x","dealy_ms":5}`, `unknown field "dealy_ms"`},
		{`{"callback_url":"x"}`, "no schedule"},
		{`{"callback_url":"x","every_ms":null}`, "no schedule"},
		{`{"callback_url":"x","delay_ms":5,"cron":"@daily"}`, "only one schedule may be given, got delay_ms and cron"},
		{`{"callback_url":"x","every_ms":0}`, "every_ms: must be positive"},
		{`{"callback_url":"x","cron":" "}`, "cron: empty"},
		{`{"callback_url":"x","due_at":""}`, "due_at"},
		{`{"callback_url":"x","every_ms":1000,"start_at":"soon"}`, "start_at"},
		{`{"callback_url":"x","every_ms":1000,"end_at":"never"}`, "end_at"},
		{`{"callback_url":"x","every_ms":1000,"max_runs":0}`, "max_runs: must be at least 1"},
		{`{"callback_url":"x","every_ms":1000,"max_runs":1.5}`, "max_runs"},
		{`{"callback_url":"x","delay_ms":"5s"}`, "delay_ms"},
		{`{"callback_url":"x","delay_ms":5} {}`, "more than one JSON value"},
		{`[1]`, "cannot unmarshal"},
	} {
		_, err := client.ParseTask([]byte(tt.body))
		if !errors.Is(err, client.ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseTask(%s) = %v, want ErrInvalid saying %q", tt.body, err, tt.want)
		}
	}
}
