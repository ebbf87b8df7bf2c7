package httpapi

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/chime-scheduler/chime/node/schedule"
	"github.com/chime-scheduler/chime/storage"
)

// Decode a request, validate it, store it as a task, render it: every field
// the client sent comes back with the same meaning.
func TestTaskResponseRoundTrip(t *testing.T) {
	tests := []struct {
		name     string
		body     string
		schedule string // the one schedule field the response must carry
	}{
		{"minimal delay", specBody(`"delay_ms":2500`), "delay_ms"},
		{"due_at with offset", `{"id":"t-1","callback_url":"https://x.example/cb?q=1","due_at":"2026-03-02T10:00:00.5+01:00","payload":{"n":[1,2.5,"x",null,true]},"headers":{"Authorization":"Bearer t"},"timeout_ms":1,"max_retries":0,"labels":{"env":"prod"}}`, "due_at"},
		{"every with everything", `{"id":"t-2","callback_url":"http://127.0.0.1:9/cb","every_ms":100,"start_at":"2026-03-01T13:00:00Z","payload":"text","timeout_ms":300000,"max_retries":100,"misfire":"fire_all","max_fails":7,"labels":{"a":"1","b/c":""}}`, "every_ms"},
		{"cron in a timezone", specBody(`"cron":"0 30 9 * * MON-FRI","timezone":"America/New_York","misfire":"skip","max_fails":0`), "cron"},
		{"cron descriptor with payload null", specBody(`"cron":"@every 90s","payload":null`), "cron"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id, spec, e := decodeValid(tt.body, DefaultLimits())
			if e != nil {
				t.Fatalf("validate(%s) error = %v", tt.body, e)
			}
			due, err := schedule.FirstDue(&spec, specNow)
			if err != nil {
				t.Fatal(err)
			}
			task := &storage.Task{ID: id, Slot: 42, Spec: spec, Status: storage.StatusScheduled, NextDue: due,
				CreatedAt: specNow.UnixNano(), UpdatedAt: specNow.UnixNano()}
			out, err := json.Marshal(taskResponse(task, "n1"))
			if err != nil {
				t.Fatalf("json.Marshal(taskResponse) error = %v", err)
			}
			var req, resp map[string]any
			if err := json.Unmarshal([]byte(tt.body), &req); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(out, &resp); err != nil {
				t.Fatal(err)
			}
			for k, want := range req {
				got, ok := resp[k]
				switch {
				case want == nil: // null = absent
					if ok {
						t.Errorf("response %s has %q = %v; the request gave null", out, k, got)
					}
				case k == "due_at" || k == "start_at":
					g, _ := time.Parse(time.RFC3339Nano, fmt.Sprint(got))
					w, err := time.Parse(time.RFC3339Nano, want.(string))
					if !ok || err != nil || !g.Equal(w) {
						t.Errorf("response %s has %q = %v, want the instant %v", out, k, got, want)
					}
				case !reflect.DeepEqual(got, want):
					t.Errorf("response %s has %q = %#v, want %#v", out, k, got, want)
				}
			}
			for _, k := range []string{"delay_ms", "due_at", "every_ms", "cron"} {
				if _, ok := resp[k]; ok != (k == tt.schedule) {
					t.Errorf("response %s: has %q = %v, want only %q among the schedule fields", out, k, ok, tt.schedule)
				}
			}
			wantState := map[string]any{
				"id": id, "slot": 42.0, "status": "scheduled", "next_due_at": formatInstant(due),
				"created_at": "2026-03-01T12:00:00Z", "updated_at": "2026-03-01T12:00:00Z",
				"fire_count": 0.0, "fail_count": 0.0, "owner": "n1",
			}
			if _, ok := req["timeout_ms"]; !ok {
				wantState["timeout_ms"] = 5000.0
			}
			if _, ok := req["max_retries"]; !ok {
				wantState["max_retries"] = 3.0
			}
			if spec.Kind != storage.KindOnce {
				if _, ok := req["misfire"]; !ok {
					wantState["misfire"] = "fire_once"
				}
				if _, ok := req["max_fails"]; !ok {
					wantState["max_fails"] = 0.0
				}
			}
			for k, want := range wantState {
				if got := resp[k]; !reflect.DeepEqual(got, want) {
					t.Errorf("response %s has %q = %#v, want %#v", out, k, got, want)
				}
			}
			if _, ok := resp["last_fire"]; ok {
				t.Errorf("response %s has last_fire for a task that never fired", out)
			}
		})
	}
}

