package node

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"testing/synctest"
)

// The callback address policy through a node; the policy's own tables
// are in package dispatch (policy_test.go).

// TestSSRFFireDeniedNoRetry runs the guard through a node: literal and
// metadata callback URLs are refused at create time (400 naming
// callback_url); a name that resolves to a denied address is accepted but
// its fire fails at once — one execution, "callback address denied", no
// retries though max_retries is 3 — and the receiver sees nothing; the
// refusals are counted in chime_callbacks_denied_total.
func TestSSRFFireDeniedNoRetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rcv := newReceiver(t)
		port := netip.MustParseAddrPort(rcv.addr).Port()
		tn := startNode(t, func(c *Config) {
			c.Dispatch.CallbackDenyPrivate = true
			c.lookup = func(_ context.Context, host string) ([]netip.Addr, error) {
				if host == "hooks.test" {
					return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
				}
				return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
			}
		})
		for _, u := range []string{rcv.url("/cb"), "http://169.254.169.254/latest/meta-data/", "http://metadata.google.internal/", "http://localhost:9/"} {
			var eb errorBody
			code := tn.do(t, "POST", "/v1/tasks", map[string]any{"callback_url": u, "delay_ms": 0}, &eb)
			if code != http.StatusBadRequest || eb.Error.Code != CodeInvalidArgument || eb.Error.Field != "callback_url" || !strings.Contains(eb.Error.Message, "callback address denied") {
				t.Errorf("create with %s: %d %+v, want 400 invalid_argument on callback_url", u, code, eb.Error)
			}
		}
		var br struct {
			Results []struct {
				Status int    `json:"status"`
				Error  *Error `json:"error"`
			} `json:"results"`
		}
		batch := map[string]any{"tasks": []map[string]any{{"callback_url": "http://[fe80::1]/", "delay_ms": 0}}}
		if code := tn.do(t, "POST", "/v1/tasks:batch", batch, &br); code != http.StatusOK || len(br.Results) != 1 ||
			br.Results[0].Status != http.StatusBadRequest || br.Results[0].Error == nil || br.Results[0].Error.Field != "callback_url" {
			t.Errorf("batch with a link-local callback: %d %+v, want its item refused 400 on callback_url", code, br)
		}

		url := fmt.Sprintf("http://hooks.test:%d/cb", port)
		if code := tn.do(t, "POST", "/v1/tasks", map[string]any{"id": "denied", "callback_url": url, "delay_ms": 0, "max_retries": 3}, nil); code != http.StatusCreated {
			t.Fatalf("create with a name: %d, want 201 (checked when dialed)", code)
		}
		task := waitTask(t, tn, "denied", func(task map[string]any) bool { return task["status"] == "failed" })
		lf, _ := task["last_fire"].(map[string]any)
		wantErr := fmt.Sprintf("callback address denied: 127.0.0.1:%d (loopback address (--callback-deny-private))", port)
		if lf == nil || lf["error"] != wantErr || lf["attempts"] != float64(1) || lf["status_code"] != float64(0) {
			t.Errorf("last_fire = %v, want one attempt failing with %q", lf, wantErr)
		}
		var ex struct {
			Executions []map[string]any `json:"executions"`
		}
		tn.do(t, "GET", "/v1/tasks/denied/executions", nil, &ex)
		if len(ex.Executions) != 1 || ex.Executions[0]["error"] != wantErr || ex.Executions[0]["attempt"] != float64(1) {
			t.Errorf("executions = %v, want exactly one with %q", ex.Executions, wantErr)
		}
		if hs := rcv.hits(); len(hs) != 0 {
			t.Errorf("the receiver got %d callbacks", len(hs))
		}

		body := tn.metricsText(t)
		for _, want := range []string{`chime_callbacks_denied_total{stage="create"} 5`, `chime_callbacks_denied_total{stage="dial"} 1`} {
			if !strings.Contains(body, want) {
				t.Errorf("/metrics lacks %q", want)
			}
		}
	})
}
