package dispatch

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

func TestSSRFParseAddrRule(t *testing.T) {
	tests := []struct {
		in      string
		prefix  string // "" for a name rule
		name    string
		port    uint16
		wantErr string
	}{
		{in: "10.0.0.0/8", prefix: "10.0.0.0/8"},
		{in: "10.1.2.3/8", prefix: "10.0.0.0/8"}, // masked
		{in: "10.0.0.5", prefix: "10.0.0.5/32"},
		{in: "fd00::1", prefix: "fd00::1/128"},
		{in: "[fd00::1]", prefix: "fd00::1/128"},
		{in: "::ffff:169.254.169.254", prefix: "169.254.169.254/32"},
		{in: "::ffff:10.0.0.0/104", prefix: "10.0.0.0/8"},
		{in: "10.0.0.5:8080", prefix: "10.0.0.5/32", port: 8080},
		{in: "10.0.0.0/8:443", prefix: "10.0.0.0/8", port: 443},
		{in: "[fd00::1]:443", prefix: "fd00::1/128", port: 443},
		{in: "Hooks.Internal.", name: "hooks.internal"},
		{in: "hooks.internal:8443", name: "hooks.internal", port: 8443},
		{in: " metadata ", name: "metadata"},
		{in: "", wantErr: "empty"},
		{in: "hooks.internal:0", wantErr: "want 1..65535"},
		{in: "hooks.internal:99999", wantErr: "want 1..65535"},
		{in: "hooks.internal:http", wantErr: "want 1..65535"},
		{in: "http://hooks.internal/", wantErr: "want a CIDR"},
		{in: "10.0.0.0/33", wantErr: "want a CIDR"},
		{in: "a b", wantErr: "want a CIDR"},
		{in: "*.internal", wantErr: "want a CIDR"},
	}
	for _, tt := range tests {
		r, err := parseAddrRule(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("parseAddrRule(%q) error = %v, want %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("parseAddrRule(%q): %v", tt.in, err)
			continue
		}
		gotPrefix := ""
		if r.prefix.IsValid() {
			gotPrefix = r.prefix.String()
		}
		if gotPrefix != tt.prefix || r.name != tt.name || r.port != tt.port {
			t.Errorf("parseAddrRule(%q) = prefix %q name %q port %d, want %q %q %d", tt.in, gotPrefix, r.name, r.port, tt.prefix, tt.name, tt.port)
		}
	}
}

func TestSSRFPolicyAllowed(t *testing.T) {
	type pol struct {
		allow, deny []string
		private     bool
	}
	none := pol{}
	private := pol{private: true}
	tests := []struct {
		name    string
		pol     pol
		ip      string // "" = name only (create time)
		port    uint16
		host    string
		wantOK  bool
		wantWhy string
	}{
		// Defaults.
		{name: "public v4", pol: none, ip: "93.184.216.34", port: 443, wantOK: true},
		{name: "public v6", pol: none, ip: "2606:2800:220:1::1", port: 443, wantOK: true},
		{name: "loopback allowed by default", pol: none, ip: "127.0.0.1", port: 8080, wantOK: true},
		{name: "loopback v6 allowed by default", pol: none, ip: "::1", port: 8080, wantOK: true},
		{name: "rfc1918 allowed by default", pol: none, ip: "10.1.2.3", port: 80, wantOK: true},
		{name: "ula allowed by default", pol: none, ip: "fd12::1", port: 80, wantOK: true},
		{name: "aws metadata", pol: none, ip: "169.254.169.254", port: 80, wantWhy: "cloud metadata address"},
		{name: "aws metadata v6", pol: none, ip: "fd00:ec2::254", port: 80, wantWhy: "cloud metadata address"},
		{name: "alibaba metadata", pol: none, ip: "100.100.100.200", port: 80, wantWhy: "cloud metadata address"},
		{name: "link-local v4", pol: none, ip: "169.254.1.1", port: 80, wantWhy: "link-local"},
		{name: "link-local v6", pol: none, ip: "fe80::1", port: 80, wantWhy: "link-local"},
		{name: "link-local v6 zoned", pol: none, ip: "fe80::1%eth0", port: 80, wantWhy: "link-local"},
		{name: "v4-mapped metadata", pol: none, ip: "::ffff:169.254.169.254", port: 80, wantWhy: "cloud metadata address"},
		{name: "nat64 metadata", pol: none, ip: "64:ff9b::a9fe:a9fe", port: 80, wantWhy: "cloud metadata address"},
		{name: "nat64 public", pol: none, ip: "64:ff9b::5db8:d822", port: 80, wantOK: true},
		{name: "unspecified v4", pol: none, ip: "0.0.0.0", port: 80, wantWhy: "unspecified"},
		{name: "this network v4", pol: none, ip: "0.1.2.3", port: 80, wantWhy: "unspecified"},
		{name: "unspecified v6", pol: none, ip: "::", port: 80, wantWhy: "unspecified"},
		{name: "multicast v4", pol: none, ip: "239.1.1.1", port: 80, wantWhy: "multicast"},
		{name: "multicast v6", pol: none, ip: "ff02::1", port: 80, wantWhy: "multicast"},
		{name: "broadcast", pol: none, ip: "255.255.255.255", port: 80, wantWhy: "broadcast"},
		{name: "metadata name", pol: none, host: "metadata.google.internal", port: 80, wantWhy: "cloud metadata name"},
		{name: "metadata name upper, dot", pol: none, host: "Metadata.Google.Internal.", port: 80, wantWhy: "cloud metadata name"},
		{name: "bare metadata name", pol: none, host: "metadata", port: 80, wantWhy: "cloud metadata name"},
		{name: "metadata name resolved to public", pol: none, ip: "93.184.216.34", host: "metadata", port: 80, wantWhy: "cloud metadata name"},
		{name: "other name", pol: none, host: "hooks.example.com", port: 443, wantOK: true},
		{name: "name resolving to link-local", pol: none, ip: "169.254.3.3", host: "hooks.example.com", port: 443, wantWhy: "link-local"},
		{name: "localhost name by default", pol: none, host: "localhost", port: 80, wantOK: true},

		// --callback-deny-private.
		{name: "private: loopback", pol: private, ip: "127.0.0.1", port: 8080, wantWhy: "loopback address (--callback-deny-private)"},
		{name: "private: loopback 127/8", pol: private, ip: "127.3.2.1", port: 8080, wantWhy: "loopback"},
		{name: "private: loopback v6", pol: private, ip: "::1", port: 8080, wantWhy: "loopback"},
		{name: "private: mapped loopback", pol: private, ip: "::ffff:127.0.0.1", port: 8080, wantWhy: "loopback"},
		{name: "private: 10/8", pol: private, ip: "10.255.0.1", port: 80, wantWhy: "private address"},
		{name: "private: 172.16/12", pol: private, ip: "172.31.255.255", port: 80, wantWhy: "private address"},
		{name: "private: 172.32 is public", pol: private, ip: "172.32.0.1", port: 80, wantOK: true},
		{name: "private: 192.168/16", pol: private, ip: "192.168.1.1", port: 80, wantWhy: "private address"},
		{name: "private: ula", pol: private, ip: "fd12::1", port: 80, wantWhy: "private address"},
		{name: "private: localhost name", pol: private, host: "localhost", port: 80, wantWhy: "loopback name"},
		{name: "private: x.localhost name", pol: private, host: "app.localhost", port: 80, wantWhy: "loopback name"},
		{name: "private: public stays", pol: private, ip: "8.8.8.8", port: 443, wantOK: true},
		{name: "private: defaults still apply", pol: private, ip: "169.254.169.254", port: 80, wantWhy: "cloud metadata address"},

		// Allow wins over the defaults.
		{name: "allow cidr over private", pol: pol{allow: []string{"10.0.0.0/8"}, private: true}, ip: "10.1.1.1", port: 80, wantOK: true},
		{name: "allow cidr leaves others", pol: pol{allow: []string{"10.0.0.0/8"}, private: true}, ip: "192.168.1.1", port: 80, wantWhy: "private"},
		{name: "allow link-local ip", pol: pol{allow: []string{"169.254.10.10"}}, ip: "169.254.10.10", port: 80, wantOK: true},
		{name: "allow ip:port, right port", pol: pol{allow: []string{"127.0.0.1:9000"}, private: true}, ip: "127.0.0.1", port: 9000, wantOK: true},
		{name: "allow ip:port, other port", pol: pol{allow: []string{"127.0.0.1:9000"}, private: true}, ip: "127.0.0.1", port: 9001, wantWhy: "loopback"},
		{name: "allow name covers its addresses", pol: pol{allow: []string{"proxy.internal"}, private: true}, ip: "10.0.0.9", host: "Proxy.Internal", port: 80, wantOK: true},
		{name: "allow name, other name", pol: pol{allow: []string{"proxy.internal"}, private: true}, ip: "10.0.0.9", host: "other.internal", port: 80, wantWhy: "private"},
		{name: "allow name does not cover an ip literal", pol: pol{allow: []string{"proxy.internal"}, private: true}, ip: "10.0.0.9", port: 80, wantWhy: "private"},
		{name: "allow metadata name", pol: pol{allow: []string{"metadata"}}, host: "metadata", port: 80, wantOK: true},
		{name: "allow name:port", pol: pol{allow: []string{"localhost:8080"}, private: true}, ip: "127.0.0.1", host: "localhost", port: 8080, wantOK: true},
		{name: "allow name:port, other port", pol: pol{allow: []string{"localhost:8080"}, private: true}, ip: "127.0.0.1", host: "localhost", port: 8081, wantWhy: "loopback name"},

		// Deny wins over allow.
		{name: "deny public cidr", pol: pol{deny: []string{"93.184.216.0/24"}}, ip: "93.184.216.34", port: 443, wantWhy: "denied by --callback-deny 93.184.216.0/24"},
		{name: "deny beats allow", pol: pol{allow: []string{"10.0.0.0/8"}, deny: []string{"10.0.0.5"}}, ip: "10.0.0.5", port: 80, wantWhy: "denied by --callback-deny 10.0.0.5"},
		{name: "deny other ip, allow wins", pol: pol{allow: []string{"10.0.0.0/8"}, deny: []string{"10.0.0.5"}}, ip: "10.0.0.6", port: 80, wantOK: true},
		{name: "deny name", pol: pol{deny: []string{"evil.example"}}, host: "EVIL.example", port: 443, wantWhy: "denied by --callback-deny evil.example"},
		{name: "deny name at dial time", pol: pol{deny: []string{"evil.example"}}, ip: "93.184.216.34", host: "evil.example", port: 443, wantWhy: "denied by"},
		{name: "deny name:port", pol: pol{deny: []string{"hooks.example:8080"}}, host: "hooks.example", port: 8080, wantWhy: "denied by"},
		{name: "deny name:port, other port", pol: pol{deny: []string{"hooks.example:8080"}}, host: "hooks.example", port: 443, wantOK: true},
		{name: "deny cidr does not match a bare name", pol: pol{deny: []string{"10.0.0.0/8"}}, host: "hooks.example", port: 443, wantOK: true},
		{name: "deny loopback v6 via v4 rule: no", pol: pol{deny: []string{"127.0.0.0/8"}}, ip: "::1", port: 80, wantOK: true},
		{name: "deny mapped", pol: pol{deny: []string{"127.0.0.0/8"}}, ip: "::ffff:127.0.0.2", port: 80, wantWhy: "denied by"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := NewPolicy(tt.pol.allow, tt.pol.deny, tt.pol.private)
			if err != nil {
				t.Fatal(err)
			}
			var ip netip.Addr
			if tt.ip != "" {
				ip = netip.MustParseAddr(tt.ip)
			}
			ok, why := p.allowed(ip, tt.port, tt.host)
			if ok != tt.wantOK || (!ok && !strings.Contains(why, tt.wantWhy)) || (ok && why != "") {
				t.Errorf("allowed(%q, %d, %q) = %v, %q; want %v, %q", tt.ip, tt.port, tt.host, ok, why, tt.wantOK, tt.wantWhy)
			}
		})
	}
}

