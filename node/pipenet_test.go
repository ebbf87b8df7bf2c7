package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/chime-scheduler/chime/node/dispatch"
)

// pipeNet is an in-memory network for HTTP in one process: between nodes,
// from a test client, to a callback receiver. Listeners are registered by
// "host:port" (never bound) and every connection is a net.Pipe pair, so
// whatever waits on the network waits on channels and timers: inside a
// testing/synctest bubble such goroutines are durably blocked and fake time
// advances, which real loopback sockets do not allow.
//
// It cuts like ring/gossip/memnet, so one call can cut gossip and HTTP
// alike:
//   - partition: addresses listed in a group reach only their own group;
//     an established connection that crosses a cut is reset (its server
//     end closes: the client's reads see EOF, its writes fail), and a dial
//     across it is black-holed until its context ends (a dropped SYN).
//     Addresses in no group (the test client, the callback receiver) are
//     outside the cut and reach everyone, so a node cut off from its peers
//     can still fire callbacks: the test sees whether it does.
//   - crash: the address is down: its listener and its ends of every
//     connection close (the peers see EOF, as after a reset), dials to it
//     are refused and dials from it fail, so a crashed node's goroutines
//     cannot reach anyone while they wind down.
//
// As with TCP, an end whose peer went away still takes deadlines (a bare
// net.Pipe end refuses them once either end is closed).
//
// Dials of an address nobody listens on are refused at once, as a closed
// port answers RST.
//
// Loss and latency (setFaults) apply to connections between two addresses
// marked lossy (the nodes), never to the client or the receiver: each
// write on such a connection waits a random delay below the maximum, or,
// with the loss probability, resets the connection instead of delivering
// (TCP does not lose bytes; what an application sees of a lossy path is a
// call that fails: a request that never arrived, or one that was served
// but whose answer never came back). There is no bandwidth limit.
//
// All methods are safe for concurrent use. The mutex is never held across
// a channel operation or a Close.
type pipeNet struct {
	mu struct {
		sync.Mutex
		listeners map[string]*pipeListener
		group     map[string]int     // partition group of each listed address
		down      map[string]bool    // crashed addresses
		conns     map[*pipeConn]bool // open ends
		lossy     map[string]bool    // addresses whose links to each other are lossy
		loss      float64            // per write on a lossy link: probability of a reset
		delay     time.Duration      // per write on a lossy link: a random delay below it
		rng       *rand.Rand
		stats     pipeStats
	}
}

// pipeStats counts what the faults did to writes on lossy links.
type pipeStats struct {
	Writes, Delayed, Resets int
}

// errPipeRefused is a dial to an address nobody listens on or that is
// down; errPipeDown a dial from an address that is down.
var (
	errPipeRefused = errors.New("pipenet: connection refused")
	errPipeDown    = errors.New("pipenet: network is down for this address (crashed)")
	errPipeReset   = errors.New("pipenet: connection reset (loss)")
)

// pipeTimeout is a dial black-holed by a partition until its context
// ended; like a TCP connect timeout it is a net.Error with Timeout true.
type pipeTimeout struct{ err error }

func (e pipeTimeout) Error() string   { return "pipenet: dial timeout: " + e.err.Error() }
func (e pipeTimeout) Unwrap() error   { return e.err }
func (e pipeTimeout) Timeout() bool   { return true }
func (e pipeTimeout) Temporary() bool { return true }

var _ net.Error = pipeTimeout{}

func newPipeNet() *pipeNet {
	pn := &pipeNet{}
	pn.mu.listeners = map[string]*pipeListener{}
	pn.mu.group = map[string]int{}
	pn.mu.down = map[string]bool{}
	pn.mu.conns = map[*pipeConn]bool{}
	pn.mu.lossy = map[string]bool{}
	pn.mu.rng = rand.New(rand.NewPCG(1, 1))
	return pn
}

// setFaults makes the links between the given addresses lossy: every
// write on a connection between two of them is delayed by a random
// duration below delay, or, with probability loss, resets the connection
// instead (both ends close; the writer gets an error, the reader EOF).
// seed drives the draws. It applies to connections dialled from now on.
func (pn *pipeNet) setFaults(addrs []string, loss float64, delay time.Duration, seed uint64) {
	pn.mu.Lock()
	defer pn.mu.Unlock()
	for _, a := range addrs {
		pn.mu.lossy[a] = true
	}
	pn.mu.loss, pn.mu.delay = loss, delay
	pn.mu.rng = rand.New(rand.NewPCG(seed, 0x1055))
}

// stats returns what the faults did so far.
func (pn *pipeNet) stats() pipeStats {
	pn.mu.Lock()
	defer pn.mu.Unlock()
	return pn.mu.stats
}

