package node

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/chime-scheduler/chime/node/httpapi"
)

// edgeReq sends a raw request to tn: body as is, hdr pairs set exactly

// (no Content-Type unless given), host as the Host header when not empty.

// It returns the status and the decoded error body.

func edgeReq(t *testing.T, tn *testNode, method, path, host, body string, hdr ...string) (int, apiErrorBody) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, tn.url(path), rd)
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := tn.client().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var eb apiErrorBody
	if resp.StatusCode >= 400 {
		if err := json.Unmarshal(data, &eb); err != nil {
			t.Fatalf("%s %s: %d answer %q is not the error shape: %v", method, path, resp.StatusCode, data, err)
		}
	}
	return resp.StatusCode, eb
}

type apiErrorBody struct {
	Error struct {
		Code    httpapi.Code `json:"code"`
		Message string       `json:"message"`
		Field   string       `json:"field"`
	} `json:"error"`
}

// taskCount counts the node's tasks through the API.

func taskCount(t *testing.T, tn *testNode, hdr ...string) int {
	t.Helper()
	var page httpapi.ListPage
	if code := tn.do(t, "GET", "/v1/tasks", nil, &page, hdr...); code != 200 {
		t.Fatalf("list: %d", code)
	}
	return len(page.Tasks)
}

func TestAPIEdgeContentType(t *testing.T) {
	tn := startNode(t, nil)
	task := `{"id":"ct","callback_url":"http://127.0.0.1:9/","delay_ms":600000}`
	if code := tn.do(t, "POST", "/v1/tasks", `{"id":"p","callback_url":"http://127.0.0.1:9/","delay_ms":600000}`, nil); code != 201 {
		t.Fatalf("setup create: %d", code)
	}
	tests := []struct {
		name, method, path, ctype, body string
		want                            int
	}{
		{"create text/plain", "POST", "/v1/tasks", "text/plain", task, 415},
		{"create form", "POST", "/v1/tasks", "application/x-www-form-urlencoded", task, 415},
		{"create multipart", "POST", "/v1/tasks", "multipart/form-data; boundary=x", task, 415},
		{"create without Content-Type", "POST", "/v1/tasks", "", task, 415},
		{"create json-ish", "POST", "/v1/tasks", "application/jsonx", task, 415},
		{"create malformed", "POST", "/v1/tasks", "application/json; =", task, 415},
		{"batch text/plain", "POST", "/v1/tasks:batch", "text/plain", `{"tasks":[` + task + `]}`, 415},
		{"put text/plain", "PUT", "/v1/tasks/ct", "text/plain", task, 415},
		{"pause without Content-Type", "POST", "/v1/tasks/p/pause", "", "", 415},
		{"trigger form, no body", "POST", "/v1/tasks/p/trigger", "application/x-www-form-urlencoded", "", 415},
		{"keys text/plain", "POST", "/v1/cluster/keys", "text/plain", `{"op":"use","key":"x"}`, 415},
		{"forget without Content-Type", "POST", "/v1/cluster/members/x/forget", "", "", 415},
		// Accepted media types reach the handler.
		{"pause json", "POST", "/v1/tasks/p/pause", "application/json", "", 200},
		{"resume json charset", "POST", "/v1/tasks/p/resume", "application/json; charset=utf-8", "", 200},
		{"create JSON upper case", "POST", "/v1/tasks", "Application/JSON", strings.Replace(task, `"ct"`, `"ct2"`, 1), 201},
		// The built-in callback receiver takes any body; GET and DELETE need none.
		{"test callback text/plain", "POST", "/v1/test/callback", "text/plain", "hello", 200},
		{"get", "GET", "/v1/tasks/p", "", "", 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var hdr []string
			if tt.ctype != "" {
				hdr = []string{"Content-Type", tt.ctype}
			}
			code, eb := edgeReq(t, tn, tt.method, tt.path, "", tt.body, hdr...)
			if code != tt.want {
				t.Fatalf("status %d, want %d (%+v)", code, tt.want, eb.Error)
			}
			if tt.want == 415 && (eb.Error.Code != CodeUnsupportedMediaType || eb.Error.Field != "Content-Type" || eb.Error.Message == "") {
				t.Errorf("error = %+v, want unsupported_media_type naming Content-Type", eb.Error)
			}
		})
	}
	// No refusal changed anything: p is still scheduled (paused, then
	// resumed by the accepted calls) and ct was never created.
	var got httpapi.TaskResponse
	if code := tn.do(t, "GET", "/v1/tasks/p", nil, &got); code != 200 || got.Status != "scheduled" || got.FireCount != 0 {
		t.Errorf("p after the refusals: %d %s fires %d", code, got.Status, got.FireCount)
	}
	if code := tn.do(t, "GET", "/v1/tasks/ct", nil, nil); code != 404 {
		t.Errorf("ct: %d, want 404 (a refused create stored it)", code)
	}
	if n := taskCount(t, tn); n != 2 {
		t.Errorf("%d tasks, want 2 (p, ct2)", n)
	}
}

