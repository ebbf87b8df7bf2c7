package httpapi

import (
	"testing"
)

func TestEdgeHostAllowed(t *testing.T) {
	names := map[string]bool{"chime.lan": true, "10.0.0.5": true}
	tests := []struct {
		host string
		want bool
	}{
		{"localhost", true},
		{"localhost:7070", true},
		{"LOCALHOST:7070", true},
		{"localhost.:7070", true},
		{"127.0.0.1", true},
		{"127.0.0.1:7070", true},
		{"127.8.9.10:1", true},
		{"[::1]:7070", true},
		{"[::1]", true},
		{"::1", true},
		{"[::ffff:127.0.0.1]:80", true},
		{"chime.lan", true},
		{"Chime.LAN:8080", true},
		{"10.0.0.5:7070", true},
		{"", false},
		{":7070", false},
		{"evil.example", false},
		{"evil.example:7070", false},
		{"localhost.evil.example", false},
		{"127.0.0.1.evil.example", false},
		{"foo.localhost", false},
		{"10.0.0.6:7070", false},
		{"0.0.0.0:7070", false},
		{"[::]:7070", false},
		{"chime.lan.evil.example", false},
	}
	for _, tt := range tests {
		if got := hostAllowed(tt.host, names); got != tt.want {
			t.Errorf("hostAllowed(%q) = %v, want %v", tt.host, got, tt.want)
		}
	}
}

func TestEdgeRedactURL(t *testing.T) {
	tests := []struct{ in, want string }{
		{"https://example.com/hook", "https://example.com/hook"},
		{"https://user:pw@example.com/hook?x=1", "https://***@example.com/hook?x=1"},
		{"https://user@example.com:8443/a@b", "https://***@example.com:8443/a@b"},
		{"http://u:p@ss@example.com", "http://***@example.com"},
		{"http://example.com/path?who=a@b", "http://example.com/path?who=a@b"},
		{"http://example.com#x@y", "http://example.com#x@y"},
		{"not a url", "not a url"},
		{"http://u:%zz@bad", "http://***@bad"},
		{"", ""},
	}
	for _, tt := range tests {
		if got := RedactURL(tt.in); got != tt.want {
			t.Errorf("RedactURL(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestEdgeTokenRole(t *testing.T) {
	tk := newAPITokens("full-token", "read-token")
	tests := []struct {
		got  string
		want role
	}{
		{"full-token", roleFull},
		{"read-token", roleRead},
		{"", roleNone},
		{"full-toke", roleNone},
		{"full-token ", roleNone},
		{"read-token-and-more", roleNone},
	}
	for _, tt := range tests {
		if got := tk.role(tt.got); got != tt.want {
			t.Errorf("role(%q) = %d, want %d", tt.got, got, tt.want)
		}
	}
	// Without a read token, the empty string is no read token.
	onlyFull := newAPITokens("full-token", "")
	if got := onlyFull.role(""); got != roleNone {
		t.Errorf("no read token: role(\"\") = %d, want none", got)
	}
	open := newAPITokens("", "")
	if got := open.role("anything"); got != roleFull {
		t.Errorf("no tokens: role = %d, want full", got)
	}
}
