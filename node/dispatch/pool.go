package dispatch

// The callback dispatcher's connection pool: keep-alive HTTP/1.1
// connections per callback host, dialed, kept and closed by the dispatcher
// itself. See connPool for why it is not a fasthttp.Client.

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/chime-scheduler/chime/node/clock"
)

// errPoolClosed is what get returns after closeAll.
var errPoolClosed = errors.New("node: dispatch: connection pool closed")

// poolConn is one connection to a callback host. At any time it is
// either idle in the pool or held by exactly one attempt.
type poolConn struct {
	conn      net.Conn  // what requests go through: raw, or TLS over raw
	raw       net.Conn  // the TCP connection; closing it cuts conn at once
	key       string    // pool key, "scheme://host:port"
	idleSince time.Time // when it was last put back (wall clock)
	reused    bool      // handed out from the idle list, not freshly dialed
}

// idleConns is the idle connections of one pool key, oldest first.
type idleConns struct {
	conns []*poolConn
}

// connPool holds the dispatcher's keep-alive connections, keyed by
// "scheme://host:port". It has no goroutines: idle connections expire
// lazily (get discards expired ones; put sweeps every key at most once per
// idleTimeout), so a connection to a host that is never called again stays
// open until the next put anywhere or closeAll.
//
// It replaces fasthttp.Client's pool (fasthttp still encodes requests and
// parses responses) because fasthttp.Client starts cleaner goroutines that
// nothing can stop or wait for, which breaks the rule that Close waits for
// every goroutine, and because it has no way to interrupt a running request:
// here closeAll cuts every connection, idle or in use, and the attempts
// blocked on them return at once.
//
// The pool does not limit connections itself: the dispatcher runs at most
// PerHost attempts per host and an attempt holds one connection, and a new
// connection is dialed only when no idle one is left, so there are never
// more than PerHost connections per key.
//
// Concurrency: every method is safe for concurrent use. get dials without
// holding the lock; no method holds it across I/O.
type connPool struct {
	dialer      net.Dialer
	tlsConfig   *tls.Config     // cloned per dial; nil means defaults
	idleTimeout time.Duration   // > 0
	stop        context.Context // parent of every dial; cancelled at shutdown
	clock       clock.Clock     // the dispatcher's

	// dialFn, when set, replaces dialer (Deps.DialContext).
	dialFn func(ctx context.Context, network, addr string) (net.Conn, error)
	// policy decides which addresses may be dialed (policy.go); lookup
	// resolves a callback host name (net.DefaultResolver; tests replace it
	// to play DNS rebinding).
	policy *Policy
	lookup func(ctx context.Context, host string) ([]netip.Addr, error)

	mu struct {
		sync.Mutex
		idle   map[string]*idleConns  // guards the slices too
		open   map[*poolConn]struct{} // every conn not closed yet, idle or held
		swept  time.Time              // last full expiry sweep
		closed bool
	}
}

// newConnPool returns an empty pool. stop cancels dials in progress
// when it ends (closeAll cuts established connections).
func newConnPool(stop context.Context, c clock.Clock, tlsConfig *tls.Config, idleTimeout time.Duration) *connPool {
	p := &connPool{
		dialer: net.Dialer{
			Timeout:   dialTimeout,
			KeepAlive: 30 * time.Second,
		},
		tlsConfig:   tlsConfig,
		idleTimeout: idleTimeout,
		stop:        stop,
		clock:       c,
		policy:      &Policy{},
		lookup: func(ctx context.Context, host string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		},
	}
	p.mu.idle = make(map[string]*idleConns)
	p.mu.open = make(map[*poolConn]struct{})
	p.mu.swept = p.clock.Now()
	return p
}

