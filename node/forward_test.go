package node

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chime-scheduler/chime/slots"
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
		{"too old", with(func(c *call) { c.at, c.wantReason = now.Add(-31*time.Second), rejStale })},
		{"from the future", with(func(c *call) { c.at, c.wantReason = now.Add(31*time.Second), rejStale })},
		{"unsigned", with(func(c *call) { c.signWith, c.wantReason = nil, rejUnsigned })},
		{"other secret", with(func(c *call) { c.signWith, c.wantReason = []byte("another secret of 32 bytes......"), rejBadMAC })},
		{"other path", with(func(c *call) { c.sendURI, c.wantReason = "/internal/v1/ctl?x=1", rejBadMAC })},
		{"addressed to another node", with(func(c *call) { c.to, c.wantReason = "n3", rejMisdirect })},
		{"from a non-member", with(func(c *call) { c.from, c.wantReason = "mallory", rejNotMember })},
		{"declared over the limit", with(func(c *call) { c.limit, c.wantReason = 2, rejTooLarge })},
		{"no declared length", with(func(c *call) { c.chunked, c.wantReason = true, rejLength })},
		{"another body of the same length", with(func(c *call) { c.sendBody, c.wantBodyGood = "abd", false })},
		{"sender renamed", with(func(c *call) {
			c.edit, c.wantReason = func(h http.Header) { h.Set(hdrFrom, "n2") }, rejBadMAC
		})},
		{"nonce changed", with(func(c *call) {
			c.edit, c.wantReason = func(h http.Header) { h.Set(hdrNonce, strings.Repeat("0", 32)) }, rejBadMAC
		})},
		{"body hash changed", with(func(c *call) {
			c.edit, c.wantReason = func(h http.Header) { h.Set(hdrBodySum, strings.Repeat("0", 64)) }, rejBadMAC
		})},
		{"short nonce", with(func(c *call) {
			c.edit, c.wantReason = func(h http.Header) { h.Set(hdrNonce, "00") }, rejMalformed
		})},
		{"no timestamp", with(func(c *call) {
			c.edit, c.wantReason = func(h http.Header) { h.Set(hdrAuth, "zz") }, rejMalformed
		})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := tt.c
			signer := &callAuth{self: c.from, secret: c.signWith}
			recv := &callAuth{self: "n2", secret: secret}
			r := httptest.NewRequest("POST", c.sendURI, strings.NewReader(c.sendBody))
			if c.chunked {
				r.ContentLength = -1
			}
			if c.signWith != nil {
				signer.sign(r.Header, "POST", c.uri, c.to, []byte(c.body), c.at)
			} else {
				r.Header.Set(hdrFrom, c.from)
			}
			if c.edit != nil {
				c.edit(r.Header)
			}
			from, reason := recv.check(r, c.limit, now, members)
			if reason != c.wantReason {
				t.Fatalf("check = %q, want %q", reason, c.wantReason)
			}
			if reason != "" {
				return
			}
			if from != c.from {
				t.Errorf("sender %q, want %q", from, c.from)
			}
			if got := recv.checkBody(r, []byte(c.sendBody)); got != c.wantBodyGood {
				t.Errorf("checkBody = %v, want %v", got, c.wantBodyGood)
			}
			// The same call again is a replay, to this node; to another
			// node it is misdirected.
			if _, reason := recv.check(r, c.limit, now.Add(time.Second), members); reason != rejReplayed {
				t.Errorf("the call again: %q, want %q", reason, rejReplayed)
			}
			other := &callAuth{self: "n1", secret: secret}
			if _, reason := other.check(r, c.limit, now, members); reason != rejMisdirect {
				t.Errorf("the call at another node: %q, want %q", reason, rejMisdirect)
			}
		})
	}
	// Insecure on purpose: nothing is checked but the limit.
	r := httptest.NewRequest("POST", "/internal/v1/ctl", strings.NewReader("abc"))
	r.Header.Set(hdrFrom, "anyone")
	if from, reason := (&callAuth{self: "n2"}).check(r, 10, now, members); from != "anyone" || reason != "" {
		t.Errorf("insecure check = %q, %q", from, reason)
	}
}

// TestNonceCacheRemembersTwoWindows: a nonce stays known for at least two

// skew windows after it was added, whenever the generations turn, and is

// forgotten two turns later.

func TestNonceCacheRemembersTwoWindows(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	for _, before := range []time.Duration{0, time.Second, authSkew, 2*authSkew - time.Millisecond} {
		var c nonceCache
		c.add("other", t0.Add(-before)) // the generation started before
		if c.add("a", t0) != nonceNew || c.add("a", t0) != nonceSeen {
			t.Fatal("a nonce is new once, then seen")
		}
		for d := time.Duration(0); d < 2*authSkew; d += 7 * time.Second {
			if got := c.add("a", t0.Add(d)); got != nonceSeen {
				t.Errorf("generation %v old: %v later: %v, want seen", before, d, got)
			}
		}
		c.add("b", t0.Add(4*authSkew)) // turns the generations
		if got := c.add("a", t0.Add(8*authSkew)); got != nonceNew {
			t.Errorf("generation %v old: two turns later: %v, want forgotten", before, got)
		}
	}
}

func TestOwnedSet(t *testing.T) {
	var a, b ownedSet
	for _, s := range []uint16{0, 1, 63, 64, 100, slots.Count - 1} {
		a.set(s)
	}
	b.set(1)
	b.set(100)
	if got := a.minus(&b); len(got) != 4 || got[0] != 0 || got[1] != 63 || got[2] != 64 || got[3] != slots.Count-1 {
		t.Errorf("minus = %v", got)
	}
	if a.count() != 6 || a.has(2) || !a.has(slots.Count-1) || a.has(slots.Count) || a.has(65535) {
		t.Errorf("count %d, has(2) %v, has(last) %v, has(Count) %v", a.count(), a.has(2), a.has(slots.Count-1), a.has(slots.Count))
	}
}
