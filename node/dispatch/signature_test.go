package dispatch

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chime-scheduler/chime/client/signature"
)

// signHit is what the signing tests' receiver saw.
type signHit struct {
	sig, fireID string
	body        []byte
}

// newSignReceiver is a real HTTP receiver that records the signature,
// fire id and raw body of every callback.
func newSignReceiver(t *testing.T) (*httptest.Server, func() []signHit) {
	t.Helper()
	var mu sync.Mutex
	var hits []signHit
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		hits = append(hits, signHit{r.Header.Get("X-Chime-Signature"), r.Header.Get("X-Chime-Fire-Id"), body})
		mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	return srv, func() []signHit {
		mu.Lock()
		defer mu.Unlock()
		return append([]signHit(nil), hits...)
	}
}

// refMAC is the signature computed independently of the dispatcher's code.
func refMAC(key []byte, ts, fireID string, body []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(ts + "." + fireID + "." + string(body)))
	return hex.EncodeToString(m.Sum(nil))
}

var sigHeaderRE = regexp.MustCompile(`^t=(\d+)((?:,v1=[0-9a-f]{64})*)$`)

func TestSignCallbackHeader(t *testing.T) {
	dispNoLeaks(t)
	cur := []byte("current-key-0123456789abcdef0123")
	next := []byte("next-key-0123456789")
	other := []byte("some-other-key-0123456789")
	srv, hits := newSignReceiver(t)

	tests := []struct {
		name     string
		keys     [][]byte
		payload  []byte
		wantKeys [][]byte // the v1 values, in order; nil: no header
	}{
		{name: "unsigned", payload: []byte(`{"a":1}`)},
		{name: "one key", keys: [][]byte{cur}, payload: []byte(`{"a":1}`), wantKeys: [][]byte{cur}},
		{name: "rotation", keys: [][]byte{cur, next}, payload: []byte(`{"b":[1,2,3]}`), wantKeys: [][]byte{cur, next}},
		{name: "no body", keys: [][]byte{cur}, wantKeys: [][]byte{cur}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := Config{}
			if len(tt.keys) > 0 {
				cfg.SigningKey = tt.keys[0]
			}
			if len(tt.keys) > 1 {
				cfg.SigningKeyNext = tt.keys[1]
			}
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			d, results := newDispTest(t, cfg, Deps{})
			d.Start()
			before := len(hits())
			j := &Job{TaskID: "sig-" + strconv.Itoa(i), Seq: 7, Due: time.Now().UnixNano(), Attempt: 1, URL: srv.URL + "/cb", Payload: tt.payload}
			if !d.Submit(j) {
				t.Fatal("submit refused")
			}
			if r := dispRecv(t, results, 1)[0]; r.Outcome != OutcomeSuccess {
				t.Fatalf("outcome %v (%s)", r.Outcome, r.Err)
			}
			hs := hits()
			if len(hs) != before+1 {
				t.Fatalf("receiver got %d callbacks, want 1", len(hs)-before)
			}
			h := hs[len(hs)-1]
			if h.fireID != j.TaskID+":7" || string(h.body) != string(tt.payload) {
				t.Fatalf("fire id %q body %q", h.fireID, h.body)
			}
			if tt.wantKeys == nil {
				if h.sig != "" {
					t.Fatalf("unsigned dispatcher sent X-Chime-Signature %q", h.sig)
				}
				return
			}
			m := sigHeaderRE.FindStringSubmatch(h.sig)
			if m == nil {
				t.Fatalf("X-Chime-Signature %q: bad shape", h.sig)
			}
			ts, _ := strconv.ParseInt(m[1], 10, 64)
			if d := time.Since(time.Unix(ts, 0)); d < -time.Second || d > 5*time.Second {
				t.Errorf("t=%d is %v from now", ts, d)
			}
			v1s := strings.Split(strings.TrimPrefix(m[2], ",v1="), ",v1=")
			if len(v1s) != len(tt.wantKeys) {
				t.Fatalf("%d v1 values, want %d: %q", len(v1s), len(tt.wantKeys), h.sig)
			}
			for k, key := range tt.wantKeys {
				if want := refMAC(key, m[1], h.fireID, h.body); v1s[k] != want {
					t.Errorf("v1 #%d = %s, want %s", k, v1s[k], want)
				}
			}
			// A receiver that knows any one of the keys accepts it: that is
			// what makes a rotation work. One that knows none does not.
			now := time.Now()
			for _, key := range tt.wantKeys {
				if v := signature.Verify(h.sig, h.fireID, h.body, [][]byte{key}, now, 0); v != signature.Valid {
					t.Errorf("verify with one key: %s", v)
				}
			}
			if v := signature.Verify(h.sig, h.fireID, h.body, [][]byte{other}, now, 0); v != signature.Invalid {
				t.Errorf("verify with another key: %s, want invalid", v)
			}
			if v := signature.Verify(h.sig, h.fireID, append(h.body, ' '), tt.wantKeys, now, 0); v != signature.Invalid {
				t.Errorf("verify of a changed body: %s, want invalid", v)
			}
			if v := signature.Verify(h.sig, j.TaskID+":8", h.body, tt.wantKeys, now, 0); v != signature.Invalid {
				t.Errorf("verify under another fire id: %s, want invalid", v)
			}
		})
	}
}

