package node

import (
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/chime-scheduler/chime/slots"
	"github.com/chime-scheduler/chime/storage"
)

// TestFireWaitsForItsAck: a task is not fired before the API write that
// made it due is acknowledged. The disk takes 200 ms per sync, so a create
// (or a trigger) is committed, and its task in the wheel, long before its
// 2xx; the callback comes after the 2xx all the same, for a create due now,
// one due in the past and a trigger of a task due in an hour.
func TestFireWaitsForItsAck(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rcv := newReceiver(t)
		mem := storage.NewMemFS()
		tn := startNode(t, func(c *Config) { c.Mem = mem })
		mem.DelaySync(200 * time.Millisecond)
		later := time.Now().Add(time.Hour).UTC().Format(time.RFC3339Nano)
		if code := tn.do(t, "POST", "/v1/tasks", `{"id":"t","callback_url":"`+rcv.url("/cb")+`","due_at":"`+later+`"}`, nil); code != 201 {
			t.Fatalf("create t: %d", code)
		}
		past := time.Now().Add(-time.Minute).UTC().Format(time.RFC3339Nano)
		for _, c := range []struct{ id, method, path, body string }{
			{"now", "POST", "/v1/tasks", `{"id":"now","callback_url":"` + rcv.url("/cb") + `","delay_ms":0}`},
			{"past", "PUT", "/v1/tasks/past", `{"callback_url":"` + rcv.url("/cb") + `","due_at":"` + past + `"}`},
			{"t", "POST", "/v1/tasks/t/trigger", ``},
		} {
			sent := time.Now()
			code := tn.do(t, c.method, c.path, c.body, nil)
			acked := time.Since(sent)
			if code/100 != 2 {
				t.Fatalf("%s %s: %d", c.method, c.path, code)
			}
			if acked < 200*time.Millisecond {
				t.Fatalf("%s answered after %v: the disk's sync delay is not in force", c.id, acked)
			}
			rcv.waitHits(t, 10*time.Second, func(hs []hit) bool {
				for _, h := range hs {
					if h.TaskID == c.id {
						return true
					}
				}
				return false
			})
			for _, h := range rcv.hits() {
				if h.TaskID == c.id && h.At.Sub(sent) < acked {
					t.Errorf("%s fired %v after its request, before its %d at %v", c.id, h.At.Sub(sent), code, acked)
				}
			}
		}
	})
}

// TestFireWaitsForItsFollowersAck: in a cluster a write is acknowledged
// once its follower has it too. The follower's disk takes 300 ms a sync,
// so the owner's create waits that long for the follower's ack; the task,
// created due at once, fires only after its 201.
func TestFireWaitsForItsFollowersAck(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c := newFaultCluster(t, 3, 41)
		id := ids("gate", 1, c.table(0), ownedBy("n1"))[0]
		f, _ := c.table(0).Follower(slots.Of(id))
		for _, n := range c.nodes {
			if n.name == f.Name {
				n.mem.DelaySync(300 * time.Millisecond)
			}
		}
		sent := time.Now()
		code, body := c.request(0, http.MethodPost, "/v1/tasks", map[string]any{"id": id, "callback_url": faultCallbackURL, "delay_ms": 0})
		acked := time.Since(sent)
		if code != http.StatusCreated {
			t.Fatalf("create %s on its owner: %d %s", id, code, body)
		}
		if acked < 300*time.Millisecond {
			t.Fatalf("create answered after %v: the follower's sync delay is not in force", acked)
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			for _, x := range c.rcv.all() {
				if x.TaskID == id {
					if x.At.Sub(sent) < acked {
						t.Errorf("%s fired %v after its create, before its 201 at %v", id, x.At.Sub(sent), acked)
					}
					return
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s not fired 10 s after its create", id)
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
}
