// Package forward is the client of the calls between nodes: requests
// forwarded to a slot's owner and the cluster's internal calls, every one
// signed with the cluster secret (node/internalauth) and sent over
// keep-alive connections.
package forward

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
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
	// HeaderHop counts how often a request was forwarded; a node that is
	// not the owner forwards only while it is below the API's hop limit.
	HeaderHop = "X-Chime-Hop"
	// HeaderForwardedBy names the node that forwarded the request.
	HeaderForwardedBy = "X-Chime-Forwarded-By"
)

// Client sends requests to other nodes over keep-alive connections,
// every call signed with the cluster secret. It uses fasthttp's HostClient,
// one per node: a forwarded create cost 178 µs of CPU over the nodes with
// net/http's client against 51 µs for a direct one (wrk, 3 nodes), most of
// it the client's.
type Client struct {
	cfg  Config
	auth *internalauth.Auth
	// secure holds the HTTP addresses of the members whose meta says they
	// serve HTTPS (NoteTLS, from every view).
	secure atomic.Pointer[map[string]bool]

	mu    sync.Mutex
	hosts map[string]*fasthttp.HostClient // by HTTP address, "tls:" first for HTTPS
}

// Config is what a Client is made with.
type Config struct {
	Self    string // this node's name, the signer
	Secret  []byte // the cluster secret
	Timeout time.Duration
	Clock   clock.Clock
	// Dial, when set, opens the connections (node.Config.DialContext).
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// TLS gives the client side for a member at host that serves HTTPS
	// (node.Config.TLS); nil means crypto/tls defaults (the system roots).
	TLS func(host string) *tls.Config
}

// NoteTLS records which members serve HTTPS.
func (f *Client) NoteTLS(members []gossip.Member) {
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

// New returns a client with no connection yet.
func New(cfg Config) *Client {
	return &Client{cfg: cfg, auth: internalauth.New(cfg.Self, cfg.Secret), hosts: map[string]*fasthttp.HostClient{}}
}

// Auth is the signer of the client's calls (and the checker of calls
// signed with the same secret).
func (f *Client) Auth() *internalauth.Auth { return f.auth }

func (f *Client) host(addr string) *fasthttp.HostClient {
	key, secure := addr, false
	if m := f.secure.Load(); m != nil && (*m)[addr] {
		key, secure = "tls:"+addr, true
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	hc := f.hosts[key]
	if hc == nil {
		var tc *tls.Config
		if secure && f.cfg.TLS != nil {
			h, _, _ := net.SplitHostPort(addr)
			tc = f.cfg.TLS(h)
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
				if f.cfg.Dial != nil {
					ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
					defer cancel()
					return f.cfg.Dial(ctx, "tcp", a)
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

// Close closes the idle connections.
func (f *Client) Close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, hc := range f.hosts {
		hc.CloseIdleConnections()
	}
}

// Do sends method uri to member m with body, signed, and reads the whole
// answer (its Header holds only the headers relayed to clients). hop is
// the hop count the callee sees. Errors are transport failures and
// timeouts (Config.Timeout, or ctx's deadline when sooner).
func (f *Client) Do(ctx context.Context, m ring.Member, method, uri string, body []byte, hdr http.Header, hop int) (httpapi.Answer, error) {
	if err := ctx.Err(); err != nil {
		return httpapi.Answer{}, err
	}
	deadline := f.cfg.Clock.Now().Add(f.cfg.Timeout)
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
	req.Header.Set(HeaderHop, strconv.Itoa(hop))
	req.Header.Set(HeaderForwardedBy, f.cfg.Self)
	h := http.Header{}
	f.auth.Sign(h, method, uri, m.Name, body, f.cfg.Clock.Now())
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
		return httpapi.Answer{}, err
	}
	c := httpapi.Answer{Status: resp.StatusCode(), Header: http.Header{}, Body: append([]byte(nil), resp.Body()...)}
	for _, k := range httpapi.Relayed {
		if v := resp.Header.Peek(k); len(v) > 0 {
			c.Header.Set(k, string(v))
		}
	}
	return c, nil
}

// Post posts body to path at member m and returns the answer's body; an
// answer other than 200 is an error.
func (f *Client) Post(ctx context.Context, m ring.Member, path, contentType string, body []byte) ([]byte, error) {
	res, err := f.Do(ctx, m, http.MethodPost, path, body, http.Header{"Content-Type": {contentType}}, 0)
	if err != nil {
		return nil, err
	}
	if res.Status != http.StatusOK {
		return nil, fmt.Errorf("status %d: %s", res.Status, res.Body)
	}
	return res.Body, nil
}