func TestSSRFPolicyBadRules(t *testing.T) {
	if _, err := NewPolicy([]string{"10.0.0.0/8", "no way"}, nil, false); err == nil || !strings.Contains(err.Error(), `allow rule "no way"`) {
		t.Errorf("bad allow rule: err = %v", err)
	}
	if _, err := NewPolicy(nil, []string{""}, false); err == nil || !strings.Contains(err.Error(), "deny rule") {
		t.Errorf("bad deny rule: err = %v", err)
	}
}

func TestSSRFCheckCallbackURL(t *testing.T) {
	p, err := NewPolicy(nil, []string{"evil.example", "10.9.0.0/16:8080"}, false)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		url     string
		wantErr string // "" = accepted
	}{
		{url: "http://127.0.0.1:8080/hook"},
		{url: "https://hooks.example.com/x"},
		{url: "http://169.254.169.254/latest/meta-data/", wantErr: "callback address denied: 169.254.169.254:80 (cloud metadata address)"},
		{url: "http://[fe80::1%25eth0]:81/", wantErr: "callback address denied: [fe80::1]:81 (link-local address)"},
		{url: "http://[::ffff:169.254.1.1]/", wantErr: "169.254.1.1:80 (link-local address)"},
		{url: "https://0.0.0.0/", wantErr: "0.0.0.0:443 (unspecified address)"},
		{url: "http://metadata.google.internal/computeMetadata/v1/", wantErr: "metadata.google.internal:80 (cloud metadata name)"},
		{url: "https://Evil.Example./", wantErr: "denied by --callback-deny evil.example"},
		{url: "http://10.9.1.1:8080/", wantErr: "denied by --callback-deny 10.9.0.0/16:8080"},
		{url: "http://10.9.1.1:8081/"},
		{url: "http://[ff02::1]/", wantErr: "multicast"},
	}
	for _, tt := range tests {
		err := p.CheckURL(tt.url)
		switch {
		case tt.wantErr == "" && err != nil:
			t.Errorf("%s: refused: %v", tt.url, err)
		case tt.wantErr != "" && err == nil:
			t.Errorf("%s: accepted, want %q", tt.url, tt.wantErr)
		case err != nil && !strings.Contains(err.Error(), tt.wantErr):
			t.Errorf("%s: error %q, want %q", tt.url, err, tt.wantErr)
		}
	}
}

