package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chime-scheduler/chime/slots"
)

// freeGossipPorts returns k loopback ports free for both TCP and UDP
// (memberlist binds both). They are below the kernel's ephemeral range
// when there is room, so that no outgoing connection (of a node already
// running, or of anything else on the machine) takes one between this
// check and the node's bind, or while a killed node is down.
func freeGossipPorts(t *testing.T, k int) []int {
	t.Helper()
	lo, hi := 10000, 0 // hi: the first ephemeral port
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			hi, _ = strconv.Atoi(f[0])
		}
	}
	var out []int
	for tries := 0; len(out) < k; tries++ {
		port := 0 // the kernel's choice, when there is no room below the range
		if hi > lo+1000 && tries < 1000 {
			port = lo + rand.IntN(hi-lo)
		}
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			continue
		}
		port = l.Addr().(*net.TCPAddr).Port
		u, err := net.ListenPacket("udp", "127.0.0.1:"+strconv.Itoa(port))
		l.Close()
		if err != nil {
			continue // taken for UDP: try another
		}
		u.Close()
		if !slices.Contains(out, port) {
			out = append(out, port)
		}
	}
	return out
}

// procClusterView is the part of GET /v1/cluster the tests read.
type procClusterView struct {
	Self         string `json:"self"`
	TableVersion uint64 `json:"table_version"`
	Settled      bool   `json:"settled"`
	Members      []struct {
		Name            string      `json:"name"`
		HTTPAddr        string      `json:"http_addr"`
		State           string      `json:"state"`
		Status          string      `json:"status"`
		SlotsOwned      int         `json:"slots_owned"`
		SlotsFollowing  int         `json:"slots_following"`
		OwnedRanges     [][2]uint16 `json:"owned_ranges"`
		FollowingRanges [][2]uint16 `json:"following_ranges"`
	} `json:"members"`
}

// getCluster reads GET /v1/cluster without the slot ranges: a few hundred
// bytes (with them, ~280 KB for 3 nodes, a tenth of a second to decode
// under -race, for every poll).
func getCluster(url string) (procClusterView, error) { return readCluster(url + "/v1/cluster") }

// getClusterRanges reads GET /v1/cluster with every member's slot ranges
// (ownerOf, slotOwners need them).
func getClusterRanges(url string) (procClusterView, error) {
	return readCluster(url + "/v1/cluster?ranges=true")
}

func readCluster(url string) (procClusterView, error) {
	var cv procClusterView
	resp, err := http.Get(url)
	if err != nil {
		return cv, err
	}
	defer resp.Body.Close()
	return cv, json.NewDecoder(resp.Body).Decode(&cv)
}

// readTableVersion reads table_version from GET /v1/cluster (without the
// ranges: with them the view is a few hundred KB, a tenth of a second to
// decode under -race), decoding only up to it.
func readTableVersion(url string) (uint64, error) {
	resp, err := http.Get(url + "/v1/cluster")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("/v1/cluster: %d", resp.StatusCode)
	}
	dec := json.NewDecoder(resp.Body)
	if _, err := dec.Token(); err != nil { // {
		return 0, err
	}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return 0, err
		}
		if key == "table_version" {
			var v uint64
			err := dec.Decode(&v)
			return v, err
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return 0, err
		}
	}
	return 0, errors.New("/v1/cluster has no table_version")
}

// startCluster starts k chime processes that join each other and waits
// until every one sees all k active and the same table. The k start at
// once, as scripts/cluster.sh up starts them: each has every other in its
// join list.
func startCluster(t *testing.T, k int, extra ...string) []*chimeProc {
	t.Helper()
	ports := freeGossipPorts(t, 2*k) // gossip, then HTTP (so a restart can reuse it)
	var addrs []string
	for _, p := range ports[:k] {
		addrs = append(addrs, "127.0.0.1:"+strconv.Itoa(p))
	}
	var procs []*chimeProc
	for i := range k {
		args := append([]string{"--name", fmt.Sprintf("n%d", i+1), "--gossip-addr", addrs[i],
			"--join", strings.Join(addrs, ","), "--http-addr", "127.0.0.1:" + strconv.Itoa(ports[k+i])}, extra...)
		procs = append(procs, launchChime(t, t.TempDir(), args...))
	}
	for _, p := range procs {
		p.awaitReady(t)
	}
	awaitAgreement(t, procs)
	return procs
}

