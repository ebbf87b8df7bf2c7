package client_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"hash"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chime-scheduler/chime/client"
	"github.com/chime-scheduler/chime/client/signature"
	"github.com/chime-scheduler/chime/slots"
)

// fireRequest is a callback request as a node sends it, signed at t with
// keys by the node's own signing code (signature.Append).
func fireRequest(t time.Time, body string, keys ...[]byte) *http.Request {
	r := httptest.NewRequest("POST", "http://receiver.example/hook", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("X-Chime-Task-Id", "invoice-42")
	r.Header.Set("X-Chime-Fire-Id", "invoice-42:3")
	r.Header.Set("X-Chime-Due-At", "2026-03-01T12:00:00.5Z")
	r.Header.Set("X-Chime-Attempt", "2")
	r.Header.Set("X-Chime-Node", "n1")
	r.Header.Set("X-Chime-Slot-Epoch", "7")
	if len(keys) > 0 {
		var macs []hash.Hash
		for _, k := range keys {
			macs = append(macs, hmac.New(sha256.New, k))
		}
		var sum [sha256.Size]byte
		r.Header.Set("X-Chime-Signature", string(signature.Append(nil, macs, &sum, t.Unix(), []byte("invoice-42:3"), []byte(body))))
	}
	return r
}

func TestParseFire(t *testing.T) {
	r := fireRequest(time.Now(), `{"invoice":42}`)
	f, err := client.ParseFire(r)
	if err != nil {
		t.Fatal(err)
	}
	want := client.Fire{TaskID: "invoice-42", FireID: "invoice-42:3", DueAt: time.Date(2026, 3, 1, 12, 0, 0, 5e8, time.UTC),
		Attempt: 2, Node: "n1", Slot: slots.Of("invoice-42"), SlotEpoch: 7, Payload: []byte(`{"invoice":42}`)}
	if f.TaskID != want.TaskID || f.FireID != want.FireID || !f.DueAt.Equal(want.DueAt) || f.Attempt != want.Attempt ||
		f.Node != want.Node || f.Slot != want.Slot || f.SlotEpoch != want.SlotEpoch || string(f.Payload) != string(want.Payload) {
		t.Errorf("ParseFire = %+v, want %+v", f, want)
	}
	if b, _ := io.ReadAll(r.Body); string(b) != `{"invoice":42}` {
		t.Errorf("the body after ParseFire = %q, want it readable", b)
	}

	// Standalone: no epoch header.
	r = fireRequest(time.Now(), "")
	r.Header.Del("X-Chime-Slot-Epoch")
	if f, err := client.ParseFire(r); err != nil || f.SlotEpoch != 0 || len(f.Payload) != 0 {
		t.Errorf("ParseFire without epoch and body = %+v, %v", f, err)
	}

	for _, tt := range []struct{ header, value string }{
		{"X-Chime-Task-Id", ""},
		{"X-Chime-Fire-Id", ""},
		{"X-Chime-Due-At", "yesterday"},
		{"X-Chime-Attempt", "0"},
		{"X-Chime-Attempt", "x"},
		{"X-Chime-Slot-Epoch", "-1"},
	} {
		r := fireRequest(time.Now(), "{}")
		r.Header.Set(tt.header, tt.value)
		if _, err := client.ParseFire(r); err == nil {
			t.Errorf("ParseFire with %s %q: no error", tt.header, tt.value)
		}
	}
}

func TestVerifySignature(t *testing.T) {
	key, next, other := []byte("current-key-0123456789"), []byte("next-key-0123456789"), []byte("other-key-0123456789")
	now := time.Now()
	tests := []struct {
		name   string
		r      *http.Request
		maxAge time.Duration
		keys   [][]byte
		want   error
	}{
		{name: "good", r: fireRequest(now, `{"a":1}`, key), keys: [][]byte{key}},
		{name: "rotation, the receiver has the old key", r: fireRequest(now, `{"a":1}`, key, next), keys: [][]byte{key}},
		{name: "rotation, the receiver has the new key", r: fireRequest(now, `{"a":1}`, key, next), keys: [][]byte{next}},
		{name: "the receiver knows both", r: fireRequest(now, `{"a":1}`, next), keys: [][]byte{key, next}},
		{name: "empty body", r: fireRequest(now, "", key), keys: [][]byte{key}},
		{name: "bad key", r: fireRequest(now, `{"a":1}`, other), keys: [][]byte{key}, want: client.ErrSignatureInvalid},
		{name: "expired", r: fireRequest(now.Add(-6*time.Minute), `{"a":1}`, key), keys: [][]byte{key}, want: client.ErrSignatureExpired},
		{name: "expired under a shorter max age", r: fireRequest(now.Add(-time.Minute), `{"a":1}`, key), maxAge: 30 * time.Second, keys: [][]byte{key}, want: client.ErrSignatureExpired},
		{name: "from the future", r: fireRequest(now.Add(6*time.Minute), `{"a":1}`, key), keys: [][]byte{key}, want: client.ErrSignatureExpired},
		{name: "missing", r: fireRequest(now, `{"a":1}`), keys: [][]byte{key}, want: client.ErrSignatureMissing},
		{name: "no key", r: fireRequest(now, `{"a":1}`, key), want: client.ErrNoKey},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := ""
			if tt.r.Body != nil {
				b, _ := io.ReadAll(tt.r.Body)
				body = string(b)
				tt.r.Body = io.NopCloser(strings.NewReader(body))
			}
			if err := client.VerifySignature(tt.r, tt.maxAge, tt.keys...); !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
				t.Errorf("VerifySignature = %v, want %v", err, tt.want)
			}
			if b, _ := io.ReadAll(tt.r.Body); string(b) != body {
				t.Errorf("the body after VerifySignature = %q, want %q", b, body)
			}
		})
	}

	// A changed body or fire id fails.
	r := fireRequest(now, `{"a":1}`, key)
	r.Body = io.NopCloser(strings.NewReader(`{"a":2}`))
	if err := client.VerifySignature(r, 0, key); !errors.Is(err, client.ErrSignatureInvalid) {
		t.Errorf("changed body: %v, want ErrSignatureInvalid", err)
	}
	r = fireRequest(now, `{"a":1}`, key)
	r.Header.Set("X-Chime-Fire-Id", "invoice-42:4")
	if err := client.VerifySignature(r, 0, key); !errors.Is(err, client.ErrSignatureInvalid) {
		t.Errorf("changed fire id: %v, want ErrSignatureInvalid", err)
	}
}

