package node

// Verifying callback signatures (X-Chime-Signature, see
// DispatchConfig.SigningKey and appendSignature): what the built-in test
// receiver does, and what README "Verifying callbacks" tells receivers to
// do.

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
	"time"
)

// signatureTolerance is how far a signature's t may be from the receiver's
// clock: beyond it a captured callback can no longer be replayed.
const signatureTolerance = 5 * time.Minute

// Signature verdicts of the test receiver.
const (
	sigValid   = "valid"   // a v1 matches one of the keys and t is recent
	sigInvalid = "invalid" // malformed, or no v1 matches
	sigExpired = "expired" // a v1 matches but t is more than signatureTolerance from now
	sigMissing = "missing" // no X-Chime-Signature header
	sigNoKey   = "no key"  // this node has no signing key to check with
)

// verifySignature checks the X-Chime-Signature value header of a callback
// with fire id fireID and body body against keys (any may match: that is
// what lets a receiver accept both keys during a rotation). The MACs are
// compared in constant time. Every input is untrusted; it never panics.
func verifySignature(header, fireID string, body []byte, keys [][]byte, now time.Time) string {
	if len(keys) == 0 {
		return sigNoKey
	}
	if header == "" {
		return sigMissing
	}
	var ts string
	var sigs [][]byte
	for part := range strings.SplitSeq(header, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return sigInvalid
		}
		switch k {
		case "t":
			if ts != "" {
				return sigInvalid
			}
			ts = v
		case "v1":
			mac, err := hex.DecodeString(v)
			if err != nil || len(mac) != sha256.Size {
				return sigInvalid
			}
			if len(sigs) < 8 { // more proves nothing more
				sigs = append(sigs, mac)
			}
		}
		// Unknown schemes (a future v2) are ignored.
	}
	t, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || len(sigs) == 0 {
		return sigInvalid
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
		return sigInvalid
	}
	if d := now.Sub(time.Unix(t, 0)); d > signatureTolerance || d < -signatureTolerance {
		return sigExpired
	}
	return sigValid
}
