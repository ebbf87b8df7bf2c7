package keyring

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/chime-scheduler/chime/node/httpapi"
	"github.com/chime-scheduler/chime/ring/gossip"
)

// fakeRing is a gossip keyring with Membership's rules: install adds once,
// use needs an installed key, remove refuses the primary.
type fakeRing struct {
	mu   sync.Mutex
	keys [][]byte // primary first; nil: no encryption
}

func (f *fakeRing) Keys() (gossip.Keys, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.keys == nil {
		return gossip.Keys{}, gossip.ErrNoEncryption
	}
	return gossip.Keys{Primary: f.keys[0], All: slices.Clone(f.keys)}, nil
}

func (f *fakeRing) index(key []byte) int {
	return slices.IndexFunc(f.keys, func(k []byte) bool { return bytes.Equal(k, key) })
}

func (f *fakeRing) InstallKey(key []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.index(key) < 0 {
		f.keys = append(f.keys, key)
	}
	return nil
}

func (f *fakeRing) UseKey(key []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	i := f.index(key)
	if i < 0 {
		return gossip.ErrKeyNotInstalled
	}
	f.keys = append([][]byte{key}, slices.Delete(f.keys, i, i+1)...)
	return nil
}

func (f *fakeRing) RemoveKey(key []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch i := f.index(key); {
	case i == 0:
		return gossip.ErrPrimaryKey
	case i > 0:
		f.keys = slices.Delete(f.keys, i, i+1)
	}
	return nil
}

// cluster is three members whose key endpoints call each other directly.
type cluster struct {
	rings    map[string]*fakeRing
	svcs     map[string]*Service
	members  []gossip.Member
	unreach  map[string]bool // Call fails
	refused  map[string]bool // Authenticate refuses
	internal int             // internal calls answered
}

func newCluster(key []byte, names ...string) *cluster {
	c := &cluster{rings: map[string]*fakeRing{}, svcs: map[string]*Service{}, unreach: map[string]bool{}, refused: map[string]bool{}}
	for _, name := range names {
		c.rings[name] = &fakeRing{keys: [][]byte{key}}
		c.members = append(c.members, gossip.Member{Name: name, Status: gossip.StatusAlive, Meta: gossip.Meta{HTTPAddr: name + ":8080"}})
	}
	var mu sync.Mutex
	for _, name := range names {
		c.svcs[name] = New(Config{
			Self:    name,
			Keyring: func() Keyring { return c.rings[name] },
			Members: func() []gossip.Member { return c.members },
			Call: func(_ context.Context, m gossip.Member, body []byte) (int, []byte, error) {
				if c.unreach[m.Name] {
					return 0, nil, errors.New("connection refused")
				}
				w := httptest.NewRecorder()
				c.svcs[m.Name].HandleInternal(w, httptest.NewRequest("POST", InternalPath, bytes.NewReader(body)))
				mu.Lock()
				c.internal++
				mu.Unlock()
				return w.Code, w.Body.Bytes(), nil
			},
			Authenticate: func(r *http.Request, _ string, limit int64) (string, []byte, *httpapi.Error) {
				if c.refused[name] {
					return "", nil, &httpapi.Error{Code: httpapi.CodeUnauthenticated, Message: "unsigned"}
				}
				body, _ := io.ReadAll(io.LimitReader(r.Body, limit))
				return "x", body, nil
			},
			Log: slog.New(slog.DiscardHandler),
		})
	}
	return c
}

// ask sends a public keys request to member name.
func (c *cluster) ask(t *testing.T, name, op string, key []byte) (int, Answer, *httpapi.Error) {
	t.Helper()
	r := httptest.NewRequest("GET", "/v1/cluster/keys", nil)
	if op != "" {
		b, _ := json.Marshal(request{Op: op, Key: base64.StdEncoding.EncodeToString(key)})
		r = httptest.NewRequest("POST", "/v1/cluster/keys", bytes.NewReader(b))
	}
	w := httptest.NewRecorder()
	c.svcs[name].HandleKeys(w, r)
	var a Answer
	var e struct{ Error *httpapi.Error }
	if w.Code == http.StatusOK {
		if err := json.Unmarshal(w.Body.Bytes(), &a); err != nil {
			t.Fatalf("answer %s: %v", w.Body, err)
		}
	} else if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || e.Error == nil {
		t.Fatalf("error %s: want the error shape", w.Body)
	}
	return w.Code, a, e.Error
}

// summary renders an answer's keys: fingerprint, installed/primary.
func summary(a Answer) string {
	var b strings.Builder
	for _, k := range a.Keys {
		b.WriteString(k.Fingerprint[:4])
		b.WriteString(strings.Repeat("+", k.Installed) + strings.Repeat("*", k.Primary) + " ")
	}
	return b.String()
}

// TestRotation: a rotation asked of one member reaches every member, and
// each step waits for all of them.
func TestRotation(t *testing.T) {
	oldKey, newKey := bytes.Repeat([]byte("o"), 32), bytes.Repeat([]byte("n"), 32)
	o, n := gossip.KeyFingerprint(oldKey)[:4], gossip.KeyFingerprint(newKey)[:4]
	c := newCluster(oldKey, "a", "b", "c")
	steps := []struct {
		op   string
		key  []byte
		want string
	}{
		{"", nil, o + "+++*** "},
		{"install", newKey, o + "+++*** " + n + "+++ "},
		{"use", newKey, n + "+++*** " + o + "+++ "},
		{"remove", oldKey, n + "+++*** "},
	}
	for _, s := range steps {
		code, a, e := c.ask(t, "b", s.op, s.key)
		if code != http.StatusOK || a.Members != 3 || a.Answered != 3 || a.Failed != nil || a.Down != nil {
			t.Fatalf("%s: %d %+v %v", s.op, code, a, e)
		}
		if got := summary(a); got != s.want {
			t.Errorf("%s: keys %q, want %q", s.op, got, s.want)
		}
	}
	for name, r := range c.rings {
		if len(r.keys) != 1 || !bytes.Equal(r.keys[0], newKey) {
			t.Errorf("%s: keyring %q, want only the new key", name, r.keys)
		}
	}
}

