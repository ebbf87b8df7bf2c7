package bench

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/valyala/fasthttp"
)

// maxAnswer bounds how much of one answer the harness reads; a batch
// answer of 10,000 results is well under 1 MiB.
const maxAnswer = 16 << 20

// newHTTPClient returns a keep-alive client sized for conns concurrent
// requests to one host. It never uses a proxy from the environment and
// never asks for compression: both would measure something else.
func newHTTPClient(conns int, timeout time.Duration) *http.Client {
	tr := &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        2 * conns,
		MaxIdleConnsPerHost: 2 * conns,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
		ForceAttemptHTTP2:   false,
	}
	return &http.Client{Transport: tr, Timeout: timeout}
}

// apiClient talks to one Chime node's HTTP API (docs/API.md). It is
// safe for concurrent use. It is a load generator, so it uses fasthttp's
// HostClient: about a third of the CPU per request of net/http's client
// (the harness shares the machine with the node, and every microsecond it
// spends is one the node does not get). baseline-http keeps net/http on
// purpose: it stands for a plain Go client.
type apiClient struct {
	base  string // e.g. http://127.0.0.1:7070, no trailing slash
	token string // bearer token; empty sends none
	hc    *fasthttp.HostClient
	err   error // a base URL that cannot be used; every request fails with it
}

// apiTimeout bounds one request without a deadline in its context.
const apiTimeout = 2 * time.Minute

func newAPIClient(base, token string, conns int) *apiClient {
	c := &apiClient{base: strings.TrimRight(base, "/"), token: token}
	u, err := url.Parse(c.base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		c.err = fmt.Errorf("bench: target %q is not an http:// or https:// URL", base)
		return c
	}
	addr := u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(u.Hostname(), map[string]string{"http": "80", "https": "443"}[u.Scheme])
	}
	c.hc = &fasthttp.HostClient{
		Addr:                     addr,
		IsTLS:                    u.Scheme == "https",
		MaxConns:                 2 * conns,
		MaxIdleConnDuration:      90 * time.Second,
		MaxResponseBodySize:      maxAnswer,
		NoDefaultUserAgentHeader: true,
		// net's dialer, not fasthttp's: that one caches DNS in a
		// process-wide goroutine that never ends.
		Dial: func(addr string) (net.Conn, error) {
			return (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).Dial("tcp", addr)
		},
		// Retrying is the workload's decision (429/503 with backoff), never
		// a silent resend of a create.
		RetryIfErr: func(*fasthttp.Request, int, error) (bool, bool) { return false, false },
	}
	return c
}

// answer is a response read in full.
type answer struct {
	status     int
	body       []byte
	retryAfter time.Duration // from Retry-After on 429/503, 0 if absent
}

// do sends one request and reads the whole answer. A non-2xx status is an
// answer, not an error; errors are transport failures. The request's
// deadline is ctx's, or apiTimeout; a cancelled ctx fails the request before
// it is sent (fasthttp cannot abort one in flight).
func (c *apiClient) do(ctx context.Context, method, path string, body []byte) (answer, error) {
	if c.err != nil {
		return answer{}, c.err
	}
	if err := context.Cause(ctx); err != nil {
		return answer{}, fmt.Errorf("bench: %s %s: %w", method, path, err)
	}
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI(c.base + path)
	req.Header.SetMethod(method)
	if body != nil || method == fasthttp.MethodPost || method == fasthttp.MethodPut {
		req.Header.SetContentType("application/json") // the node wants it on every POST and PUT
	}
	if body != nil {
		req.SetBodyRaw(body)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(apiTimeout)
	}
	if err := c.hc.DoDeadline(req, resp, deadline); err != nil {
		return answer{}, fmt.Errorf("bench: %s %s: %w", method, c.base+path, err)
	}
	a := answer{status: resp.StatusCode(), body: append([]byte(nil), resp.Body()...)}
	if s := resp.Header.Peek("Retry-After"); len(s) > 0 {
		if secs, err := strconv.Atoi(string(s)); err == nil && secs >= 0 {
			a.retryAfter = time.Duration(secs) * time.Second
		}
	}
	return a, nil
}

// ready reports whether GET /readyz answers 200.
func (c *apiClient) ready(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	a, err := c.do(ctx, http.MethodGet, "/readyz", nil)
	return err == nil && a.status == http.StatusOK
}

// close releases idle connections.
func (c *apiClient) close() {
	if c.hc != nil {
		c.hc.CloseIdleConnections()
	}
}