// fault draws the fate of one write on a lossy link: reset it, or delay
// it by d.
func (pn *pipeNet) fault() (reset bool, d time.Duration) {
	pn.mu.Lock()
	defer pn.mu.Unlock()
	pn.mu.stats.Writes++
	if pn.mu.rng.Float64() < pn.mu.loss {
		pn.mu.stats.Resets++
		return true, 0
	}
	if pn.mu.delay > 0 {
		d = time.Duration(pn.mu.rng.Int64N(int64(pn.mu.delay)))
		pn.mu.stats.Delayed++
	}
	return false, d
}

// listen registers a listener at addr (an IP:port). An address that
// crashed comes back up (a restart). Listening on an address that has a
// listener is a test bug and panics.
func (pn *pipeNet) listen(addr string) *pipeListener {
	ap := netip.MustParseAddrPort(addr)
	pn.mu.Lock()
	defer pn.mu.Unlock()
	if pn.mu.listeners[addr] != nil {
		panic(fmt.Sprintf("pipenet: %s: address in use", addr))
	}
	delete(pn.mu.down, addr)
	l := &pipeListener{pn: pn, addr: net.TCPAddrFromAddrPort(ap), accept: make(chan net.Conn), done: make(chan struct{})}
	pn.mu.listeners[addr] = l
	return l
}

// dialer returns the DialContext of the party at from (an IP:port that
// may or may not listen too): the hook a node gets as Config.DialContext.
func (pn *pipeNet) dialer(from string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	src := net.TCPAddrFromAddrPort(netip.MustParseAddrPort(from))
	return func(ctx context.Context, _, addr string) (net.Conn, error) {
		return pn.dial(ctx, src, addr)
	}
}

func (pn *pipeNet) dial(ctx context.Context, src *net.TCPAddr, addr string) (net.Conn, error) {
	from := src.String()
	opErr := func(err error) error {
		e := &net.OpError{Op: "dial", Net: "tcp", Source: src, Err: err}
		if ap, perr := netip.ParseAddrPort(addr); perr == nil {
			e.Addr = net.TCPAddrFromAddrPort(ap)
		}
		return e
	}
	pn.mu.Lock()
	l := pn.mu.listeners[addr]
	down, cut := pn.mu.down[from], !pn.reachableLocked(from, addr)
	pn.mu.Unlock()
	switch {
	case down:
		return nil, opErr(errPipeDown)
	case l == nil:
		return nil, opErr(errPipeRefused)
	case cut:
		<-ctx.Done()
		return nil, opErr(pipeTimeout{ctx.Err()})
	}
	a, b := net.Pipe()
	client := &pipeConn{Conn: a, pn: pn, local: src, remote: l.addr}
	server := &pipeConn{Conn: b, pn: pn, local: l.addr, remote: src, server: true}
	client.peer, server.peer = server, client
	pn.mu.Lock()
	lossy := pn.mu.lossy[from] && pn.mu.lossy[addr] && (pn.mu.loss > 0 || pn.mu.delay > 0)
	client.lossy, server.lossy = lossy, lossy
	pn.mu.conns[client] = true
	pn.mu.conns[server] = true
	pn.mu.Unlock()
	var err error
	select {
	case l.accept <- server:
		return client, nil
	case <-l.done:
		err = errPipeRefused
	case <-ctx.Done():
		err = pipeTimeout{ctx.Err()}
	}
	client.Close()
	server.Close()
	return nil, opErr(err)
}

// reachableLocked reports whether a and b are on the same side of the
// partition; an address in no group is outside it and reaches everyone.
func (pn *pipeNet) reachableLocked(a, b string) bool {
	ga, oka := pn.mu.group[a]
	gb, okb := pn.mu.group[b]
	return !oka || !okb || ga == gb
}

// partition replaces the partition with groups (each a set of addresses
// that reach each other) and resets the connections that cross a cut.
func (pn *pipeNet) partition(groups ...[]string) {
	pn.mu.Lock()
	clear(pn.mu.group)
	for i, g := range groups {
		for _, a := range g {
			pn.mu.group[a] = i
		}
	}
	cut := pn.connsLocked(func(c *pipeConn) bool {
		return c.server && !pn.reachableLocked(c.local.String(), c.remote.String())
	})
	pn.mu.Unlock()
	for _, c := range cut {
		c.Close()
	}
}

// heal removes the partition. Crashed addresses stay down.
func (pn *pipeNet) heal() { pn.partition() }

// crash takes addr down: its listener closes, its connections are cut,
// dials to and from it fail until it listens again.
func (pn *pipeNet) crash(addr string) {
	pn.mu.Lock()
	pn.mu.down[addr] = true
	l := pn.mu.listeners[addr]
	cut := pn.connsLocked(func(c *pipeConn) bool { return c.local.String() == addr })
	pn.mu.Unlock()
	if l != nil {
		l.Close()
	}
	for _, c := range cut {
		c.Close()
	}
}

