package signature

import (
	"crypto/hmac"
	"crypto/sha256"
	"hash"
	"strings"
	"testing"
	"time"
)

// FuzzVerify: an X-Chime-Signature header as anyone may send it to
// a receiver. It never panics, says "valid" only for a header that
// carries the HMAC of the fire under the key, and a header the signer made
// is always valid.
func FuzzVerify(f *testing.F) {
	key := []byte("0123456789abcdef0123456789abcdef")
	now := time.Unix(1_800_000_000, 0)
	f.Add("t=1800000000,v1=00", "t1:1", []byte("{}"))
	f.Add("", "t1:1", []byte(nil))
	f.Add("t=1,t=2,v1=zz,,=", "x", []byte("a"))
	f.Add("v1="+strings.Repeat("ab", 32)+",t=1800000000", "t1:2", []byte("body"))
	f.Fuzz(func(t *testing.T, header, fireID string, body []byte) {
		got := Verify(header, fireID, body, [][]byte{key}, now, 0)
		switch got {
		case Valid, Invalid, Expired, Missing:
		default:
			t.Fatalf("Verify(%q) = %q", header, got)
		}
		var sum [sha256.Size]byte
		signed := string(Append(nil, []hash.Hash{hmac.New(sha256.New, key)}, &sum, now.Unix(), []byte(fireID), body))
		if v := Verify(signed, fireID, body, [][]byte{key}, now, 0); v != Valid {
			t.Fatalf("the signer's own header %q = %q", signed, v)
		}
		if got == Valid && header != signed {
			// Another spelling may be valid only if it carries the same MAC.
			if !strings.Contains(header, signed[strings.Index(signed, ",v1=")+4:]) {
				t.Fatalf("header %q without the fire's MAC was accepted", header)
			}
		}
	})
}
