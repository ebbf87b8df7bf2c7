package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chime-scheduler/chime/node"
)

// TestTaskCommandsAgainstARealNode drives every `chime task` verb against
// an in-process node (real Pebble store, real HTTP), with a bearer token,
// the node's built-in test receiver as the callback, and checks what each
// prints.
func TestTaskCommandsAgainstARealNode(t *testing.T) {
	cfg := node.DefaultConfig()
	cfg.Name = "cli-node"
	cfg.DataDir = t.TempDir()
	cfg.APIToken = "tok"
	n, err := node.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(n.Handler())
	t.Cleanup(func() {
		srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = n.Close(ctx)
	})
	env := func(k string) string {
		switch k {
		case "CHIME_ADDR":
			return srv.URL
		case "CHIME_API_TOKEN":
			return "tok"
		}
		return ""
	}
	run := func(args ...string) (string, error) {
		t.Helper()
		var out, errOut bytes.Buffer
		err := runTask(t.Context(), args, &out, &errOut, env)
		return out.String() + errOut.String(), err
	}
	cb := srv.URL + "/v1/test/callback"
	out, err := run("create", "--id", "cli-1", "--delay", "200ms", "--url", cb, "--payload", `{"a":1}`, "--label", "team=x", "--header", "Authorization=Bearer tok")
	if err != nil || !strings.Contains(out, "cli-1") {
		t.Fatalf("create: %v\n%s", err, out)
	}
	if out, err := run("create", "--id", "cli-1", "--delay", "1s", "--url", cb); err == nil || !strings.Contains(out+err.Error(), "409") {
		t.Errorf("duplicate create: err %v, output %q; want a 409 error", err, out)
	}
	if out, err := run("create", "--id", "cli-cron", "--cron", "0 9 * * *", "--tz", "Europe/Berlin", "--url", cb, "--json"); err != nil || !json.Valid([]byte(strings.TrimSpace(out))) {
		t.Errorf("create --json: %v %q", err, out)
	}
	if _, err := run("pause", "cli-cron"); err != nil {
		t.Errorf("pause: %v", err)
	}
	if out, _ := run("get", "cli-cron"); !strings.Contains(out, "paused") {
		t.Errorf("get after pause: %q", out)
	}
	if _, err := run("resume", "cli-cron"); err != nil {
		t.Errorf("resume: %v", err)
	}
	if out, _ := run("list", "--label", "team:x"); !strings.Contains(out, "cli-1") || strings.Contains(out, "cli-cron") {
		t.Errorf("list --label team:x: %q", out)
	}
	// cli-1 fires into the built-in receiver; its execution shows up.
	deadline := time.Now().Add(20 * time.Second)
	for {
		out, err := run("executions", "cli-1")
		if err == nil && strings.Contains(out, "cli-1:1") && strings.Contains(out, "200") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no execution of cli-1: %v %q", err, out)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := run("trigger", "cli-1"); err != nil {
		t.Errorf("trigger: %v", err)
	}
	if out, err := run("delete", "cli-cron"); err != nil || !strings.Contains(out, "deleted") {
		t.Errorf("delete: %v %q", err, out)
	}
	if _, err := run("get", "cli-cron"); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("get after delete: %v, want a 404 error", err)
	}
	bad := func(k string) string {
		if k == "CHIME_ADDR" {
			return srv.URL
		}
		return ""
	}
	var sink bytes.Buffer
	if err := runTask(t.Context(), []string{"list"}, &sink, &sink, bad); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("list without the token: %v, want a 401 error", err)
	}
}
