package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Headers of the API the client reads (API.md "Conventions").
const (
	headerTableVersion = "X-Chime-Table-Version"
	headerOwner        = "X-Chime-Owner"
)

// maxAnswerBytes bounds how much of one answer the client reads: a list
// page of 1000 tasks with 64 KiB payloads each is ~64 MiB.
const maxAnswerBytes = 80 << 20

// Client talks to a Chime cluster (or one node). It is safe for concurrent
// use; it starts no goroutines of its own beyond a request's (CreateBatch
// sends its parts in parallel) and holds no resources but idle connections,
// so it needs no Close.
type Client struct {
	seeds   []string // base URLs: scheme://host:port[/prefix], no trailing slash
	scheme  string   // of the first seed: how the nodes of the slot map are reached
	token   string
	timeout time.Duration
	retry   RetryPolicy
	log     *slog.Logger
	hc      *http.Client
	noRoute bool // every request goes to the seeds (WithOwnerRouting(false))

	live atomic.Int32 // the index of the seed that answered last

	slots atomic.Pointer[slotMap] // nil until loaded
	// reload serializes slot map loads; lastLoad is when the last one
	// was tried (guarded by reload).
	reload   sync.Mutex
	lastLoad time.Time
}

// New returns a client of the cluster that seeds belong to: addresses of
// some of its nodes, as URLs (http://host:port, https://host:port) or bare
// host:port (http). Any one live seed is enough; the client learns the
// other nodes from the slot map. New does no I/O.
func New(seeds []string, opts ...Option) (*Client, error) {
	if len(seeds) == 0 {
		return nil, errors.New("chime: no seed addresses")
	}
	cfg := config{timeout: DefaultTimeout, retry: DefaultRetryPolicy()}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.timeout <= 0 {
		return nil, fmt.Errorf("chime: the timeout must be positive, got %s", cfg.timeout)
	}
	if cfg.retry.MaxAttempts < 1 {
		return nil, fmt.Errorf("chime: RetryPolicy.MaxAttempts must be at least 1, got %d", cfg.retry.MaxAttempts)
	}
	if cfg.retry.BackoffBase < 0 || cfg.retry.BackoffMax < cfg.retry.BackoffBase {
		return nil, fmt.Errorf("chime: RetryPolicy wants 0 <= BackoffBase <= BackoffMax, got %s and %s", cfg.retry.BackoffBase, cfg.retry.BackoffMax)
	}
	c := &Client{token: cfg.token, timeout: cfg.timeout, retry: cfg.retry, log: cfg.log, hc: cfg.hc, noRoute: cfg.noRoute}
	for _, s := range seeds {
		base, err := baseURL(s)
		if err != nil {
			return nil, err
		}
		c.seeds = append(c.seeds, base)
	}
	c.scheme, _, _ = strings.Cut(c.seeds[0], "://")
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if c.hc == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig = cfg.tls
		tr.MaxIdleConnsPerHost = 64
		c.hc = &http.Client{Transport: tr}
	}
	return c, nil
}

// baseURL turns a seed address into a base URL without a trailing slash:
// a bare host:port gets http, a bare :port means 127.0.0.1:port.
func baseURL(addr string) (string, error) {
	a := strings.TrimSpace(addr)
	if !strings.Contains(a, "://") {
		if strings.HasPrefix(a, ":") {
			a = "127.0.0.1" + a
		}
		a = "http://" + a
	}
	u, err := url.Parse(a)
	switch {
	case err != nil:
		return "", fmt.Errorf("chime: seed %q: %w", addr, err)
	case u.Scheme != "http" && u.Scheme != "https":
		return "", fmt.Errorf("chime: seed %q: the scheme must be http or https", addr)
	case u.Host == "":
		return "", fmt.Errorf("chime: seed %q has no host", addr)
	case u.RawQuery != "" || u.Fragment != "" || u.User != nil:
		return "", fmt.Errorf("chime: seed %q: only scheme, host, port and path are allowed", addr)
	}
	return strings.TrimRight(u.String(), "/"), nil
}

// call is one API request.
type call struct {
	method, path string
	query        url.Values
	body         []byte
	// id routes the request to the owner of its slot ("": any node).
	id string
	// to routes it to this base URL first ("": by id).
	to string
	// idempotent requests are retried; the others are sent once (unless
	// no connection could be opened: then nothing was sent).
	idempotent bool
}

// answer is one HTTP answer, read in full.
type answer struct {
	status int
	header http.Header
	body   []byte
}

// do sends cl to the nodes of targets in turn until one answers, with the
// retry policy. A non-2xx answer is an *Error; a request no node answered
// is an error matching ErrUnavailable.
func (c *Client) do(ctx context.Context, cl call) (answer, error) {
	m := c.slotMap(ctx)
	targets := c.targets(m, cl)
	var lastErr error
	next := 0 // index into targets
	for attempt := 1; ; attempt++ {
		to := targets[next%len(targets)]
		ans, err := c.send(ctx, to, cl)
		var wait time.Duration
		switch {
		case err != nil && ctx.Err() != nil:
			return answer{}, ended(ctx, cl, lastErr)
		case err != nil:
			lastErr = fmt.Errorf("%w: %s %s at %s: %w", ErrUnavailable, cl.method, cl.path, to, err)
			if !cl.idempotent && !neverSent(err) {
				return answer{}, lastErr
			}
			next++ // a node down: the next one
		case ans.status == http.StatusServiceUnavailable || ans.status == http.StatusTooManyRequests:
			c.noteAnswer(ctx, to, ans.header)
			lastErr = apiError(ans)
			if !cl.idempotent {
				return ans, lastErr
			}
			wait = retryAfter(ans.header)
			if ans.status == http.StatusServiceUnavailable {
				next++ // this node cannot serve it now: the next one may
			}
		default:
			c.noteAnswer(ctx, to, ans.header)
			c.noteLive(to)
			if ans.status >= 300 {
				return ans, apiError(ans)
			}
			return ans, nil
		}
		if attempt >= c.retry.MaxAttempts {
			return ans, lastErr
		}
		wait = max(wait, c.backoff(attempt))
		c.log.Debug("chime: retrying", "method", cl.method, "path", cl.path, "attempt", attempt, "node", to,
			"next", targets[next%len(targets)], "wait", wait, "err", lastErr)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return answer{}, ended(ctx, cl, lastErr)
		case <-t.C:
		}
	}
}

