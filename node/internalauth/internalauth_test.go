package internalauth

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestCallAuth: a call between nodes is checked from its headers alone,
// before its body is read, and accepted once: signed with the cluster
// secret for this node by a member, fresh, within the endpoint's limit,
// not seen before; then its body must be the one signed.
func TestCallAuth(t *testing.T) {
	secret := []byte("0123456789abcdef0123456789abcdef")
	now := time.Unix(1_800_000_000, 0)
	members := func(name string) bool { return name == "n1" || name == "n2" }
	type call struct {
		signWith     []byte
		from, to     string
		uri, body    string
		at           time.Time
		sendURI      string
		sendBody     string
		limit        int64
		edit         func(h http.Header)
		chunked      bool
		wantReason   string
		wantBodyGood bool
	}
	good := call{signWith: secret, from: "n1", to: "n2", uri: "/internal/v1/ctl", body: "abc", at: now,
		sendURI: "/internal/v1/ctl", sendBody: "abc", limit: 1 << 20, wantBodyGood: true}
	with := func(f func(c *call)) call { c := good; f(&c); return c }
	tests := []struct {
		name string
		c    call
	}{
		{"good", good},
		{"good, empty body", with(func(c *call) { c.body, c.sendBody = "", "" })},
		{"clock skew within bound", with(func(c *call) { c.at = now.Add(-29 * time.Second) })},
		{"too old", with(func(c *call) { c.at, c.wantReason = now.Add(-31*time.Second), RejStale })},
		{"from the future", with(func(c *call) { c.at, c.wantReason = now.Add(31*time.Second), RejStale })},
		{"unsigned", with(func(c *call) { c.signWith, c.wantReason = nil, RejUnsigned })},
		{"other secret", with(func(c *call) { c.signWith, c.wantReason = []byte("another secret of 32 bytes......"), RejBadMAC })},
		{"other path", with(func(c *call) { c.sendURI, c.wantReason = "/internal/v1/ctl?x=1", RejBadMAC })},
		{"addressed to another node", with(func(c *call) { c.to, c.wantReason = "n3", RejMisdirect })},
		{"from a non-member", with(func(c *call) { c.from, c.wantReason = "mallory", RejNotMember })},
		{"declared over the limit", with(func(c *call) { c.limit, c.wantReason = 2, RejTooLarge })},
		{"no declared length", with(func(c *call) { c.chunked, c.wantReason = true, RejLength })},
		{"another body of the same length", with(func(c *call) { c.sendBody, c.wantBodyGood = "abd", false })},
		{"sender renamed", with(func(c *call) {
			c.edit, c.wantReason = func(h http.Header) { h.Set(HdrFrom, "n2") }, RejBadMAC
		})},
		{"nonce changed", with(func(c *call) {
			c.edit, c.wantReason = func(h http.Header) { h.Set(HdrNonce, strings.Repeat("0", 32)) }, RejBadMAC
		})},
		{"body hash changed", with(func(c *call) {
			c.edit, c.wantReason = func(h http.Header) { h.Set(HdrBodySum, strings.Repeat("0", 64)) }, RejBadMAC
		})},
		{"short nonce", with(func(c *call) {
			c.edit, c.wantReason = func(h http.Header) { h.Set(HdrNonce, "00") }, RejMalformed
		})},
		{"no timestamp", with(func(c *call) {
			c.edit, c.wantReason = func(h http.Header) { h.Set(HdrAuth, "zz") }, RejMalformed
		})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := tt.c
			signer := &Auth{self: c.from, secret: c.signWith}
			recv := &Auth{self: "n2", secret: secret}
			r := httptest.NewRequest("POST", c.sendURI, strings.NewReader(c.sendBody))
			if c.chunked {
				r.ContentLength = -1
			}
			if c.signWith != nil {
				signer.Sign(r.Header, "POST", c.uri, c.to, []byte(c.body), c.at)
			} else {
				r.Header.Set(HdrFrom, c.from)
			}
			if c.edit != nil {
				c.edit(r.Header)
			}
			from, reason := recv.Check(r, c.limit, now, members)
			if reason != c.wantReason {
				t.Fatalf("check = %q, want %q", reason, c.wantReason)
			}
			if reason != "" {
				return
			}
			if from != c.from {
				t.Errorf("sender %q, want %q", from, c.from)
			}
			if got := recv.CheckBody(r, []byte(c.sendBody)); got != c.wantBodyGood {
				t.Errorf("CheckBody = %v, want %v", got, c.wantBodyGood)
			}
			// The same call again is a replay, to this node; to another
			// node it is misdirected.
			if _, reason := recv.Check(r, c.limit, now.Add(time.Second), members); reason != RejReplayed {
				t.Errorf("the call again: %q, want %q", reason, RejReplayed)
			}
			other := &Auth{self: "n1", secret: secret}
			if _, reason := other.Check(r, c.limit, now, members); reason != RejMisdirect {
				t.Errorf("the call at another node: %q, want %q", reason, RejMisdirect)
			}
		})
	}
	// Insecure on purpose: nothing is checked but the limit.
	r := httptest.NewRequest("POST", "/internal/v1/ctl", strings.NewReader("abc"))
	r.Header.Set(HdrFrom, "anyone")
	if from, reason := (&Auth{self: "n2"}).Check(r, 10, now, members); from != "anyone" || reason != "" {
		t.Errorf("insecure check = %q, %q", from, reason)
	}
}

// TestNonceCacheRemembersTwoWindows: a nonce stays known for at least two
// skew windows after it was added, whenever the generations turn, and is
// forgotten two turns later.
func TestNonceCacheRemembersTwoWindows(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	for _, before := range []time.Duration{0, time.Second, Skew, 2*Skew - time.Millisecond} {
		var c nonceCache
		c.add("other", t0.Add(-before)) // the generation started before
		if c.add("a", t0) != nonceNew || c.add("a", t0) != nonceSeen {
			t.Fatal("a nonce is new once, then seen")
		}
		for d := time.Duration(0); d < 2*Skew; d += 7 * time.Second {
			if got := c.add("a", t0.Add(d)); got != nonceSeen {
				t.Errorf("generation %v old: %v later: %v, want seen", before, d, got)
			}
		}
		c.add("b", t0.Add(4*Skew)) // turns the generations
		if got := c.add("a", t0.Add(8*Skew)); got != nonceNew {
			t.Errorf("generation %v old: two turns later: %v, want forgotten", before, got)
		}
	}
}
