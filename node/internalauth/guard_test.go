package internalauth

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chime-scheduler/chime/node/httpapi"
)

// TestGuardRead: an internal endpoint answers only a signed call from a
// member (or one that left within the lease), with a verified client
// certificate under mutual TLS, and reads no body over its limit nor one
// other than signed; every refusal is counted and answered in the API's
// error shape with its status.
func TestGuardRead(t *testing.T) {
	secret := []byte("0123456789abcdef0123456789abcdef")
	t0 := time.Unix(1_800_000_000, 0)
	type setup struct {
		from      string
		body      string
		limit     int64
		mutual    bool
		hasCert   bool
		leftAgo   time.Duration // > 0: the sender left this long ago
		swapBody  string        // sent instead of the signed body
		wantFrom  string
		wantCode  int
		wantLabel string
	}
	good := setup{from: "n1", body: `{"x":1}`, limit: 1 << 10, wantFrom: "n1"}
	with := func(f func(s *setup)) setup { s := good; f(&s); return s }
	tests := []struct {
		name string
		s    setup
	}{
		{"good", good},
		{"empty body", with(func(s *setup) { s.body = "" })},
		{"itself", with(func(s *setup) { s.from, s.wantFrom = "n2", "n2" })},
		{"left within the lease", with(func(s *setup) { s.leftAgo = 5 * time.Second })},
		{"left a lease ago", with(func(s *setup) { s.leftAgo, s.wantCode, s.wantLabel = 10*time.Second, 403, RejNotMember })},
		{"not a member", with(func(s *setup) { s.from, s.wantCode, s.wantLabel = "mallory", 403, RejNotMember })},
		{"over the limit", with(func(s *setup) { s.limit, s.wantCode, s.wantLabel = 3, 413, RejTooLarge })},
		{"another body", with(func(s *setup) { s.swapBody, s.wantCode, s.wantLabel = `{"x":2}`, 401, RejBadBody })},
		{"mutual TLS, certificate", with(func(s *setup) { s.mutual, s.hasCert = true, true })},
		{"mutual TLS, no certificate", with(func(s *setup) { s.mutual, s.wantCode, s.wantLabel = true, 401, RejNoCert })},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := tt.s
			now := t0
			var counted []string
			cfg := GuardConfig{Auth: New("n2", secret), Self: "n2", Now: func() time.Time { return now }, Lease: 10 * time.Second,
				Member: func(name string) (bool, bool) {
					return name == "n1" || name == "n2", name == "n1" && s.leftAgo > 0
				},
				Rejected: func(endpoint, reason string) { counted = append(counted, endpoint+"/"+reason) },
			}
			if s.mutual {
				cfg.ClientCert = func(*http.Request) bool { return s.hasCert }
			}
			g := NewGuard(cfg)
			if s.leftAgo > 0 {
				now = t0.Add(-s.leftAgo)
				g.NoteView([]Member{{Name: "n1", Left: true}, {Name: "n2"}})
				now = t0
			}
			r := httptest.NewRequest("POST", "/internal/v1/ctl", strings.NewReader(s.body))
			if s.swapBody != "" {
				r = httptest.NewRequest("POST", "/internal/v1/ctl", strings.NewReader(s.swapBody))
			}
			New(s.from, secret).Sign(r.Header, "POST", "/internal/v1/ctl", "n2", []byte(s.body), now)
			from, body, e := g.Read(r, "ctl", s.limit)
			if s.wantCode == 0 {
				if e != nil || from != s.wantFrom || string(body) != s.body || len(counted) != 0 {
					t.Fatalf("Read = %q, %q, %v (counted %v); want %q and the body", from, body, e, counted, s.wantFrom)
				}
				return
			}
			if e == nil || e.HTTPStatus() != s.wantCode || len(counted) != 1 || counted[0] != "ctl/"+s.wantLabel {
				t.Fatalf("Read = %v (counted %v), want %d counted as %s", e, counted, s.wantCode, s.wantLabel)
			}
			w := httptest.NewRecorder()
			httpapi.WriteError(w, e)
			var shape struct {
				Error struct{ Code, Message, Field string }
			}
			if err := json.Unmarshal(w.Body.Bytes(), &shape); err != nil || shape.Error.Code == "" || !strings.HasPrefix(shape.Error.Message, "internal endpoint: ") {
				t.Errorf("error body %s: want the error shape", w.Body)
			}
		})
	}
}

// TestGuardNil: a node outside any cluster has no guard; its internal
// endpoints answer 404 and a forwarded request's headers count for
// nothing.
func TestGuardNil(t *testing.T) {
	var g *Guard
	r := httptest.NewRequest("POST", "/internal/v1/ctl", bytes.NewReader([]byte("x")))
	if _, _, e := g.Read(r, "ctl", 10); e == nil || e.HTTPStatus() != http.StatusNotFound {
		t.Errorf("nil guard Read = %v, want 404", e)
	}
	if g.Signed(r, []byte("x")) {
		t.Error("nil guard: Signed = true")
	}
}

// TestGuardSigned: a forwarded request's headers count only when signed by
// a member for this body, and only once.
func TestGuardSigned(t *testing.T) {
	secret := []byte("0123456789abcdef0123456789abcdef")
	now := time.Unix(1_800_000_000, 0)
	g := NewGuard(GuardConfig{Auth: New("n2", secret), Self: "n2", Now: func() time.Time { return now },
		Member: func(name string) (bool, bool) { return name == "n1", false }})
	req := func(from, body, signed string) *http.Request {
		r := httptest.NewRequest("POST", "/v1/tasks", strings.NewReader(body))
		New(from, secret).Sign(r.Header, "POST", "/v1/tasks", "n2", []byte(signed), now)
		return r
	}
	r := req("n1", "abc", "abc")
	if !g.Signed(r, []byte("abc")) {
		t.Fatal("a member's signed request: Signed = false")
	}
	if g.Signed(r, []byte("abc")) {
		t.Error("the same request again: Signed = true")
	}
	if g.Signed(req("n1", "abd", "abc"), []byte("abd")) {
		t.Error("another body: Signed = true")
	}
	if g.Signed(req("mallory", "abc", "abc"), []byte("abc")) {
		t.Error("a non-member: Signed = true")
	}
}

// TestRejectionStatuses: each reason keeps the status and code clients
// and the hostile-input test know.
func TestRejectionStatuses(t *testing.T) {
	for reason, want := range map[string]int{
		RejUnsigned: 401, RejMalformed: 401, RejStale: 401, RejMisdirect: 401, RejNotMember: 403,
		RejLength: 411, RejTooLarge: 413, RejBadMAC: 401, RejReplayed: 401, RejBusy: 503, RejBadBody: 401,
		RejNoCert: 401, "other": 401,
	} {
		if got := Rejection(reason).HTTPStatus(); got != want {
			t.Errorf("%s: %d, want %d", reason, got, want)
		}
	}
}
