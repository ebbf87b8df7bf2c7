package node

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chime-scheduler/chime/node/httpapi"

	"github.com/chime-scheduler/chime/ring"
	"github.com/chime-scheduler/chime/ring/gossip"
	"github.com/chime-scheduler/chime/ring/gossip/memnet"
	"github.com/chime-scheduler/chime/slots"
	"github.com/chime-scheduler/chime/storage"
)

// The fault harness: full nodes (store, writer, loop, dispatcher, gossip,
// ownership machine, replication, API) in one process, inside a
// testing/synctest bubble. Gossip runs on memnet, HTTP between nodes
// (ctl messages, replication, forwarding), from the test client and to the
// callback receiver on a pipeNet, and every store on a storage.MemFS, so
// nothing touches a socket or a disk and time is fake: failure detection,
// handovers and due times of several seconds cost no real time, only the
// CPU the nodes spend meanwhile, and the bubble ends only when every
// goroutine of every node has exited. The links between nodes lose and
// delay a little (faultLoss, faultDelay).
//
//	synctest.Test(t, func(t *testing.T) {
//		c := newFaultCluster(t, 3, 1) // n1..n3, ready
//		first := time.Now().Add(2 * time.Second)
//		c.create(ids("a", 10, c.table(0), nil), first, 100*time.Millisecond)
//		c.crash(1) // n2 dies without a word
//		c.settle(first.Add(15 * time.Second)) // every task fired, or 15 s
//		report(t, c.check(checkOpts{}))
//		c.close()
//	})
//
// Cost: each node's ownership machine ticks its 16384 slots ~7 times a
// second and heartbeats the ones it owns, so an idle node costs ~0.35 s of
// CPU per second of fake time under -race (~0.04 s without); tests keep
// their clusters small and their fake time short.

// Addresses on the in-memory networks. The receiver and the client are on
// no side of a partition: every node reaches them.
const (
	faultReceiverAddr = "10.0.9.9:80"
	faultClientAddr   = "10.0.8.8:40000"
	faultCallbackURL  = "http://" + faultReceiverAddr + "/cb"
)

// faultSecret signs the calls between the harness's nodes.
var faultSecret = []byte("fault-harness")

// gossipSettle is the fake time a bubble sleeps after the last close, so
// memberlist's goroutines finish inside it.
const gossipSettle = 30 * time.Second

// faultCluster is up to len(nodes) full nodes and a callback receiver.
type faultCluster struct {
	t      *testing.T
	gnet   *memnet.Network
	hnet   *pipeNet
	rcv    *fireRecorder
	client *http.Client
	rnd    *rand.Rand
	seed   uint64
	nodes  []*faultNode
	// configure changes every node's Config before it starts.
	configure []func(*Config)
	closed    bool // close ran

	mu       sync.Mutex
	faults   []faultWindow        // when a fault allowed a node's fires to be repeated
	calls    map[string]int       // internal calls between nodes, by path
	acked    map[string]time.Time // task id -> acknowledged due time
	replaced map[string]time.Time // task id -> when a PUT changed its due time
	gone     map[string]time.Time // task id -> when its DELETE was acknowledged
}

// faultNode is one member's slot in the harness; it keeps its store's
// filesystem across stops and crashes.
type faultNode struct {
	name   string
	gossip string // gossip address (memnet)
	http   string // API address (pipeNet)
	mem    *storage.MemFS
	n      *Node // nil while down
	srv    *pipeServer
}

// newFaultCluster starts k nodes n1..nk at the same moment, each joining
// through all of them, as the `chime serve` processes of a new cluster
// start, and waits until every one is ready: they bootstrap the cluster
// together. Then every slot's table owner must fire it at the highest
// epoch any member knows (epochsBehind): that checks the formation in
// every fault test. The links between the nodes are lossy from the start
// (faultLoss, faultDelay). seed drives the harness's choices (which node a
// request goes to) and the losses; it is logged. configure changes every
// node's Config before it starts (see faultCluster.configure). k may be 1:
// a one-member cluster, which a test can grow with add and start.
func newFaultCluster(t *testing.T, k int, seed uint64, configure ...func(*Config)) *faultCluster {
	t.Helper()
	c := newFaultHarness(t, seed)
	c.configure = configure
	for i := range k {
		c.nodes = append(c.nodes, c.newNode(i))
	}
	c.lossy()
	for i := range k {
		c.start(i, c.seeds(k))
	}
	c.waitReady(c.up()...)
	if k > 1 {
		c.waitReplicated()
	}
	report(t, c.epochsBehind())
	// The ownership machines' messages crossed the in-memory network, so
	// its faults apply (and the replication does: close checks). A lone
	// member has nobody to call.
	if k > 1 && c.internalCalls("/internal/v1/ctl") == 0 {
		t.Errorf("no /internal/v1/ctl call between nodes went through the pipe network")
	}
	return c
}