// ssrfDialLog is a Config.DialContext-style hook that dials TCP for real
// and records every address it was asked to dial.
type ssrfDialLog struct {
	mu    sync.Mutex
	addrs []string
}

func (l *ssrfDialLog) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	l.mu.Lock()
	l.addrs = append(l.addrs, addr)
	l.mu.Unlock()
	return (&net.Dialer{}).DialContext(ctx, network, addr)
}

func (l *ssrfDialLog) dialed() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.addrs...)
}

// newConnCountingServer is a real receiver on loopback that counts the
// connections it accepted; close says whether it asks for each connection
// to be closed after the answer (so every callback dials anew).
func newConnCountingServer(t *testing.T, ln net.Listener, closeConns bool) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if closeConns {
			w.Header().Set("Connection", "close")
		}
		_, _ = io.WriteString(w, "ok")
	}))
	if ln != nil {
		srv.Listener.Close()
		srv.Listener = ln
	}
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, &conns
}

// TestSSRFDialNeverDialsDenied checks that refused addresses — a literal
// loopback IP under deny-private, a name resolving to one, a metadata name,
// a name with one refused address among allowed ones — fail with
// OutcomeDenied, are never handed to the dial function and never reach the
// listening receiver; and that an allow rule opens the same receiver.
func TestSSRFDialNeverDialsDenied(t *testing.T) {
	dispNoLeaks(t)
	srv, conns := newConnCountingServer(t, nil, false)
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	var lookups atomic.Int64
	lookup := func(_ context.Context, host string) ([]netip.Addr, error) {
		lookups.Add(1)
		switch host {
		case "hooks.test":
			return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
		case "mixed.test":
			return []netip.Addr{netip.MustParseAddr("127.0.0.2"), netip.MustParseAddr("169.254.169.254")}, nil
		}
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	p := strconv.Itoa(port)
	tests := []struct {
		url, wantErr string
	}{
		{url: "http://127.0.0.1:" + p + "/cb", wantErr: "callback address denied: 127.0.0.1:" + p + " (loopback address (--callback-deny-private))"},
		{url: "http://[::ffff:127.0.0.1]:" + p + "/cb", wantErr: "callback address denied: 127.0.0.1:" + p + " (loopback"},
		{url: "http://hooks.test:" + p + "/cb", wantErr: "callback address denied: 127.0.0.1:" + p + " (loopback"},
		{url: "http://mixed.test:" + p + "/cb", wantErr: "callback address denied: 169.254.169.254:" + p + " (cloud metadata address)"},
		{url: "http://metadata.google.internal:" + p + "/cb", wantErr: "callback address denied: metadata.google.internal:" + p + " (cloud metadata name)"},
	}
	var log ssrfDialLog
	// 127.0.0.2 is allowed, so mixed.test is refused for its other address.
	cfg := Config{CallbackDenyPrivate: true, CallbackAllow: []string{"127.0.0.2"}}
	d, results := newDispTest(t, cfg, Deps{DialContext: log.dial, LookupNetIP: lookup})
	d.Start()
	for i, tt := range tests {
		j := &Job{TaskID: "deny-" + strconv.Itoa(i), Seq: 1, Attempt: 1, URL: tt.url}
		if !d.Submit(j) {
			t.Fatal("submit refused")
		}
		r := dispRecv(t, results, 1)[0]
		if r.Outcome != OutcomeDenied || r.StatusCode != 0 || !strings.Contains(r.Err, tt.wantErr) {
			t.Errorf("%s: outcome %v, status %d, err %q; want denied with %q", tt.url, r.Outcome, r.StatusCode, r.Err, tt.wantErr)
		}
	}
	if got := log.dialed(); len(got) != 0 {
		t.Errorf("denied addresses were dialed: %v", got)
	}
	if n := conns.Load(); n != 0 {
		t.Errorf("the receiver saw %d connections, want 0", n)
	}
	if n := lookups.Load(); n != 2 {
		t.Errorf("%d lookups, want 2 (hooks.test, mixed.test; the metadata name is refused before resolving)", n)
	}

	// The control: with an allow rule for the name and port, the same
	// receiver is reached, through its resolved address.
	var log2 ssrfDialLog
	cfg2 := Config{CallbackDenyPrivate: true, CallbackAllow: []string{"hooks.test:" + p}}
	d2, results2 := newDispTest(t, cfg2, Deps{DialContext: log2.dial, LookupNetIP: lookup})
	d2.Start()
	d2.Submit(&Job{TaskID: "allowed", Seq: 1, Attempt: 1, URL: "http://hooks.test:" + p + "/cb"})
	if r := dispRecv(t, results2, 1)[0]; r.Outcome != OutcomeSuccess {
		t.Fatalf("allowed callback: outcome %v err %q", r.Outcome, r.Err)
	}
	if got := log2.dialed(); len(got) != 1 || got[0] != "127.0.0.1:"+p {
		t.Errorf("dialed %v, want [127.0.0.1:%s] (the checked address, not the name)", got, p)
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("the receiver saw %d connections, want 1", n)
	}
}

// TestSSRFDialRebinding checks that a name is checked on every dial: it
// first resolves to an allowed address and is called, then re-resolves to
// a denied one (DNS rebinding), which is refused and never dialed — not
// even the listener waiting on it sees a connection.
func TestSSRFDialRebinding(t *testing.T) {
	dispNoLeaks(t)
	srv, conns := newConnCountingServer(t, nil, true) // Connection: close: each callback dials
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	p := strconv.Itoa(port)
	var trapConns *atomic.Int64
	if ln, err := net.Listen("tcp", "127.0.0.3:"+p); err == nil {
		_, trapConns = newConnCountingServer(t, ln, true)
	} else {
		t.Logf("no trap listener on 127.0.0.3:%s (%v); the dial log still proves it", p, err)
	}
	var calls atomic.Int64
	lookup := func(_ context.Context, host string) ([]netip.Addr, error) {
		if calls.Add(1) == 1 {
			return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
		}
		return []netip.Addr{netip.MustParseAddr("127.0.0.3")}, nil
	}
	var log ssrfDialLog
	cfg := Config{CallbackDeny: []string{"127.0.0.3"}}
	d, results := newDispTest(t, cfg, Deps{DialContext: log.dial, LookupNetIP: lookup})
	d.Start()
	url := "http://rebind.test:" + p + "/cb"
	d.Submit(&Job{TaskID: "rb", Seq: 1, Attempt: 1, URL: url})
	if r := dispRecv(t, results, 1)[0]; r.Outcome != OutcomeSuccess {
		t.Fatalf("first callback: outcome %v err %q", r.Outcome, r.Err)
	}
	d.Submit(&Job{TaskID: "rb", Seq: 2, Attempt: 1, URL: url})
	r := dispRecv(t, results, 1)[0]
	if want := "callback address denied: 127.0.0.3:" + p + " (denied by --callback-deny 127.0.0.3)"; r.Outcome != OutcomeDenied || r.Err != want {
		t.Errorf("after rebinding: outcome %v err %q, want denied %q", r.Outcome, r.Err, want)
	}
	if got := log.dialed(); len(got) != 1 || got[0] != "127.0.0.1:"+p {
		t.Errorf("dialed %v, want only 127.0.0.1:%s", got, p)
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("receiver connections = %d, want 1", n)
	}
	if trapConns != nil && trapConns.Load() != 0 {
		t.Errorf("the denied address saw %d connections", trapConns.Load())
	}
}
