// Package signature is the format of a callback's X-Chime-Signature header
// (docs/API.md "The callback", README "Verifying callbacks"): appending one
// (Append, what the node's dispatcher does per attempt) and verifying one
// (Verify, what the node's built-in test receiver and the Go SDK's
// client.VerifySignature do).
//
// The header is "t=<unix seconds>" followed by one ",v1=<hex
// HMAC-SHA256(key, "<t>.<fire id>.<raw body>")>" per signing key, current
// key first. It is a pure leaf: the standard library only, no clock (time
// comes in as a value), so both the node and the client may import it.
package signature

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"strconv"
	"strings"
	"time"
)

// Header is the name of the header that carries the signature.
const Header = "X-Chime-Signature"

// DefaultMaxAge is how far a signature's t may be from the receiver's
// clock by default: beyond it a captured callback can no longer be
// replayed.
const DefaultMaxAge = 5 * time.Minute

// dot separates the parts of the signed string.
var dot = []byte{'.'}

// Append appends the X-Chime-Signature value of a callback to dst: "t=<t>"
// and one ",v1=<hex HMAC-SHA256(key, t.fireID.body)>" per MAC of macs
// (hmac.New(sha256.New, key), current key first). t is the sender's clock
// in Unix seconds. Allocation free once dst has grown to fit (about 80
// bytes a key); sum is scratch. The macs are Reset before use.
func Append(dst []byte, macs []hash.Hash, sum *[sha256.Size]byte, t int64, fireID, body []byte) []byte {
	dst = append(dst, "t="...)
	dst = strconv.AppendInt(dst, t, 10)
	tEnd := len(dst)
	for _, m := range macs {
		m.Reset()
		m.Write(dst[2:tEnd])
		m.Write(dot)
		m.Write(fireID)
		m.Write(dot)
		m.Write(body)
		dst = append(dst, ",v1="...)
		dst = hex.AppendEncode(dst, m.Sum(sum[:0]))
	}
	return dst
}

// Verdict is the outcome of Verify.
type Verdict string

// Verdicts of Verify (the node's test receiver reports them as is).
const (
	Valid   Verdict = "valid"   // a v1 matches one of the keys and t is recent
	Invalid Verdict = "invalid" // malformed, or no v1 matches
	Expired Verdict = "expired" // a v1 matches but t is more than maxAge from now
	Missing Verdict = "missing" // no X-Chime-Signature header
	NoKey   Verdict = "no key"  // there is no signing key to check with
)

// String returns the verdict's name.
func (v Verdict) String() string { return string(v) }

// Verify checks the X-Chime-Signature value header of a callback with fire
// id fireID and body body against keys (any may match: that is what lets a
// receiver accept both keys during a rotation) at now, accepting a t at
// most maxAge from now (DefaultMaxAge when maxAge <= 0), and returns one of
// the verdicts. The MACs are compared in constant time. Every input is
// untrusted; it never panics.
func Verify(header, fireID string, body []byte, keys [][]byte, now time.Time, maxAge time.Duration) Verdict {
	if len(keys) == 0 {
		return NoKey
	}
	if header == "" {
		return Missing
	}
	if maxAge <= 0 {
		maxAge = DefaultMaxAge
	}
	var ts string
	var sigs [][]byte
	for part := range strings.SplitSeq(header, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return Invalid
		}
		switch k {
		case "t":
			if ts != "" {
				return Invalid
			}
			ts = v
		case "v1":
			mac, err := hex.DecodeString(v)
			if err != nil || len(mac) != sha256.Size {
				return Invalid
			}
			if len(sigs) < 8 { // more proves nothing more
				sigs = append(sigs, mac)
			}
		}
		// Unknown schemes (a future v2) are ignored.
	}
	t, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || len(sigs) == 0 {
		return Invalid
	}
	match := false
	for _, key := range keys {
		m := hmac.New(sha256.New, key)
		m.Write([]byte(ts + "." + fireID + "."))
		m.Write(body)
		want := m.Sum(nil)
		for _, got := range sigs {
			if hmac.Equal(got, want) {
				match = true
			}
		}
	}
	if !match {
		return Invalid
	}
	if d := now.Sub(time.Unix(t, 0)); d > maxAge || d < -maxAge {
		return Expired
	}
	return Valid
}
