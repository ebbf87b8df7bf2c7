package internalauth

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A fuzz target for what other programs send a node (issue 11): it may
// not panic, and may not accept what it should refuse.

// FuzzCallAuth: signature headers from anyone. Without the secret no
// combination is accepted; a call signed for this node is accepted once.
func FuzzCallAuth(f *testing.F) {
	secret := []byte("0123456789abcdef0123456789abcdef")
	now := time.Unix(1_800_000_000, 0)
	// One genuine call, with a fixed nonce: fuzz workers are separate
	// processes, and each must know the same one.
	sum := sha256.Sum256([]byte("x"))
	g := signed{ts: strconv.FormatInt(now.UnixMilli(), 10), from: "n1", to: "n2", nonce: strings.Repeat("ab", 16), sum: hex.EncodeToString(sum[:])}
	good := httptest.NewRequest("POST", "/internal/v1/ctl", strings.NewReader("x"))
	good.Header.Set(HdrNonce, g.nonce)
	good.Header.Set(HdrBodySum, g.sum)
	good.Header.Set(HdrAuth, g.ts+":"+hex.EncodeToString(callMAC(secret, "POST", "/internal/v1/ctl", g, 1)))
	f.Add(good.Header.Get(HdrAuth), "n1", "n2", good.Header.Get(HdrNonce), good.Header.Get(HdrBodySum), int64(1))
	f.Add("", "", "", "", "", int64(-1))
	f.Add("1800000000000:00", "n1", "n2", strings.Repeat("0", 32), strings.Repeat("0", 64), int64(1<<40))
	f.Fuzz(func(t *testing.T, auth, from, to, nonce, sum string, length int64) {
		r := httptest.NewRequest("POST", "/internal/v1/ctl", nil)
		for k, v := range map[string]string{HdrAuth: auth, HdrFrom: from, HdrTo: to, HdrNonce: nonce, HdrBodySum: sum} {
			r.Header[http.CanonicalHeaderKey(k)] = []string{v}
		}
		r.ContentLength = length
		recv := &Auth{self: "n2", secret: secret}
		_, reason := recv.Check(r, 1<<20, now, func(string) bool { return true })
		genuine := auth == good.Header.Get(HdrAuth) && from == "n1" && to == "n2" && nonce == good.Header.Get(HdrNonce) &&
			sum == good.Header.Get(HdrBodySum) && length == 1
		if reason == "" && !genuine {
			t.Fatalf("accepted a forged call: auth %q from %q to %q nonce %q sum %q length %d", auth, from, to, nonce, sum, length)
		}
	})
}