func (pn *pipeNet) connsLocked(match func(c *pipeConn) bool) []*pipeConn {
	var out []*pipeConn
	for c := range pn.mu.conns {
		if match(c) {
			out = append(out, c)
		}
	}
	return out
}

// pipeListener is a net.Listener on a pipeNet.
type pipeListener struct {
	pn        *pipeNet
	addr      *net.TCPAddr
	accept    chan net.Conn // unbuffered: a dial waits until accepted
	done      chan struct{}
	closeOnce sync.Once
}

var _ net.Listener = (*pipeListener)(nil)

// Accept waits for the next connection; net.ErrClosed after Close.
func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.accept:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close stops accepting and frees the address; established connections
// stay open (as with a TCP listener). Idempotent.
func (l *pipeListener) Close() error {
	l.closeOnce.Do(func() {
		close(l.done)
		l.pn.mu.Lock()
		if l.pn.mu.listeners[l.addr.String()] == l {
			delete(l.pn.mu.listeners, l.addr.String())
		}
		l.pn.mu.Unlock()
	})
	return nil
}

// Addr is the address the listener was registered at.
func (l *pipeListener) Addr() net.Addr { return l.addr }

// pipeServer is an HTTP server on a pipeNet listener.
type pipeServer struct {
	srv    *http.Server
	served chan struct{} // closed when Serve returned
	// mu orders each handler's start (active.Add) before close's
	// active.Wait, as a WaitGroup requires of an Add from zero; a handler
	// that starts after close began (http.Server.Close does not stop a
	// connection that has read its request) aborts instead.
	mu struct {
		sync.Mutex
		closed bool
	}
	active    sync.WaitGroup // running handlers
	closeOnce sync.Once
}

// servePipe serves h on ln until close. A dial to ln's address may come
// before: it waits in accept until Serve runs, as in a listen backlog.
func servePipe(ln *pipeListener, h http.Handler) *pipeServer {
	s := &pipeServer{served: make(chan struct{})}
	s.srv = &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		if s.mu.closed {
			s.mu.Unlock()
			panic(http.ErrAbortHandler) // the client sees its connection close
		}
		s.active.Add(1)
		s.mu.Unlock()
		defer s.active.Done()
		h.ServeHTTP(w, r)
	})}
	go func() {
		defer close(s.served)
		_ = s.srv.Serve(ln)
	}()
	return s
}

// close closes the listener and every connection (their clients see EOF)
// and waits until Serve and every handler returned, so that a bubble can
// end. Idempotent.
func (s *pipeServer) close() {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.mu.closed = true
		s.mu.Unlock()
		s.srv.Close()
		<-s.served
		s.active.Wait()
	})
}

// pipeConn is one end of a connection: a net.Pipe end that reports TCP
// addresses and leaves the network's registry when closed.
type pipeConn struct {
	net.Conn
	pn            *pipeNet
	local, remote *net.TCPAddr
	server        bool      // the end a listener accepted
	peer          *pipeConn // the other end
	lossy         bool      // a link with loss and delay (setFaults)
	closed        atomic.Bool
	closeOnce     sync.Once
}

func (c *pipeConn) LocalAddr() net.Addr  { return c.local }
func (c *pipeConn) RemoteAddr() net.Addr { return c.remote }

// Write delivers p, after a delay on a lossy link, or resets the
// connection instead (see setFaults).
func (c *pipeConn) Write(p []byte) (int, error) {
	if c.lossy {
		reset, d := c.pn.fault()
		if reset {
			c.Close()
			c.peer.Close()
			return 0, &net.OpError{Op: "write", Net: "tcp", Source: c.local, Addr: c.remote, Err: errPipeReset}
		}
		if d > 0 {
			time.Sleep(d)
		}
	}
	return c.Conn.Write(p)
}

// Close closes this end (the peer's reads then return io.EOF).
func (c *pipeConn) Close() error {
	c.closeOnce.Do(func() {
		c.closed.Store(true)
		c.pn.mu.Lock()
		delete(c.pn.mu.conns, c)
		c.pn.mu.Unlock()
		c.Conn.Close()
	})
	return nil
}

// SetDeadline, SetReadDeadline and SetWriteDeadline fail only on an end
// that was closed itself, as on a TCP socket.
func (c *pipeConn) SetDeadline(t time.Time) error      { return c.deadline(c.Conn.SetDeadline(t)) }
func (c *pipeConn) SetReadDeadline(t time.Time) error  { return c.deadline(c.Conn.SetReadDeadline(t)) }
func (c *pipeConn) SetWriteDeadline(t time.Time) error { return c.deadline(c.Conn.SetWriteDeadline(t)) }

