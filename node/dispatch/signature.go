package dispatch

// Callback signatures (X-Chime-Signature, see Config.SigningKey): signing
// them (appendSignature, per callback in buildRequest), and verifying them
// (VerifySignature): what the node's built-in test receiver does, and what
// README "Verifying callbacks" tells receivers to do.

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"strconv"
	"strings"
	"time"
)

// sigDot separates the parts of the signed string.
var sigDot = []byte{'.'}

// appendSignature appends the X-Chime-Signature value of a callback to
// dst: "t=<t>" and one ",v1=<hex HMAC-SHA256(key, t.fireID.body)>" per key
// of macs (current key first). t (the dispatcher's clock: the wall clock) is what
// the receiver compares with its own. Allocation free once dst has grown to
// fit (about 80 bytes a key); sum is scratch.
func appendSignature(dst []byte, macs []hash.Hash, sum *[sha256.Size]byte, t int64, fireID, body []byte) []byte {
	dst = append(dst, "t="...)
	dst = strconv.AppendInt(dst, t, 10)
	tEnd := len(dst)
	for _, m := range macs {
		m.Reset()
		m.Write(dst[2:tEnd])
		m.Write(sigDot)
		m.Write(fireID)
		m.Write(sigDot)
		m.Write(body)
		dst = append(dst, ",v1="...)
		dst = hex.AppendEncode(dst, m.Sum(sum[:0]))
	}
	return dst
}

// signatureTolerance is how far a signature's t may be from the receiver's
// clock: beyond it a captured callback can no longer be replayed.
const signatureTolerance = 5 * time.Minute

// Verdicts of VerifySignature (the test receiver reports them as is).
const (
	SignatureValid   = "valid"   // a v1 matches one of the keys and t is recent
	SignatureInvalid = "invalid" // malformed, or no v1 matches
	SignatureExpired = "expired" // a v1 matches but t is more than 5 minutes from now
	SignatureMissing = "missing" // no X-Chime-Signature header
	SignatureNoKey   = "no key"  // there is no signing key to check with
)

// VerifySignature checks the X-Chime-Signature value header of a callback
// with fire id fireID and body body against keys (any may match: that is
// what lets a receiver accept both keys during a rotation) at now, and
// returns one of the Signature* verdicts. The MACs are compared in constant
// time. Every input is untrusted; it never panics.
func VerifySignature(header, fireID string, body []byte, keys [][]byte, now time.Time) string {
	if len(keys) == 0 {
		return SignatureNoKey
	}
	if header == "" {
		return SignatureMissing
	}
	var ts string
	var sigs [][]byte
	for part := range strings.SplitSeq(header, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return SignatureInvalid
		}
		switch k {
		case "t":
			if ts != "" {
				return SignatureInvalid
			}
			ts = v
		case "v1":
			mac, err := hex.DecodeString(v)
			if err != nil || len(mac) != sha256.Size {
				return SignatureInvalid
			}
			if len(sigs) < 8 { // more proves nothing more
				sigs = append(sigs, mac)
			}
		}
		// Unknown schemes (a future v2) are ignored.
	}
	t, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || len(sigs) == 0 {
		return SignatureInvalid
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
		return SignatureInvalid
	}
	if d := now.Sub(time.Unix(t, 0)); d > signatureTolerance || d < -signatureTolerance {
		return SignatureExpired
	}
	return SignatureValid
}