func TestAPIEdgeHost(t *testing.T) {
	open := startNode(t, func(c *Config) { c.PublicHosts = []string{"chime.lan", "Sched.Example.com:8443"} })
	tests := []struct {
		host string
		want int
	}{
		{"localhost", 200},
		{"localhost:7070", 200},
		{"127.0.0.1:1", 200},
		{"127.1.2.3", 200},
		{"[::1]:7070", 200},
		{"chime.lan:7070", 200},
		{"sched.example.com", 200},
		{"evil.example", 421},
		{"evil.example:7070", 421},
		{"192.168.1.10:7070", 421},
		{"127.0.0.1.nip.io", 421},
	}
	for _, tt := range tests {
		for _, path := range []string{"/v1/tasks", "/healthz", "/metrics"} {
			code, eb := edgeReq(t, open, "GET", path, tt.host, "")
			if code != tt.want {
				t.Errorf("Host %s, GET %s: %d, want %d", tt.host, path, code, tt.want)
				continue
			}
			if code == 421 && (eb.Error.Code != CodeMisdirected || eb.Error.Field != "Host") {
				t.Errorf("Host %s: error %+v, want misdirected_request naming Host", tt.host, eb.Error)
			}
		}
	}
	// A refused write changes nothing.
	if code, _ := edgeReq(t, open, "POST", "/v1/tasks", "evil.example", `{"id":"x","callback_url":"http://127.0.0.1:9/","delay_ms":600000}`,
		"Content-Type", "application/json"); code != 421 {
		t.Errorf("create via evil Host: %d, want 421", code)
	}
	if n := taskCount(t, open); n != 0 {
		t.Errorf("%d tasks after a refused create", n)
	}
	// GuardHost (the dashboard's wrapper) applies the same check.
	g := open.GuardHost(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(204) }))
	for host, want := range map[string]int{"localhost:1": 204, "evil.example": 421} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("GET", "/ui/", nil)
		req.Host = host
		g.ServeHTTP(rec, req)
		if rec.Code != want {
			t.Errorf("GuardHost, Host %s: %d, want %d", host, rec.Code, want)
		}
	}
	// /internal/ is exempt: its calls are signed and addressed by IP:port.
	if code, eb := edgeReq(t, open, "GET", "/internal/v1/member", "10.9.8.7:7070", ""); code == 421 {
		t.Errorf("/internal/ with a foreign Host: 421 (%+v)", eb.Error)
	}
	// With a token, the token is the guard: any Host.
	tok := startNode(t, func(c *Config) { c.APIToken = "s3cret" })
	if code, _ := edgeReq(t, tok, "GET", "/v1/tasks", "chime.example.org", "", "Authorization", "Bearer s3cret"); code != 200 {
		t.Errorf("token node, foreign Host: %d, want 200", code)
	}
}

