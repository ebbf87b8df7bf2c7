package storage

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"sync"
)

// Record format. Each stored record is one msgpack array, written and read
// by the hand-written codec below (the msgpack tags in record.go are not
// used for storage). Positions, in struct declaration order:
//
//	Task      [1, ID, Slot, Spec, Status, NextDue, FireSeq, Inflight|nil,
//	           Triggers|nil, CreatedAt, UpdatedAt, FireCount, FailCount,
//	           LastFire|nil, HistSeq, Version, Runs, TriggerDues|nil,
//	           SkippedFires, Backfill|nil, FinishedAt, ExpireAt, ParentID,
//	           ParentFire, Children|nil, Notices|nil, FailReason]
//	Spec      [CallbackURL, Kind, DelayMs, DueAt, EveryMs, Cron, Timezone,
//	           StartAt, Payload|nil, Headers|nil, TimeoutMs, MaxRetries,
//	           Misfire, MaxFails, Labels|nil, DSTGap, DSTOverlap, EndAt,
//	           MaxRuns, MaxCatchup, RetentionMs, RetentionSet,
//	           OnSuccess|nil, OnFailure|nil,   (each an array of bin)
//	           SuccessURL, FailureURL, AckURL, AckDelayMs, AckRetries,
//	           FlowKey]
//	Inflight  [Seq, Due, Attempt, NextAttemptAt, StartedAt, Trigger, Misfired,
//	           Ack]
//	Backfill  [Next, To, Left, At]
//	PendingChild [ID, Seq, Index, Failure, At, Body, Result]
//	PendingNotice [Seq, Failure, URL, DueAt, Body, Attempts, At]
//	LastFire  [FireID, DueAt, FinishedAt, Attempts, StatusCode, Error,
//	           Result|nil]
//	Execution [1, FireID, DueAt, StartedAt, FinishedAt, Attempt, StatusCode,
//	           Error, Result|nil, Children|nil, Ack]
//
// The leading 1 is the record's format version (taskFormat,
// executionFormat); nested structs have none and follow their record's.
//
// These positions are on disk: APPEND ONLY (R27). A new field goes at the
// end of its array; never reorder, remove, retype or reuse a position. A
// change that appending cannot express bumps the format version, and the
// decoder then rejects records of a version it does not know.
//
// Encoding is canonical, so equal records give equal bytes (the slot
// checksum relies on it): integers in their shortest form (unsigned forms
// for values >= 0), strings as str, Payload and Result as bin, the shortest
// length headers, map keys in ascending byte order, and nil for a nil
// pointer, map or slice (an empty non-nil map or slice encodes as empty, so
// it round-trips as empty).
//
// Decoding is lenient where forward compatibility needs it and strict
// elsewhere: a shorter array leaves the missing trailing fields zero (an
// older writer), extra trailing elements of any type are skipped (a newer
// writer), nil reads as the zero value, any integer form is accepted if the
// value fits the field, and str and bin are interchangeable. Anything else
// (a wrong type, a value out of range, a length beyond the input, bytes
// after the record) is an error. No input panics, and allocation is bounded
// by a small multiple of the input's size: every length is checked against
// the bytes left before anything is allocated.

// Format versions of the stored records.
const (
	taskFormat      = 1
	executionFormat = 1
)

// Array lengths written for each struct (fields plus the version where
// there is one). Appending a field means bumping its count.
const (
	taskFields      = 27
	specFields      = 30
	inflightFields  = 8
	lastFireFields  = 7
	backfillFields  = 4
	executionFields = 11
	childFields     = 7
	noticeFields    = 7
)