// TestRefusals: a key is used only once every live member has it and
// removed only once none sends with it; a member that cannot be asked
// stops both; dead members are reported, not asked.
func TestRefusals(t *testing.T) {
	oldKey, newKey := bytes.Repeat([]byte("o"), 32), bytes.Repeat([]byte("n"), 32)
	c := newCluster(oldKey, "a", "b", "c")
	if code, _, e := c.ask(t, "a", "use", newKey); code != http.StatusConflict || e.Field != "key" || !strings.Contains(e.Message, "has not installed") {
		t.Errorf("use before install: %d %+v", code, e)
	}
	if code, _, e := c.ask(t, "a", "remove", oldKey); code != http.StatusConflict || e.Field != "key" || !strings.Contains(e.Message, "still uses") {
		t.Errorf("remove the primary: %d %+v", code, e)
	}
	c.ask(t, "a", "install", newKey)
	c.unreach["c"] = true
	if code, _, e := c.ask(t, "a", "use", newKey); code != http.StatusServiceUnavailable || !strings.Contains(e.Message, "c: unreachable") {
		t.Errorf("use with c unreachable: %d %+v", code, e)
	}
	c.unreach["c"], c.refused["c"] = false, true
	if code, _, e := c.ask(t, "a", "use", newKey); code != http.StatusServiceUnavailable || !strings.Contains(e.Message, "c: answered 401") {
		t.Errorf("use with c refusing: %d %+v", code, e)
	}
	for name, r := range c.rings {
		if !bytes.Equal(r.keys[0], oldKey) {
			t.Errorf("%s uses another key after refusals", name)
		}
	}
	c.refused["c"] = false
	c.members[2].Status = gossip.StatusDead
	code, a, _ := c.ask(t, "a", "", nil)
	if code != http.StatusOK || a.Answered != 2 || !slices.Equal(a.Down, []string{"c"}) {
		t.Errorf("list with c dead: %d %+v", code, a)
	}
}

// TestBadRequests: every malformed request is refused with the error
// shape and a field, without asking any member.
func TestBadRequests(t *testing.T) {
	key := bytes.Repeat([]byte("k"), 32)
	c := newCluster(key, "a", "b")
	for _, tt := range []struct {
		name, body string
		code       int
		field      string
	}{
		{"not JSON", `{"op":`, 400, "body"},
		{"unknown op", `{"op":"drop"}`, 400, "op"},
		{"list by POST", `{"op":"list"}`, 400, "op"},
		{"no key", `{"op":"install"}`, 400, "key"},
		{"short key", `{"op":"install","key":"` + base64.StdEncoding.EncodeToString(key[:16]) + `"}`, 400, "key"},
		{"over the limit", `{"op":"install","key":"` + strings.Repeat("A", maxBody) + `"}`, 413, ""},
	} {
		w := httptest.NewRecorder()
		c.svcs["a"].HandleKeys(w, httptest.NewRequest("POST", "/v1/cluster/keys", strings.NewReader(tt.body)))
		var e struct{ Error httpapi.Error }
		if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || w.Code != tt.code || e.Error.Field != tt.field {
			t.Errorf("%s: %d %s, want %d field %q", tt.name, w.Code, w.Body, tt.code, tt.field)
		}
	}
	if c.internal != 0 {
		t.Errorf("%d internal calls for bad requests", c.internal)
	}
}

// TestNoKeyring: a standalone node has no keys to list (400), a member
// without gossip encryption none to change (409), and the internal
// endpoint answers the authentication's refusal before anything else.
func TestNoKeyring(t *testing.T) {
	c := newCluster(nil, "a")
	c.rings["a"].keys = nil
	if code, _, e := c.ask(t, "a", "", nil); code != http.StatusConflict || !strings.Contains(e.Message, "insecure-cluster") {
		t.Errorf("no encryption: %d %+v", code, e)
	}
	s := New(Config{Self: "a", Keyring: func() Keyring { return nil },
		Authenticate: func(*http.Request, string, int64) (string, []byte, *httpapi.Error) {
			return "a", []byte(`{"op":"list"}`), nil
		}})
	w := httptest.NewRecorder()
	s.HandleKeys(w, httptest.NewRequest("GET", "/v1/cluster/keys", nil))
	if w.Code != http.StatusBadRequest {
		t.Errorf("standalone list: %d %s", w.Code, w.Body)
	}
	w = httptest.NewRecorder()
	s.HandleInternal(w, httptest.NewRequest("POST", InternalPath, nil))
	if w.Code != http.StatusNotFound {
		t.Errorf("standalone internal: %d %s", w.Code, w.Body)
	}
	c.refused["a"] = true
	w = httptest.NewRecorder()
	c.svcs["a"].HandleInternal(w, httptest.NewRequest("POST", InternalPath, strings.NewReader(`{"op":"install","key":"`+base64.StdEncoding.EncodeToString(bytes.Repeat([]byte("k"), 32))+`"}`)))
	if w.Code != http.StatusUnauthorized || c.rings["a"].keys != nil {
		t.Errorf("refused internal call: %d %s, keyring %q", w.Code, w.Body, c.rings["a"].keys)
	}
}
