package main

import (
	"bytes"
	"compress/flate"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/chime-scheduler/chime/node"
	"github.com/chime-scheduler/chime/node/dashboard"
)

// dashNode is a real in-process node served by newHTTPHandler on
// 127.0.0.1, as `chime serve` serves it.
type dashNode struct {
	n   *node.Node
	srv *httptest.Server
	h   http.Handler
}

// startDashNode starts a node on a temp dir with the given API token; node,
// server and dashboard are closed at cleanup.
func startDashNode(t *testing.T, name, token string) *dashNode {
	t.Helper()
	return startDashNodeWith(t, name, func(c *node.Config) { c.APIToken = token })
}

// startDashNodeWith is startDashNode with the config changed by mutate
// (tokens, public hosts).
func startDashNodeWith(t *testing.T, name string, mutate func(*node.Config)) *dashNode {
	t.Helper()
	srv := httptest.NewUnstartedServer(nil)
	cfg := node.DefaultConfig()
	cfg.Name = name
	cfg.DataDir = t.TempDir()
	cfg.HTTPAddr = srv.Listener.Addr().String()
	mutate(&cfg)
	log := slog.New(slog.NewTextHandler(testLogWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	cfg.Logger = log
	n, err := node.New(cfg)
	if err != nil {
		t.Fatalf("node.New: %v", err)
	}
	if err := n.Start(); err != nil {
		t.Fatalf("Start: %v", err)
	}
	d := &dashNode{n: n, srv: srv, h: newHTTPHandler(n, cfg.APIToken, cfg.ReadToken, log)}
	srv.Config.Handler = d.h
	srv.Start()
	t.Cleanup(func() {
		// chime serve's order: the node drains (its handovers need the
		// internal endpoints), then the dashboard and server close.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := n.Close(ctx); err != nil {
			t.Errorf("node Close: %v", err)
		}
		if c, ok := d.h.(io.Closer); ok {
			c.Close()
		}
		srv.Close()
	})
	deadline := time.Now().Add(10 * time.Second)
	for !n.Ready() {
		if time.Now().After(deadline) {
			t.Fatal("node not ready after 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	return d
}

// testLogWriter sends log lines to t.Log, so they show only on failure.
type testLogWriter struct{ t *testing.T }

func (w testLogWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func TestHTTPHandlerRoutes(t *testing.T) {
	const token = "s3cret"
	d := startDashNode(t, "chime-routes", token)
	client := d.srv.Client()
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	tests := []struct {
		name     string
		path     string
		auth     bool
		status   int
		ctype    string
		location string
	}{
		{name: "root redirects to the dashboard", path: "/", status: http.StatusFound, location: "/ui/"},
		{name: "ui without a slash", path: "/ui", status: http.StatusMovedPermanently, location: "/ui/"},
		{name: "page needs no token", path: "/ui/", status: http.StatusOK, ctype: "text/html; charset=utf-8"},
		{name: "script needs no token", path: "/ui/app.js", status: http.StatusOK, ctype: "text/javascript; charset=utf-8"},
		{name: "websocket checks the token itself", path: "/v1/ws", status: http.StatusUnauthorized, ctype: "application/json"},
		{name: "websocket with token but no upgrade", path: "/v1/ws", auth: true, status: http.StatusBadRequest},
		{name: "API needs the token", path: "/v1/cluster", status: http.StatusUnauthorized, ctype: "application/json"},
		{name: "API with the token", path: "/v1/cluster", auth: true, status: http.StatusOK, ctype: "application/json"},
		{name: "health stays open", path: "/healthz", status: http.StatusOK},
		{name: "metrics need the token", path: "/metrics", status: http.StatusUnauthorized},
		{name: "unknown API path", path: "/v1/nope", auth: true, status: http.StatusNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(t.Context(), "GET", d.srv.URL+tt.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			if tt.auth {
				req.Header.Set("Authorization", "Bearer "+token)
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatalf("GET %s: %v", tt.path, err)
			}
			resp.Body.Close()
			if resp.StatusCode != tt.status {
				t.Errorf("GET %s = %d, want %d", tt.path, resp.StatusCode, tt.status)
			}
			if got := resp.Header.Get("Content-Type"); tt.ctype != "" && got != tt.ctype {
				t.Errorf("GET %s Content-Type = %q, want %q", tt.path, got, tt.ctype)
			}
			if got := resp.Header.Get("Location"); got != tt.location {
				t.Errorf("GET %s Location = %q, want %q", tt.path, got, tt.location)
			}
		})
	}
}

// TestHTTPHandlerStreamsNodeSnapshots: the adapter feeds the real node's
// snapshot to the websocket, with the slot table of a one-node cluster:
// base64 strings of 16384 bytes, every slot member 0's and ok.
func TestHTTPHandlerStreamsNodeSnapshots(t *testing.T) {
	const token = "s3cret"
	d := startDashNode(t, "chime-ws", token)
	url := "ws" + strings.TrimPrefix(d.srv.URL, "http") + "/v1/ws"
	dialer := websocket.Dialer{Subprotocols: []string{"chime.v1", "bearer." + token}, HandshakeTimeout: 10 * time.Second}
	c, resp, err := dialer.Dial(url, nil)
	if err != nil {
		t.Fatalf("dial: %v (status %d)", err, statusCode(resp))
	}
	defer c.Close()
	for i := range 2 {
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, b, err := c.ReadMessage()
		if err != nil {
			t.Fatalf("read %d: %v", i, err)
		}
		var m struct {
			Type string             `json:"type"`
			Data dashboard.Snapshot `json:"data"`
		}
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("decode push %d: %v", i, err)
		}
		if m.Type != "snapshot" || len(m.Data.Members) != 1 || m.Data.Members[0].Name != "chime-ws" {
			t.Fatalf("push %d = {type %q, members %+v}, want a snapshot of chime-ws", i, m.Type, m.Data.Members)
		}
		var wire struct {
			Data struct {
				SlotOwners string `json:"slot_owners"`
				SlotStates string `json:"slot_states"`
			} `json:"data"`
		}
		if err := json.Unmarshal(b, &wire); err != nil || len(wire.Data.SlotOwners) != 21848 || len(wire.Data.SlotStates) != 21848 {
			t.Errorf("push %d: slot_owners, slot_states are %d and %d characters (%v), want base64 of 16384 bytes (21848)",
				i, len(wire.Data.SlotOwners), len(wire.Data.SlotStates), err)
		}
		snap := m.Data
		if err := snap.CheckSlotTable(); err != nil {
			t.Fatalf("push %d: %v", i, err)
		}
		for slot := range snap.SlotOwners {
			if snap.SlotOwners[slot] != 0 || snap.SlotStates[slot] != dashboard.SlotOK {
				t.Fatalf("push %d: slot %d is member %d's and %v, want member 0's and ok", i, slot, snap.SlotOwners[slot], snap.SlotStates[slot])
			}
		}
		if snap.TableVersion != 1 {
			t.Errorf("push %d: table_version = %d, want 1 (as GET /v1/cluster)", i, snap.TableVersion)
		}
		t.Logf("push %d: %d bytes, %d deflated", i, len(b), deflatedLen(t, b))
	}
}

// deflatedLen is len(b) after flate level 1, what permessage-deflate sends.
func deflatedLen(t *testing.T, b []byte) int {
	t.Helper()
	var z bytes.Buffer
	fw, err := flate.NewWriter(&z, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := fw.Close(); err != nil {
		t.Fatal(err)
	}
	return z.Len()
}

func statusCode(resp *http.Response) int {
	if resp == nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}
