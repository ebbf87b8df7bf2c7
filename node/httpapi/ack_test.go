package httpapi

import (
	"strings"
	"testing"

	"github.com/chime-scheduler/chime/storage"
)

// TestValidateAck: ack_url, ack_delay_ms and ack_retries (API.md "The ACK
// phase") on a one-shot task only, bounded, with their defaults.
func TestValidateAck(t *testing.T) {
	const ack = `"ack_url":"https://example.com/ack"`
	bad := []struct {
		name, body, field string
	}{
		{"ack_url on every_ms", specBody(`"every_ms":1000,` + ack), "ack_url"},
		{"ack_url on cron", specBody(`"cron":"@daily",` + ack), "ack_url"},
		{"ack_url ftp", specBody(`"delay_ms":1,"ack_url":"ftp://x/ack"`), "ack_url"},
		{"ack_url relative", specBody(`"delay_ms":1,"ack_url":"/ack"`), "ack_url"},
		{"ack_url no host", specBody(`"delay_ms":1,"ack_url":"http:///ack"`), "ack_url"},
		{"ack_url too long", specBody(`"delay_ms":1,"ack_url":"https://x/` + strings.Repeat("a", 4096) + `"`), "ack_url"},
		{"ack_url a number", specBody(`"delay_ms":1,"ack_url":3`), "ack_url"},
		{"ack_delay_ms without ack_url", specBody(`"delay_ms":1,"ack_delay_ms":5`), "ack_delay_ms"},
		{"ack_retries without ack_url", specBody(`"delay_ms":1,"ack_retries":5`), "ack_retries"},
		{"ack_delay_ms negative", specBody(`"delay_ms":1,` + ack + `,"ack_delay_ms":-1`), "ack_delay_ms"},
		{"ack_delay_ms over 1h", specBody(`"delay_ms":1,` + ack + `,"ack_delay_ms":3600001`), "ack_delay_ms"},
		{"ack_delay_ms a string", specBody(`"delay_ms":1,` + ack + `,"ack_delay_ms":"1"`), "ack_delay_ms"},
		{"ack_retries negative", specBody(`"delay_ms":1,` + ack + `,"ack_retries":-1`), "ack_retries"},
		{"ack_retries over 100", specBody(`"delay_ms":1,` + ack + `,"ack_retries":101`), "ack_retries"},
		{"ack_retries twice", specBody(`"delay_ms":1,` + ack + `,"ack_retries":1,"ack_retries":2`), "ack_retries"},
		{"chain child ack_url on a periodic child", specBody(`"delay_ms":1,"on_success":[{"callback_url":"http://x/c","every_ms":1000,` + ack + `}]`), "on_success[0].ack_url"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			_, spec, e := decodeValid(tt.body, Limits{})
			if e == nil {
				t.Fatalf("validate(%s) = %+v, nil; want an error on %q", tt.body, spec, tt.field)
			}
			if e.Code != CodeInvalidArgument || e.Field != tt.field || e.HTTPStatus() != 400 {
				t.Errorf("validate(%s) = %q (code %s, field %q); want invalid_argument on %q", tt.body, e.Message, e.Code, e.Field, tt.field)
			}
		})
	}
	good := []struct {
		body    string
		url     string
		delay   int64
		retries int
	}{
		{specBody(`"delay_ms":1`), "", 0, 0},
		{specBody(`"delay_ms":1,"ack_url":""`), "", 0, 0},
		{specBody(`"delay_ms":1,` + ack), "https://example.com/ack", 1000, 3},
		{specBody(`"due_at":"2026-03-02T00:00:00Z",` + ack + `,"ack_delay_ms":0,"ack_retries":0`), "https://example.com/ack", 0, 0},
		{specBody(`"delay_ms":1,` + ack + `,"ack_delay_ms":3600000,"ack_retries":100`), "https://example.com/ack", 3600000, 100},
		{specBody(`"delay_ms":1,` + ack + `,"ack_delay_ms":null,"ack_retries":null`), "https://example.com/ack", 1000, 3},
	}
	for _, tt := range good {
		_, spec, e := decodeValid(tt.body, Limits{})
		if e != nil {
			t.Fatalf("validate(%s): %v", tt.body, e)
		}
		if spec.AckURL != tt.url || spec.AckDelayMs != tt.delay || spec.AckRetries != tt.retries {
			t.Errorf("validate(%s): ack %q %d %d, want %q %d %d", tt.body, spec.AckURL, spec.AckDelayMs, spec.AckRetries, tt.url, tt.delay, tt.retries)
		}
	}
}

// TestAckJSON: the task answer echoes the ACK fields with their effective
// values, the next ACK attempt while awaiting it and the failure reason;
// an ACK attempt's execution has phase "ack".
func TestAckJSON(t *testing.T) {
	tk := &storage.Task{ID: "a", Status: storage.StatusAwaitingAck, Spec: storage.Spec{Kind: storage.KindOnce, DueAt: 1,
		AckURL: "https://example.com/ack", AckDelayMs: 0, AckRetries: 3},
		Inflight: &storage.Inflight{Seq: 1, Due: 1, NextAttemptAt: specNow.UnixNano(), Ack: true}}
	r := taskResponse(tk, "n1")
	if r.Status != "awaiting_ack" || r.AckURL != "https://example.com/ack" || r.AckDelayMs == nil || *r.AckDelayMs != 0 ||
		r.AckRetries == nil || *r.AckRetries != 3 || r.NextAckAt != "2026-03-01T12:00:00Z" || r.FailReason != "" {
		t.Errorf("taskResponse = %+v", r)
	}
	tk.Status, tk.Inflight, tk.FailReason = storage.StatusFailed, nil, "ack"
	if r := taskResponse(tk, "n1"); r.FailReason != "ack" || r.NextAckAt != "" {
		t.Errorf("failed by its ack: %+v", r)
	}
	if r := taskResponse(&storage.Task{ID: "b", Status: storage.StatusDone, Spec: storage.Spec{Kind: storage.KindOnce}}, ""); r.AckURL != "" || r.AckDelayMs != nil || r.AckRetries != nil {
		t.Errorf("no ack phase: %+v", r)
	}
	if e := executionResponse(&storage.Execution{FireID: "a:1", Ack: true}); e.Phase != "ack" {
		t.Errorf("ACK execution phase %q", e.Phase)
	}
	if e := executionResponse(&storage.Execution{FireID: "a:1"}); e.Phase != "" {
		t.Errorf("callback execution phase %q", e.Phase)
	}
	if s, ok := storage.ParseStatus("awaiting_ack"); !ok || s != storage.StatusAwaitingAck {
		t.Errorf("ParseStatus(awaiting_ack) = %v, %v", s, ok)
	}
}

// TestAckURLRedacted: a read-token answer masks the ack_url's userinfo
// like the callback_url's.
func TestAckURLRedacted(t *testing.T) {
	ts := []TaskResponse{{CallbackURL: "https://u:p@x/cb", AckURL: "https://u:p@x/ack"}, {CallbackURL: "https://x/cb"}}
	redactTasks(ts)
	if ts[0].CallbackURL != "https://***@x/cb" || ts[0].AckURL != "https://***@x/ack" || ts[1].AckURL != "" {
		t.Errorf("redacted %+v", ts)
	}
}