// countCalls counts the internal calls h serves that come from a node.
func (c *faultCluster) countCalls(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/internal/") && r.RemoteAddr != faultClientAddr {
			c.mu.Lock()
			c.calls[r.URL.Path]++
			c.mu.Unlock()
		}
		h.ServeHTTP(w, r)
	})
}

// internalCalls returns how many calls to path nodes served from nodes.
func (c *faultCluster) internalCalls(path string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls[path]
}

// Faults on every link between two nodes, gossip and HTTP alike: a small
// loss rate (a gossip packet dropped; an HTTP call between nodes — ctl
// messages, replication, forwarded requests — reset before its request or
// its answer got through) and a delay of up to faultDelay per write. What
// the client sends and the callbacks are neither lost nor delayed, so a
// fire's arrival time is when its node sent it.
const (
	faultLoss  = 0.01
	faultDelay = 4 * time.Millisecond
)

// lossy makes the links between every node the harness has so far (and
// gossip between any two addresses) lossy.
func (c *faultCluster) lossy() {
	var addrs []string
	for _, fn := range c.nodes {
		addrs = append(addrs, fn.http)
	}
	c.hnet.setFaults(addrs, faultLoss, faultDelay, c.seed)
	c.gnet.SetLoss(faultLoss)
}

// newFaultHarness sets up the networks, the receiver and the client.
func newFaultHarness(t *testing.T, seed uint64) *faultCluster {
	t.Helper()
	if re := os.Getenv("CHIME_RACE_CLUSTERS"); raceOn && re != "" && !regexp.MustCompile(re).MatchString(t.Name()) {
		// make check runs the in-process clusters without the race
		// detector, which costs them ~10x (docs/BENCHMARKS.md), and only
		// those CHIME_RACE_CLUSTERS names with it; every other node test
		// runs under it. make test-race-full runs them all under it.
		// (raceOn is true under -tags invariants too; only make check
		// sets the variable.)
		t.Skip("in-process cluster: make check runs it without -race (CHIME_RACE_CLUSTERS)")
	}
	if v := os.Getenv("CHIME_FAULT_SEED"); v != "" {
		// Another run of the same scenarios: other losses, other choices.
		off, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("CHIME_FAULT_SEED=%q: %v", v, err)
		}
		seed += off * 1000
	}
	t.Logf("harness seed %d", seed)
	c := &faultCluster{
		t:        t,
		seed:     seed,
		gnet:     memnet.New(seed),
		hnet:     newPipeNet(),
		rnd:      rand.New(rand.NewPCG(seed, 0xfa17)),
		calls:    map[string]int{},
		acked:    map[string]time.Time{},
		replaced: map[string]time.Time{},
		gone:     map[string]time.Time{},
	}
	c.rcv = newFireRecorder(c.hnet.listen(faultReceiverAddr), seed)
	c.client = &http.Client{
		Timeout:   15 * time.Second,
		Transport: &http.Transport{DialContext: c.hnet.dialer(faultClientAddr)},
	}
	// A test that stops early (t.Fatal) leaves its nodes running: their
	// timers would keep the bubble's fake time going until the test
	// binary's timeout. The bubble's cleanups run before it waits for its
	// goroutines.
	t.Cleanup(c.close)
	return c
}

func (c *faultCluster) newNode(i int) *faultNode {
	return &faultNode{
		name:   fmt.Sprintf("n%d", i+1),
		gossip: fmt.Sprintf("127.0.0.1:%d", 7001+i),
		http:   fmt.Sprintf("10.0.0.%d:8080", i+1),
		mem:    storage.NewMemFS(),
	}
}