func TestTaskResponseJSON(t *testing.T) {
	base := func(mod func(*storage.Task)) *storage.Task {
		tk := &storage.Task{
			ID: "t1", Slot: 9, Status: storage.StatusScheduled,
			Spec: storage.Spec{CallbackURL: "http://x/cb", Kind: storage.KindOnce, DelayMs: 1000, DueAt: 1772366401000000000,
				TimeoutMs: 5000, MaxRetries: 3, Misfire: storage.MisfireFireOnce},
			NextDue: 1772366401000000000, CreatedAt: 1772366400000000000, UpdatedAt: 1772366400000000001,
		}
		if mod != nil {
			mod(tk)
		}
		return tk
	}
	tests := []struct {
		name string
		task *storage.Task
		want string
	}{
		{
			name: "one-shot by delay",
			task: base(nil),
			want: `{"id":"t1","callback_url":"http://x/cb","delay_ms":1000,"timeout_ms":5000,"max_retries":3,"slot":9,"status":"scheduled","next_due_at":"2026-03-01T12:00:01Z","created_at":"2026-03-01T12:00:00Z","updated_at":"2026-03-01T12:00:00.000000001Z","fire_count":0,"fail_count":0,"owner":"n1"}`,
		},
		{
			name: "delay_ms 0 is rendered as due_at",
			task: base(func(tk *storage.Task) { tk.Spec.DelayMs = 0 }),
			want: `{"id":"t1","callback_url":"http://x/cb","due_at":"2026-03-01T12:00:01Z","timeout_ms":5000,"max_retries":3,"slot":9,"status":"scheduled","next_due_at":"2026-03-01T12:00:01Z","created_at":"2026-03-01T12:00:00Z","updated_at":"2026-03-01T12:00:00.000000001Z","fire_count":0,"fail_count":0,"owner":"n1"}`,
		},
		{
			name: "failed one-shot with last fire",
			task: base(func(tk *storage.Task) {
				tk.Status, tk.NextDue, tk.FailCount = storage.StatusFailed, 0, 1
				tk.LastFire = &storage.LastFire{FireID: "t1:1", DueAt: 1772366401000000000, FinishedAt: 1772366402123000000,
					Attempts: 4, StatusCode: 503, Error: "status 503", Result: []byte(`{"busy":true}`)}
			}),
			want: `{"id":"t1","callback_url":"http://x/cb","delay_ms":1000,"timeout_ms":5000,"max_retries":3,"slot":9,"status":"failed","created_at":"2026-03-01T12:00:00Z","updated_at":"2026-03-01T12:00:00.000000001Z","fire_count":0,"fail_count":1,"owner":"n1","last_fire":{"fire_id":"t1:1","due_at":"2026-03-01T12:00:01Z","finished_at":"2026-03-01T12:00:02.123Z","attempts":4,"status_code":503,"error":"status 503","result":"{\"busy\":true}"}}`,
		},
		{
			name: "paused cron with everything",
			task: base(func(tk *storage.Task) {
				tk.Status, tk.FireCount = storage.StatusPaused, 12
				tk.Spec = storage.Spec{CallbackURL: "https://x/cb", Kind: storage.KindCron, Cron: "@daily", Timezone: "Europe/Berlin",
					StartAt: 1772366400000000000, Payload: []byte(`{"a": [1, 2]}`), Headers: map[string]string{"X-B": "2", "X-A": "1"},
					TimeoutMs: 100, MaxRetries: 0, Misfire: storage.MisfireSkip, MaxFails: 5, Labels: map[string]string{"team": "core"}}
				tk.LastFire = &storage.LastFire{FireID: "t1:12", DueAt: 1772319600000000000, FinishedAt: 1772319600500000000,
					Attempts: 1, Error: "connection refused"}
			}),
			want: `{"id":"t1","callback_url":"https://x/cb","cron":"@daily","timezone":"Europe/Berlin","start_at":"2026-03-01T12:00:00Z","payload":{"a":[1,2]},"headers":{"X-A":"1","X-B":"2"},"timeout_ms":100,"max_retries":0,"misfire":"skip","max_fails":5,"labels":{"team":"core"},"max_catchup":100,"slot":9,"status":"paused","next_due_at":"2026-03-01T12:00:01Z","created_at":"2026-03-01T12:00:00Z","updated_at":"2026-03-01T12:00:00.000000001Z","fire_count":12,"fail_count":0,"skipped_fires":0,"owner":"n1","last_fire":{"fire_id":"t1:12","due_at":"2026-02-28T23:00:00Z","finished_at":"2026-02-28T23:00:00.5Z","attempts":1,"status_code":0,"error":"connection refused"}}`,
		},
		{
			name: "inactive every with invalid UTF-8 result",
			task: base(func(tk *storage.Task) {
				tk.Status, tk.NextDue, tk.FailCount = storage.StatusInactive, 0, 3
				tk.Spec = storage.Spec{CallbackURL: "http://x/cb", Kind: storage.KindEvery, EveryMs: 60000,
					TimeoutMs: 5000, MaxRetries: 3, Misfire: storage.MisfireFireOnce, MaxFails: 3}
				tk.LastFire = &storage.LastFire{FireID: "t1:3", Attempts: 1, StatusCode: 410, Result: []byte("gone \xff\xfe caf\xc3")}
			}),
			want: `{"id":"t1","callback_url":"http://x/cb","every_ms":60000,"timeout_ms":5000,"max_retries":3,"misfire":"fire_once","max_fails":3,"max_catchup":100,"slot":9,"status":"inactive","created_at":"2026-03-01T12:00:00Z","updated_at":"2026-03-01T12:00:00.000000001Z","fire_count":0,"fail_count":3,"skipped_fires":0,"owner":"n1","last_fire":{"fire_id":"t1:3","attempts":1,"status_code":410,"result":"gone ` + "\uFFFD" + ` caf` + "\uFFFD" + `"}}`, // runs of invalid bytes become one U+FFFD each
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := json.Marshal(taskResponse(tt.task, "n1"))
			if err != nil {
				t.Fatalf("json.Marshal(taskResponse) error = %v", err)
			}
			if string(out) != tt.want {
				t.Errorf("taskResponse JSON =\n%s\nwant\n%s", out, tt.want)
			}
		})
	}
}

