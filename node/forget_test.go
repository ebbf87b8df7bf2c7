package node

import (
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/chime-scheduler/chime/ring"
	"github.com/chime-scheduler/chime/storage"
)

// TestFaultForgetOwnerDeadAtFormation: a new cluster's n2 reaches the
// others by gossip but none of its calls arrive (its heartbeats, grants
// and copies are lost), and it dies: nobody holds a grant of the slots it
// took at the bootstrap, so they wait for it, unavailable, as a node that
// dies around its own bootstrap leaves them (DESIGN §4, "A dead owner's
// slot nobody holds a grant of"). An operator forgets it: the survivors
// take those slots after a census of each other's copies (slots,
// census.go), here empty, become ready, and fire tasks of every slot.
// Then n2 returns with its data, is told it was forgotten, and takes its
// slots back only by handover.
func TestFaultForgetOwnerDeadAtFormation(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c := newFaultHarness(t, 29)
		for i := range 3 {
			c.nodes = append(c.nodes, c.newNode(i))
		}
		c.lossy()
		n1, n2, n3 := c.nodes[0], c.nodes[1], c.nodes[2]
		c.hnet.partition([]string{n1.http, n3.http}, []string{n2.http}) // gossip only
		for i := range 3 {
			c.start(i, c.seeds(3))
		}
		time.Sleep(10 * time.Second)
		c.crash(1)
		c.hnet.heal()
		time.Sleep(10 * time.Second)
		waiting := n1.n.ctl.Counts().Unavailable + n3.n.ctl.Counts().Unavailable
		t.Logf("%v: %d slots wait for n2 (unavailable on n1, n3)", fakeClock{}, waiting)
		if waiting == 0 {
			t.Fatalf("no slot waits for n2: the test does not reach the census (n1: %+v, n3: %+v)", n1.n.ctl.Counts(), n3.n.ctl.Counts())
		}
		if code, _ := c.send(0, http.MethodPost, "/v1/cluster/members/n2/forget", nil, http.StatusOK); code != http.StatusOK {
			t.Fatalf("forget n2: %d", code)
		}
		c.waitReady(0, 2)
		if _, body := c.get(2, "/v1/cluster"); !strings.Contains(string(body), `"name":"n2"`) || !strings.Contains(string(body), `"forgotten":true`) {
			t.Errorf("n3's /v1/cluster does not show n2 forgotten: %s", body)
		}
		if f := n1.n.ctl.Counts().Firing + n3.n.ctl.Counts().Firing; f != 16384 {
			t.Errorf("n1 and n3 fire %d slots, want all 16384", f)
		}
		first := time.Now().Add(2 * time.Second)
		c.create(ids("after", 200, c.table(0), func(string, string) bool { return true }), first, 5*time.Millisecond)
		c.settle(first.Add(2*time.Second + faultsSettle))
		// n2 comes back with its data after all: the others tell it, as
		// it joins, that its earlier run was forgotten, and it claims none
		// of the slots it took at the bootstrap (slots.Disowned); its
		// slots move back to it by handover, and no fire repeats.
		c.restart(1)
		if !n2.n.cluster.Gossip().RunForgotten() {
			t.Errorf("n2 came back and was not told its earlier run was forgotten")
		}
		second := time.Now().Add(2 * time.Second)
		c.create(ids("back", 200, c.table(0), func(string, string) bool { return true }), second, 5*time.Millisecond)
		c.settle(second.Add(2*time.Second + faultsSettle))
		report(t, c.check(checkOpts{}))
		c.close()
	})
}

// TestFaultWipedNodeIsDisowned: a node that comes back with an empty data
// dir under its old name, not forgotten (its disk was replaced), asks the
// members whether its name had an earlier run (GET /internal/v1/run) and,
// told so, claims nothing that run held (slots.Disowned): it must not hand
// a restarted owner back an epoch that run may have acted on (sim seeds
// 564, 7377, 7748 with -simwipefault 2). The nodes of a new cluster, all
// empty too, and a node restarted with its data are not disowned. Every
// acknowledged task still fires once the slots settle.
func TestFaultWipedNodeIsDisowned(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c := newFaultHarness(t, 31)
		for i := range 3 {
			c.nodes = append(c.nodes, c.newNode(i))
		}
		for i := range 3 {
			c.start(i, c.seeds(3))
		}
		c.waitReady(0, 1, 2)
		for i, fn := range c.nodes {
			if fn.n.exec.Disowned() {
				t.Errorf("n%d of a new cluster is disowned", i+1)
			}
		}
		first := time.Now().Add(2 * time.Second)
		c.create(ids("before", 200, c.table(0), func(string, string) bool { return true }), first, 5*time.Millisecond)
		c.crash(1)
		c.restart(1) // with its data
		if c.nodes[1].n.exec.Disowned() {
			t.Error("n2, restarted with its data, is disowned")
		}
		c.crash(2)
		c.nodes[2].mem = storage.NewMemFS() // a new disk
		c.restart(2)
		if !c.nodes[2].n.exec.Disowned() {
			t.Error("n3 came back with an empty data dir and was not told its name had an earlier run")
		}
		second := time.Now().Add(2 * time.Second)
		c.create(ids("after", 200, c.table(0), func(string, string) bool { return true }), second, 5*time.Millisecond)
		c.settle(second.Add(2*time.Second + faultsSettle))
		report(t, c.check(checkOpts{}))
		c.close()
	})
}

// TestInternalRunAuth: GET /internal/v1/run answers only signed calls and
// refuses a boot id that is not a positive integer (field boot); a node
// outside any cluster has no runs to speak of.
func TestInternalRunAuth(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		secret := []byte("s3cret")
		b := startSigningNode(t, "b", secret)
		if code := b.do(t, "GET", "/internal/v1/run?boot=5", nil, nil); code != http.StatusUnauthorized {
			t.Errorf("unsigned GET /internal/v1/run = %d, want 401", code)
		}
		a := signer(t, "a", secret, time.Second)
		for _, q := range []string{"", "?boot=", "?boot=0", "?boot=-1", "?boot=x", "?boot=18446744073709551616"} {
			c, err := a.Do(t.Context(), ring.Member{Name: "b", HTTPAddr: b.cfg.HTTPAddr}, "GET", "/internal/v1/run"+q, nil, http.Header{}, 0)
			if err != nil || c.Status != http.StatusBadRequest || !strings.Contains(string(c.Body), `"field":"boot"`) {
				t.Errorf("GET /internal/v1/run%s = %d %s, %v; want 400 on field boot", q, c.Status, c.Body, err)
			}
		}
		c, err := a.Do(t.Context(), ring.Member{Name: "b", HTTPAddr: b.cfg.HTTPAddr}, "GET", "/internal/v1/run?boot=5", nil, http.Header{}, 0)
		if err != nil || c.Status != http.StatusBadRequest {
			t.Errorf("GET /internal/v1/run on a standalone node = %d %s, %v; want 400", c.Status, c.Body, err)
		}
	})
}
