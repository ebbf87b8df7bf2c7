package signature

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"strconv"
	"strings"
	"testing"
	"time"
)

// refMAC is the signature computed independently of Append.
func refMAC(key []byte, ts, fireID string, body []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(ts + "." + fireID + "." + string(body)))
	return hex.EncodeToString(m.Sum(nil))
}

func TestAppend(t *testing.T) {
	key, next := []byte("0123456789abcdef"), []byte("fedcba9876543210")
	body := []byte(`{"x":1}`)
	var sum [sha256.Size]byte
	tests := []struct {
		name string
		keys [][]byte
		want string
	}{
		{name: "no key", want: "t=1700000000"},
		{name: "one key", keys: [][]byte{key}, want: "t=1700000000,v1=" + refMAC(key, "1700000000", "t:1", body)},
		{name: "rotation", keys: [][]byte{key, next},
			want: "t=1700000000,v1=" + refMAC(key, "1700000000", "t:1", body) + ",v1=" + refMAC(next, "1700000000", "t:1", body)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var macs []hash.Hash
			for _, k := range tt.keys {
				macs = append(macs, hmac.New(sha256.New, k))
			}
			if got := string(Append(nil, macs, &sum, 1_700_000_000, []byte("t:1"), body)); got != tt.want {
				t.Errorf("Append = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestVerify(t *testing.T) {
	key := []byte("0123456789abcdef")
	next := []byte("fedcba9876543210")
	now := time.Unix(1_700_000_000, 0)
	body := []byte(`{"x":1}`)
	sign := func(ts int64, k []byte) string {
		return refMAC(k, strconv.FormatInt(ts, 10), "t:1", body)
	}
	t0 := now.Unix()
	good := sign(t0, key)
	tests := []struct {
		name   string
		header string
		keys   [][]byte
		maxAge time.Duration
		want   Verdict
	}{
		{name: "valid", header: fmt.Sprintf("t=%d,v1=%s", t0, good), keys: [][]byte{key}, want: Valid},
		{name: "valid, second v1", header: fmt.Sprintf("t=%d,v1=%s,v1=%s", t0, sign(t0, next), good), keys: [][]byte{key}, want: Valid},
		{name: "valid with the next key", header: fmt.Sprintf("t=%d,v1=%s", t0, sign(t0, next)), keys: [][]byte{key, next}, want: Valid},
		{name: "spaces, unknown scheme", header: fmt.Sprintf("t=%d, v2=zz, v1=%s", t0, good), keys: [][]byte{key}, want: Valid},
		{name: "4 min 59 s old", header: fmt.Sprintf("t=%d,v1=%s", t0-299, sign(t0-299, key)), keys: [][]byte{key}, want: Valid},
		{name: "6 min old", header: fmt.Sprintf("t=%d,v1=%s", t0-360, sign(t0-360, key)), keys: [][]byte{key}, want: Expired},
		{name: "6 min ahead", header: fmt.Sprintf("t=%d,v1=%s", t0+360, sign(t0+360, key)), keys: [][]byte{key}, want: Expired},
		{name: "61 s old, max age 1 min", header: fmt.Sprintf("t=%d,v1=%s", t0-61, sign(t0-61, key)), keys: [][]byte{key}, maxAge: time.Minute, want: Expired},
		{name: "59 s old, max age 1 min", header: fmt.Sprintf("t=%d,v1=%s", t0-59, sign(t0-59, key)), keys: [][]byte{key}, maxAge: time.Minute, want: Valid},
		{name: "t changed", header: fmt.Sprintf("t=%d,v1=%s", t0+1, good), keys: [][]byte{key}, want: Invalid},
		{name: "wrong key", header: fmt.Sprintf("t=%d,v1=%s", t0, good), keys: [][]byte{next}, want: Invalid},
		{name: "missing", header: "", keys: [][]byte{key}, want: Missing},
		{name: "no key", header: fmt.Sprintf("t=%d,v1=%s", t0, good), want: NoKey},
		{name: "no t", header: "v1=" + good, keys: [][]byte{key}, want: Invalid},
		{name: "two t", header: fmt.Sprintf("t=%d,t=%d,v1=%s", t0, t0, good), keys: [][]byte{key}, want: Invalid},
		{name: "no v1", header: fmt.Sprintf("t=%d", t0), keys: [][]byte{key}, want: Invalid},
		{name: "short v1", header: fmt.Sprintf("t=%d,v1=%s", t0, good[:62]), keys: [][]byte{key}, want: Invalid},
		{name: "not hex", header: fmt.Sprintf("t=%d,v1=%s", t0, strings.Repeat("g", 64)), keys: [][]byte{key}, want: Invalid},
		{name: "huge t", header: "t=99999999999999999999999,v1=" + good, keys: [][]byte{key}, want: Invalid},
		{name: "negative t", header: "t=-1,v1=" + good, keys: [][]byte{key}, want: Invalid},
		{name: "garbage", header: ",,,=,=,t", keys: [][]byte{key}, want: Invalid},
		{name: "binary", header: "t=\x00\xff,v1=\x00", keys: [][]byte{key}, want: Invalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Verify(tt.header, "t:1", body, tt.keys, now, tt.maxAge); got != tt.want {
				t.Errorf("Verify(%q) = %s, want %s", tt.header, got, tt.want)
			}
		})
	}
}