// ended is the error of cl when ctx ended, with the failure that made it
// wait if there was one.
func ended(ctx context.Context, cl call, lastErr error) error {
	if lastErr == nil {
		return fmt.Errorf("chime: %s %s: %w", cl.method, cl.path, ctx.Err())
	}
	return fmt.Errorf("chime: %s %s: %w (after %w)", cl.method, cl.path, ctx.Err(), lastErr)
}

// targets lists the base URLs to try for cl, best first: its preferred
// node (cl.to, or the owner of cl.id's slot and then its follower), then
// the seeds from the one that answered last, without repeats.
func (c *Client) targets(m *slotMap, cl call) []string {
	out := make([]string, 0, len(c.seeds)+2)
	add := func(base string) {
		for _, b := range out {
			if b == base {
				return
			}
		}
		out = append(out, base)
	}
	switch {
	case cl.to != "":
		add(cl.to)
	case cl.id != "" && m != nil:
		if o, f := m.route(cl.id); o != "" {
			add(o)
			if f != "" {
				add(f)
			}
		}
	}
	live := int(c.live.Load())
	for i := range c.seeds {
		add(c.seeds[(live+i)%len(c.seeds)])
	}
	return out
}

// noteLive remembers base as the seed to try first, if it is one.
func (c *Client) noteLive(base string) {
	for i, s := range c.seeds {
		if s == base {
			c.live.Store(int32(i))
			return
		}
	}
}

// backoff is the wait after the attempt-th failed attempt: BackoffBase
// doubled per attempt up to BackoffMax, the upper half jittered.
func (c *Client) backoff(attempt int) time.Duration {
	d := c.retry.BackoffBase
	for i := 1; i < attempt && d < c.retry.BackoffMax; i++ {
		d *= 2
	}
	d = min(d, c.retry.BackoffMax)
	if d <= 1 {
		return d
	}
	return d/2 + rand.N(d/2)
}

// retryAfter reads an answer's Retry-After: seconds or an HTTP date.
func retryAfter(h http.Header) time.Duration {
	v := h.Get("Retry-After")
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(v); err == nil && s >= 0 {
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0)
	}
	return 0
}

// neverSent reports whether err means the request never left: no
// connection could be opened, so even a request that is not idempotent
// may go to another node.
func neverSent(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// send sends cl to the node at base once and reads its answer.
func (c *Client) send(ctx context.Context, base string, cl call) (answer, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	target := base + cl.path
	if len(cl.query) > 0 {
		target += "?" + cl.query.Encode()
	}
	var body io.Reader
	if cl.body != nil {
		body = bytes.NewReader(cl.body)
	}
	req, err := http.NewRequestWithContext(ctx, cl.method, target, body)
	if err != nil {
		return answer{}, err
	}
	return c.exchange(req, cl.method == http.MethodPost || cl.method == http.MethodPut)
}

// exchange sends req with the client's headers and reads the answer.
func (c *Client) exchange(req *http.Request, isJSON bool) (answer, error) {
	c.setHeaders(req, isJSON)
	resp, err := c.hc.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes+1))
	if err != nil {
		return answer{}, fmt.Errorf("reading the answer: %w", err)
	}
	if len(b) > maxAnswerBytes {
		return answer{}, fmt.Errorf("the answer is over %d bytes", maxAnswerBytes)
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: b}, nil
}

// setHeaders sets the client's headers on req: the token, the content
// type of a POST or PUT (the node wants it even without a body: its CSRF
// guard), Accept and User-Agent.
func (c *Client) setHeaders(req *http.Request, isJSON bool) {
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if isJSON {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "chime-go-client")
}

// apiError turns a non-2xx answer into an *Error.
func apiError(a answer) *Error {
	var eb struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
			Field   string `json:"field"`
		} `json:"error"`
	}
	e := &Error{Status: a.status, RetryAfter: retryAfter(a.header)}
	if json.Unmarshal(a.body, &eb) == nil && eb.Error.Code != "" {
		e.Code, e.Message, e.Field = eb.Error.Code, eb.Error.Message, eb.Error.Field
	} else {
		e.Code, e.Message = "http_"+strconv.Itoa(a.status), strings.TrimSpace(string(a.body[:min(len(a.body), 200)]))
	}
	return e
}

// decode decodes a JSON answer body into v.
func decode(a answer, v any) error {
	if err := json.Unmarshal(a.body, v); err != nil {
		return fmt.Errorf("chime: decoding the answer (%d): %w", a.status, err)
	}
	return nil
}
