package client

// Helpers for the receivers of callbacks (API.md "The callback").

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/chime-scheduler/chime/client/signature"
	"github.com/chime-scheduler/chime/slots"
)

// Fire is one callback as its receiver sees it.
type Fire struct {
	TaskID string
	// FireID is "<task id>:<fire sequence>": the same on every attempt
	// of a fire and when a fire is repeated after a crash, a failover or
	// a handover. It is the dedupe key.
	FireID string
	// DueAt is when the fire was due (for a trigger: when it was
	// triggered).
	DueAt time.Time
	// Attempt is 1 for the first attempt, 2 for the first retry, …
	Attempt int
	// Node is the name of the node that sent it.
	Node string
	// Slot is the task's slot (slots.Of(TaskID)).
	Slot uint16
	// SlotEpoch is the epoch of the slot at the sending node; 0 from a
	// standalone node. A fire with a lower epoch than one already seen
	// for its slot comes from a deposed owner.
	SlotEpoch uint64
	// Payload is the request body: the task's payload as given.
	Payload []byte
}

// MaxFireBody bounds the body ParseFire and VerifySignature read: the
// node's own limit on payloads is 64 KiB by default (--max-payload).
const MaxFireBody = 4 << 20

// ErrNotAFire is returned by ParseFire for a request without Chime's
// headers.
var ErrNotAFire = errors.New("chime: not a callback: X-Chime-Task-Id or X-Chime-Fire-Id missing")

// ParseFire reads the fire that callback request r carries: its X-Chime-*
// headers and its body (at most MaxFireBody bytes). r.Body stays readable:
// it is replaced by a reader of the same bytes. It does not check the
// signature (VerifySignature does).
func ParseFire(r *http.Request) (Fire, error) {
	body, err := readBody(r)
	if err != nil {
		return Fire{}, err
	}
	h := r.Header
	f := Fire{TaskID: h.Get("X-Chime-Task-Id"), FireID: h.Get("X-Chime-Fire-Id"), Node: h.Get("X-Chime-Node"), Payload: body}
	if f.TaskID == "" || f.FireID == "" {
		return Fire{}, ErrNotAFire
	}
	f.Slot = slots.Of(f.TaskID)
	if f.DueAt, err = time.Parse(time.RFC3339Nano, h.Get("X-Chime-Due-At")); err != nil {
		return Fire{}, fmt.Errorf("chime: X-Chime-Due-At: %w", err)
	}
	if f.Attempt, err = strconv.Atoi(h.Get("X-Chime-Attempt")); err != nil || f.Attempt < 1 {
		return Fire{}, fmt.Errorf("chime: X-Chime-Attempt %q is not a positive integer", h.Get("X-Chime-Attempt"))
	}
	if v := h.Get("X-Chime-Slot-Epoch"); v != "" {
		if f.SlotEpoch, err = strconv.ParseUint(v, 10, 64); err != nil {
			return Fire{}, fmt.Errorf("chime: X-Chime-Slot-Epoch: %w", err)
		}
	}
	return f, nil
}

// readBody reads r's body (at most MaxFireBody bytes) and puts an
// unread copy back.
func readBody(r *http.Request) ([]byte, error) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxFireBody+1))
	r.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("chime: reading the callback body: %w", err)
	}
	if len(body) > MaxFireBody {
		return nil, fmt.Errorf("chime: the callback body is over %d bytes", MaxFireBody)
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	return body, nil
}

// Errors of VerifySignature.
var (
	ErrSignatureMissing = errors.New("chime: the callback has no X-Chime-Signature")
	ErrSignatureInvalid = errors.New("chime: the callback's X-Chime-Signature does not match")
	ErrSignatureExpired = errors.New("chime: the callback's X-Chime-Signature is too old (or from the future)")
	ErrNoKey            = errors.New("chime: no signing key to verify with")
)

// VerifySignature checks callback request r's X-Chime-Signature against
// keys, the node's --signing-key values: any one may match, which is what
// lets keys rotate. The signature's time may be at most maxAge from now
// (0: 5 minutes); an older one is ErrSignatureExpired, so a captured
// callback cannot be replayed later. It reads the body (at most
// MaxFireBody bytes) and leaves it readable. nil means the callback is
// authentic.
func VerifySignature(r *http.Request, maxAge time.Duration, keys ...[]byte) error {
	body, err := readBody(r)
	if err != nil {
		return err
	}
	switch signature.Verify(r.Header.Get(signature.Header), r.Header.Get("X-Chime-Fire-Id"), body, keys, time.Now(), maxAge) {
	case signature.Valid:
		return nil
	case signature.Missing:
		return ErrSignatureMissing
	case signature.Expired:
		return ErrSignatureExpired
	case signature.NoKey:
		return ErrNoKey
	}
	return ErrSignatureInvalid
}
