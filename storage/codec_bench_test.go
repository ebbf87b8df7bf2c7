package storage

import (
	"bytes"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

// reflectCodec is the reflection-based msgpack codec the store used before
// the hand-written one (map-encoded structs via the msgpack tags in
// record.go, compact ints, sorted map keys). It is kept only as the
// baseline for the impl=reflect benchmarks.
type reflectCodec struct {
	buf bytes.Buffer
	enc *msgpack.Encoder
	r   bytes.Reader
	dec *msgpack.Decoder
}

func newReflectCodec() *reflectCodec {
	c := &reflectCodec{}
	c.enc = msgpack.NewEncoder(&c.buf)
	c.enc.UseCompactInts(true)
	c.enc.SetSortMapKeys(true)
	c.dec = msgpack.NewDecoder(&c.r)
	return c
}

// encode returns a copy of v's encoding, as the old EncodeTask did.
func (c *reflectCodec) encode(v any) ([]byte, error) {
	c.buf.Reset()
	if err := c.enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.Clone(c.buf.Bytes()), nil
}

func (c *reflectCodec) decodeTask(b []byte, t *Task) error {
	*t = Task{}
	c.r.Reset(b)
	c.dec.ResetReader(&c.r)
	return c.dec.Decode(t)
}

// benchTaskFull is benchTask with the firing state a task has mid-life: an
// in-flight fire and a last fire.
func benchTaskFull() *Task {
	tk := benchTask(1)
	tk.Inflight = &Inflight{Seq: 7, Due: tk.NextDue, Attempt: 2, NextAttemptAt: tk.NextDue + 2e9, StartedAt: tk.NextDue + 1e9}
	tk.LastFire = &LastFire{FireID: tk.ID + ":6", DueAt: tk.NextDue - 60e9, FinishedAt: tk.NextDue - 59e9,
		Attempts: 1, StatusCode: 200, Result: []byte(`{"ok":true}`)}
	tk.FireSeq, tk.FireCount, tk.HistSeq, tk.Version = 7, 6, 6, 14
	return tk
}

var benchRecords = []struct {
	name string
	task func() *Task
}{
	{"task=created", func() *Task { return benchTask(1) }},
	{"task=firing", benchTaskFull},
}

// BenchmarkEncodeTask compares EncodeTask (impl=custom) with the old
// reflection codec (impl=reflect); both return a fresh slice.
func BenchmarkEncodeTask(b *testing.B) {
	for _, rec := range benchRecords {
		tk := rec.task()
		b.Run(rec.name+"/impl=custom", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := EncodeTask(tk); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(rec.name+"/impl=reflect", func(b *testing.B) {
			c := newReflectCodec()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.encode(tk); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDecodeTask compares DecodeTask (impl=custom) with the old
// reflection codec (impl=reflect), each decoding its own encoding.
func BenchmarkDecodeTask(b *testing.B) {
	for _, rec := range benchRecords {
		tk := rec.task()
		b.Run(rec.name+"/impl=custom", func(b *testing.B) {
			enc, err := EncodeTask(tk)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(enc)))
			b.ReportAllocs()
			var got Task
			for b.Loop() {
				if err := DecodeTask(enc, &got); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(rec.name+"/impl=reflect", func(b *testing.B) {
			c := newReflectCodec()
			enc, err := c.encode(tk)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(enc)))
			b.ReportAllocs()
			var got Task
			for b.Loop() {
				if err := c.decodeTask(enc, &got); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkAppendTask is the store's write path: encoding into a reused
// buffer, as Batch.PutTask does.
func BenchmarkAppendTask(b *testing.B) {
	for _, rec := range benchRecords {
		tk := rec.task()
		b.Run(rec.name, func(b *testing.B) {
			var buf []byte
			b.ReportAllocs()
			for b.Loop() {
				buf = appendTask(buf[:0], tk)
			}
			b.SetBytes(int64(len(buf)))
		})
	}
}
