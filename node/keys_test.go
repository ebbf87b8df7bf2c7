package node

import (
	"encoding/base64"
	"net/http"
	"strings"
	"testing"

	"github.com/chime-scheduler/chime/node/keyring"
	"github.com/chime-scheduler/chime/ring/gossip"
	"github.com/chime-scheduler/chime/ring/gossip/memnet"
)

// TestKeysAPI drives /v1/cluster/keys on a one-member cluster: every bad
// request is refused with the error shape and changes nothing; a rotation
// ends with only the new key. (A 3-process rotation is in cmd/chime,
// TestGossipKeyRotation.)
func TestKeysAPI(t *testing.T) {
	oldKey := []byte("0123456789abcdef0123456789abcdef")
	newKey := []byte("NEWNEWNEWNEWNEWNEWNEWNEWNEWNEW32")
	b64 := base64.StdEncoding.EncodeToString
	oldFP, newFP := gossip.KeyFingerprint(oldKey), gossip.KeyFingerprint(newKey)

	standalone := startNode(t, nil)
	if code := standalone.do(t, "GET", "/v1/cluster/keys", nil, nil); code != http.StatusBadRequest {
		t.Errorf("keys on a standalone node = %d, want 400", code)
	}
	open := clusterNode(t, memnet.New(1), "open", "127.0.0.1:7001")
	if code := open.do(t, "GET", "/v1/cluster/keys", nil, nil); code != http.StatusConflict {
		t.Errorf("keys without a gossip key = %d, want 409", code)
	}

	tn := clusterNodeWith(t, memnet.New(2), "n1", "127.0.0.1:7001", func(c *Config) { c.Cluster.Gossip.SecretKey = oldKey })
	list := func() string {
		t.Helper()
		var a keyring.Answer
		if code := tn.do(t, "GET", "/v1/cluster/keys", nil, &a); code != 200 || a.Answered != 1 {
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
		if code := tn.do(t, "POST", "/v1/cluster/keys", tt.body, &e); code != tt.code || e.Error.Field != tt.field || e.Error.Message == "" {
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
		if code := tn.do(t, "POST", "/v1/cluster/keys", map[string]string{"op": step.op, "key": b64(key)}, &a); code != 200 || len(a.Failed) > 0 {
			t.Fatalf("%s = %d %+v", step.op, code, a)
		}
		if got := list(); got != step.want {
			t.Errorf("after %s: keys %q, want %q", step.op, got, step.want)
		}
	}
}