func TestMemoryDeduper(t *testing.T) {
	a, b := "task-a", "task-b"
	sa := slots.Of(a)
	fire := func(task string, seq int, epoch uint64) client.Fire {
		return client.Fire{TaskID: task, FireID: task + ":" + strconv.Itoa(seq), Slot: slots.Of(task), SlotEpoch: epoch}
	}
	if slots.Of(b) == sa {
		t.Fatal("pick task ids in different slots")
	}
	type step struct {
		f      client.Fire
		forget bool // Forget f.FireID instead of admitting it
		want   error
	}
	tests := []struct {
		name  string
		size  int
		steps []step
	}{
		{name: "dedupe by fire id", size: 10, steps: []step{
			{f: fire(a, 1, 0)}, {f: fire(a, 1, 0), want: client.ErrDuplicate}, {f: fire(a, 2, 0)}, {f: fire(b, 1, 0)},
		}},
		{name: "a repeat after a failover is still a duplicate", size: 10, steps: []step{
			{f: fire(a, 1, 3)}, {f: fire(a, 1, 4), want: client.ErrDuplicate}, {f: fire(a, 2, 4)},
		}},
		{name: "a deposed owner is fenced per slot", size: 10, steps: []step{
			{f: fire(a, 1, 3)}, {f: fire(a, 2, 4)}, {f: fire(a, 3, 3), want: client.ErrStaleEpoch},
			{f: fire(b, 1, 1)}, // another slot has its own epoch
			{f: fire(a, 3, 4)},
		}},
		{name: "epoch 0 is never stale", size: 10, steps: []step{
			{f: fire(a, 1, 5)}, {f: fire(a, 2, 0)},
		}},
		{name: "forget admits the retry", size: 10, steps: []step{
			{f: fire(a, 1, 0)}, {f: fire(a, 1, 0), forget: true}, {f: fire(a, 1, 0)}, {f: fire(a, 1, 0), want: client.ErrDuplicate},
		}},
		{name: "the oldest ids are forgotten first", size: 2, steps: []step{
			{f: fire(a, 1, 0)}, {f: fire(a, 2, 0)}, {f: fire(a, 3, 0)},
			{f: fire(a, 3, 0), want: client.ErrDuplicate}, {f: fire(a, 2, 0), want: client.ErrDuplicate},
			{f: fire(a, 1, 0)}, // evicted, so new again
		}},
		{name: "forgotten then admitted again outlives its first place", size: 3, steps: []step{
			{f: fire(a, 1, 0)}, {f: fire(a, 1, 0), forget: true}, {f: fire(a, 1, 0)}, {f: fire(a, 2, 0)},
			{f: fire(a, 3, 0)}, // takes a:1's first place
			{f: fire(a, 1, 0), want: client.ErrDuplicate},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := client.NewMemoryDeduper(tt.size)
			for i, s := range tt.steps {
				if s.forget {
					d.Forget(s.f.FireID)
					continue
				}
				if err := d.Admit(s.f); !errors.Is(err, s.want) || (s.want == nil) != (err == nil) {
					t.Errorf("step %d: Admit(%s, epoch %d) = %v, want %v", i, s.f.FireID, s.f.SlotEpoch, err, s.want)
				}
			}
		})
	}
}