// get returns a connection for key ("http://host:port" or
// "https://host:port"): the most recently used idle one that has not
// expired, or, when there is none or fresh is set, a new one dialed before
// deadline. The caller owns it until put or discard. It returns
// errPoolClosed after closeAll.
func (p *connPool) get(key []byte, fresh bool, deadline time.Time) (*poolConn, error) {
	now := p.clock.Now()
	var expired []*poolConn
	p.mu.Lock()
	if p.mu.closed {
		p.mu.Unlock()
		return nil, errPoolClosed
	}
	if e := p.mu.idle[string(key)]; e != nil && !fresh {
		for n := len(e.conns); n > 0; n-- {
			c := e.conns[n-1]
			e.conns[n-1] = nil
			e.conns = e.conns[:n-1]
			if now.Sub(c.idleSince) < p.idleTimeout {
				p.mu.Unlock()
				return c, nil
			}
			// The newest has expired, so have all older ones.
			delete(p.mu.open, c)
			expired = append(expired, c)
		}
	}
	p.mu.Unlock()
	for _, c := range expired {
		c.raw.Close()
	}
	return p.dial(string(key), deadline)
}

// dial opens and registers a connection for key.
func (p *connPool) dial(key string, deadline time.Time) (*poolConn, error) {
	tlsOn := len(key) > len("https://") && key[:len("https://")] == "https://"
	addr := key[len("http://"):]
	if tlsOn {
		addr = key[len("https://"):]
	}
	// The connect timeout bounds the dial and the TLS handshake; the
	// attempt's deadline may be shorter.
	if limit := p.clock.Now().Add(connectTimeout); limit.Before(deadline) {
		deadline = limit
	}
	ctx, cancel := context.WithDeadline(p.stop, deadline)
	defer cancel()
	raw, err := p.dialChecked(ctx, addr)
	if err != nil {
		return nil, err
	}
	c := &poolConn{conn: raw, raw: raw, key: key}
	if tlsOn {
		tc := tls.Client(raw, p.tlsClientConfig(addr))
		if err := tc.HandshakeContext(ctx); err != nil {
			raw.Close()
			return nil, err
		}
		c.conn = tc
	}
	p.mu.Lock()
	if p.mu.closed {
		p.mu.Unlock()
		raw.Close()
		return nil, errPoolClosed
	}
	p.mu.open[c] = struct{}{}
	p.mu.Unlock()
	return c, nil
}

// dialChecked resolves addr (host:port), checks every address it resolves
// to against the policy and dials the checked addresses, never the name:
// so a name that resolves, or later re-resolves, to a refused address is
// refused (a *deniedError) and nothing is dialed. If any address of
// the name is refused the whole dial is: a name mixing public and refused
// addresses is more likely a rebinding attempt than a receiver. Several
// allowed addresses are tried in order, each with an equal share of the
// time left (at least minAddrDial), as net.Dialer does.
func (p *connPool) dialChecked(ctx context.Context, addr string) (net.Conn, error) {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	port64, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("invalid port %q", portStr)
	}
	port := uint16(port64)
	var ips []netip.Addr
	name := ""
	if ip, err := netip.ParseAddr(host); err == nil {
		ips = []netip.Addr{ip}
	} else {
		name = host
		if ok, why := p.policy.allowed(netip.Addr{}, port, name); !ok {
			return nil, &deniedError{addr: addr, why: why}
		}
		if ips, err = p.lookup(ctx, host); err != nil {
			return nil, err
		}
		if len(ips) == 0 {
			return nil, &net.DNSError{Err: "no addresses", Name: host, IsNotFound: true}
		}
	}
	targets := make([]string, len(ips))
	for i, ip := range ips {
		ip = ip.Unmap()
		targets[i] = netip.AddrPortFrom(ip, port).String()
		if ok, why := p.policy.allowed(ip, port, name); !ok {
			return nil, &deniedError{addr: netip.AddrPortFrom(ip.WithZone(""), port).String(), why: why}
		}
	}
	dial := p.dialer.DialContext
	if p.dialFn != nil {
		dial = p.dialFn
	}
	var firstErr error
	for i, target := range targets {
		actx, cancel := ctx, context.CancelFunc(func() {})
		if left := len(targets) - i; left > 1 {
			if dl, ok := ctx.Deadline(); ok {
				share := max(dl.Sub(p.clock.Now())/time.Duration(left), minAddrDial)
				actx, cancel = context.WithTimeout(ctx, share)
			}
		}
		c, err := dial(actx, "tcp", target)
		cancel()
		if err == nil {
			return c, nil
		}
		if firstErr == nil {
			firstErr = err
		}
		if ctx.Err() != nil {
			break
		}
	}
	return nil, firstErr
}

