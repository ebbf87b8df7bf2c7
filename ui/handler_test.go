package ui

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestStaticFiles(t *testing.T) {
	h := NewHandler(&fakeAPI{}, Options{Token: "s3cret"})
	t.Cleanup(func() { h.Close() })
	tests := []struct {
		name     string
		method   string
		path     string
		status   int
		ctype    string
		contains string
	}{
		{"index", "GET", "/ui/", 200, "text/html; charset=utf-8", "<canvas id=\"slotmap\""},
		{"index by name", "GET", "/ui/index.html", 200, "text/html; charset=utf-8", "<title>Chime</title>"},
		{"script", "GET", "/ui/app.js", 200, "text/javascript; charset=utf-8", "'use strict';"},
		{"styles", "GET", "/ui/app.css", 200, "text/css; charset=utf-8", ":root"},
		{"icon", "GET", "/ui/favicon.svg", 200, "image/svg+xml", "<svg"},
		{"head", "HEAD", "/ui/app.js", 200, "text/javascript; charset=utf-8", ""},
		{"missing file", "GET", "/ui/nope.js", 404, "application/json", `"not_found"`},
		{"post", "POST", "/ui/", 405, "application/json", `"invalid_argument"`},
		{"outside ui", "GET", "/v1/tasks", 404, "application/json", `"not_found"`},
		{"no slash", "GET", "/ui", 301, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(tt.method, tt.path, nil))
			if rec.Code != tt.status {
				t.Fatalf("%s %s: status = %d, want %d", tt.method, tt.path, rec.Code, tt.status)
			}
			if got := rec.Header().Get("Content-Type"); tt.ctype != "" && got != tt.ctype {
				t.Errorf("%s %s: Content-Type = %q, want %q", tt.method, tt.path, got, tt.ctype)
			}
			if !strings.Contains(rec.Body.String(), tt.contains) {
				t.Errorf("%s %s: body does not contain %q", tt.method, tt.path, tt.contains)
			}
			if tt.method == "HEAD" && rec.Body.Len() != 0 {
				t.Errorf("HEAD %s: body has %d bytes, want 0", tt.path, rec.Body.Len())
			}
		})
	}
}

func TestStaticHeaders(t *testing.T) {
	h := NewHandler(&fakeAPI{}, Options{})
	t.Cleanup(func() { h.Close() })

	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/ui/", nil))
	if got := rec.Header().Get("Content-Security-Policy"); !strings.Contains(got, "script-src 'self'") {
		t.Errorf("index Content-Security-Policy = %q, want script-src 'self'", got)
	}
	if got := rec.Header().Get("X-Content-Type-Options"); got != "nosniff" {
		t.Errorf("X-Content-Type-Options = %q, want nosniff", got)
	}
	etag := rec.Header().Get("ETag")
	if etag == "" {
		t.Fatal("index has no ETag")
	}

	rec = httptest.NewRecorder()
	req := httptest.NewRequest("GET", "/ui/", nil)
	req.Header.Set("If-None-Match", etag)
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusNotModified {
		t.Errorf("GET /ui/ with If-None-Match = %d, want 304", rec.Code)
	}
}

// TestStaticNeedsNoToken: the page is public; only the websocket is not.
func TestStaticNeedsNoToken(t *testing.T) {
	h := NewHandler(&fakeAPI{}, Options{Token: "s3cret"})
	t.Cleanup(func() { h.Close() })
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/ui/app.js", nil))
	if rec.Code != http.StatusOK {
		t.Errorf("GET /ui/app.js without a token = %d, want 200", rec.Code)
	}
}

func TestWebsocketWrongMethod(t *testing.T) {
	h := NewHandler(&fakeAPI{}, Options{})
	t.Cleanup(func() { h.Close() })
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("POST", "/v1/ws", nil))
	if rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST /v1/ws = %d, want 405", rec.Code)
	}
}

func TestOptionsDefaults(t *testing.T) {
	d := DefaultOptions()
	tests := []struct {
		name string
		in   Options
		want Options
	}{
		{"zero takes defaults", Options{}, d},
		{"negative takes defaults", Options{Interval: -1, ClientQueue: -3, MaxClients: -1, ReadLimit: -1}, d},
		{"tiny interval is raised", Options{Interval: 1}, func() Options { o := d; o.Interval = minInterval; return o }()},
		{"set fields stay", Options{Interval: 2 * d.Interval, ClientQueue: 9}, func() Options {
			o := d
			o.Interval, o.ClientQueue = 2*d.Interval, 9
			return o
		}()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.in.withDefaults(); got != tt.want {
				t.Errorf("withDefaults(%+v) = %+v, want %+v", tt.in, got, tt.want)
			}
		})
	}
	if got, want := d.pingPeriod(), d.PongWait*9/10; got != want {
		t.Errorf("pingPeriod() = %v, want %v", got, want)
	}
}
