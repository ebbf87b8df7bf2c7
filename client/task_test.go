package client

import (
	"encoding/json"
	"testing"
	"time"
)

func TestTaskRequest(t *testing.T) {
	three, zero := 3, 0
	due := time.Date(2026, 3, 1, 12, 0, 0, 0, time.FixedZone("CET", 3600))
	tests := []struct {
		name string
		task Task
		want string
	}{
		{name: "no schedule: at once", task: Task{CallbackURL: "http://x/"},
			want: `{"callback_url":"http://x/","delay_ms":0}`},
		{name: "delay", task: Task{ID: "a", CallbackURL: "http://x/", Delay: 1500 * time.Millisecond},
			want: `{"id":"a","callback_url":"http://x/","delay_ms":1500}`},
		{name: "due at, in UTC", task: Task{CallbackURL: "http://x/", DueAt: due},
			want: `{"callback_url":"http://x/","due_at":"2026-03-01T11:00:00Z"}`},
		{name: "every, with the periodic fields", task: Task{CallbackURL: "http://x/", Every: time.Minute, StartAt: due,
			Misfire: MisfireSkip, MaxFails: 3, Timeout: 2 * time.Second, MaxRetries: &zero},
			want: `{"callback_url":"http://x/","every_ms":60000,"start_at":"2026-03-01T11:00:00Z","timeout_ms":2000,"max_retries":0,"misfire":"skip","max_fails":3}`},
		{name: "cron, paused, with payload, headers and labels", task: Task{CallbackURL: "http://x/", Cron: "0 9 * * *", Timezone: "Europe/Paris",
			Status: StatusPaused, Payload: json.RawMessage(`{"a":1}`), Headers: map[string]string{"X-A": "b"}, Labels: map[string]string{"team": "x"}, MaxRetries: &three},
			want: `{"callback_url":"http://x/","cron":"0 9 * * *","timezone":"Europe/Paris","payload":{"a":1},"headers":{"X-A":"b"},"max_retries":3,"labels":{"team":"x"},"status":"paused"}`},
		{name: "state fields are not sent", task: Task{CallbackURL: "http://x/", Delay: time.Second, Status: StatusDone, Slot: 5,
			Owner: "n1", FireCount: 2, CreatedAt: due, LastFire: &LastFire{FireID: "a:1"}},
			want: `{"callback_url":"http://x/","delay_ms":1000}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := json.Marshal(tt.task.request())
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != tt.want {
				t.Errorf("request(%+v) = %s, want %s", tt.task, b, tt.want)
			}
		})
	}
}

func TestTaskAnswer(t *testing.T) {
	body := `{"id":"a","callback_url":"http://x/","every_ms":60000,"start_at":"2026-03-01T11:00:00Z","timeout_ms":5000,"max_retries":3,
		"misfire":"fire_once","max_fails":0,"slot":42,"status":"paused","next_due_at":"2026-03-01T11:01:00.25Z",
		"created_at":"2026-03-01T10:00:00Z","updated_at":"2026-03-01T10:30:00Z","fire_count":7,"fail_count":1,"owner":"n2",
		"last_fire":{"fire_id":"a:8","due_at":"2026-03-01T11:00:00Z","finished_at":"2026-03-01T11:00:01Z","attempts":2,"status_code":500,"error":"","result":"oops"}}`
	var w taskJSON
	if err := json.Unmarshal([]byte(body), &w); err != nil {
		t.Fatal(err)
	}
	got := w.task()
	if got.ID != "a" || got.Every != time.Minute || got.Timeout != 5*time.Second || got.MaxRetries == nil || *got.MaxRetries != 3 ||
		got.Misfire != MisfireFireOnce || got.Slot != 42 || got.Status != StatusPaused || got.FireCount != 7 || got.FailCount != 1 ||
		got.Owner != "n2" || !got.NextDueAt.Equal(time.Date(2026, 3, 1, 11, 1, 0, 25e7, time.UTC)) || !got.StartAt.Equal(time.Date(2026, 3, 1, 11, 0, 0, 0, time.UTC)) {
		t.Errorf("task = %+v", got)
	}
	if lf := got.LastFire; lf == nil || lf.FireID != "a:8" || lf.Attempts != 2 || lf.StatusCode != 500 || lf.Result != "oops" ||
		!lf.FinishedAt.Equal(time.Date(2026, 3, 1, 11, 0, 1, 0, time.UTC)) {
		t.Errorf("last fire = %+v", got.LastFire)
	}
}
