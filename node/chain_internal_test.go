package node

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/chime-scheduler/chime/node/chain"
	"github.com/chime-scheduler/chime/node/forward"
	"github.com/chime-scheduler/chime/node/httpapi"
	"github.com/chime-scheduler/chime/ring"
	"github.com/chime-scheduler/chime/slots"
	"github.com/chime-scheduler/chime/storage"
)

// TestInternalChainHostile: POST /internal/v1/chain creates a child only
// for a member that signs with the cluster secret, and only from a record
// that checks out; anything else is refused before a write, and a repeat
// of a created child creates nothing (create-if-absent).
func TestInternalChainHostile(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		secret := []byte("s3cret")
		b := startSigningNode(t, "b", secret)
		to := ring.Member{Name: "b", HTTPAddr: b.cfg.HTTPAddr}
		good := signer(t, "a", secret, time.Second)
		child := func(id string) *storage.Task {
			now := time.Now().UnixNano()
			return &storage.Task{ID: id, Slot: uint16(slots.Of(id)), Status: storage.StatusScheduled,
				Spec:    storage.Spec{Kind: storage.KindOnce, CallbackURL: "http://127.0.0.1:9/cb", DelayMs: 60000},
				NextDue: now + int64(time.Minute), CreatedAt: now, ParentID: "p", ParentFire: "p:1"}
		}
		enc := func(tk *storage.Task) []byte {
			body, err := storage.EncodeTask(tk)
			if err != nil {
				t.Fatal(err)
			}
			return body
		}
		post := func(f *forward.Client, body []byte) httpapi.Answer {
			c, err := f.Do(t.Context(), to, http.MethodPost, "/internal/v1/chain", body, http.Header{}, 0)
			if err != nil {
				t.Fatalf("POST of %d bytes: %v", len(body), err)
			}
			return c
		}
		field := func(c httpapi.Answer) string {
			var e struct {
				Error struct{ Field string } `json:"error"`
			}
			_ = json.Unmarshal(c.Body, &e)
			return e.Error.Field
		}

		if code := b.do(t, "POST", "/internal/v1/chain", enc(child("p.1.0")), nil); code != http.StatusUnauthorized {
			t.Errorf("unsigned: %d, want 401", code)
		}
		if c := post(signer(t, "x", []byte("other"), time.Second), enc(child("p.1.0"))); c.Status != http.StatusUnauthorized {
			t.Errorf("signed with another secret: %d, want 401", c.Status)
		}
		wrongSlot := child("p.1.1")
		wrongSlot.Slot++
		noParent := child("p.1.2")
		noParent.ParentID = ""
		done := child("p.1.3")
		done.Status = storage.StatusDone
		for _, c := range []struct {
			name  string
			body  []byte
			code  int
			field string
		}{
			{"garbage", []byte{0xde, 0xad, 0xbe, 0xef}, 400, "body"},
			{"empty", nil, 400, "body"},
			{"a slot not the id's", enc(wrongSlot), 400, "slot"},
			{"no parent", enc(noParent), 400, "parent_id"},
			{"not a new task", enc(done), 400, "status"},
		} {
			if got := post(good, c.body); got.Status != c.code || (c.field != "" && field(got) != c.field) {
				t.Errorf("%s: %d %s, want %d on %q", c.name, got.Status, got.Body, c.code, c.field)
			}
		}
		// Past the bound the node stops reading (413, or the sender's
		// write fails on the pipe network): nothing is allocated or written.
		if c, err := good.Do(t.Context(), to, http.MethodPost, "/internal/v1/chain",
			bytes.Repeat([]byte{'x'}, chain.MaxBody+1), http.Header{}, 0); err == nil && c.Status != http.StatusRequestEntityTooLarge {
			t.Errorf("too long: %d, want 413", c.Status)
		}
		for _, id := range []string{"p.1.1", "p.1.2", "p.1.3"} {
			if code := b.do(t, "GET", "/v1/tasks/"+id, nil, nil); code != http.StatusNotFound {
				t.Errorf("refused child %s: GET = %d, want 404 (nothing written)", id, code)
			}
		}

		if c := post(good, enc(child("p.1.0"))); c.Status != http.StatusCreated {
			t.Fatalf("a good child: %d %s, want 201", c.Status, c.Body)
		}
		if c := post(good, enc(child("p.1.0"))); c.Status != http.StatusOK || !bytes.Contains(c.Body, []byte(`"created":false`)) {
			t.Errorf("the same child again: %d %s, want 200 created false", c.Status, c.Body)
		}
		var got map[string]any
		if code := b.do(t, "GET", "/v1/tasks/p.1.0", nil, &got); code != http.StatusOK || got["parent_id"] != "p" {
			t.Errorf("created child: %d %v, want it with parent_id p", code, got)
		}
	})
}
