package storage

import (
	"bytes"
	"fmt"
	"sync"

	"github.com/vmihailenco/msgpack/v5"
)

// codec is reusable scratch space for encoding records and building keys.
// One codec is used by one goroutine at a time (a Batch holds one for its
// lifetime; Get and the scans borrow one from codecPool).
type codec struct {
	buf bytes.Buffer // encoder output, reset before each record
	enc *msgpack.Encoder
	r   bytes.Reader // decoder input
	dec *msgpack.Decoder
	key []byte // key scratch; pebble copies keys on Set, so it is reused
	end []byte // second key scratch, for range ends
}

func newCodec() *codec {
	c := &codec{}
	c.enc = msgpack.NewEncoder(&c.buf)
	// Compact ints: most counters and small numbers fit in 1-3 bytes rather
	// than 9. Sorted map keys: the same record always encodes to the same
	// bytes (Headers, Labels), which an order-independent checksum over
	// values needs when owner and follower compare slots.
	c.enc.UseCompactInts(true)
	c.enc.SetSortMapKeys(true)
	c.dec = msgpack.NewDecoder(&c.r)
	return c
}

// codecPool holds idle codecs. Encoders and decoders cache per-type
// metadata internally, so reusing them saves allocations on the hot path.
var codecPool = sync.Pool{New: func() any { return newCodec() }}

func getCodec() *codec { return codecPool.Get().(*codec) }

// maxPooledBuf keeps one huge record from pinning a large buffer in the pool.
const maxPooledBuf = 64 << 10

func putCodec(c *codec) {
	if c.buf.Cap() > maxPooledBuf || cap(c.key) > maxPooledBuf {
		return
	}
	c.r.Reset(nil)
	codecPool.Put(c)
}

// encode encodes v into c.buf and returns the bytes, valid until the next
// encode on c.
func (c *codec) encode(v any) ([]byte, error) {
	c.buf.Reset()
	if err := c.enc.Encode(v); err != nil {
		return nil, err
	}
	return c.buf.Bytes(), nil
}

// decode decodes b into v. v must be reset by the caller: msgpack leaves
// fields absent from b untouched.
func (c *codec) decode(b []byte, v any) error {
	c.r.Reset(b)
	c.dec.ResetReader(&c.r)
	return c.dec.Decode(v)
}

// EncodeTask returns the msgpack encoding of t as stored under its task key.
// The encoding is deterministic (map keys sorted). Exported for benchmarks
// and tools; the store encodes through its own reused buffers.
func EncodeTask(t *Task) ([]byte, error) {
	c := getCodec()
	defer putCodec(c)
	b, err := c.encode(t)
	if err != nil {
		return nil, fmt.Errorf("storage: encode task %q: %w", t.ID, err)
	}
	return bytes.Clone(b), nil
}

// DecodeTask decodes b, as produced by EncodeTask, into t. Every field of t
// is overwritten (t is zeroed first). t does not alias b.
func DecodeTask(b []byte, t *Task) error {
	c := getCodec()
	defer putCodec(c)
	return c.decodeTask(b, t)
}

func (c *codec) decodeTask(b []byte, t *Task) error {
	*t = Task{}
	if err := c.decode(b, t); err != nil {
		return fmt.Errorf("storage: decode task: %w", err)
	}
	return nil
}

func (c *codec) decodeExecution(b []byte, e *Execution) error {
	*e = Execution{}
	if err := c.decode(b, e); err != nil {
		return fmt.Errorf("storage: decode execution: %w", err)
	}
	return nil
}