func TestAPITokenRoles(t *testing.T) {
	tn := startNode(t, func(c *Config) { c.APIToken = "full-s3cret"; c.ReadToken = "read-s3cret" })
	full := []string{"Authorization", "Bearer full-s3cret"}
	read := []string{"Authorization", "Bearer read-s3cret"}
	task := `{"id":"t","callback_url":"https://user:pw@127.0.0.1:9/hook","delay_ms":600000}`
	if code := tn.do(t, "POST", "/v1/tasks", task, nil, full...); code != 201 {
		t.Fatalf("create with the API token: %d", code)
	}
	ctJSON := []string{"Content-Type", "application/json"}
	tests := []struct {
		name, method, path, body string
		hdr                      []string
		want                     int
		code                     httpapi.Code
	}{
		{"read: get", "GET", "/v1/tasks/t", "", read, 200, ""},
		{"read: list", "GET", "/v1/tasks", "", read, 200, ""},
		{"read: stats", "GET", "/v1/stats", "", read, 200, ""},
		{"read: snapshot", "GET", "/v1/snapshot", "", read, 200, ""},
		{"read: cluster", "GET", "/v1/cluster", "", read, 200, ""},
		{"read: metrics", "GET", "/metrics", "", read, 200, ""},
		{"read: head", "HEAD", "/v1/tasks/t", "", read, 200, ""},
		{"read: create", "POST", "/v1/tasks", strings.Replace(task, `"t"`, `"t2"`, 1), append(read, ctJSON...), 403, CodeForbidden},
		{"read: put", "PUT", "/v1/tasks/t", task, append(read, ctJSON...), 403, CodeForbidden},
		{"read: delete", "DELETE", "/v1/tasks/t", "", read, 403, CodeForbidden},
		{"read: pause", "POST", "/v1/tasks/t/pause", "", append(read, ctJSON...), 403, CodeForbidden},
		{"read: forget", "POST", "/v1/cluster/members/n2/forget", "", append(read, ctJSON...), 403, CodeForbidden},
		{"read: keys list", "GET", "/v1/cluster/keys", "", read, 403, CodeForbidden},
		{"read: keys use", "POST", "/v1/cluster/keys", `{"op":"use","key":"x"}`, append(read, ctJSON...), 403, CodeForbidden},
		{"read: backup", "GET", "/v1/admin/backup", "", read, 403, CodeForbidden},
		{"none: get", "GET", "/v1/tasks/t", "", nil, 401, CodeUnauthenticated},
		{"none: metrics", "GET", "/metrics", "", nil, 401, CodeUnauthenticated},
		{"wrong: get", "GET", "/v1/tasks/t", "", []string{"Authorization", "Bearer read-s3cre"}, 401, CodeUnauthenticated},
		{"full: keys list (standalone)", "GET", "/v1/cluster/keys", "", full, 400, CodeInvalidArgument},
		{"full: pause", "POST", "/v1/tasks/t/pause", "", append(full, ctJSON...), 200, ""},
		{"health needs no token", "GET", "/healthz", "", nil, 200, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, eb := edgeReq(t, tn, tt.method, tt.path, "", tt.body, tt.hdr...)
			if code != tt.want {
				t.Fatalf("status %d, want %d (%+v)", code, tt.want, eb.Error)
			}
			if tt.code != "" && eb.Error.Code != tt.code {
				t.Errorf("code %q, want %q", eb.Error.Code, tt.code)
			}
			if code == 401 || code == 403 {
				if eb.Error.Field != "Authorization" {
					t.Errorf("field %q, want Authorization", eb.Error.Field)
				}
			}
		})
	}
	// The read token's refusals changed nothing: t is there, paused by the
	// API token only, and t2 does not exist.
	var got httpapi.TaskResponse
	if code := tn.do(t, "GET", "/v1/tasks/t", nil, &got, full...); code != 200 || got.Status != "paused" {
		t.Errorf("t: %d %s, want 200 paused", code, got.Status)
	}
	if code := tn.do(t, "GET", "/v1/tasks/t2", nil, nil, full...); code != 404 {
		t.Errorf("t2: %d, want 404", code)
	}
	// Read-token holders see callback URLs without user:password.
	const masked, plain = "https://***@127.0.0.1:9/hook", "https://user:pw@127.0.0.1:9/hook"
	if code := tn.do(t, "GET", "/v1/tasks/t", nil, &got, read...); code != 200 || got.CallbackURL != masked {
		t.Errorf("read: get callback_url %q, want %q", got.CallbackURL, masked)
	}
	var page httpapi.ListPage
	if code := tn.do(t, "GET", "/v1/tasks", nil, &page, read...); code != 200 || len(page.Tasks) != 1 || page.Tasks[0].CallbackURL != masked {
		t.Errorf("read: list %d %+v, want the masked URL", code, page.Tasks)
	}
	if code := tn.do(t, "GET", "/v1/tasks/t", nil, &got, full...); code != 200 || got.CallbackURL != plain {
		t.Errorf("full: get callback_url %q, want %q", got.CallbackURL, plain)
	}
}

// TestAPIEdgeSnapshotRedacts: a callback URL's password never reaches the

// dashboard's snapshot (its per-host latency view).

func TestAPIEdgeSnapshotRedacts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rcv := newReceiver(t)
		tn := startNode(t, nil)
		cb := strings.Replace(rcv.url("/r"), "http://", "http://user:pa55word@", 1)
		if code := tn.do(t, "POST", "/v1/tasks", map[string]any{"id": "pw", "callback_url": cb, "delay_ms": 0}, nil); code != 201 {
			t.Fatalf("create: %d", code)
		}
		rcv.waitHits(t, 5*time.Second, func(h []hit) bool { return len(h) >= 1 })
		var raw json.RawMessage
		waitFor(t, 5*time.Second, "the host in the snapshot", func() bool {
			if code := tn.do(t, "GET", "/v1/snapshot", nil, &raw); code != 200 {
				t.Fatalf("snapshot: %d", code)
			}
			return strings.Contains(string(raw), "***@127.0.0.1")
		})
		for _, path := range []string{"/v1/snapshot", "/v1/stats"} {
			if code := tn.do(t, "GET", path, nil, &raw); code != 200 || strings.Contains(string(raw), "pa55word") {
				t.Errorf("%s: %d, and it shows the password: %s", path, code, raw)
			}
		}
	})
}

// TestEdgeCallbackHost: the dashboard's per-host key keeps the host, never
// the password.
func TestEdgeCallbackHost(t *testing.T) {
	if got, want := callbackHost("https://user:pw@example.com:8443/x"), "https://***@example.com:8443"; got != want {
		t.Errorf("callbackHost = %q, want %q", got, want)
	}
}
