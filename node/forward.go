package node

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chime-scheduler/chime/ring"
	"github.com/chime-scheduler/chime/ring/gossip"
	"github.com/chime-scheduler/chime/slots"
	"github.com/chime-scheduler/chime/storage"
	"github.com/valyala/fasthttp"
)

// Headers of calls between nodes.
const (
	// hdrHop counts how often a request was forwarded; a node that is not
	// the owner forwards only while it is below maxHops.
	hdrHop = "X-Chime-Hop"
	// hdrForwardedBy names the node that forwarded the request.
	hdrForwardedBy = "X-Chime-Forwarded-By"
	// hdrAuth authenticates a call between nodes: "<unix ms>:<hex HMAC>".
	hdrAuth = "X-Chime-Auth"
)

// maxHops bounds forwarding: a request is forwarded at most twice (a table
// change in flight can make the first owner wrong), then answered 503.
const maxHops = 2

// authSkew is how far the timestamp of a signed call may be from this
// node's clock: it bounds how long a captured call can be replayed.
const authSkew = 30 * time.Second

// forwarder sends requests to other nodes over keep-alive connections,
// every call signed with the cluster secret. It uses fasthttp's HostClient,
// one per node: a forwarded create cost 178 µs of CPU over the nodes with
// net/http's client against 51 µs for a direct one (wrk, 3 nodes), most of
// it the client's.
type forwarder struct {
	self    string
	auth    *callAuth
	timeout time.Duration
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

func newForwarder(self string, secret []byte, timeout time.Duration) *forwarder {
	return &forwarder{self: self, auth: &callAuth{self: self, secret: secret}, timeout: timeout, hosts: map[string]*fasthttp.HostClient{}}
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

// hops returns how often r was forwarded already. The header counts only on
// a signed call from a member: a client cannot make a node refuse by
// sending it. body is the request's body, already read.
func (n *Node) hops(r *http.Request, body []byte) int {
	h := r.Header.Get(hdrHop)
	if h == "" || n.fwd == nil {
		return 0
	}
	v, err := strconv.Atoi(h)
	if err != nil || v < 0 {
		return 0
	}
	if _, reason := n.fwd.auth.check(r, int64(len(body)), n.now(), n.mayCall); reason != "" || !n.fwd.auth.checkBody(r, body) {
		return 0
	}
	return v
}

// call is one request to another node, answered in full.
type call struct {
	status int
	header http.Header // only the headers relayed to clients
	body   []byte
}

// relayed are the answer headers a forwarded answer keeps.
var relayed = []string{"Content-Type", "Retry-After", "X-Chime-Node", "WWW-Authenticate"}

// do sends method uri to member m with body, signed, and reads the answer.
// hop is the hop count the callee sees. Errors are transport failures and
// timeouts (ForwardTimeout, or ctx's deadline when sooner).
func (f *forwarder) do(ctx context.Context, m ring.Member, method, uri string, body []byte, hdr http.Header, hop int) (call, error) {
	if err := ctx.Err(); err != nil {
		return call{}, err
	}
	deadline := time.Now().Add(f.timeout)
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
	f.auth.sign(h, method, uri, m.Name, body, time.Now())
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
	for _, k := range relayed {
		if v := resp.Header.Peek(k); len(v) > 0 {
			c.header.Set(k, string(v))
		}
	}
	return c, nil
}

// errNoOwner answers a request for a slot no member owns yet.
var errNoOwner = &Error{Code: CodeUnavailable, Message: "no member owns this slot yet: the cluster is forming"}

// routed answers r by forwarding it to the owner of id's slot when that is
// another node, and reports whether it did (or refused: no owner, hop
// limit, owner unreachable). body is the request body as it should reach
// the owner. A node that owns the slot answers itself (false).
func (n *Node) routed(w http.ResponseWriter, r *http.Request, id string, body []byte) bool {
	v := n.view.Load()
	s := slots.Of(id)
	if v.owns(s) {
		return false
	}
	owner, ok := v.owner(s)
	if !ok {
		writeError(w, errNoOwner)
		return true
	}
	n.forwardTo(w, r, owner, body)
	return true
}

// forwardTo relays r to owner and its answer back.
func (n *Node) forwardTo(w http.ResponseWriter, r *http.Request, owner ring.Member, body []byte) {
	hop := n.hops(r, body)
	if hop >= maxHops {
		writeError(w, &Error{Code: CodeUnavailable, Message: fmt.Sprintf(
			"not the owner after %d forwards (owner here: %s): the slot table is changing", hop, owner.Name)})
		return
	}
	c, err := n.fwd.do(r.Context(), owner, r.Method, r.URL.RequestURI(), body, r.Header, hop+1)
	if err != nil {
		n.metrics.forwarded.WithLabelValues("error").Inc()
		writeError(w, unreachable(owner, err))
		return
	}
	n.metrics.forwarded.WithLabelValues("ok").Inc()
	for _, k := range relayed {
		if v := c.header.Get(k); v != "" {
			w.Header().Set(k, v)
		}
	}
	w.WriteHeader(c.status)
	_, _ = w.Write(c.body)
}

// unreachable is the 503 for an owner that did not answer.
func unreachable(owner ring.Member, err error) *Error {
	msg := err.Error()
	if errors.Is(err, context.DeadlineExceeded) {
		msg = "timed out"
	}
	return &Error{Code: CodeUnavailable, Message: fmt.Sprintf("owner %s (%s) is unreachable: %s", owner.Name, owner.HTTPAddr, msg)}
}

// withID returns the JSON object raw with "id":id added as its first
// member. raw is a valid object without an id (the caller decoded it).
func withID(raw []byte, id string) []byte {
	raw = bytes.TrimSpace(raw)
	rest := bytes.TrimSpace(raw[1:]) // after '{'
	out := make([]byte, 0, len(raw)+len(id)+8)
	out = append(out, `{"id":`...)
	out = strconv.AppendQuote(out, id) // ids are [A-Za-z0-9._:-]: no escapes
	if len(rest) > 0 && rest[0] != '}' {
		out = append(out, ',')
	}
	return append(out, rest...)
}

// splitBatch forwards the tasks of a batch whose slots other nodes own, one
// sub-batch per owner in parallel, and takes them out of tasks (nil) so the
// caller stores only its own. Their results land in results (same index)
// by the time the returned wg is done. raws are the tasks' JSON
// objects, with generated ids filled in.
func (n *Node) splitBatch(r *http.Request, reqBody []byte, raws []json.RawMessage, tasks []*storage.Task, results []batchResult) *remoteBatch {
	rb := &remoteBatch{}
	v := n.view.Load()
	groups := map[string][]int{}
	owners := map[string]ring.Member{}
	for i, t := range tasks {
		if t == nil || v.owns(t.Slot) {
			continue
		}
		o, ok := v.owner(t.Slot)
		if !ok {
			results[i].Status, results[i].Error = errNoOwner.HTTPStatus(), errNoOwner
			tasks[i] = nil
			continue
		}
		groups[o.Name] = append(groups[o.Name], i)
		owners[o.Name] = o
		tasks[i] = nil
	}
	if len(groups) == 0 {
		return rb
	}
	hop := n.hops(r, reqBody) // the whole request's count decides for every sub-batch
	for name, idx := range groups {
		owner := owners[name]
		fail := func(e *Error) {
			for _, i := range idx {
				results[i].Status, results[i].Error = e.HTTPStatus(), e
			}
		}
		if hop >= maxHops {
			fail(&Error{Code: CodeUnavailable, Message: fmt.Sprintf(
				"not the owner after %d forwards (owner here: %s): the slot table is changing", hop, name)})
			continue
		}
		var body bytes.Buffer
		body.WriteString(`{"tasks":[`)
		for k, i := range idx {
			if k > 0 {
				body.WriteByte(',')
			}
			body.Write(raws[i])
		}
		body.WriteString("]}")
		rb.n++
		rb.wg.Go(func() {
			c, err := n.fwd.do(r.Context(), owner, http.MethodPost, "/v1/tasks:batch", body.Bytes(), r.Header, hop+1)
			if err != nil {
				n.metrics.forwarded.WithLabelValues("error").Inc()
				fail(unreachable(owner, err))
				return
			}
			n.metrics.forwarded.WithLabelValues("ok").Inc()
			if c.status != http.StatusOK {
				var eb struct {
					Error *Error `json:"error"`
				}
				if json.Unmarshal(c.body, &eb) != nil || eb.Error == nil {
					eb.Error = &Error{Code: CodeInternal, Message: fmt.Sprintf("owner %s answered %d", name, c.status)}
				}
				eb.Error.Status = c.status
				fail(eb.Error)
				return
			}
			var ans struct {
				Results []batchResult `json:"results"`
			}
			if err := json.Unmarshal(c.body, &ans); err != nil || len(ans.Results) != len(idx) {
				fail(&Error{Code: CodeInternal, Message: fmt.Sprintf("owner %s answered a malformed batch result", name)})
				return
			}
			for k, i := range idx {
				res := ans.Results[k]
				res.Index = i
				results[i] = res
			}
		})
	}
	return rb
}

// remoteBatch is the part of a batch forwarded to other nodes.
type remoteBatch struct {
	n  int // sub-batches sent
	wg sync.WaitGroup
}