// joinNode starts one more process, named n<len(procs)+1>, with the flags
// extra, that joins the cluster of procs through their gossip addresses,
// and waits until it and procs agree on one table (it has taken over its
// slots). It returns procs with the new node last; SIGTERM (signal) makes
// it drain and leave.
func joinNode(t *testing.T, procs []*chimeProc, extra ...string) []*chimeProc {
	t.Helper()
	var join []string
	for _, p := range procs {
		join = append(join, argAfter(p.args, "--gossip-addr"))
	}
	args := append([]string{"--name", fmt.Sprintf("n%d", len(procs)+1),
		"--gossip-addr", "127.0.0.1:" + strconv.Itoa(freeGossipPorts(t, 1)[0]), "--join", strings.Join(join, ",")}, extra...)
	all := append(slices.Clip(procs), startChime(t, t.TempDir(), args...))
	awaitAgreement(t, all)
	return all
}

// awaitAgreement waits until the nodes procs agree (clusterAgreement),
// failing after 30 s with each one's view.
func awaitAgreement(t *testing.T, procs []*chimeProc) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		why := clusterAgreement(procs)
		if why == "" {
			return
		}
		if time.Now().After(deadline) {
			for _, p := range procs {
				cv, err := getCluster(p.url)
				t.Logf("%s: %+v %v", p.url, cv, err)
			}
			t.Fatalf("the %d nodes did not agree on one table in 30 s: %s", len(procs), why)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// clusterAgreement returns "" when the nodes procs (named by --name) agree:
// each is ready (joined, settled, its slots taken over), sees exactly them
// alive and active, and sees the same slot table (the same version: the
// table's checksum), with the same counts of owned and followed slots per
// member; members that are not alive (dead, left) own and follow nothing.
// Otherwise it says what differs.
func clusterAgreement(procs []*chimeProc) string {
	want := map[string]bool{}
	for _, p := range procs {
		want[argAfter(p.cmd.Args, "--name")] = true
	}
	var first procClusterView
	firstRanges := map[string]string{}
	for i, p := range procs {
		resp, err := http.Get(p.url + "/readyz")
		if err != nil {
			return fmt.Sprintf("%s: /readyz: %v", p.url, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Sprintf("%s: /readyz: %d", p.url, resp.StatusCode)
		}
		cv, err := getCluster(p.url)
		if err != nil {
			return fmt.Sprintf("%s: /v1/cluster: %v", p.url, err)
		}
		alive, ranges := 0, map[string]string{}
		for _, m := range cv.Members {
			if m.Status != "alive" {
				if m.SlotsOwned+m.SlotsFollowing > 0 {
					return fmt.Sprintf("%s sees %s %s with slots", cv.Self, m.Status, m.Name)
				}
				continue
			}
			if !want[m.Name] || m.State != "active" {
				return fmt.Sprintf("%s sees %s alive, %s", cv.Self, m.Name, m.State)
			}
			alive++
			ranges[m.Name] = fmt.Sprint(m.SlotsOwned, m.SlotsFollowing)
		}
		if alive != len(want) {
			return fmt.Sprintf("%s sees %d of the %d nodes alive", cv.Self, alive, len(want))
		}
		if i == 0 {
			first, firstRanges = cv, ranges
			continue
		}
		if cv.TableVersion != first.TableVersion {
			return fmt.Sprintf("%s has table %x, %s has %x", cv.Self, cv.TableVersion, first.Self, first.TableVersion)
		}
		for name, r := range ranges {
			if firstRanges[name] != r {
				return fmt.Sprintf("%s and %s disagree on %s's slots", cv.Self, first.Self, name)
			}
		}
	}
	return ""
}

// startFiringCluster starts 3 ready nodes and a receiver for their fires,
// and returns each slot's owner as node 1 sees it.
func startFiringCluster(t *testing.T) ([]*chimeProc, *fireLog, []string) {
	t.Helper()
	procs := startCluster(t, 3)
	fl := newFireLog(t)
	cv, err := getClusterRanges(procs[0].url)
	if err != nil {
		t.Fatal(err)
	}
	return procs, fl, ownerOf(t, cv)
}

// ownerOf maps every slot to its owner's name, from one node's view, and
// fails the test if a slot has none.
func ownerOf(t *testing.T, cv procClusterView) []string {
	t.Helper()
	owners := slotOwners(cv)
	for s, o := range owners {
		if o == "" {
			t.Fatalf("slot %d has no owner in %s's view", s, cv.Self)
		}
	}
	return owners
}

// slotOwners maps every slot to its owner's name in one node's view ("":
// none).
func slotOwners(cv procClusterView) []string {
	owners := make([]string, slots.Count)
	for _, m := range cv.Members {
		for _, r := range m.OwnedRanges {
			for s := int(r[0]); s <= int(r[1]); s++ {
				owners[s] = m.Name
			}
		}
	}
	return owners
}

// metricsText reads url's GET /metrics.
func metricsText(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// metricValue reads one unlabelled or fully labelled sample from /metrics.
func metricValue(t *testing.T, url, sample string) float64 {
	t.Helper()
	for line := range strings.SplitSeq(metricsText(t, url), "\n") {
		if v, ok := strings.CutPrefix(line, sample+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				t.Fatalf("metric %s: %v", sample, err)
			}
			return f
		}
	}
	return 0
}

// TestClusterOfThreeProcesses starts 3 real chime processes on loopback and
// creates 3,000 tasks through one node, so that about two thirds are
// forwarded, plus a batch through another; each task fires exactly once, at
// its owner, never early; a listing through the third node pages over all
// of them without duplicates; and a request for a killed owner's slot is
// answered 503 with Retry-After at once.
func TestClusterOfThreeProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	procs := startCluster(t, 3)
	fl := newFireLog(t)
	cv, err := getClusterRanges(procs[0].url)
	if err != nil {
		t.Fatal(err)
	}
	owners := ownerOf(t, cv)
	// The view is compact by default; the ranges are on request.
	for _, q := range []struct {
		query    string
		min, max int
	}{{"", 100, 20 << 10}, {"?ranges=true", 100 << 10, 1 << 20}} {
		resp, err := http.Get(procs[0].url + "/v1/cluster" + q.query)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || len(b) < q.min || len(b) > q.max {
			t.Errorf("GET /v1/cluster%s on 3 nodes: %d bytes (%v), want %d to %d", q.query, len(b), err, q.min, q.max)
		}
		t.Logf("GET /v1/cluster%s on 3 nodes: %d bytes", q.query, len(b))
	}

	const singles, batched = 3000, 300
	due := time.Now().Add(4 * time.Second)
	var wg sync.WaitGroup
	errs := make(chan string, singles)
	next := make(chan int)
	for range 16 {
		wg.Go(func() {
			for i := range next {
				body := map[string]any{"id": fmt.Sprintf("c-%d", i), "callback_url": fl.srv.URL,
					"due_at": due.Add(time.Duration(i%1000) * time.Millisecond).Format(time.RFC3339Nano)}
				if code := postJSON(t, procs[0].url+"/v1/tasks", body, nil); code != http.StatusCreated {
					errs <- fmt.Sprintf("create c-%d through n1: %d", i, code)
				}
			}
		})
	}
	for i := range singles {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	var tasks []map[string]any
	for i := range batched {
		tasks = append(tasks, map[string]any{"id": fmt.Sprintf("b-%d", i), "callback_url": fl.srv.URL,
			"due_at": due.Add(time.Duration(i) * time.Millisecond).Format(time.RFC3339Nano)})
	}
	tasks = append(tasks, map[string]any{"id": "bad id", "callback_url": fl.srv.URL, "delay_ms": 1000})
	var br struct {
		Results []struct {
			Index  int    `json:"index"`
			ID     string `json:"id"`
			Status int    `json:"status"`
		} `json:"results"`
	}
	if code := postJSON(t, procs[1].url+"/v1/tasks:batch", map[string]any{"tasks": tasks}, &br); code != http.StatusOK {
		t.Fatalf("batch through n2: %d", code)
	}
	if len(br.Results) != batched+1 {
		t.Fatalf("batch answered %d results, want %d", len(br.Results), batched+1)
	}
	for i, r := range br.Results {
		want := http.StatusCreated
		if i == batched {
			want = http.StatusBadRequest
		}
		if r.Index != i || r.Status != want {
			t.Errorf("batch result %d = %+v, want index %d status %d", i, r, i, want)
		}
	}

	// A task owned by n2, read through n1: forwarded, answered by n2.
	for i := range singles {
		id := fmt.Sprintf("c-%d", i)
		if owners[slots.Of(id)] != "n2" {
			continue
		}
		resp, err := http.Get(procs[0].url + "/v1/tasks/" + id)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.Header.Get("X-Chime-Node") != "n2" {
			t.Errorf("GET %s through n1 = %d from %q, want 200 from n2", id, resp.StatusCode, resp.Header.Get("X-Chime-Node"))
		}
		break
	}

	// The whole cluster's listing, through n3, in pages of 250.
	seen := map[string]bool{}
	cursor, pages := "", 0
	for {
		var page struct {
			Tasks []struct {
				ID string `json:"id"`
			} `json:"tasks"`
			NextCursor string `json:"next_cursor"`
		}
		resp, err := http.Get(procs[2].url + "/v1/tasks?limit=250&cursor=" + cursor)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.NewDecoder(resp.Body).Decode(&page); err != nil || resp.StatusCode != 200 {
			t.Fatalf("list page %d: %d %v", pages, resp.StatusCode, err)
		}
		resp.Body.Close()
		pages++
		for _, tk := range page.Tasks {
			if seen[tk.ID] {
				t.Errorf("task %s listed twice", tk.ID)
			}
			seen[tk.ID] = true
		}
		if cursor = page.NextCursor; cursor == "" || pages > 100 {
			break
		}
	}
	if len(seen) != singles+batched {
		t.Errorf("listing returned %d distinct tasks in %d pages, want %d", len(seen), pages, singles+batched)
	}

	// Every task fires exactly once, never early.
	fl.awaitCount(singles+batched, 30*time.Second)
	time.Sleep(500 * time.Millisecond) // let duplicates, if any, arrive
	fl.mu.Lock()
	want := map[string]int{}
	for id, fs := range fl.got {
		if len(fs) != 1 {
			t.Errorf("task %s fired %d times", id, len(fs))
		}
		for _, f := range fs {
			if f.at.Before(f.due) {
				t.Errorf("task %s fired %v early", id, f.due.Sub(f.at))
			}
		}
		want[owners[slots.Of(id)]]++
	}
	got := len(fl.got)
	fl.mu.Unlock()
	if got != singles+batched {
		t.Fatalf("%d of %d tasks fired", got, singles+batched)
	}
	// ... at their owners: each node fired exactly the tasks of its slots.
	for i, p := range procs {
		name := fmt.Sprintf("n%d", i+1)
		if f := metricValue(t, p.url, `chime_fires_total{result="success"}`); int(f) != want[name] {
			t.Errorf("%s fired %v tasks, owns %d of them", name, f, want[name])
		}
	}
	if f := metricValue(t, procs[0].url, `chime_forwarded_requests_total{result="ok"}`); f < singles/2 {
		t.Errorf("n1 forwarded %v requests; about two thirds of %d expected", f, singles)
	}

	// A killed owner: its slots answer 503 + Retry-After at once, until
	// the cluster notices the death.
	procs[2].signal(t, syscall.SIGKILL)
	for i := range singles {
		id := fmt.Sprintf("c-%d", i)
		if owners[slots.Of(id)] != "n3" {
			continue
		}
		start := time.Now()
		resp, err := http.Get(procs[0].url + "/v1/tasks/" + id)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
			t.Errorf("GET %s (owner n3 killed) = %d, Retry-After %q; want 503 with Retry-After", id, resp.StatusCode, resp.Header.Get("Retry-After"))
		}
		if took := time.Since(start); took > 5*time.Second {
			t.Errorf("the 503 took %v", took)
		}
		break
	}
}

// TestFailoverLosesNoAcknowledgedTask: 3 real processes; 1,500 tasks due a
// few seconds ahead are acknowledged through n1 (so each is on its owner and
// its follower), then the node owning most of them is SIGKILLed at once.
// Every task must still fire (at least once), none before its due time: the
// dead node's slots move to their followers, which hold the replicas.
func TestFailoverLosesNoAcknowledgedTask(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	parallelProcs(t, 3)
	procs, fl, owners := startFiringCluster(t)
	const n = 1500
	due := time.Now().Add(6 * time.Second)
	var tasks []map[string]any
	perOwner := map[string]int{}
	for i := range n {
		id := fmt.Sprintf("f-%d", i)
		perOwner[owners[slots.Of(id)]]++
		tasks = append(tasks, map[string]any{"id": id, "callback_url": fl.srv.URL,
			"due_at": due.Add(time.Duration(i%500) * time.Millisecond).Format(time.RFC3339Nano)})
	}
	createAll(t, procs[0].url, tasks)
	victim := 1 // n2 unless another owns more
	for i := range procs {
		if perOwner[fmt.Sprintf("n%d", i+1)] > perOwner[fmt.Sprintf("n%d", victim+1)] && i != 0 {
			victim = i
		}
	}
	name := fmt.Sprintf("n%d", victim+1)
	killed := time.Now()
	procs[victim].signal(t, syscall.SIGKILL)
	t.Logf("killed %s (owner of %d of the %d tasks) %v before the first due time", name, perOwner[name], n, due.Sub(killed).Round(time.Millisecond))
	t.Logf("%s shows %s dead %v after the kill", procs[0].url, name, awaitMemberState(t, procs[0].url, name, "dead", killed))

	fl.awaitCount(n, 40*time.Second)
	time.Sleep(time.Second)
	fl.mu.Lock()
	defer fl.mu.Unlock()
	dups, early := 0, 0
	var firstOfVictim time.Time
	for id, fs := range fl.got {
		d, e := tally(fs)
		dups, early = dups+d, early+e
		for _, f := range fs {
			if owners[slots.Of(id)] == name && (firstOfVictim.IsZero() || f.at.Before(firstOfVictim)) {
				firstOfVictim = f.at
			}
		}
	}
	if len(fl.got) != n {
		var missing []string
		for i := range n {
			if id := fmt.Sprintf("f-%d", i); len(fl.got[id]) == 0 && len(missing) < 5 {
				missing = append(missing, id+"@"+owners[slots.Of(id)])
			}
		}
		t.Errorf("%d of %d acknowledged tasks fired after %s was killed; e.g. missing %v", len(fl.got), n, name, missing)
	}
	if early > 0 {
		t.Errorf("%d fires before their due time", early)
	}
	t.Logf("all fired: %d tasks, %d repeated deliveries of one fire id; the dead node's slots fired again %v after the kill",
		len(fl.got), dups, firstOfVictim.Sub(killed).Round(time.Millisecond))
}

// TestDrainHandsOverWithoutLossOrRepeat: SIGTERM to one of 3 nodes while
// its slots are firing. It stops starting fires, lets the running ones
// finish, has their results replicated, announces it is draining and only
// then leaves: every task fires exactly once, none early, and firing of
// its slots pauses only for the handover.
func TestDrainHandsOverWithoutLossOrRepeat(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	parallelProcs(t, 3)
	procs, fl, _ := startFiringCluster(t)
	const n = 2000
	first := time.Now().Add(3 * time.Second)
	var tasks []map[string]any
	for i := range n {
		tasks = append(tasks, map[string]any{"id": fmt.Sprintf("d-%d", i), "callback_url": fl.srv.URL,
			"due_at": first.Add(time.Duration(i*2) * time.Millisecond).Format(time.RFC3339Nano)})
	}
	createAll(t, procs[0].url, tasks)
	time.Sleep(time.Until(first.Add(1500 * time.Millisecond))) // mid-way through the fires
	start := time.Now()
	procs[1].signal(t, syscall.SIGTERM)
	t.Logf("n2 drained and exited in %v", time.Since(start).Round(time.Millisecond))
	t.Logf("n1 shows n2 left %v after the SIGTERM", awaitMemberState(t, procs[0].url, "n2", "left", start))
	if code := procs[1].cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("n2 exited with %d after SIGTERM", code)
	}
	fl.awaitCount(n, 30*time.Second)
	time.Sleep(time.Second)
	fl.mu.Lock()
	defer fl.mu.Unlock()
	var maxLate time.Duration
	for id, fs := range fl.got {
		if len(fs) != 1 {
			t.Errorf("task %s fired %d times (fire ids %v)", id, len(fs), fs)
		}
		for _, f := range fs {
			if f.at.Before(f.due) {
				t.Errorf("task %s fired %v early", id, f.due.Sub(f.at))
			}
			maxLate = max(maxLate, f.at.Sub(f.due))
		}
	}
	if len(fl.got) != n {
		t.Errorf("%d of %d tasks fired", len(fl.got), n)
	}
	t.Logf("%d tasks fired once each; the latest fire was %v late (the handover pause)", len(fl.got), maxLate.Round(time.Millisecond))
}