// add makes room for one more node (not started) and returns its index.
func (c *faultCluster) add() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.nodes = append(c.nodes, c.newNode(len(c.nodes)))
	c.hnet.setFaults([]string{c.nodes[len(c.nodes)-1].http}, faultLoss, faultDelay, c.seed+uint64(len(c.nodes)))
	return len(c.nodes) - 1
}

// seeds returns the gossip addresses of the first k nodes.
func (c *faultCluster) seeds(k int) []string {
	var out []string
	for _, fn := range c.nodes[:k] {
		out = append(out, fn.gossip)
	}
	return out
}

// start starts node i on its filesystem (empty, or what it had) joining
// through seeds. It does not wait for readiness.
func (c *faultCluster) start(i int, seeds []string) {
	c.t.Helper()
	fn := c.nodes[i]
	if fn.n != nil {
		c.t.Fatalf("start %s: already running", fn.name)
	}
	cfg := DefaultConfig()
	cfg.Name = fn.name
	cfg.HTTPAddr = fn.http
	cfg.Mem = fn.mem
	cfg.Seed = uint64(i + 1)
	cfg.DialContext = c.hnet.dialer(fn.http)
	cfg.Logger = faultLogger(c.t)
	// A due-index scan seeks every owned slot; under the race detector
	// it costs ~100 ms, and the harness's tasks are filed directly or by
	// the catch-up scan of a gained slot anyway.
	cfg.LoadInterval = 20 * time.Second
	// Few callbacks at a time: fewer goroutines, same behaviour.
	cfg.Dispatch.Concurrency, cfg.Dispatch.PerHost = 16, 16
	g := gossip.DefaultLocalConfig()
	g.Transport = c.gnet.Transport(fn.gossip)
	g.Logger = cfg.Logger
	cc := DefaultClusterConfig(g)
	cc.Join = seeds
	cc.Secret = faultSecret
	cc.TraceSlots, _ = strconv.Atoi(os.Getenv("CHIME_TRACE_SLOTS"))
	cfg.Cluster = &cc
	for _, f := range c.configure {
		f(&cfg)
	}
	n, err := New(cfg)
	if err != nil {
		c.t.Fatalf("New %s: %v", fn.name, err)
	}
	ln := c.hnet.listen(fn.http) // dials wait in accept until Serve runs
	if err := n.Start(); err != nil {
		ln.Close()
		c.t.Fatalf("Start %s: %v", fn.name, err)
	}
	c.mu.Lock()
	fn.n = n
	c.mu.Unlock()
	fn.srv = servePipe(ln, c.countCalls(n.Handler()))
}

// restart starts node i again on what its filesystem holds, joining
// through every other node, and waits until it is ready.
func (c *faultCluster) restart(i int) {
	c.t.Helper()
	var seeds []string
	for j, fn := range c.nodes {
		if j != i {
			seeds = append(seeds, fn.gossip)
		}
	}
	c.start(i, seeds)
	c.waitReady(i)
}

// stop closes node i gracefully (drain, leave) and waits for it.
func (c *faultCluster) stop(i int) {
	c.t.Helper()
	fn := c.nodes[i]
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// The API keeps serving while the node drains: peers pull its slots.
	if err := fn.n.Close(ctx); err != nil {
		c.t.Errorf("Close %s: %v", fn.name, err)
	}
	c.closeServer(fn)
}

// crash kills node i the way SIGKILL does: first its network goes (gossip
// and HTTP: nothing more leaves or reaches it, callbacks included), its
// disk is frozen as the kill leaves it, then its goroutines are stopped
// without a drain or a leave. A restart finds the frozen disk.
func (c *faultCluster) crash(i int) {
	c.t.Helper()
	c.kill(i, true)
}

// kill is crash; keep false drops the frozen disk instead of copying it,
// for close: nothing restarts the node (a copy of a store costs ~0.1 s of
// CPU under -race).
func (c *faultCluster) kill(i int, keep bool) {
	c.t.Helper()
	fn := c.nodes[i]
	c.mu.Lock()
	c.faults = append(c.faults, faultWindow{fn.name, time.Now().Add(-repeatLag), time.Now(), "crash"})
	c.mu.Unlock()
	c.hnet.crash(fn.http)
	c.gnet.Crash(fn.gossip)
	if keep {
		fn.mem = fn.mem.CrashClone()
	} else {
		fn.mem = nil
	}
	if err := fn.n.crash(); err != nil {
		c.t.Logf("crash %s: stopping: %v", fn.name, err)
	}
	c.closeServer(fn)
}

