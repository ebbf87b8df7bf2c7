package dispatch

// The callback address policy (the SSRF guard): which addresses a callback
// may be sent to. The dispatcher checks every address it is about to dial
// (pool.go: the host name is resolved, every address checked,
// then only the checked addresses dialed); task creation checks literal
// IPs and host names early, so most refusals are a 400 rather than a
// failed fire.

import (
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
)

// Policy decides which callback addresses may be dialed. Precedence,
// first match wins:
//
//  1. a deny rule (--callback-deny) refuses;
//  2. an allow rule (--callback-allow) permits;
//  3. the built-in defaults refuse link-local, cloud metadata addresses and
//     names, unspecified, multicast and broadcast addresses, and with
//     denyPrivate also loopback, RFC 1918 and ULA addresses (and the name
//     localhost);
//  4. anything else is permitted.
//
// So an allow rule can open a default-denied address (a metadata proxy on
// a link-local address, a receiver on 10.0.0.5 under deny-private), and a
// deny rule closes anything, allowed or not. Immutable after
// NewPolicy; safe for concurrent use.
type Policy struct {
	allow, deny []addrRule
	denyPrivate bool
}

// addrRule is one --callback-allow or --callback-deny entry: an address
// range or a host name, and optionally a port.
type addrRule struct {
	text   string       // as given, for messages
	prefix netip.Prefix // valid for an address rule (an IP is a /32 or /128)
	name   string       // for a name rule: lower case, no trailing dot
	port   uint16       // 0: any port
}

// deniedRange is a built-in refused range and why.
type deniedRange struct {
	prefix netip.Prefix
	why    string
}

// defaultDenied are refused unless an allow rule matches. The specific
// metadata addresses come before the ranges holding them, for the message.
var defaultDenied = []deniedRange{
	{netip.MustParsePrefix("169.254.169.254/32"), "cloud metadata address"},
	{netip.MustParsePrefix("fd00:ec2::254/128"), "cloud metadata address"},
	{netip.MustParsePrefix("100.100.100.200/32"), "cloud metadata address"},
	{netip.MustParsePrefix("169.254.0.0/16"), "link-local address"},
	{netip.MustParsePrefix("fe80::/10"), "link-local address"},
	{netip.MustParsePrefix("0.0.0.0/8"), "unspecified address"},
	{netip.MustParsePrefix("::/128"), "unspecified address"},
	{netip.MustParsePrefix("224.0.0.0/4"), "multicast address"},
	{netip.MustParsePrefix("ff00::/8"), "multicast address"},
	{netip.MustParsePrefix("255.255.255.255/32"), "broadcast address"},
}

// privateDenied are refused with denyPrivate, unless an allow rule matches.
var privateDenied = []deniedRange{
	{netip.MustParsePrefix("127.0.0.0/8"), "loopback address (--callback-deny-private)"},
	{netip.MustParsePrefix("::1/128"), "loopback address (--callback-deny-private)"},
	{netip.MustParsePrefix("10.0.0.0/8"), "private address (--callback-deny-private)"},
	{netip.MustParsePrefix("172.16.0.0/12"), "private address (--callback-deny-private)"},
	{netip.MustParsePrefix("192.168.0.0/16"), "private address (--callback-deny-private)"},
	{netip.MustParsePrefix("fc00::/7"), "private address (--callback-deny-private)"},
}

// defaultDeniedNames are cloud metadata host names, refused unless an
// allow rule matches (they resolve to metadata addresses only inside the
// cloud, so the name is refused too: a node's resolver may point them
// anywhere).
var defaultDeniedNames = []string{
	"metadata",
	"metadata.google.internal",
	"metadata.goog",
	"instance-data",
	"instance-data.ec2.internal",
}

// nat64 is the well-known NAT64 prefix (RFC 6052): 64:ff9b::a9fe:a9fe
// reaches 169.254.169.254 through a NAT64 gateway, so the embedded IPv4
// address is checked against the defaults too.
var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// NewPolicy builds the policy of the allow and deny rules, each a CIDR, an
// IP, a host name, or one of them with ":port" (see parseAddrRule), and of
// denyPrivate (--callback-deny-private). The error names the first bad
// rule.
func NewPolicy(allow, deny []string, denyPrivate bool) (*Policy, error) {
	p := &Policy{denyPrivate: denyPrivate}
	for _, s := range allow {
		r, err := parseAddrRule(s)
		if err != nil {
			return nil, fmt.Errorf("callback allow rule %q: %w", s, err)
		}
		p.allow = append(p.allow, r)
	}
	for _, s := range deny {
		r, err := parseAddrRule(s)
		if err != nil {
			return nil, fmt.Errorf("callback deny rule %q: %w", s, err)
		}
		p.deny = append(p.deny, r)
	}
	return p, nil
}

