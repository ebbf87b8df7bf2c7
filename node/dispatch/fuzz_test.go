package dispatch

import (
	"crypto/hmac"
	"crypto/sha256"
	"hash"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Fuzz targets for what receivers send the dispatcher: none may panic.

// FuzzRetryAfter: a receiver's Retry-After and Date headers.
func FuzzRetryAfter(f *testing.F) {
	at := time.Unix(1_800_000_000, 0)
	for _, v := range []string{"", "0", "120", "99999999999999999999", "Wed, 21 Oct 2015 07:28:00 GMT", "-1", "1.5"} {
		f.Add(v, "")
	}
	f.Add("Wed, 21 Oct 2026 07:28:00 GMT", "Wed, 21 Oct 2026 07:27:00 GMT")
	f.Fuzz(func(t *testing.T, v, date string) {
		d := parseRetryAfter(v, date, at)
		if d < 0 || d > maxRetryAfter {
			t.Fatalf("Retry-After %q (Date %q) = %v, outside [0, %v]", v, date, d, maxRetryAfter)
		}
		if secs, err := strconv.Atoi(v); err == nil && v[0] >= '0' && v[0] <= '9' && secs <= int(maxRetryAfter/time.Second) &&
			d != time.Duration(secs)*time.Second {
			t.Fatalf("Retry-After %q = %v", v, d)
		}
	})
}

// FuzzVerifySignature: an X-Chime-Signature header as anyone may send it to
// the test receiver. It never panics, says "valid" only for a header that
// carries the HMAC of the fire under the key, and a header the signer made
// is always valid.
func FuzzVerifySignature(f *testing.F) {
	key := []byte("0123456789abcdef0123456789abcdef")
	now := time.Unix(1_800_000_000, 0)
	f.Add("t=1800000000,v1=00", "t1:1", []byte("{}"))
	f.Add("", "t1:1", []byte(nil))
	f.Add("t=1,t=2,v1=zz,,=", "x", []byte("a"))
	f.Add("v1="+strings.Repeat("ab", 32)+",t=1800000000", "t1:2", []byte("body"))
	f.Fuzz(func(t *testing.T, header, fireID string, body []byte) {
		got := VerifySignature(header, fireID, body, [][]byte{key}, now)
		switch got {
		case SignatureValid, SignatureInvalid, SignatureExpired, SignatureMissing:
		default:
			t.Fatalf("VerifySignature(%q) = %q", header, got)
		}
		var sum [sha256.Size]byte
		signed := string(appendSignature(nil, []hash.Hash{hmac.New(sha256.New, key)}, &sum, now.Unix(), []byte(fireID), body))
		if v := VerifySignature(signed, fireID, body, [][]byte{key}, now); v != SignatureValid {
			t.Fatalf("the signer's own header %q = %q", signed, v)
		}
		if got == SignatureValid && header != signed {
			// Another spelling may be valid only if it carries the same MAC.
			if !strings.Contains(header, signed[strings.Index(signed, ",v1=")+4:]) {
				t.Fatalf("header %q without the fire's MAC was accepted", header)
			}
		}
	})
}