func TestExecutionResponseJSON(t *testing.T) {
	tests := []struct {
		name string
		exec storage.Execution
		want string
	}{
		{
			name: "success",
			exec: storage.Execution{FireID: "t1:7", DueAt: 1772366400000000000, StartedAt: 1772366400001000000,
				FinishedAt: 1772366400020000000, Attempt: 2, StatusCode: 200, Result: []byte("ok")},
			want: `{"fire_id":"t1:7","due_at":"2026-03-01T12:00:00Z","started_at":"2026-03-01T12:00:00.001Z","finished_at":"2026-03-01T12:00:00.02Z","attempt":2,"status_code":200,"result":"ok"}`,
		},
		{
			name: "timeout without a response",
			exec: storage.Execution{FireID: "t1:8", DueAt: 1772366400000000000, StartedAt: 1772366400000000001,
				FinishedAt: 1772366405000000001, Attempt: 1, Error: "timeout after 5s"},
			want: `{"fire_id":"t1:8","due_at":"2026-03-01T12:00:00Z","started_at":"2026-03-01T12:00:00.000000001Z","finished_at":"2026-03-01T12:00:05.000000001Z","attempt":1,"status_code":0,"error":"timeout after 5s"}`,
		},
		{
			name: "not finished",
			exec: storage.Execution{FireID: "t1:9", DueAt: 1772366400000000000, StartedAt: 1772366400000000000, Attempt: 1},
			want: `{"fire_id":"t1:9","due_at":"2026-03-01T12:00:00Z","started_at":"2026-03-01T12:00:00Z","attempt":1,"status_code":0}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := json.Marshal(executionResponse(&tt.exec))
			if err != nil {
				t.Fatal(err)
			}
			if string(out) != tt.want {
				t.Errorf("executionResponse JSON =\n%s\nwant\n%s", out, tt.want)
			}
		})
	}
}

func TestFormatInstant(t *testing.T) {
	tests := []struct {
		ns   int64
		want string
	}{
		{0, ""},
		{1, "1970-01-01T00:00:00.000000001Z"},
		{1772366400000000000, "2026-03-01T12:00:00Z"},
		{1772366400120000000, "2026-03-01T12:00:00.12Z"},
		{1772366400123456789, "2026-03-01T12:00:00.123456789Z"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			got := formatInstant(tt.ns)
			if got != tt.want {
				t.Errorf("formatInstant(%d) = %q, want %q", tt.ns, got, tt.want)
			}
			if tt.ns != 0 {
				if back, err := time.Parse(time.RFC3339Nano, got); err != nil || back.UnixNano() != tt.ns {
					t.Errorf("time.Parse(formatInstant(%d)) = %v, %v; want the same instant", tt.ns, back, err)
				}
			}
		})
	}
}

func BenchmarkTaskResponse(b *testing.B) {
	id, spec, e := decodeValid(specBody(`"cron":"0 9 * * *","timezone":"Europe/Berlin","payload":{"order":12345},"headers":{"Authorization":"Bearer abc"},"labels":{"team":"core"}`), DefaultLimits())
	if e != nil {
		b.Fatal(e)
	}
	task := &storage.Task{ID: id, Slot: 1, Spec: spec, Status: storage.StatusScheduled, NextDue: 1772366400000000000,
		CreatedAt: 1772366400000000000, UpdatedAt: 1772366400000000000,
		LastFire: &storage.LastFire{FireID: id + ":1", DueAt: 1772366400000000000, FinishedAt: 1772366400000000000, Attempts: 1, StatusCode: 200, Result: []byte("ok")}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := json.Marshal(taskResponse(task, "n1")); err != nil {
			b.Fatal(err)
		}
	}
}