// parseAddrRule parses a rule: a CIDR ("10.0.0.0/8"), an IP ("10.0.0.5",
// "fd00::1", "[fd00::1]"), a host name ("hooks.internal"), or any of them
// with a port ("10.0.0.0/8:8080", "[fd00::1]:443", "hooks.internal:8443").
func parseAddrRule(s string) (addrRule, error) {
	r := addrRule{text: s}
	s = strings.TrimSpace(s)
	if s == "" {
		return r, fmt.Errorf("empty")
	}
	if strings.Contains(s, "://") {
		return r, fmt.Errorf("want a CIDR, an IP address or a host name, optionally with :port, not a URL")
	}
	host := s
	if pf, ok := parsePrefixOrAddr(s); ok {
		r.prefix = pf
		return r, nil
	}
	if h, port, err := net.SplitHostPort(s); err == nil {
		v, err := strconv.ParseUint(port, 10, 16)
		if err != nil || v == 0 {
			return r, fmt.Errorf("port %q: want 1..65535", port)
		}
		r.port, host = uint16(v), h
		if pf, ok := parsePrefixOrAddr(host); ok {
			r.prefix = pf
			return r, nil
		}
	}
	name := normalHost(host)
	if name == "" || strings.ContainsFunc(name, func(c rune) bool {
		return !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_')
	}) {
		return r, fmt.Errorf("want a CIDR, an IP address or a host name, optionally with :port")
	}
	r.name = name
	return r, nil
}

// parsePrefixOrAddr parses a CIDR or an IP address (brackets allowed, zone
// dropped) as a prefix.
func parsePrefixOrAddr(s string) (netip.Prefix, bool) {
	if pf, err := netip.ParsePrefix(s); err == nil {
		if pf.Addr().Is4In6() {
			pf = netip.PrefixFrom(pf.Addr().Unmap(), max(pf.Bits()-96, 0))
		}
		return pf.Masked(), true
	}
	s = strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")
	if ip, err := netip.ParseAddr(s); err == nil {
		ip = ip.Unmap().WithZone("")
		return netip.PrefixFrom(ip, ip.BitLen()), true
	}
	return netip.Prefix{}, false
}

// normalHost is a host name as rules compare it: lower case, without a
// trailing dot.
func normalHost(h string) string {
	return strings.TrimSuffix(strings.ToLower(h), ".")
}

// matches reports whether r covers the address ip (invalid: not known
// yet) or the name host ("" for an IP literal) on port.
func (r *addrRule) matches(ip netip.Addr, port uint16, host string) bool {
	if r.port != 0 && r.port != port {
		return false
	}
	if r.prefix.IsValid() {
		return ip.IsValid() && r.prefix.Contains(ip)
	}
	return host != "" && r.name == host
}

// allowed reports whether a callback may go to ip:port, reached through
// the host name host ("" when the URL has an IP literal), and if not, why
// (a short phrase for the error text). An invalid ip checks the name alone:
// what task creation can check before anything is resolved. Pure.
func (p *Policy) allowed(ip netip.Addr, port uint16, host string) (ok bool, why string) {
	ip = ip.Unmap().WithZone("")
	host = normalHost(host)
	for i := range p.deny {
		if p.deny[i].matches(ip, port, host) {
			return false, "denied by --callback-deny " + p.deny[i].text
		}
	}
	for i := range p.allow {
		if p.allow[i].matches(ip, port, host) {
			return true, ""
		}
	}
	for _, n := range defaultDeniedNames {
		if host == n {
			return false, "cloud metadata name"
		}
	}
	if p.denyPrivate && (host == "localhost" || strings.HasSuffix(host, ".localhost")) {
		return false, "loopback name (--callback-deny-private)"
	}
	if !ip.IsValid() {
		return true, ""
	}
	check := []netip.Addr{ip}
	if nat64.Contains(ip) {
		b := ip.As16()
		check = append(check, netip.AddrFrom4([4]byte(b[12:])))
	}
	for _, a := range check {
		for _, d := range defaultDenied {
			if d.prefix.Contains(a) {
				return false, d.why
			}
		}
		if p.denyPrivate {
			for _, d := range privateDenied {
				if d.prefix.Contains(a) {
					return false, d.why
				}
			}
		}
	}
	return true, ""
}

// deniedError is an address the policy refused: at dial time the attempt
// fails at once, without retries (OutcomeDenied); at create time CheckURL
// returns it.
type deniedError struct {
	addr string // ip:port, or the host name when refused by name
	why  string
}

func (e *deniedError) Error() string {
	return "callback address denied: " + e.addr + " (" + e.why + ")"
}

// CheckURL is the create-time check of a validated callback URL: a
// literal IP, or a host name refused by name, returns an error whose text
// names the address and why ("callback address denied: ..."; the node
// answers it as a 400 on callback_url); so does a port beyond 65535. Names
// that pass are checked again, on every address they resolve to, when
// dialed. A URL that does not parse is not this check's business: nil.
func (p *Policy) CheckURL(rawURL string) error {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil // the caller's URL validation has decided already
	}
	host := u.Hostname()
	port := uint16(80)
	if u.Scheme == "https" {
		port = 443
	}
	if ps := u.Port(); ps != "" {
		v, err := strconv.ParseUint(ps, 10, 16)
		if err != nil {
			return fmt.Errorf("port %q: want 0..65535", ps)
		}
		port = uint16(v)
	}
	ip, perr := netip.ParseAddr(host)
	name := host
	if perr == nil {
		name = ""
	} else {
		ip = netip.Addr{}
	}
	if ok, why := p.allowed(ip, port, name); !ok {
		addr := host
		if perr == nil {
			addr = netip.AddrPortFrom(ip.Unmap().WithZone(""), port).String()
		} else {
			addr = net.JoinHostPort(host, strconv.Itoa(int(port)))
		}
		return &deniedError{addr: addr, why: why}
	}
	return nil
}