func appendTask(b []byte, t *Task) []byte {
	b = appendArrayHeader(b, taskFields)
	b = appendUint(b, taskFormat)
	b = appendStr(b, t.ID)
	b = appendUint(b, uint64(t.Slot))
	b = appendSpec(b, &t.Spec)
	b = appendUint(b, uint64(t.Status))
	b = appendInt(b, t.NextDue)
	b = appendUint(b, t.FireSeq)
	b = appendInflight(b, t.Inflight)
	b = appendInts(b, t.Triggers)
	b = appendInt(b, t.CreatedAt)
	b = appendInt(b, t.UpdatedAt)
	b = appendUint(b, t.FireCount)
	b = appendUint(b, t.FailCount)
	b = appendLastFire(b, t.LastFire)
	b = appendUint(b, t.HistSeq)
	b = appendUint(b, t.Version)
	b = appendUint(b, t.Runs)
	b = appendInts(b, t.TriggerDues)
	b = appendUint(b, t.SkippedFires)
	b = appendBackfill(b, t.Backfill)
	b = appendInt(b, t.FinishedAt)
	b = appendInt(b, t.ExpireAt)
	b = appendStr(b, t.ParentID)
	b = appendStr(b, t.ParentFire)
	b = appendChildren(b, t.Children)
	b = appendNotices(b, t.Notices)
	b = appendStr(b, t.FailReason)
	return b
}

func appendNotices(b []byte, ns []PendingNotice) []byte {
	if ns == nil {
		return appendNil(b)
	}
	b = appendArrayHeader(b, len(ns))
	for i := range ns {
		n := &ns[i]
		b = appendArrayHeader(b, noticeFields)
		b = appendUint(b, n.Seq)
		b = appendBool(b, n.Failure)
		b = appendStr(b, n.URL)
		b = appendInt(b, n.DueAt)
		b = appendBin(b, n.Body)
		b = appendInt(b, int64(n.Attempts))
		b = appendInt(b, n.At)
	}
	return b
}

func appendChildren(b []byte, cs []PendingChild) []byte {
	if cs == nil {
		return appendNil(b)
	}
	b = appendArrayHeader(b, len(cs))
	for i := range cs {
		c := &cs[i]
		b = appendArrayHeader(b, childFields)
		b = appendStr(b, c.ID)
		b = appendUint(b, c.Seq)
		b = appendInt(b, int64(c.Index))
		b = appendBool(b, c.Failure)
		b = appendInt(b, c.At)
		b = appendBin(b, c.Body)
		b = appendBin(b, c.Result)
	}
	return b
}

// appendBins appends v as an array of bin; nil v is nil.
func appendBins(b []byte, v [][]byte) []byte {
	if v == nil {
		return appendNil(b)
	}
	b = appendArrayHeader(b, len(v))
	for _, p := range v {
		b = appendBin(b, p)
	}
	return b
}

// appendStrs appends v as an array of str; nil v is nil.
func appendStrs(b []byte, v []string) []byte {
	if v == nil {
		return appendNil(b)
	}
	b = appendArrayHeader(b, len(v))
	for _, s := range v {
		b = appendStr(b, s)
	}
	return b
}

func appendSpec(b []byte, s *Spec) []byte {
	b = appendArrayHeader(b, specFields)
	b = appendStr(b, s.CallbackURL)
	b = appendUint(b, uint64(s.Kind))
	b = appendInt(b, s.DelayMs)
	b = appendInt(b, s.DueAt)
	b = appendInt(b, s.EveryMs)
	b = appendStr(b, s.Cron)
	b = appendStr(b, s.Timezone)
	b = appendInt(b, s.StartAt)
	b = appendBin(b, s.Payload)
	b = appendStrMap(b, s.Headers)
	b = appendInt(b, s.TimeoutMs)
	b = appendInt(b, int64(s.MaxRetries))
	b = appendUint(b, uint64(s.Misfire))
	b = appendInt(b, int64(s.MaxFails))
	b = appendStrMap(b, s.Labels)
	b = appendUint(b, uint64(s.DSTGap))
	b = appendUint(b, uint64(s.DSTOverlap))
	b = appendInt(b, s.EndAt)
	b = appendInt(b, s.MaxRuns)
	b = appendInt(b, s.MaxCatchup)
	b = appendInt(b, s.RetentionMs)
	b = appendBool(b, s.RetentionSet)
	b = appendBins(b, s.OnSuccess)
	b = appendBins(b, s.OnFailure)
	b = appendStr(b, s.SuccessURL)
	b = appendStr(b, s.FailureURL)
	b = appendStr(b, s.AckURL)
	b = appendInt(b, s.AckDelayMs)
	b = appendInt(b, int64(s.AckRetries))
	b = appendStr(b, s.FlowKey)
	return b
}

