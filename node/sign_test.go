package node

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/chime-scheduler/chime/client/signature"
)

// Callback signing through a node; signing itself is tested in package
// dispatch (signature_test.go), the format and verification in package
// signature.

// refMAC is the signature computed independently of the dispatcher's code.
func refMAC(key []byte, ts, fireID string, body []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(ts + "." + fireID + "." + string(body)))
	return hex.EncodeToString(m.Sum(nil))
}

// TestSignNodeConfigValidate: the node's Config.Validate reports what
// DispatchConfig.Validate does about keys and rules.
func TestSignNodeConfigValidate(t *testing.T) {
	long := []byte("0123456789abcdef")
	tests := []struct {
		name    string
		cfg     DispatchConfig
		wantErr string
	}{
		{name: "none", cfg: DispatchConfig{}},
		{name: "16 bytes", cfg: DispatchConfig{SigningKey: long, SigningKeyNext: long}},
		{name: "short", cfg: DispatchConfig{SigningKey: long[:15]}, wantErr: "signing key has 15 bytes: it needs at least 16"},
		{name: "short next", cfg: DispatchConfig{SigningKey: long, SigningKeyNext: []byte("x")}, wantErr: "next signing key has 1 bytes"},
		{name: "next alone", cfg: DispatchConfig{SigningKeyNext: long}, wantErr: "needs a current signing key"},
		{name: "bad rule", cfg: DispatchConfig{CallbackDeny: []string{"10.0.0.0/99"}}, wantErr: `callback deny rule "10.0.0.0/99"`},
	}
	for _, tt := range tests {
		for _, err := range []error{func() error {
			c := DefaultConfig()
			c.Dispatch = DispatchConfig{Concurrency: 1, PerHost: 1, MaxQueued: 1,
				SigningKey: tt.cfg.SigningKey, SigningKeyNext: tt.cfg.SigningKeyNext, CallbackDeny: tt.cfg.CallbackDeny}
			return c.Validate()
		}()} {
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("%s: %v", tt.name, err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("%s: err = %v, want %q", tt.name, err, tt.wantErr)
			}
		}
	}
}

// TestSignTestReceiver checks that the built-in receiver checks the
// signature of a real fire and reports forged, missing and unkeyed ones.
func TestSignTestReceiver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		key := []byte("test-receiver-key-0123456789")
		tn := startNode(t, func(c *Config) { c.Dispatch.SigningKey = key })
		tn.do(t, "POST", "/v1/tasks", map[string]any{"id": "signed", "callback_url": tn.url("/v1/test/callback"), "delay_ms": 0, "payload": map[string]int{"n": 1}}, nil)
		task := waitTask(t, tn, "signed", func(task map[string]any) bool { return task["status"] == "done" })
		lf, _ := task["last_fire"].(map[string]any)
		if lf == nil || !strings.Contains(fmt.Sprint(lf["result"]), `"signature":"valid"`) {
			t.Errorf("last_fire = %v, want the receiver's signature verdict valid", lf)
		}

		var ans map[string]string
		ts := strconv.FormatInt(time.Now().Unix(), 10)
		body := `{"n":1}`
		for _, tt := range []struct {
			name, sig, want string
		}{
			{"missing", "", string(signature.Missing)},
			{"forged", "t=" + ts + ",v1=" + refMAC([]byte("not-the-key-0123456789"), ts, "x:1", []byte(body)), string(signature.Invalid)},
			{"malformed", "t=,v1=", string(signature.Invalid)},
			{"hand-made valid", "t=" + ts + ",v1=" + refMAC(key, ts, "x:1", []byte(body)), string(signature.Valid)},
		} {
			hdr := []string{"X-Chime-Fire-Id", "x:1"}
			if tt.sig != "" {
				hdr = append(hdr, "X-Chime-Signature", tt.sig)
			}
			ans = nil
			if code := tn.do(t, "POST", "/v1/test/callback", body, &ans, hdr...); code != 200 || ans["signature"] != tt.want {
				t.Errorf("%s: %d %v, want signature %q", tt.name, code, ans, tt.want)
			}
		}

		plain := startNode(t, nil)
		ans = nil
		if code := plain.do(t, "POST", "/v1/test/callback", body, &ans, "X-Chime-Fire-Id", "x:1", "X-Chime-Signature", "t="+ts+",v1="+refMAC(key, ts, "x:1", []byte(body))); code != 200 || ans["signature"] != string(signature.NoKey) {
			t.Errorf("node without a key: %d %v, want signature %q", code, ans, string(signature.NoKey))
		}
	})
}
