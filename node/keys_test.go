package node

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/chime-scheduler/chime/node/keyring"
	"github.com/chime-scheduler/chime/ring/gossip"
)

// TestKeysAPI drives /v1/cluster/keys on one-member clusters of the fault
// harness (fake time): every bad request is refused with the error shape
// and changes nothing; a rotation ends with only the new key. (A 3-process
// rotation is in cmd/chime, TestGossipKeyRotation.)
func TestKeysAPI(t *testing.T) {
	oldKey := []byte("0123456789abcdef0123456789abcdef")
	newKey := []byte("NEWNEWNEWNEWNEWNEWNEWNEWNEWNEW32")
	b64 := base64.StdEncoding.EncodeToString
	oldFP, newFP := gossip.KeyFingerprint(oldKey), gossip.KeyFingerprint(newKey)

	standalone := startNode(t, nil)
	if code := standalone.do(t, "GET", "/v1/cluster/keys", nil, nil); code != http.StatusBadRequest {
		t.Errorf("keys on a standalone node = %d, want 400", code)
	}
	synctest.Test(t, func(t *testing.T) {
		open := newFaultCluster(t, 1, 41)
		if code, body := open.request(0, "GET", "/v1/cluster/keys", nil); code != http.StatusConflict {
			t.Errorf("keys without a gossip key = %d %s, want 409", code, body)
		}
		open.close()
	})

	synctest.Test(t, func(t *testing.T) {
		c := newFaultCluster(t, 1, 42, func(cfg *Config) { cfg.Cluster.Gossip.SecretKey = oldKey })
		// do sends a request to n1 and decodes its JSON answer into out.
		do := func(method, body string, out any) int {
			t.Helper()
			var in any
			if body != "" {
				in = body
			}
			code, data := c.request(0, method, "/v1/cluster/keys", in)
			if err := json.Unmarshal(data, out); err != nil {
				t.Fatalf("%s /v1/cluster/keys %s: %d %q: %v", method, body, code, data, err)
			}
			return code
		}
		list := func() string {
			t.Helper()
			var a keyring.Answer
			if code := do("GET", "", &a); code != 200 || a.Answered != 1 {
				t.Fatalf("list = %d %+v", code, a)
			}
			var b strings.Builder
			for _, k := range a.Keys {
				b.WriteString(k.Fingerprint + map[int]string{0: " ", 1: "* "}[k.Primary])
			}
			return b.String()
		}
		if got := list(); got != oldFP+"* " {
			t.Fatalf("keys = %q, want the old key as primary", got)
		}
		bad := []struct {
			name  string
			body  string
			code  int
			field string
		}{
			{"not JSON", `{"op":`, 400, "body"},
			{"unknown op", `{"op":"drop","key":"` + b64(newKey) + `"}`, 400, "op"},
			{"list by POST", `{"op":"list"}`, 400, "op"},
			{"no key", `{"op":"install"}`, 400, "key"},
			{"16-byte key", `{"op":"install","key":"` + b64(newKey[:16]) + `"}`, 400, "key"},
			{"not base64", `{"op":"install","key":"!!!"}`, 400, "key"},
			{"over 4 KiB", `{"op":"install","key":"` + strings.Repeat("A", 5000) + `"}`, 413, ""},
			{"use a key not installed", `{"op":"use","key":"` + b64(newKey) + `"}`, 409, "key"},
			{"remove the key in use", `{"op":"remove","key":"` + b64(oldKey) + `"}`, 409, "key"},
		}
		for _, tt := range bad {
			var e struct{ Error Error }
			if code := do("POST", tt.body, &e); code != tt.code || e.Error.Field != tt.field || e.Error.Message == "" {
				t.Errorf("%s: %d %+v, want %d field %q", tt.name, code, e.Error, tt.code, tt.field)
			}
			if got := list(); got != oldFP+"* " {
				t.Fatalf("%s changed the keyring: %q", tt.name, got)
			}
		}
		for _, step := range []struct{ op, want string }{
			{"install", oldFP + "* " + newFP + " "},
			{"install", oldFP + "* " + newFP + " "}, // again: no change
			{"use", newFP + "* " + oldFP + " "},
			{"remove", newFP + "* "},
		} {
			key := newKey
			if step.op == "remove" {
				key = oldKey
			}
			var a keyring.Answer
			body := `{"op":"` + step.op + `","key":"` + b64(key) + `"}`
			if code := do("POST", body, &a); code != 200 || len(a.Failed) > 0 {
				t.Fatalf("%s = %d %+v", step.op, code, a)
			}
			if got := list(); got != step.want {
				t.Errorf("after %s: keys %q, want %q", step.op, got, step.want)
			}
		}
		c.close()
	})
}
