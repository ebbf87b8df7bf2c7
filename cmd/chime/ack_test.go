package main

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// TestImportAck: an exported one-shot task's ack_url, ack_delay_ms and
// ack_retries go into the import's create request; a task awaiting its
// ACK is not re-created (its callback was delivered).
func TestImportAck(t *testing.T) {
	line := `{"id":"a","callback_url":"http://x/","due_at":"2030-01-01T00:00:00Z","status":"scheduled","next_due_at":"2030-01-01T00:00:00Z",` +
		`"ack_url":"http://x/ack","ack_delay_ms":0,"ack_retries":7}`
	if out := importRequestJSON(t, line); !strings.Contains(out, `"ack_url":"http://x/ack","ack_delay_ms":0,"ack_retries":7`) {
		t.Errorf("import request %s lacks the ACK fields", out)
	}
	var r exportRecord
	if err := json.Unmarshal([]byte(line), &r); err != nil {
		t.Fatal(err)
	}
	r.Status = "awaiting_ack"
	if _, err := importRequestOf(&r); !errors.Is(err, errFinished) {
		t.Errorf("awaiting_ack: %v, want errFinished", err)
	}
}

// TestCreateAckFlags: --ack-url, --ack-delay and --ack-retries become the
// request's ack_url, ack_delay_ms and ack_retries (absent when not given).
func TestCreateAckFlags(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--url", cb, "--delay", "1s", "--ack-url", "http://x/ack"},
			`{"callback_url":"` + cb + `","delay_ms":1000,"ack_url":"http://x/ack"}`},
		{[]string{"--url", cb, "--delay", "1s", "--ack-url", "http://x/ack", "--ack-delay", "2m", "--ack-retries", "0"},
			`{"callback_url":"` + cb + `","delay_ms":1000,"ack_url":"http://x/ack","ack_delay_ms":120000,"ack_retries":0}`},
		{[]string{"--url", cb, "--delay", "1s", "--ack-url", "http://x/ack", "--ack-delay", "0"},
			`{"callback_url":"` + cb + `","delay_ms":1000,"ack_url":"http://x/ack","ack_delay_ms":0}`},
	} {
		f := newFakeNode(t, constant(201, taskJSON))
		res := runCLI(t, f, "", nil, append([]string{"create"}, tt.args...)...)
		if res.err != nil {
			t.Fatalf("create %v: %v", tt.args, res.err)
		}
		assertJSON(t, f.onlyRequest(t).Body, tt.want)
	}
}

// TestTaskTableAck: `task get` shows the ACK phase's rows when the task
// has them.
func TestTaskTableAck(t *testing.T) {
	answer := `{"id":"a","callback_url":"http://x/cb","due_at":"2030-01-01T00:00:00Z","ack_url":"http://x/ack","ack_delay_ms":1000,"ack_retries":3,` +
		`"slot":1,"status":"awaiting_ack","next_ack_at":"2030-01-01T00:00:01Z","fire_count":1,"fail_count":0,"timeout_ms":5000,"max_retries":3}`
	f := newFakeNode(t, constant(200, answer))
	res := runCLI(t, f, "", nil, "get", "a")
	if res.err != nil {
		t.Fatal(res.err)
	}
	for key, want := range map[string]string{"status": "awaiting_ack", "ack url": "http://x/ack", "next ack": "2030-01-01T00:00:01Z"} {
		if got := fieldOf(t, res.stdout, key); got != want {
			t.Errorf("row %q = %q, want %q:\n%s", key, got, want, res.stdout)
		}
	}
	if strings.Contains(res.stdout, "fail reason") {
		t.Errorf("a fail reason row without one:\n%s", res.stdout)
	}
}
