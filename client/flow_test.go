package client

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"
)

// TestTaskFlowKeyJSON: Task.FlowKey goes to a node as flow_key and comes
// back from an answer; an answered task round-trips through its JSON.
func TestTaskFlowKeyJSON(t *testing.T) {
	req := Task{CallbackURL: "https://x/cb", Delay: time.Second, FlowKey: "tenant-7"}
	b, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil || m["flow_key"] != "tenant-7" {
		t.Errorf("request %s, want flow_key tenant-7", b)
	}
	answer := `{"id":"{tenant-7}01JNF5K8Q3V7X2M4R6T8W0Y2Z4","callback_url":"https://x/cb","due_at":"2026-03-01T12:00:00Z","flow_key":"tenant-7",` +
		`"slot":1,"status":"scheduled","fire_count":0,"fail_count":0,"timeout_ms":5000,"max_retries":3}`
	var got Task
	if err := json.Unmarshal([]byte(answer), &got); err != nil || got.FlowKey != "tenant-7" {
		t.Fatalf("answer read as %+v (%v)", got, err)
	}
	b, _ = json.Marshal(got)
	var back Task
	if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back, got) {
		t.Errorf("round trip %s: %+v, want %+v", b, back, got)
	}
}