func (c *pipeConn) deadline(err error) error {
	if errors.Is(err, io.ErrClosedPipe) && !c.closed.Load() {
		return nil // the peer closed: reads see EOF, writes fail, as after a reset
	}
	return err
}

// The in-memory network carries the dispatcher's callbacks through the
// dial hook, with the sender's name; a partition black-holes a dial until
// the attempt's deadline (fake time), a crash refuses at once.
func TestFaultPipeNetCarriesCallbacks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const sender, receiver = "10.0.0.7:8080", "10.0.9.9:80"
		pn := newPipeNet()
		got := make(chan http.Header, 8)
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			got <- r.Header.Clone()
		})}
		ln := pn.listen(receiver)
		served := make(chan struct{})
		go func() {
			defer close(served)
			_ = srv.Serve(ln)
		}()
		results := make(chan dispatch.Result, 8)
		d := dispatch.New(DispatchConfig{Concurrency: 1, PerHost: 1}, dispatch.Deps{
			OnResult:    func(r dispatch.Result) { results <- r },
			Node:        "n7",
			DialContext: pn.dialer(sender),
		})
		d.Start()
		fire := func(seq uint64) (dispatch.Result, time.Duration) {
			t.Helper()
			start := time.Now()
			if !d.Submit(&dispatch.Job{TaskID: "a", Seq: seq, Due: start.UnixNano(), Attempt: 1, Epoch: 3,
				URL: "http://" + receiver + "/cb", Timeout: time.Second}) {
				t.Fatal("submit refused")
			}
			r := <-results
			return r, time.Since(start)
		}

		if r, _ := fire(1); r.Outcome != dispatch.OutcomeSuccess {
			t.Fatalf("fire over the pipe network: %v %q, want success", r.Outcome, r.Err)
		}
		h := <-got
		if h.Get("X-Chime-Node") != "n7" || h.Get("X-Chime-Slot-Epoch") != "3" {
			t.Errorf("callback headers X-Chime-Node %q, X-Chime-Slot-Epoch %q; want n7, 3", h.Get("X-Chime-Node"), h.Get("X-Chime-Slot-Epoch"))
		}

		pn.partition([]string{sender}, []string{receiver})
		if r, took := fire(2); r.Outcome != dispatch.OutcomeFailure || took != time.Second {
			t.Errorf("fire across a partition: %v after %v, want a failure after the 1s timeout", r.Outcome, took)
		}
		pn.heal()
		if r, _ := fire(3); r.Outcome != dispatch.OutcomeSuccess {
			t.Errorf("fire after heal: %v %q, want success", r.Outcome, r.Err)
		}
		<-got

		pn.crash(sender)
		if r, took := fire(4); r.Outcome != dispatch.OutcomeFailure || took != 0 {
			t.Errorf("fire from a crashed node: %v %q after %v, want an immediate failure", r.Outcome, r.Err, took)
		}

		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		d.Close(ctx)
		srv.Close()
		<-served
	})
}

// Links between lossy addresses delay writes and sometimes reset the
// connection; links to an address outside the set are never touched.
func TestFaultPipeNetLossAndDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const a, b, outside = "10.0.0.1:8080", "10.0.0.2:8080", "10.0.9.9:80"
		pn := newPipeNet()
		pn.setFaults([]string{a, b}, 0.2, 20*time.Millisecond, 7)
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
		})}
		var served []chan struct{}
		for _, addr := range []string{b, outside} {
			ln := pn.listen(addr)
			done := make(chan struct{})
			served = append(served, done)
			go func() {
				defer close(done)
				_ = srv.Serve(ln)
			}()
		}
		client := &http.Client{Transport: &http.Transport{DialContext: pn.dialer(a)}}
		calls := func(to string) (failed int, took time.Duration) {
			start := time.Now()
			for range 100 {
				resp, err := client.Post("http://"+to+"/", "text/plain", nil)
				if err != nil {
					failed++
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			return failed, time.Since(start)
		}
		if failed, took := calls(outside); failed != 0 || took != 0 {
			t.Errorf("to an address outside the lossy set: %d of 100 calls failed, took %v; want none, 0s", failed, took)
		}
		failed, took := calls(b)
		st := pn.stats()
		t.Logf("lossy link: %d of 100 calls failed in %v; %+v", failed, took, st)
		if failed == 0 || failed > 80 || st.Resets == 0 {
			t.Errorf("lossy link: %d of 100 calls failed (%d resets); want some, not most", failed, st.Resets)
		}
		if took < 100*time.Millisecond {
			t.Errorf("lossy link: 100 calls took %v of fake time; want the delays (mean 10ms per write)", took)
		}
		client.CloseIdleConnections()
		srv.Close()
		for _, done := range served {
			<-done
		}
	})
}