func appendBackfill(b []byte, f *Backfill) []byte {
	if f == nil {
		return appendNil(b)
	}
	b = appendArrayHeader(b, backfillFields)
	b = appendInt(b, f.Next)
	b = appendInt(b, f.To)
	b = appendUint(b, f.Left)
	b = appendInt(b, f.At)
	return b
}

func appendInflight(b []byte, f *Inflight) []byte {
	if f == nil {
		return appendNil(b)
	}
	b = appendArrayHeader(b, inflightFields)
	b = appendUint(b, f.Seq)
	b = appendInt(b, f.Due)
	b = appendInt(b, int64(f.Attempt))
	b = appendInt(b, f.NextAttemptAt)
	b = appendInt(b, f.StartedAt)
	b = appendBool(b, f.Trigger)
	b = appendBool(b, f.Misfired)
	b = appendBool(b, f.Ack)
	return b
}

func appendLastFire(b []byte, l *LastFire) []byte {
	if l == nil {
		return appendNil(b)
	}
	b = appendArrayHeader(b, lastFireFields)
	b = appendStr(b, l.FireID)
	b = appendInt(b, l.DueAt)
	b = appendInt(b, l.FinishedAt)
	b = appendInt(b, int64(l.Attempts))
	b = appendInt(b, int64(l.StatusCode))
	b = appendStr(b, l.Error)
	b = appendBin(b, l.Result)
	return b
}

func appendExecution(b []byte, e *Execution) []byte {
	b = appendArrayHeader(b, executionFields)
	b = appendUint(b, executionFormat)
	b = appendStr(b, e.FireID)
	b = appendInt(b, e.DueAt)
	b = appendInt(b, e.StartedAt)
	b = appendInt(b, e.FinishedAt)
	b = appendInt(b, int64(e.Attempt))
	b = appendInt(b, int64(e.StatusCode))
	b = appendStr(b, e.Error)
	b = appendBin(b, e.Result)
	b = appendStrs(b, e.Children)
	b = appendBool(b, e.Ack)
	return b
}

// field consumes one of the n array elements left, reporting whether there
// was one: fields past the end of a shorter array keep their zero value.
func field(n *int) bool {
	if *n <= 0 {
		return false
	}
	*n--
	return true
}

// record reads the header and format version of a top-level record and
// returns the number of elements left.
func (r *reader) record(what string, version uint64) int {
	n, isNil := r.arrayLen()
	if r.err != nil {
		return 0
	}
	if isNil || !field(&n) {
		r.fail(fmt.Errorf("%s record without a format version", what))
		return 0
	}
	if v := r.uint(math.MaxUint64); r.err == nil && v != version {
		r.fail(fmt.Errorf("unknown %s format version %d (want %d)", what, v, version))
	}
	return n
}

// end checks that the record consumed its whole input.
func (r *reader) end() {
	if r.err == nil && len(r.b) > 0 {
		r.fail(fmt.Errorf("%d bytes after the record", len(r.b)))
	}
}

