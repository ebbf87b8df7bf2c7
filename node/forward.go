package node

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/chime-scheduler/chime/node/clock"
	"github.com/chime-scheduler/chime/node/httpapi"
	"github.com/chime-scheduler/chime/node/internalauth"
	"github.com/chime-scheduler/chime/ring"
	"github.com/chime-scheduler/chime/ring/gossip"
)

// Headers of calls between nodes.
const (
	// hdrHop counts how often a request was forwarded; a node that is not
	// the owner forwards only while it is below the API's hop limit.
	hdrHop = "X-Chime-Hop"
	// hdrForwardedBy names the node that forwarded the request.
	hdrForwardedBy = "X-Chime-Forwarded-By"
)

// forwarder sends requests to other nodes over keep-alive connections,
// every call signed with the cluster secret. It uses fasthttp's HostClient,
// one per node: a forwarded create cost 178 µs of CPU over the nodes with
// net/http's client against 51 µs for a direct one (wrk, 3 nodes), most of
// it the client's.
type forwarder struct {
	self    string
	auth    *internalauth.Auth
	timeout time.Duration
	clock   clock.Clock
	// dial, when set, opens the connections (Config.DialContext).
	dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// tls gives the client side for a member at host that serves HTTPS
	// (Config.TLS); nil means crypto/tls defaults (the system roots).
	tls func(host string) *tls.Config
	// secure holds the HTTP addresses of the members whose meta says they
	// serve HTTPS (noteTLS, from every view).
	secure atomic.Pointer[map[string]bool]

	mu    sync.Mutex
	hosts map[string]*fasthttp.HostClient // by HTTP address, "tls:" first for HTTPS
}

// noteTLS records which members serve HTTPS.
func (f *forwarder) noteTLS(members []gossip.Member) {
	m := map[string]bool{}
	for _, mb := range members {
		if mb.Meta.TLS {
			m[mb.Meta.HTTPAddr] = true
		}
	}
	f.secure.Store(&m)
}

// forwardConns bounds the connections to one node.
const forwardConns = 512

func newForwarder(self string, secret []byte, timeout time.Duration, c clock.Clock) *forwarder {
	return &forwarder{self: self, auth: internalauth.New(self, secret), timeout: timeout, clock: c, hosts: map[string]*fasthttp.HostClient{}}
}

func (f *forwarder) host(addr string) *fasthttp.HostClient {
	key, secure := addr, false
	if m := f.secure.Load(); m != nil && (*m)[addr] {
		key, secure = "tls:"+addr, true
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	hc := f.hosts[key]
	if hc == nil {
		var tc *tls.Config
		if secure && f.tls != nil {
			h, _, _ := net.SplitHostPort(addr)
			tc = f.tls(h)
		}
		hc = &fasthttp.HostClient{
			Addr:                          addr,
			IsTLS:                         secure,
			TLSConfig:                     tc,
			MaxConns:                      forwardConns,
			MaxIdleConnDuration:           30 * time.Second, // below the API server's 2 min idle timeout
			MaxResponseBodySize:           64 << 20,
			NoDefaultUserAgentHeader:      true,
			DisableHeaderNamesNormalizing: true,
			Dial: func(a string) (net.Conn, error) {
				if f.dial != nil {
					ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
					defer cancel()
					return f.dial(ctx, "tcp", a)
				}
				return (&net.Dialer{Timeout: 2 * time.Second, KeepAlive: 30 * time.Second}).Dial("tcp", a)
			},
			// Retry only a request the other side closed the connection
			// on before answering (an idle connection it just dropped):
			// it never ran. Anything else is the caller's 503.
			RetryIfErr: func(_ *fasthttp.Request, attempts int, err error) (bool, bool) {
				return false, attempts < 2 && errors.Is(err, fasthttp.ErrConnectionClosed)
			},
		}
		f.hosts[key] = hc
	}
	return hc
}

func (f *forwarder) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, hc := range f.hosts {
		hc.CloseIdleConnections()
	}
}

// call is one request to another node, answered in full.
type call struct {
	status int
	header http.Header // only the headers relayed to clients
	body   []byte
}

// do sends method uri to member m with body, signed, and reads the answer.
// hop is the hop count the callee sees. Errors are transport failures and
// timeouts (ForwardTimeout, or ctx's deadline when sooner).
func (f *forwarder) do(ctx context.Context, m ring.Member, method, uri string, body []byte, hdr http.Header, hop int) (call, error) {
	if err := ctx.Err(); err != nil {
		return call{}, err
	}
	deadline := f.clock.Now().Add(f.timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	hc := f.host(m.HTTPAddr)
	scheme := "http://"
	if hc.IsTLS {
		scheme = "https://"
	}
	req.SetRequestURI(scheme + m.HTTPAddr + uri)
	req.Header.SetMethod(method)
	for _, k := range []string{"Authorization", "Content-Type", "Accept"} {
		if v := hdr.Get(k); v != "" {
			req.Header.Set(k, v)
		}
	}
	req.Header.Set(hdrHop, strconv.Itoa(hop))
	req.Header.Set(hdrForwardedBy, f.self)
	h := http.Header{}
	f.auth.Sign(h, method, uri, m.Name, body, f.clock.Now())
	for k, v := range h {
		req.Header.Set(k, v[0])
	}
	if len(body) > 0 {
		req.SetBodyRaw(body)
	}
	err := hc.DoDeadline(req, resp, deadline)
	if errors.Is(err, fasthttp.ErrTimeout) {
		err = context.DeadlineExceeded
	}
	if err != nil {
		return call{}, err
	}
	c := call{status: resp.StatusCode(), header: http.Header{}, body: append([]byte(nil), resp.Body()...)}
	for _, k := range httpapi.Relayed {
		if v := resp.Header.Peek(k); len(v) > 0 {
			c.header.Set(k, string(v))
		}
	}
	return c, nil
}
