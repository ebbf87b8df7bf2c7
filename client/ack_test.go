package client

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"
)

// TestAckFields: the ACK phase's fields (API.md "The ACK phase") go to a
// node as ack_url, ack_delay_ms and ack_retries, and the answer's
// awaiting_ack status, next_ack_at, fail_reason and an execution's phase
// come back; an answered task round-trips through its JSON.
func TestAckFields(t *testing.T) {
	d, r := 2500*time.Millisecond, 0
	req := Task{ID: "a", CallbackURL: "https://x/cb", Delay: time.Second, AckURL: "https://x/ack", AckDelay: &d, AckRetries: &r}
	b, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if m["ack_url"] != "https://x/ack" || m["ack_delay_ms"] != float64(2500) || m["ack_retries"] != float64(0) {
		t.Errorf("request %s, want ack_url, ack_delay_ms 2500, ack_retries 0", b)
	}
	if pt, err := ParseTask(b); err != nil || pt.AckURL != "https://x/ack" || pt.AckDelay == nil || *pt.AckDelay != d || pt.AckRetries == nil || *pt.AckRetries != 0 {
		t.Errorf("ParseTask(%s) = %+v, %v", b, pt, err)
	}

	answer := `{"id":"a","callback_url":"https://x/cb","due_at":"2026-03-01T12:00:00Z","ack_url":"https://x/ack","ack_delay_ms":1000,"ack_retries":3,` +
		`"slot":1,"status":"awaiting_ack","next_ack_at":"2026-03-01T12:00:01Z","fire_count":1,"fail_count":0,"timeout_ms":5000,"max_retries":3}`
	var got Task
	if err := json.Unmarshal([]byte(answer), &got); err != nil {
		t.Fatal(err)
	}
	if got.Status != StatusAwaitingAck || got.AckURL != "https://x/ack" || got.AckDelay == nil || *got.AckDelay != time.Second ||
		got.AckRetries == nil || *got.AckRetries != 3 || !got.NextAckAt.Equal(time.Date(2026, 3, 1, 12, 0, 1, 0, time.UTC)) {
		t.Errorf("answer read as %+v", got)
	}
	got.Status, got.FailReason, got.NextAckAt = StatusFailed, FailReasonAck, time.Time{}
	b, _ = json.Marshal(got)
	var back Task
	if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back, got) {
		t.Errorf("round trip %s: %+v, want %+v", b, back, got)
	}

	var ej executionJSON
	if err := json.Unmarshal([]byte(`{"fire_id":"a:1","attempt":2,"status_code":503,"phase":"ack"}`), &ej); err != nil {
		t.Fatal(err)
	}
	e := ej.execution()
	if e.Phase != "ack" || e.FireID != "a:1" {
		t.Errorf("execution read as %+v", e)
	}
	if b, _ := json.Marshal(e); !json.Valid(b) || json.Unmarshal(b, &m) != nil || m["phase"] != "ack" {
		t.Errorf("execution rendered as %s, want phase ack", b)
	}
}