func (r *reader) task(t *Task) {
	n := r.record("task", taskFormat)
	if field(&n) {
		t.ID = r.ownStr()
	}
	if field(&n) {
		t.Slot = uint16(r.uint(math.MaxUint16))
	}
	if field(&n) {
		r.spec(&t.Spec)
	}
	if field(&n) {
		t.Status = Status(r.uint(math.MaxUint8))
	}
	if field(&n) {
		t.NextDue = r.int64()
	}
	if field(&n) {
		t.FireSeq = r.uint(math.MaxUint64)
	}
	if field(&n) {
		t.Inflight = r.inflight()
	}
	if field(&n) {
		t.Triggers = r.ints()
	}
	if field(&n) {
		t.CreatedAt = r.int64()
	}
	if field(&n) {
		t.UpdatedAt = r.int64()
	}
	if field(&n) {
		t.FireCount = r.uint(math.MaxUint64)
	}
	if field(&n) {
		t.FailCount = r.uint(math.MaxUint64)
	}
	if field(&n) {
		t.LastFire = r.lastFire()
	}
	if field(&n) {
		t.HistSeq = r.uint(math.MaxUint64)
	}
	if field(&n) {
		t.Version = r.uint(math.MaxUint64)
	}
	if field(&n) {
		t.Runs = r.uint(math.MaxUint64)
	}
	if field(&n) {
		t.TriggerDues = r.ints()
	}
	if field(&n) {
		t.SkippedFires = r.uint(math.MaxUint64)
	}
	if field(&n) {
		t.Backfill = r.backfill()
	}
	if field(&n) {
		t.FinishedAt = r.int64()
	}
	if field(&n) {
		t.ExpireAt = r.int64()
	}
	if field(&n) {
		t.ParentID = r.str()
	}
	if field(&n) {
		t.ParentFire = r.str()
	}
	if field(&n) {
		t.Children = r.children()
	}
	if field(&n) {
		t.Notices = r.notices()
	}
	if field(&n) {
		t.FailReason = r.str()
	}
	r.skip(n, 0)
}

// children reads the pending children; nil reads as nil.
func (r *reader) children() []PendingChild {
	n, isNil := r.arrayLen()
	if isNil || r.err != nil {
		return nil
	}
	if n > len(r.b)/childFields {
		// Each child is an array of childFields elements, a byte each at
		// least: a longer list cannot be in the input (and must not size
		// the allocation).
		r.fail(fmt.Errorf("%d pending children in %d bytes", n, len(r.b)))
		return nil
	}
	cs := make([]PendingChild, n)
	for i := range cs {
		m, isNil := r.arrayLen()
		if r.err != nil {
			return nil
		}
		if isNil {
			r.fail(errors.New("a pending child is nil"))
			return nil
		}
		c := &cs[i]
		if field(&m) {
			c.ID = r.str()
		}
		if field(&m) {
			c.Seq = r.uint(math.MaxUint64)
		}
		if field(&m) {
			c.Index = r.int()
		}
		if field(&m) {
			c.Failure = r.bool()
		}
		if field(&m) {
			c.At = r.int64()
		}
		if field(&m) {
			c.Body = r.bytes()
		}
		if field(&m) {
			c.Result = r.bytes()
		}
		r.skip(m, 0)
	}
	return cs
}

// notices reads the pending notices; nil reads as nil.
func (r *reader) notices() []PendingNotice {
	n, isNil := r.arrayLen()
	if isNil || r.err != nil {
		return nil
	}
	if n > len(r.b)/noticeFields {
		// Each notice is an array of noticeFields elements, a byte each
		// at least: a longer list cannot be in the input.
		r.fail(fmt.Errorf("%d pending notices in %d bytes", n, len(r.b)))
		return nil
	}
	ns := make([]PendingNotice, n)
	for i := range ns {
		m, isNil := r.arrayLen()
		if r.err != nil {
			return nil
		}
		if isNil {
			r.fail(errors.New("a pending notice is nil"))
			return nil
		}
		c := &ns[i]
		if field(&m) {
			c.Seq = r.uint(math.MaxUint64)
		}
		if field(&m) {
			c.Failure = r.bool()
		}
		if field(&m) {
			c.URL = r.str()
		}
		if field(&m) {
			c.DueAt = r.int64()
		}
		if field(&m) {
			c.Body = r.bytes()
		}
		if field(&m) {
			c.Attempts = r.int()
		}
		if field(&m) {
			c.At = r.int64()
		}
		r.skip(m, 0)
	}
	return ns
}

// bins reads an array of bin (or str); nil reads as nil.
func (r *reader) bins() [][]byte {
	n, isNil := r.arrayLen()
	if isNil || r.err != nil {
		return nil
	}
	v := make([][]byte, n)
	for i := range v {
		v[i] = r.bytes()
	}
	return v
}