func (c *faultCluster) closeServer(fn *faultNode) {
	fn.srv.close()
	c.mu.Lock()
	fn.n, fn.srv = nil, nil
	c.mu.Unlock()
}

// crash stops n as a killed process stops, for tests: nothing is drained
// or handed over, gossip stops without a leave (peers declare the node
// dead), running callbacks are cut at once. The caller cuts its network
// first; the goroutines still write their last results to the store on
// the way out, which a real kill would not, so a restart should use a
// storage.MemFS CrashClone taken before.
func (n *Node) crash() error {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return n.shutdown(ctx, stopCrash)
}

// partition cuts the cluster into groups of node indexes, for gossip and
// HTTP alike; nodes in no group form one more group. The receiver and the
// client stay reachable from everywhere. Until heal, the nodes outside the
// largest group may have fires repeated (their results cannot reach the
// majority that takes their slots over).
func (c *faultCluster) partition(groups ...[]int) {
	largest := 0
	for k, g := range groups {
		if len(g) > len(groups[largest]) {
			largest = k
		}
	}
	c.mu.Lock()
	for i, fn := range c.nodes {
		if !slices.Contains(groups[largest], i) {
			c.faults = append(c.faults, faultWindow{fn.name, time.Now().Add(-repeatLag), time.Time{}, "partition"})
		}
	}
	c.mu.Unlock()
	var gg, hg [][]string
	listed := map[int]bool{}
	for _, g := range groups {
		var ga, ha []string
		for _, i := range g {
			ga = append(ga, c.nodes[i].gossip)
			ha = append(ha, c.nodes[i].http)
			listed[i] = true
		}
		gg, hg = append(gg, ga), append(hg, ha)
	}
	var ga, ha []string
	for i, fn := range c.nodes {
		if !listed[i] {
			ga, ha = append(ga, fn.gossip), append(ha, fn.http)
		}
	}
	if len(ga) > 0 {
		gg, hg = append(gg, ga), append(hg, ha)
	}
	c.gnet.Partition(gg...)
	c.hnet.partition(hg...)
}

// heal removes the partition.
func (c *faultCluster) heal() {
	c.gnet.Heal()
	c.hnet.heal()
	c.mu.Lock()
	for k := range c.faults {
		if c.faults[k].why == "partition" && c.faults[k].to.IsZero() {
			c.faults[k].to = time.Now()
		}
	}
	c.mu.Unlock()
}

// repeatLag is how long before a crash or a cut a node's fire may have
// completed without its result reaching the node that takes its slot
// over: results are replicated without anyone waiting, at once, or after
// a shipper retry (100 ms and up) when a call between the nodes was lost.
const repeatLag = time.Second

// faultWindow says that the fires node sent within [from, to] may be
// repeated (to zero: until now): their results may not have reached the
// slot's next owner because of the fault (why).
type faultWindow struct {
	node     string
	from, to time.Time
	why      string
}

// quorumWatch records when running nodes lose and regain the majority of
// their own view (View.Quorum), polling every 50 ms of fake time.
type quorumWatch struct {
	stop, done chan struct{}
	mu         sync.Mutex
	lost       map[string]time.Time // first loss of each node
}

