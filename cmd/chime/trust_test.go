package main

import (
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/chime-scheduler/chime/node"
)

// TestTrustFlags: the signing keys come from flags, the environment or
// files (not two of them at once) and must be 16+ bytes; the callback
// address rules are repeatable and comma lists, and reach the node's
// config, which validates them.
func TestTrustFlags(t *testing.T) {
	dir := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	const key, next = "0123456789abcdef0123", "fedcba9876543210fedc"
	keyFile, nextFile := file("key", key+"\n"), file("next", next+"\n")
	tests := []struct {
		name              string
		args              []string
		env               map[string]string
		wantKey, wantNext string
		wantAllow         []string
		wantDeny          []string
		wantPrivate       bool
		wantErr           string
	}{
		{name: "none"},
		{name: "flag", args: []string{"--signing-key", key}, wantKey: key},
		{name: "rotation", args: []string{"--signing-key", key, "--signing-key-next", next}, wantKey: key, wantNext: next},
		{name: "environment", env: map[string]string{"CHIME_SIGNING_KEY": key, "CHIME_SIGNING_KEY_NEXT": next}, wantKey: key, wantNext: next},
		{name: "files", args: []string{"--signing-key-file", keyFile, "--signing-key-next-file", nextFile}, wantKey: key, wantNext: next},
		{name: "flag and file", args: []string{"--signing-key", key, "--signing-key-file", keyFile}, wantErr: "--signing-key and --signing-key-file both given"},
		{name: "short", args: []string{"--signing-key", "0123456789abcde"}, wantErr: "--signing-key has 15 bytes: it needs at least 16"},
		{name: "short next", args: []string{"--signing-key", key, "--signing-key-next", "x"}, wantErr: "--signing-key-next has 1 bytes"},
		{name: "next alone", args: []string{"--signing-key-next", next}, wantErr: "--signing-key-next needs --signing-key"},
		{name: "rules", args: []string{"--callback-allow", "10.0.0.0/8", "--callback-allow", "hooks.internal:8443,fd00::1", "--callback-deny", "10.0.0.5", "--callback-deny-private"},
			wantAllow: []string{"10.0.0.0/8", "hooks.internal:8443", "fd00::1"}, wantDeny: []string{"10.0.0.5"}, wantPrivate: true},
		{name: "rules from the environment", env: map[string]string{"CHIME_CALLBACK_DENY": "evil.example, 192.0.2.0/24", "CHIME_CALLBACK_DENY_PRIVATE": "true"},
			wantDeny: []string{"evil.example", "192.0.2.0/24"}, wantPrivate: true},
		{name: "bad rule", args: []string{"--callback-deny", "http://x/"}, wantErr: `callback deny rule "http://x/"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var tf trustFlags
			fs := flag.NewFlagSet("serve", flag.ContinueOnError)
			tf.register(fs)
			if err := parseWithEnv(fs, tc.args, func(k string) string { return tc.env[k] }); err != nil {
				t.Fatal(err)
			}
			cfg := node.DefaultConfig()
			err := tf.apply(&cfg.Dispatch)
			if err == nil {
				err = cfg.Validate()
			}
			switch {
			case tc.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("err %v, want one containing %q", err, tc.wantErr)
				}
			case err != nil:
				t.Errorf("unexpected error: %v", err)
			case string(cfg.Dispatch.SigningKey) != tc.wantKey || string(cfg.Dispatch.SigningKeyNext) != tc.wantNext:
				t.Errorf("keys %q, %q; want %q, %q", cfg.Dispatch.SigningKey, cfg.Dispatch.SigningKeyNext, tc.wantKey, tc.wantNext)
			case !slices.Equal(cfg.Dispatch.CallbackAllow, tc.wantAllow) || !slices.Equal(cfg.Dispatch.CallbackDeny, tc.wantDeny) || cfg.Dispatch.CallbackDenyPrivate != tc.wantPrivate:
				t.Errorf("allow %q deny %q private %v; want %q %q %v", cfg.Dispatch.CallbackAllow, cfg.Dispatch.CallbackDeny, cfg.Dispatch.CallbackDenyPrivate, tc.wantAllow, tc.wantDeny, tc.wantPrivate)
			}
		})
	}
}
