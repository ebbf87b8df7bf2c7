package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
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

// apiClient talks to one Chime node's HTTP API (/work/shared/API.md). It is
// safe for concurrent use.
type apiClient struct {
	base  string // e.g. http://127.0.0.1:7070, no trailing slash
	token string // bearer token; empty sends none
	hc    *http.Client
}

func newAPIClient(base, token string, conns int) *apiClient {
	return &apiClient{
		base:  strings.TrimRight(base, "/"),
		token: token,
		hc:    newHTTPClient(conns, 2*time.Minute),
	}
}

// answer is a response read in full.
type answer struct {
	status     int
	body       []byte
	retryAfter time.Duration // from Retry-After on 429/503, 0 if absent
}

// do sends one request and reads the whole answer. A non-2xx status is an
// answer, not an error; errors are transport failures.
func (c *apiClient) do(ctx context.Context, method, path string, body []byte) (answer, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return answer{}, fmt.Errorf("bench: %s %s: %w", method, path, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return answer{}, fmt.Errorf("bench: %s %s: %w", method, c.base+path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return answer{}, fmt.Errorf("bench: %s %s: read answer: %w", method, c.base+path, err)
	}
	a := answer{status: resp.StatusCode, body: b}
	if s := resp.Header.Get("Retry-After"); s != "" {
		if secs, err := strconv.Atoi(s); err == nil && secs >= 0 {
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
func (c *apiClient) close() { c.hc.CloseIdleConnections() }