// watchQuorum starts a quorumWatch; call its close before c.close.
func (c *faultCluster) watchQuorum() *quorumWatch {
	w := &quorumWatch{stop: make(chan struct{}), done: make(chan struct{}), lost: map[string]time.Time{}}
	go func() {
		defer close(w.done)
		had := map[string]bool{}
		for {
			c.mu.Lock()
			for _, fn := range c.nodes {
				if fn.n == nil {
					continue
				}
				q := fn.n.view.Load().Quorum
				if prev, ok := had[fn.name]; ok && prev != q {
					c.t.Logf("%v: %s majority %v -> %v", fakeClock{}, fn.name, prev, q)
					w.mu.Lock()
					if _, seen := w.lost[fn.name]; !q && !seen {
						w.lost[fn.name] = time.Now()
					}
					w.mu.Unlock()
				}
				had[fn.name] = q
			}
			c.mu.Unlock()
			select {
			case <-w.stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	return w
}

// lostAt returns when node first lost its majority, if it did.
func (w *quorumWatch) lostAt(node string) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	t, ok := w.lost[node]
	return t, ok
}

func (w *quorumWatch) close() {
	close(w.stop)
	<-w.done
}

// up returns the indexes of the running nodes. Called from other
// goroutines than the test's, it needs c.mu.
func (c *faultCluster) up() []int {
	var out []int
	for i, fn := range c.nodes {
		if fn.n != nil {
			out = append(out, i)
		}
	}
	return out
}

// waitReady waits (fake time) until the given nodes report ready and
// their tables hold exactly the running nodes (so a crash has been
// detected and a restarted node is back).
func (c *faultCluster) waitReady(idx ...int) {
	c.t.Helper()
	start := time.Now()
	c.mu.Lock()
	want := c.names(c.up())
	c.mu.Unlock()
	for {
		ready := true
		for _, i := range idx {
			n := c.nodes[i].n
			var names []string
			for _, m := range n.view.Load().Table.Members() {
				names = append(names, m.Name)
			}
			slices.Sort(names)
			if !n.Ready() || !slices.Equal(names, want) {
				ready = false
				break
			}
		}
		if ready {
			c.t.Logf("%v: nodes %v ready after %v", fakeClock{}, c.names(idx), time.Since(start))
			return
		}
		if time.Since(start) > 60*time.Second {
			c.t.Fatalf("nodes %v not ready after %v", c.names(idx), time.Since(start))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitReplicated waits (fake time) until no running node owns a slot
// whose follower holds no copy yet: a new cluster is ready once every
// slot fires, and its followers catch up just after (~1 s: two heartbeat
// rounds). The fault tests start from a cluster at rest, where every
// owner has its follower. A lone member has none.
func (c *faultCluster) waitReplicated() {
	c.t.Helper()
	start := time.Now()
	for {
		under := 0
		for _, i := range c.up() {
			under += c.nodes[i].n.ctl.Counts().UnderReplicated
		}
		if under == 0 {
			c.t.Logf("%v: every slot replicated after %v more", fakeClock{}, time.Since(start))
			return
		}
		if time.Since(start) > 30*time.Second {
			c.t.Fatalf("%d slots under-replicated 30 s after the nodes were ready", under)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (c *faultCluster) names(idx []int) []string {
	var out []string
	for _, i := range idx {
		out = append(out, c.nodes[i].name)
	}
	return out
}

// roles counts node i's slots by the role its ownership machine last
// published for them.
func (c *faultCluster) roles(i int) map[slots.Role]int {
	out := map[slots.Role]int{}
	for s := range uint16(slots.Count) {
		r, _, _ := c.nodes[i].n.ctl.State(s)
		out[r]++
	}
	return out
}

// owns reports whether node i's ownership machine last published any slot
// as owned (roles(i)[slots.RoleOwner] > 0, without counting them all).
func (c *faultCluster) owns(i int) bool {
	for s := range uint16(slots.Count) {
		if r, _, _ := c.nodes[i].n.ctl.State(s); r == slots.RoleOwner {
			return true
		}
	}
	return false
}

// table returns the slot table as node i sees it.
func (c *faultCluster) table(i int) ring.Table { return c.nodes[i].n.view.Load().Table }

// ids returns k new task ids (prefix-0, prefix-1, …, skipping ids whose slot
// does not qualify) whose slot satisfies pick in table tb; pick nil takes
// every id.
func ids(prefix string, k int, tb ring.Table, pick func(owner, follower string) bool) []string {
	var out []string
	for j := 0; len(out) < k; j++ {
		id := prefix + "-" + strconv.Itoa(j)
		s := slots.Of(id)
		o, _ := tb.Owner(s)
		f, _ := tb.Follower(s)
		if pick == nil || pick(o.Name, f.Name) {
			out = append(out, id)
		}
	}
	return out
}

// request sends one API request to node i through the in-memory network
// and returns the status and the body. A string body is sent as it is
// (malformed JSON too), anything else as its JSON.
func (c *faultCluster) request(i int, method, path string, body any) (int, []byte) {
	c.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			c.t.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, "http://"+c.nodes[i].http+path, rd)
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.client.Do(req)
	if err != nil {
		return 0, []byte(err.Error())
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, data
}

// pick returns a random running node.
func (c *faultCluster) pick() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	up := c.up()
	return up[c.rnd.IntN(len(up))]
}

// retryable reports whether a write's answer leaves it undecided, so that
// a client tries again: a 503 (no owner yet, owner unreachable, not
// replicated) or no answer at all.
func retryable(code int) bool { return code == 0 || code == http.StatusServiceUnavailable }

// tries is how often the harness sends one write, each to the next
// running node after a random first one, 200 ms apart, as a client
// would. Failover takes longer; a write that fails every try is not
// counted as acknowledged.
const tries = 3

// put creates or replaces task id, due at due, first through node via
// (then through the next running nodes), and records it as acknowledged on
// a 2xx. PUT makes the retries harmless. A replacement that is not
// acknowledged leaves the task undecided: it is no longer checked. It
// reports whether the write was acknowledged.
func (c *faultCluster) put(id string, due time.Time, via int) bool {
	c.t.Helper()
	body := map[string]any{"callback_url": faultCallbackURL, "due_at": due.Format(time.RFC3339Nano)}
	code, _ := c.send(via, http.MethodPut, "/v1/tasks/"+id, body, http.StatusCreated, http.StatusOK)
	c.mu.Lock()
	defer c.mu.Unlock()
	old, had := c.acked[id]
	switch {
	case code == http.StatusCreated || code == http.StatusOK:
		if had && !old.Equal(due) {
			c.replaced[id] = time.Now()
		}
		c.acked[id] = due
		return true
	case had:
		delete(c.acked, id)
		delete(c.replaced, id)
	}
	return false
}

// send sends one request (a write, or a read) until it gets one of the ok
// codes or an answer that is not retryable, at most tries times, and
// returns the last status (0: no answer) and how many tries it took.
func (c *faultCluster) send(via int, method, path string, body any, ok ...int) (code, n int) {
	c.t.Helper()
	for try := range tries {
		n = try + 1
		if try > 0 {
			time.Sleep(200 * time.Millisecond)
		}
		c.mu.Lock()
		up := c.up()
		c.mu.Unlock()
		i := up[(slices.Index(up, via)+try+len(up))%len(up)]
		var ans []byte
		code, ans = c.request(i, method, path, body)
		if slices.Contains(ok, code) {
			return code, n
		}
		c.t.Logf("%v: %s %s via %s: %d %s", fakeClock{}, method, path, c.nodes[i].name, code, bytes.TrimSpace(ans))
		if !retryable(code) {
			return code, n
		}
	}
	return code, n
}

// get reads path through node via, retried like send (each try through
// the next running node, 200 ms apart) while the answer is retryable: a
// read forwarded to the owner crosses the lossy links, and a lost call is
// a 503, not an answer about the cluster. It returns the last answer.
func (c *faultCluster) get(via int, path string) (int, []byte) {
	c.t.Helper()
	var code int
	var ans []byte
	for try := range tries {
		if try > 0 {
			time.Sleep(200 * time.Millisecond)
		}
		c.mu.Lock()
		up := c.up()
		c.mu.Unlock()
		i := up[(slices.Index(up, via)+try+len(up))%len(up)]
		if code, ans = c.request(i, http.MethodGet, path, nil); !retryable(code) {
			return code, ans
		}
		c.t.Logf("%v: GET %s via %s: %d %s", fakeClock{}, path, c.nodes[i].name, code, bytes.TrimSpace(ans))
	}
	return code, ans
}

// create creates the ids, the j-th due at first + j*step, in one batch
// (POST /v1/tasks:batch) through a random running node, which stores its
// own part and forwards the rest to the owners in parallel: the whole batch
// takes one round trip of fake time, so the due times stay ahead. A task
// the batch did not acknowledge is retried alone with put. It returns how
// many were acknowledged.
func (c *faultCluster) create(idList []string, first time.Time, step time.Duration) int {
	c.t.Helper()
	return c.createVia(c.pick(), idList, first, step)
}

// createVia is create with the batch sent through node via.
func (c *faultCluster) createVia(via int, idList []string, first time.Time, step time.Duration) int {
	c.t.Helper()
	due := func(j int) time.Time { return first.Add(time.Duration(j) * step) }
	tasks := make([]map[string]any, len(idList))
	for j, id := range idList {
		tasks[j] = map[string]any{"id": id, "callback_url": faultCallbackURL, "due_at": due(j).Format(time.RFC3339Nano)}
	}
	code, body := c.request(via, http.MethodPost, "/v1/tasks:batch", map[string]any{"tasks": tasks})
	var ans struct {
		Results []httpapi.BatchResult `json:"results"`
	}
	if code != http.StatusOK || json.Unmarshal(body, &ans) != nil || len(ans.Results) != len(idList) {
		c.t.Logf("%v: batch of %d via %s: %d %s", fakeClock{}, len(idList), c.nodes[via].name, code, bytes.TrimSpace(body))
		ans.Results = make([]httpapi.BatchResult, len(idList))
	}
	ok := 0
	for j, id := range idList {
		if ans.Results[j].Status == http.StatusCreated {
			c.mu.Lock()
			c.acked[id] = due(j)
			c.mu.Unlock()
			ok++
			continue
		}
		if e := ans.Results[j].Error; e != nil {
			c.t.Logf("%v: batch via %s: %s: %d %s", fakeClock{}, c.nodes[via].name, id, ans.Results[j].Status, e.Message)
		}
		if c.put(id, due(j), c.pick()) {
			ok++
		}
	}
	c.t.Logf("%v: %d of %d creates acknowledged", fakeClock{}, ok, len(idList))
	return ok
}

// replace replaces the ids, the j-th to be due at first + j*step, one PUT
// each through a random running node (see put).
func (c *faultCluster) replace(idList []string, first time.Time, step time.Duration) int {
	c.t.Helper()
	ok := 0
	for j, id := range idList {
		if c.put(id, first.Add(time.Duration(j)*step), c.pick()) {
			ok++
		}
	}
	c.t.Logf("%v: %d of %d replacements acknowledged", fakeClock{}, ok, len(idList))
	return ok
}

// remove deletes task id through a random running node and records when
// the delete was acknowledged (204, or 404 on a retry: an earlier try that
// got no clear answer did it). A delete that is not acknowledged leaves
// the task undecided: it is no longer checked.
func (c *faultCluster) remove(id string) bool {
	c.t.Helper()
	code, n := c.send(c.pick(), http.MethodDelete, "/v1/tasks/"+id, nil, http.StatusNoContent, http.StatusNotFound)
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.acked[id]; ok && code == http.StatusNotFound && n == 1 {
		c.t.Errorf("%v: DELETE %s: 404 at the first try: the acknowledged task is gone", fakeClock{}, id)
	}
	delete(c.acked, id)
	delete(c.replaced, id)
	if code == http.StatusNoContent || code == http.StatusNotFound {
		c.gone[id] = time.Now()
		return true
	}
	return false
}

// settle waits (fake time) until every acknowledged task fired at its
// acknowledged due time, or until limit, and then faultsQuiet more, so that
// late repeats, fires of deposed owners and deleted tasks coming back
// still arrive before the check.
func (c *faultCluster) settle(limit time.Time) {
	c.t.Helper()
	for time.Now().Before(limit) {
		fired := map[string]bool{}
		for _, f := range c.rcv.all() {
			fired[f.TaskID+"@"+f.Due.String()] = true
		}
		c.mu.Lock()
		missing := 0
		for id, due := range c.acked {
			if !fired[id+"@"+due.String()] {
				missing++
			}
		}
		c.mu.Unlock()
		if missing == 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(faultsQuiet)
	st := c.hnet.stats()
	c.t.Logf("%v: settled; links between nodes: %d writes, %d delayed, %d reset (lost); gossip: %+v",
		fakeClock{}, st.Writes, st.Delayed, st.Resets, c.gnet.Stats())
}

// close kills every node still running (the checks are done; no handover
// needed), stops the receiver and lets the goroutines of memberlist and
// the HTTP clients finish, so the bubble can end. It runs once; the
// harness calls it at the test's cleanup too.
func (c *faultCluster) close() {
	if c.closed {
		return
	}
	c.closed = true
	c.mu.Lock()
	acked := len(c.acked)
	c.mu.Unlock()
	if acked > 0 && len(c.nodes) > 1 && c.internalCalls("/internal/v1/replicate") == 0 {
		// A cluster that took tasks replicated them (or their snapshots)
		// over the in-memory network, so its faults applied.
		c.t.Errorf("%d tasks acknowledged, but no /internal/v1/replicate call between nodes went through the pipe network", acked)
	}
	for _, i := range c.up() {
		c.kill(i, false)
	}
	c.client.CloseIdleConnections()
	c.rcv.close()
	// memberlist's goroutines end within gossipSettle; fasthttp's idle
	// connection cleaner sleeps up to its MaxIdleConnDuration (30 s).
	time.Sleep(gossipSettle + 10*time.Second)
}

// fakeClock logs the bubble's fake time as an offset from its start
// (midnight UTC, 2000-01-01).
type fakeClock struct{}

func (fakeClock) String() string {
	return "t+" + time.Since(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)).Round(time.Millisecond).String()
}

// faultLogger logs warnings and errors to t, timed by the fake clock;
// CHIME_FAULT_LOG=info logs more (with CHIME_TRACE_SLOTS, the slot traces).
func faultLogger(t *testing.T) *slog.Logger {
	level := slog.LevelWarn
	if os.Getenv("CHIME_FAULT_LOG") == "info" {
		level = slog.LevelInfo
	}
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{
		Level: level,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == slog.TimeKey {
				return slog.String(slog.TimeKey, sinceEpoch(a.Value.Time()))
			}
			return a
		},
	}))
}

// fire is one callback the receiver got.
type fire struct {
	TaskID  string
	FireID  string
	Node    string // X-Chime-Node: who sent it
	Epoch   uint64 // X-Chime-Slot-Epoch; 0 if absent
	Slot    uint16
	Attempt int
	Due     time.Time // X-Chime-Due-At
	At      time.Time // arrival, fake time
	Ack     bool      // X-Chime-Ack: 1, an ACK attempt (API.md "The ACK phase")
}

func (f fire) String() string {
	return fmt.Sprintf("%s from %s epoch %d at %v (due %v)", f.FireID, f.Node, f.Epoch, sinceEpoch(f.At), sinceEpoch(f.Due))
}

// sinceEpoch prints a fake time as an offset from the bubble's start.
func sinceEpoch(t time.Time) string {
	return "t+" + t.Sub(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)).Round(time.Millisecond).String()
}

// fireRecorder is the callback receiver: an HTTP server on the pipeNet
// that records every callback, in arrival order, and answers 200 after a
// short random delay (faultAnswerDelay).
type fireRecorder struct {
	srv   *pipeServer
	mu    sync.Mutex
	fires []fire
	rnd   *rand.Rand // answer delays; guarded by mu
}

// faultAnswerDelay bounds how long the receiver takes to answer a
// callback (a random delay in [0, faultAnswerDelay) of fake time): fires
// are in flight for a while, so a handover that did not wait for its
// running callbacks, or a crash in the middle of one, shows as a repeat.
const faultAnswerDelay = 200 * time.Millisecond

func newFireRecorder(ln *pipeListener, seed uint64) *fireRecorder {
	r := &fireRecorder{rnd: rand.New(rand.NewPCG(seed, 0xca11))}
	r.srv = servePipe(ln, http.HandlerFunc(r.serve))
	return r
}

func (r *fireRecorder) serve(w http.ResponseWriter, req *http.Request) {
	_, _ = io.Copy(io.Discard, req.Body)
	h := req.Header
	f := fire{TaskID: h.Get("X-Chime-Task-Id"), FireID: h.Get("X-Chime-Fire-Id"), Node: h.Get("X-Chime-Node"), At: time.Now()}
	f.Slot = slots.Of(f.TaskID)
	f.Epoch, _ = strconv.ParseUint(h.Get("X-Chime-Slot-Epoch"), 10, 64)
	f.Attempt, _ = strconv.Atoi(h.Get("X-Chime-Attempt"))
	f.Due, _ = time.Parse(time.RFC3339Nano, h.Get("X-Chime-Due-At"))
	f.Ack = h.Get("X-Chime-Ack") == "1"
	r.mu.Lock()
	r.fires = append(r.fires, f)
	d := time.Duration(r.rnd.Int64N(int64(faultAnswerDelay)))
	r.mu.Unlock()
	time.Sleep(d)
	if strings.HasPrefix(f.TaskID, "fail-") {
		// Tasks named fail-… fail (the execution log tests).
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = io.WriteString(w, "broken "+f.FireID)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// all returns the fires so far, in arrival order.
func (r *fireRecorder) all() []fire {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.fires)
}

func (r *fireRecorder) close() { r.srv.close() }