func TestSignConfigValidate(t *testing.T) {
	long := []byte("0123456789abcdef")
	tests := []struct {
		name    string
		cfg     Config
		wantErr string
	}{
		{name: "none", cfg: Config{}},
		{name: "16 bytes", cfg: Config{SigningKey: long, SigningKeyNext: long}},
		{name: "short", cfg: Config{SigningKey: long[:15]}, wantErr: "signing key has 15 bytes: it needs at least 16"},
		{name: "short next", cfg: Config{SigningKey: long, SigningKeyNext: []byte("x")}, wantErr: "next signing key has 1 bytes"},
		{name: "next alone", cfg: Config{SigningKeyNext: long}, wantErr: "needs a current signing key"},
		{name: "bad rule", cfg: Config{CallbackDeny: []string{"10.0.0.0/99"}}, wantErr: `callback deny rule "10.0.0.0/99"`},
	}
	for _, tt := range tests {
		for _, err := range []error{tt.cfg.Validate(), tt.cfg.ValidateTrust()} {
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("%s: %v", tt.name, err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("%s: err = %v, want %q", tt.name, err, tt.wantErr)
			}
		}
	}
}

// BenchmarkSignCallback measures the signing cost per callback: building
// X-Chime-Signature for a typical 256-byte payload, and a 4 KiB one, with
// the per-worker hashes the dispatcher keeps, and (for comparison) with
// hmac.New per callback.
func BenchmarkSignCallback(b *testing.B) {
	fireID := []byte("01HZY3KQ6M4J5V8N9P0R2S7T1W:42")
	for _, bc := range []struct {
		name  string
		keys  int
		size  int
		fresh bool
	}{
		{"1key/256B", 1, 256, false},
		{"2keys/256B", 2, 256, false},
		{"1key/4KiB", 1, 4 << 10, false},
		{"1key/256B/hmac.New-per-call", 1, 256, true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			body := []byte(`{"data":"` + strings.Repeat("x", bc.size-11) + `"}`)
			keys := [][]byte{[]byte("current-key-0123456789abcdef0123"), []byte("next-key-0123456789abcdef012345")}[:bc.keys]
			s := &scratch{}
			for _, k := range keys {
				s.macs = append(s.macs, hmac.New(sha256.New, k))
			}
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				if bc.fresh {
					s.macs[0] = hmac.New(sha256.New, keys[0])
				}
				s.sig = signature.Append(s.sig[:0], s.macs, &s.sum, 1_700_000_000, fireID, body)
			}
		})
	}
}