// minAddrDial is the least time one of several addresses of a
// callback host gets to connect.
const minAddrDial = 2 * time.Second

// tlsClientConfig returns the TLS configuration of a connection to addr
// (host:port): a clone of the configured one with ServerName defaulting to
// the host, and no ALPN, since only HTTP/1.1 is spoken.
func (p *connPool) tlsClientConfig(addr string) *tls.Config {
	var cfg *tls.Config
	if p.tlsConfig != nil {
		cfg = p.tlsConfig.Clone()
	} else {
		cfg = &tls.Config{}
	}
	if cfg.ServerName == "" {
		if host, _, err := net.SplitHostPort(addr); err == nil {
			cfg.ServerName = host
		}
	}
	cfg.NextProtos = nil
	return cfg
}

// put returns c to the idle list of its key; c must be ready for the next
// request (its response read completely). After closeAll it closes c.
func (p *connPool) put(c *poolConn) {
	now := p.clock.Now()
	c.idleSince = now
	c.reused = true
	var expired []*poolConn
	p.mu.Lock()
	if p.mu.closed {
		p.mu.Unlock()
		c.raw.Close()
		return
	}
	e := p.mu.idle[c.key]
	if e == nil {
		e = &idleConns{}
		p.mu.idle[c.key] = e
	}
	e.conns = append(e.conns, c)
	if now.Sub(p.mu.swept) >= p.idleTimeout {
		expired = p.sweepLocked(now)
	}
	p.mu.Unlock()
	for _, c := range expired {
		c.raw.Close()
	}
}

// sweepLocked removes the expired idle connections of every key (and the
// keys left without any) and returns them for closing. O(idle connections).
func (p *connPool) sweepLocked(now time.Time) []*poolConn {
	p.mu.swept = now
	var expired []*poolConn
	for key, e := range p.mu.idle {
		n := 0
		for n < len(e.conns) && now.Sub(e.conns[n].idleSince) >= p.idleTimeout {
			n++
		}
		for _, c := range e.conns[:n] {
			delete(p.mu.open, c)
			expired = append(expired, c)
		}
		m := copy(e.conns, e.conns[n:])
		clear(e.conns[m:])
		e.conns = e.conns[:m]
		if m == 0 {
			delete(p.mu.idle, key)
		}
	}
	return expired
}

// discard closes c, which the caller held. Safe after closeAll.
func (p *connPool) discard(c *poolConn) {
	p.mu.Lock()
	delete(p.mu.open, c)
	p.mu.Unlock()
	c.raw.Close()
}

// dropIdle closes every idle connection of key: called when one of them
// turned out to be closed by the server, which makes the older ones
// suspect too.
func (p *connPool) dropIdle(key string) {
	p.mu.Lock()
	var drop []*poolConn
	if e := p.mu.idle[key]; e != nil {
		drop = e.conns
		delete(p.mu.idle, key)
		for _, c := range drop {
			delete(p.mu.open, c)
		}
	}
	p.mu.Unlock()
	for _, c := range drop {
		c.raw.Close()
	}
}

// closeAll closes every connection, idle or held, so that attempts blocked
// on one fail at once; later gets fail and later puts close their
// connection. Idempotent.
func (p *connPool) closeAll() {
	p.mu.Lock()
	open := p.mu.open
	p.mu.open = nil
	p.mu.idle = nil
	p.mu.closed = true
	p.mu.Unlock()
	for c := range open {
		c.raw.Close()
	}
}

// openConns returns the number of connections not closed yet (idle and
// held).
func (p *connPool) openConns() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.mu.open)
}
