package storage

// Flow definitions (API.md "Flow keys"): the limits a flow key's fires are
// held to. A flow is stored in the slot of its key ('s' slot 'F' key), the
// slot every task of the key is in (its id's hash tag is the key), so it is
// replicated, snapshotted, checksummed and moved with that slot's tasks.
//
// Record: [1, Key, Rate, PeriodMs, Parallelism, CreatedAt, UpdatedAt,
// Version], under the same rules as the task record (codec.go): append only.

import (
	"bytes"
	"errors"
	"fmt"
	"math"

	"github.com/cockroachdb/pebble/v2"
)

// MaxFlowKeyLen is the longest flow key ValidFlowKey accepts.
const MaxFlowKeyLen = 128

// ValidFlowKey reports whether key can name a flow: 1 to MaxFlowKeyLen
// characters of A-Z a-z 0-9 . _ ~ : - (a task id's alphabet without the
// braces, so "{" key "}" is always a hash tag whose body is key).
func ValidFlowKey(key string) bool {
	if len(key) == 0 || len(key) > MaxFlowKeyLen {
		return false
	}
	for i := 0; i < len(key); i++ {
		c := key[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c == '.', c == '_', c == '~', c == ':', c == '-':
		default:
			return false
		}
	}
	return true
}

// Flow is one flow key's limits. A zero Rate means no rate limit, a zero
// Parallelism no parallelism limit.
type Flow struct {
	Key  string
	Slot uint16 // not stored: the slot of the key it was read from
	// Rate fires may start in any PeriodMs milliseconds (a sliding window).
	Rate     int64
	PeriodMs int64
	// Parallelism bounds the key's callbacks in flight at once.
	Parallelism int64
	CreatedAt   int64
	UpdatedAt   int64
	Version     uint64
}

const (
	flowFormat = 1
	flowFields = 8
)

func appendFlow(b []byte, f *Flow) []byte {
	b = appendArrayHeader(b, flowFields)
	b = appendUint(b, flowFormat)
	b = appendStr(b, f.Key)
	b = appendInt(b, f.Rate)
	b = appendInt(b, f.PeriodMs)
	b = appendInt(b, f.Parallelism)
	b = appendInt(b, f.CreatedAt)
	b = appendInt(b, f.UpdatedAt)
	b = appendUint(b, f.Version)
	return b
}

func (r *reader) flow(f *Flow) {
	n := r.record("flow", flowFormat)
	if field(&n) {
		f.Key = r.str()
	}
	if field(&n) {
		f.Rate = r.int64()
	}
	if field(&n) {
		f.PeriodMs = r.int64()
	}
	if field(&n) {
		f.Parallelism = r.int64()
	}
	if field(&n) {
		f.CreatedAt = r.int64()
	}
	if field(&n) {
		f.UpdatedAt = r.int64()
	}
	if field(&n) {
		f.Version = r.uint(math.MaxUint64)
	}
	r.skip(n, 0)
}

// EncodeFlow returns the stored encoding of f (canonical, like EncodeTask).
func EncodeFlow(f *Flow) []byte {
	c := getCodec()
	c.val = appendFlow(c.val[:0], f)
	b := bytes.Clone(c.val)
	putCodec(c)
	return b
}

// DecodeFlow decodes b, as produced by EncodeFlow, into f (zeroed first,
// and again on error). Malformed input returns an error and never panics.
func DecodeFlow(b []byte, f *Flow) error {
	*f = Flow{}
	r := newReader(b)
	r.flow(f)
	r.end()
	if r.err != nil {
		*f = Flow{}
		return fmt.Errorf("storage: decode flow: %w", r.err)
	}
	return nil
}

// appendFlowKey appends 's' slot 'F' key.
func appendFlowKey(dst []byte, slot uint16, key string) []byte {
	return append(appendSection(dst, slot, sectionFlow), key...)
}

func mustValidFlowKey(key string) {
	if !ValidFlowKey(key) {
		panic(fmt.Sprintf("storage: invalid flow key %q", key))
	}
}

// PutFlow stores f in slot (the slot of f.Key; the caller computes it).
func (b *Batch) PutFlow(slot uint16, f *Flow) {
	b.mustOpen()
	mustValidFlowKey(f.Key)
	c := b.c
	c.val = appendFlow(c.val[:0], f)
	c.key = appendFlowKey(c.key[:0], slot, f.Key)
	b.set(c.key, c.val)
}

// DeleteFlow deletes the flow key of slot.
func (b *Batch) DeleteFlow(slot uint16, key string) {
	b.mustOpen()
	mustValidFlowKey(key)
	c := b.c
	c.key = appendFlowKey(c.key[:0], slot, key)
	b.del(c.key)
}

// GetFlow reads the flow key of slot: ErrNotFound when there is none,
// ErrCorrupt (wrapped) when it does not decode.
func (s *Store) GetFlow(slot uint16, key string) (*Flow, error) {
	if !s.enter() {
		return nil, ErrClosed
	}
	defer s.leave()
	c := getCodec()
	defer putCodec(c)
	c.key = appendFlowKey(c.key[:0], slot, key)
	v, closer, err := s.db.Get(c.key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("storage: get flow %d/%s: %w", slot, key, err)
	}
	defer func() { _ = closer.Close() }()
	f := new(Flow)
	if err := DecodeFlow(v, f); err != nil {
		s.noteCorrupt(c.key, err)
		return nil, fmt.Errorf("storage: get flow %d/%s: %w: %w", slot, key, ErrCorrupt, err)
	}
	f.Slot = slot
	return f, nil
}

// ScanFlows calls fn with the stored flows from position from on, in key
// order (slot, then key; Exclusive skips from itself), in the slots owned
// reports true for (nil: all), until fn returns false. A record that does
// not decode is counted, logged once and skipped.
func (s *Store) ScanFlows(from Position, owned func(uint16) bool, fn func(*Flow) bool) (err error) {
	if !s.enter() {
		return ErrClosed
	}
	defer s.leave()
	it, err := s.newSlotIter()
	if err != nil {
		return err
	}
	defer closeIter(it, &err)
	c := getCodec()
	defer putCodec(c)
	c.key = appendFlowKey(c.key[:0], from.Slot, from.ID)
	valid := it.SeekGE(c.key)
	if valid && from.Exclusive && string(it.Key()) == string(c.key) {
		valid = it.Next()
	}
	for valid {
		slot, section, rest, ok := decodeSlotKey(it.Key())
		if !ok {
			return fmt.Errorf("storage: malformed key %q", it.Key())
		}
		switch {
		case owned != nil && !owned(slot), section > sectionFlow:
			if slot == ^uint16(0) {
				return it.Error()
			}
			valid = it.SeekGE(appendFlowKey(c.key[:0], slot+1, ""))
		case section < sectionFlow:
			valid = it.SeekGE(appendFlowKey(c.key[:0], slot, ""))
		default:
			v, verr := it.ValueAndErr()
			if verr != nil {
				return fmt.Errorf("storage: scan flows: %w", verr)
			}
			f := new(Flow)
			if err := DecodeFlow(v, f); err != nil || f.Key != string(rest) {
				if err == nil {
					err = errors.New("the record's key differs from its storage key")
				}
				s.noteCorrupt(it.Key(), err)
				valid = it.Next()
				continue
			}
			f.Slot = slot
			if !fn(f) {
				return nil
			}
			valid = it.Next()
		}
	}
	return it.Error()
}
