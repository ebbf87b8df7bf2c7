package dispatch

import (
	"strconv"
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