// strs reads an array of str (or bin); nil reads as nil.
func (r *reader) strs() []string {
	n, isNil := r.arrayLen()
	if isNil || r.err != nil {
		return nil
	}
	v := make([]string, n)
	for i := range v {
		v[i] = r.str()
	}
	return v
}

func (r *reader) spec(s *Spec) {
	n, isNil := r.arrayLen()
	if isNil || r.err != nil {
		return
	}
	if field(&n) {
		s.CallbackURL = r.str()
	}
	if field(&n) {
		s.Kind = Kind(r.uint(math.MaxUint8))
	}
	if field(&n) {
		s.DelayMs = r.int64()
	}
	if field(&n) {
		s.DueAt = r.int64()
	}
	if field(&n) {
		s.EveryMs = r.int64()
	}
	if field(&n) {
		s.Cron = r.str()
	}
	if field(&n) {
		s.Timezone = r.str()
	}
	if field(&n) {
		s.StartAt = r.int64()
	}
	if field(&n) {
		s.Payload = r.bytes()
	}
	if field(&n) {
		s.Headers = r.strMap()
	}
	if field(&n) {
		s.TimeoutMs = r.int64()
	}
	if field(&n) {
		s.MaxRetries = r.int()
	}
	if field(&n) {
		s.Misfire = Misfire(r.uint(math.MaxUint8))
	}
	if field(&n) {
		s.MaxFails = r.int()
	}
	if field(&n) {
		s.Labels = r.strMap()
	}
	if field(&n) {
		s.DSTGap = DSTGap(r.uint(math.MaxUint8))
	}
	if field(&n) {
		s.DSTOverlap = DSTOverlap(r.uint(math.MaxUint8))
	}
	if field(&n) {
		s.EndAt = r.int64()
	}
	if field(&n) {
		s.MaxRuns = r.int64()
	}
	if field(&n) {
		s.MaxCatchup = r.int64()
	}
	if field(&n) {
		s.RetentionMs = r.int64()
	}
	if field(&n) {
		s.RetentionSet = r.bool()
	}
	if field(&n) {
		s.OnSuccess = r.bins()
	}
	if field(&n) {
		s.OnFailure = r.bins()
	}
	if field(&n) {
		s.SuccessURL = r.str()
	}
	if field(&n) {
		s.FailureURL = r.str()
	}
	if field(&n) {
		s.AckURL = r.str()
	}
	if field(&n) {
		s.AckDelayMs = r.int64()
	}
	if field(&n) {
		s.AckRetries = r.int()
	}
	if field(&n) {
		s.FlowKey = r.str()
	}
	r.skip(n, 0)
}

func (r *reader) backfill() *Backfill {
	n, isNil := r.arrayLen()
	if isNil || r.err != nil {
		return nil
	}
	f := new(Backfill)
	if field(&n) {
		f.Next = r.int64()
	}
	if field(&n) {
		f.To = r.int64()
	}
	if field(&n) {
		f.Left = r.uint(math.MaxUint64)
	}
	if field(&n) {
		f.At = r.int64()
	}
	r.skip(n, 0)
	return f
}

func (r *reader) inflight() *Inflight {
	n, isNil := r.arrayLen()
	if isNil || r.err != nil {
		return nil
	}
	f := new(Inflight)
	if field(&n) {
		f.Seq = r.uint(math.MaxUint64)
	}
	if field(&n) {
		f.Due = r.int64()
	}
	if field(&n) {
		f.Attempt = r.int()
	}
	if field(&n) {
		f.NextAttemptAt = r.int64()
	}
	if field(&n) {
		f.StartedAt = r.int64()
	}
	if field(&n) {
		f.Trigger = r.bool()
	}
	if field(&n) {
		f.Misfired = r.bool()
	}
	if field(&n) {
		f.Ack = r.bool()
	}
	r.skip(n, 0)
	return f
}

func (r *reader) lastFire() *LastFire {
	n, isNil := r.arrayLen()
	if isNil || r.err != nil {
		return nil
	}
	l := new(LastFire)
	if field(&n) {
		l.FireID = r.str()
	}
	if field(&n) {
		l.DueAt = r.int64()
	}
	if field(&n) {
		l.FinishedAt = r.int64()
	}
	if field(&n) {
		l.Attempts = r.int()
	}
	if field(&n) {
		l.StatusCode = r.int()
	}
	if field(&n) {
		l.Error = r.str()
	}
	if field(&n) {
		l.Result = r.bytes()
	}
	r.skip(n, 0)
	return l
}