// awaitMemberState waits until GET /v1/cluster at url shows member name
// in state want (and as much in status: dead, left), failing after 15 s
// (memberlist declares a death in about 2.5 s here), and returns how long
// after since it first did.
func awaitMemberState(t *testing.T, url, name, want string, since time.Time) time.Duration {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	var last string
	for {
		cv, err := getCluster(url)
		if err == nil {
			last = ""
			for _, m := range cv.Members {
				if m.Name == name {
					if m.State == want && m.Status == want {
						return time.Since(since).Round(time.Millisecond)
					}
					last = m.State + "/" + m.Status
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: member %s is %q (state/status), not %s, %v after the change (%v)", url, name, last, want, time.Since(since), err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// argAfter returns the value after flag in args.
func argAfter(args []string, flag string) string {
	for i := range len(args) - 1 {
		if args[i] == flag {
			return args[i+1]
		}
	}
	return ""
}

// TestRestartWithOldDataResurrectsNothing: a node is SIGKILLed, and while
// it is down some of its tasks are deleted and others replaced through
// the survivors (which took its slots over). When it comes back with its
// old data it takes its slots back only after resyncing from their holders:
// the deleted tasks stay deleted and never fire, the replaced ones fire
// with their new payload, the rest fire once.
func TestRestartWithOldDataResurrectsNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	parallelProcs(t, 3)
	procs, fl, owners := startFiringCluster(t)
	const n = 600
	due := time.Now().Add(20 * time.Second)
	var tasks []map[string]any
	for i := range n {
		tasks = append(tasks, map[string]any{"id": fmt.Sprintf("r-%d", i), "callback_url": fl.srv.URL,
			"due_at": due.Format(time.RFC3339Nano), "payload": map[string]any{"v": 1}})
	}
	createAll(t, procs[0].url, tasks)
	victim := procs[2]
	victim.signal(t, syscall.SIGKILL)
	// Wait until the survivors took n3's slots over (a write to one works).
	var ofVictim []string
	for i := range n {
		if id := fmt.Sprintf("r-%d", i); owners[slots.Of(id)] == "n3" {
			ofVictim = append(ofVictim, id)
		}
	}
	if len(ofVictim) < 20 {
		t.Fatalf("n3 owns only %d tasks", len(ofVictim))
	}
	deleted, replaced := map[string]bool{}, map[string]bool{}
	for k, id := range ofVictim {
		if k%2 == 0 {
			deleted[id] = true
		} else {
			replaced[id] = true
		}
	}
	change := func(id string) int {
		var req *http.Request
		if deleted[id] {
			req, _ = http.NewRequest(http.MethodDelete, procs[0].url+"/v1/tasks/"+id, nil)
		} else {
			buf, _ := json.Marshal(map[string]any{"callback_url": fl.srv.URL, "due_at": due.Format(time.RFC3339Nano), "payload": map[string]any{"v": 2}})
			req, _ = http.NewRequest(http.MethodPut, procs[0].url+"/v1/tasks/"+id, strings.NewReader(string(buf)))
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	deadline := time.Now().Add(20 * time.Second)
	work := make(chan string)
	var wg sync.WaitGroup
	var failed sync.Map
	for range 16 {
		wg.Go(func() {
			for id := range work {
				for {
					code := change(id)
					if code == http.StatusNoContent || code == http.StatusOK {
						break
					}
					if (code != http.StatusServiceUnavailable && code != 0) || time.Now().After(deadline) {
						failed.Store(id, code)
						break
					}
					time.Sleep(100 * time.Millisecond)
				}
			}
		})
	}
	for _, id := range ofVictim {
		work <- id
	}
	close(work)
	wg.Wait()
	failed.Range(func(id, code any) bool {
		t.Errorf("change %s while n3 is down: %v", id, code)
		return true
	})
	// n3 comes back on its old data and takes its slots back.
	back := victim.restart(t)
	procs[2] = back
	if left := time.Until(due); left < time.Second {
		t.Fatalf("n3 was back only %v before the tasks' due time; the test needs it back before", left)
	}
	for _, id := range ofVictim {
		resp, err := http.Get(back.url + "/v1/tasks/" + id)
		if err != nil {
			t.Fatal(err)
		}
		var tk struct {
			Payload map[string]any `json:"payload"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&tk)
		resp.Body.Close()
		switch {
		case deleted[id] && resp.StatusCode != http.StatusNotFound:
			t.Errorf("deleted task %s is back on n3: %d", id, resp.StatusCode)
		case replaced[id] && (resp.StatusCode != http.StatusOK || tk.Payload["v"] != float64(2)):
			t.Errorf("replaced task %s on n3: %d payload %v, want the new payload", id, resp.StatusCode, tk.Payload)
		}
	}
	want := n - len(deleted)
	fl.awaitCount(want, 40*time.Second)
	time.Sleep(time.Second)
	fl.mu.Lock()
	defer fl.mu.Unlock()
	for id, fs := range fl.got {
		if deleted[id] {
			t.Errorf("deleted task %s fired: %+v", id, fs)
		}
		if len(fs) != 1 {
			t.Errorf("task %s fired %d times: %+v", id, len(fs), fs)
		}
	}
	if len(fl.got) != want {
		t.Errorf("%d tasks fired, want %d (%d deleted)", len(fl.got), want, len(deleted))
	}
}

// createAll stores tasks through the node at url in batches of 500 and
// fails unless every one is acknowledged (201).
func createAll(t *testing.T, url string, tasks []map[string]any) {
	t.Helper()
	for off := 0; off < len(tasks); off += 500 {
		var br struct {
			Results []struct {
				Status int `json:"status"`
			} `json:"results"`
		}
		end := min(off+500, len(tasks))
		if code := postJSON(t, url+"/v1/tasks:batch", map[string]any{"tasks": tasks[off:end]}, &br); code != http.StatusOK {
			t.Fatalf("batch of tasks %d-%d: %d", off, end-1, code)
		}
		if len(br.Results) != end-off {
			t.Fatalf("batch of tasks %d-%d: %d results", off, end-1, len(br.Results))
		}
		for i, r := range br.Results {
			if r.Status != http.StatusCreated {
				t.Fatalf("task %d: status %d", off+i, r.Status)
			}
		}
	}
}

// TestClusterRefusesToRunOpen: a node started in cluster mode without a
// cluster secret and a gossip key exits at once with a one-line error that
// says how to fix it; with --insecure-cluster it runs, and says so in its
// log and on /v1/cluster.
func TestClusterRefusesToRunOpen(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	parallelProcs(t, 1)
	gossip := fmt.Sprintf("127.0.0.1:%d", freeGossipPorts(t, 1)[0])
	cmd := chimeCmd(t, []string{"CHIME_CLUSTER_SECRET=", "CHIME_GOSSIP_KEY="},
		"serve", "--data-dir", t.TempDir(), "--http-addr", "127.0.0.1:0", "--gossip-addr", gossip)
	done := make(chan struct{})
	var out []byte
	var err error
	go func() { out, err = cmd.CombinedOutput(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("a node without secrets in cluster mode did not exit in 30 s")
	}
	msg := strings.TrimSpace(string(out))
	if err == nil || !strings.Contains(msg, "a cluster needs --cluster-secret") || !strings.Contains(msg, "--insecure-cluster") ||
		strings.Count(msg, "\n") > 0 {
		t.Errorf("exit %v, output %q: want a failure with one line naming --cluster-secret and --insecure-cluster", err, msg)
	}

	p := startChime(t, t.TempDir(), "--gossip-addr", fmt.Sprintf("127.0.0.1:%d", freeGossipPorts(t, 1)[0]), "--insecure-cluster")
	if !strings.Contains(p.log(), "--insecure-cluster: calls between nodes and gossip are not authenticated") {
		t.Errorf("no warning in the log of an insecure node:\n%s", p.log())
	}
	var cv struct {
		Insecure bool `json:"insecure"`
	}
	resp, err := http.Get(p.url + "/v1/cluster")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&cv); err != nil || !cv.Insecure {
		t.Errorf("/v1/cluster of an insecure node: insecure=%v (%v)", cv.Insecure, err)
	}
}