func (r *reader) execution(e *Execution) {
	n := r.record("execution", executionFormat)
	if field(&n) {
		e.FireID = r.str()
	}
	if field(&n) {
		e.DueAt = r.int64()
	}
	if field(&n) {
		e.StartedAt = r.int64()
	}
	if field(&n) {
		e.FinishedAt = r.int64()
	}
	if field(&n) {
		e.Attempt = r.int()
	}
	if field(&n) {
		e.StatusCode = r.int()
	}
	if field(&n) {
		e.Error = r.str()
	}
	if field(&n) {
		e.Result = r.bytes()
	}
	if field(&n) {
		e.Children = r.strs()
	}
	if field(&n) {
		e.Ack = r.bool()
	}
	r.skip(n, 0)
}

// codec is reusable scratch space for encoding records and building keys.
// One codec is used by one goroutine at a time (a Batch holds one for its
// lifetime; Get and the scans borrow one from codecPool).
type codec struct {
	val []byte // record scratch; pebble copies values on Set, so it is reused
	key []byte // key scratch; pebble copies keys on Set, so it is reused
	end []byte // second key scratch, for range ends
}

// codecPool holds idle codecs, so the hot paths reuse their buffers.
var codecPool = sync.Pool{New: func() any { return new(codec) }}

func getCodec() *codec { return codecPool.Get().(*codec) }

// maxPooledBuf keeps one huge record from pinning a large buffer in the pool.
const maxPooledBuf = 64 << 10

func putCodec(c *codec) {
	if cap(c.val) > maxPooledBuf || cap(c.key) > maxPooledBuf {
		return
	}
	codecPool.Put(c)
}

// EncodeTask returns the encoding of t as stored under its task key (see
// the record format above). The encoding is canonical: equal tasks give
// equal bytes. The error is always nil (the signature predates the
// hand-written codec); a string or payload over 4 GiB panics as a misuse.
// Exported for benchmarks and tools; the store encodes through its own
// reused buffers.
func EncodeTask(t *Task) ([]byte, error) {
	c := getCodec()
	c.val = appendTask(c.val[:0], t)
	b := bytes.Clone(c.val)
	putCodec(c)
	return b, nil
}

// DecodeTask decodes b, as produced by EncodeTask, into t. Every field of t
// is overwritten (t is zeroed first, and zeroed again on error). t does not
// alias b. Malformed input returns an error and never panics.
func DecodeTask(b []byte, t *Task) error {
	*t = Task{}
	r := newReader(b)
	r.task(t)
	r.end()
	if r.err != nil {
		*t = Task{}
		return fmt.Errorf("storage: decode task: %w", r.err)
	}
	return nil
}

// EncodeExecution returns the encoding of e as stored in a task's history.
// Like EncodeTask it is canonical and its error is always nil.
func EncodeExecution(e *Execution) ([]byte, error) {
	c := getCodec()
	c.val = appendExecution(c.val[:0], e)
	b := bytes.Clone(c.val)
	putCodec(c)
	return b, nil
}

// DecodeExecution decodes b, as produced by EncodeExecution, into e, with
// the same contract as DecodeTask.
func DecodeExecution(b []byte, e *Execution) error {
	*e = Execution{}
	r := newReader(b)
	r.execution(e)
	r.end()
	if r.err != nil {
		*e = Execution{}
		return fmt.Errorf("storage: decode execution: %w", r.err)
	}
	return nil
}

// decodeTask is DecodeTask for the store's read paths, which hold a codec
// for their key scratch anyway.
func (c *codec) decodeTask(b []byte, t *Task) error { return DecodeTask(b, t) }

// decodeExecution is DecodeExecution for the store's read paths.
func (c *codec) decodeExecution(b []byte, e *Execution) error { return DecodeExecution(b, e) }
