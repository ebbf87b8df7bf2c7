package storage

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

// TestRecordRoundTrip encodes random records, decodes them into dirty
// structs and wants deep-equal records back, and re-encoding to give the
// same bytes.
func TestRecordRoundTrip(t *testing.T) {
	const n = 2000
	t.Run("task", func(t *testing.T) {
		g := newRecordGen(1)
		dirty := g.task()
		for i := range n {
			want := g.task()
			enc, err := EncodeTask(want)
			if err != nil {
				t.Fatalf("EncodeTask #%d: %v", i, err)
			}
			got := *dirty // shallow copy: decoding must overwrite, not merge
			if err := DecodeTask(enc, &got); err != nil {
				t.Fatalf("DecodeTask(EncodeTask(#%d)): %v", i, err)
			}
			if !reflect.DeepEqual(&got, want) {
				t.Fatalf("DecodeTask(EncodeTask(#%d)) = %+v\nwant %+v", i, got, *want)
			}
			if again := appendTask(nil, &got); !bytes.Equal(again, enc) {
				t.Fatalf("task #%d re-encodes differently:\n%x\n%x", i, again, enc)
			}
		}
	})
	t.Run("execution", func(t *testing.T) {
		g := newRecordGen(2)
		dirty := g.execution()
		for i := range n {
			want := g.execution()
			enc, err := EncodeExecution(want)
			if err != nil {
				t.Fatalf("EncodeExecution #%d: %v", i, err)
			}
			got := *dirty
			if err := DecodeExecution(enc, &got); err != nil {
				t.Fatalf("DecodeExecution(EncodeExecution(#%d)): %v", i, err)
			}
			if !reflect.DeepEqual(&got, want) {
				t.Fatalf("DecodeExecution(EncodeExecution(#%d)) = %+v\nwant %+v", i, got, *want)
			}
		}
	})
}

// TestRecordGenCoversEveryField guards the round-trip test against a field
// added to a record but not to recordGen (it would stay zero, so a codec
// that forgot it would still round-trip): every field must be non-zero in
// some generated record, and every pointer, map and slice also nil in some.
func TestRecordGenCoversEveryField(t *testing.T) {
	g := newRecordGen(3)
	nonZero, isNil := map[string]bool{}, map[string]bool{}
	var walk func(prefix string, v reflect.Value)
	walk = func(prefix string, v reflect.Value) {
		for i := range v.NumField() {
			if !v.Type().Field(i).IsExported() {
				continue // in memory only (Task.stored), not a record field
			}
			f, name := v.Field(i), prefix+v.Type().Field(i).Name
			switch f.Kind() {
			case reflect.Pointer, reflect.Map, reflect.Slice:
				isNil[name] = isNil[name] || f.IsNil()
			}
			nonZero[name] = nonZero[name] || !f.IsZero()
			if f.Kind() == reflect.Pointer && !f.IsNil() {
				f = f.Elem()
			}
			if f.Kind() == reflect.Struct {
				walk(name+".", f)
			}
		}
	}
	for range 500 {
		walk("Task.", reflect.ValueOf(g.task()).Elem())
		walk("Execution.", reflect.ValueOf(g.execution()).Elem())
	}
	for name, ok := range nonZero {
		if !ok {
			t.Errorf("recordGen never sets %s", name)
		}
	}
	for name, ok := range isNil {
		if !ok {
			t.Errorf("recordGen never leaves %s nil", name)
		}
	}
}

// TestRecordFieldCounts checks the array lengths the encoder writes against
// the structs: a field added to a struct must be added to the codec.
func TestRecordFieldCounts(t *testing.T) {
	tests := []struct {
		name    string
		typ     reflect.Type
		version int // 1 if the array starts with a format version
		want    int
	}{
		{"Task", reflect.TypeFor[Task](), 1, taskFields},
		{"Spec", reflect.TypeFor[Spec](), 0, specFields},
		{"Inflight", reflect.TypeFor[Inflight](), 0, inflightFields},
		{"LastFire", reflect.TypeFor[LastFire](), 0, lastFireFields},
		{"Execution", reflect.TypeFor[Execution](), 1, executionFields},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Unexported fields are in memory only (Task.stored).
			n := 0
			for f := range tt.typ.Fields() {
				if f.IsExported() {
					n++
				}
			}
			if got := n + tt.version; got != tt.want {
				t.Errorf("%s has %d exported fields (+%d version), codec writes %d", tt.name, n, tt.version, tt.want)
			}
		})
	}
}

// TestRecordGolden pins the bytes of fixed records: the format is on disk,
// so any change here must be an append (see the format comment in codec.go).
func TestRecordGolden(t *testing.T) {
	task := &Task{
		ID:   "a",
		Slot: 300,
		Spec: Spec{
			CallbackURL: "u",
			Kind:        KindEvery,
			EveryMs:     1000,
			Payload:     []byte("{}"),
			Headers:     map[string]string{"b": "2", "a": "1"},
			TimeoutMs:   5000,
			MaxRetries:  3,
			Misfire:     MisfireSkip,
		},
		Status:    StatusScheduled,
		NextDue:   -1,
		FireSeq:   2,
		Inflight:  &Inflight{Seq: 2, Due: 1 << 40, Attempt: 1, Trigger: true},
		Triggers:  []int64{5},
		CreatedAt: 1,
		UpdatedAt: -200,
		Version:   math.MaxUint64,
	}
	exec := &Execution{FireID: "a:2", DueAt: 70000, Attempt: 1, StatusCode: 503, Error: "x"}
	tests := []struct {
		name   string
		encode func() ([]byte, error)
		want   []string // hex, one field per line
	}{
		{"task", func() ([]byte, error) { return EncodeTask(task) }, []string{
			"dc001b",             // array16 of 27
			"01",                 // format version
			"a161",               // ID "a"
			"cd012c",             // Slot 300
			"dc001e",             // Spec: array16 of 30
			"a175",               //   CallbackURL "u"
			"02",                 //   Kind every
			"00",                 //   DelayMs
			"00",                 //   DueAt
			"cd03e8",             //   EveryMs 1000
			"a0",                 //   Cron ""
			"a0",                 //   Timezone ""
			"00",                 //   StartAt
			"c4027b7d",           //   Payload bin "{}"
			"82a161a131a162a132", // Headers {a:1, b:2}, sorted
			"cd1388",             //   TimeoutMs 5000
			"03",                 //   MaxRetries
			"02",                 //   Misfire skip
			"00",                 //   MaxFails
			"c0",                 //   Labels nil
			"00",                 //   DSTGap default
			"00",                 //   DSTOverlap default
			"00",                 //   EndAt
			"00",                 //   MaxRuns
			"00",                 //   MaxCatchup
			"00",                 //   RetentionMs
			"c2",                 //   RetentionSet false
			"c0",                 //   OnSuccess nil
			"c0",                 //   OnFailure nil
			"a0",                 //   SuccessURL ""
			"a0",                 //   FailureURL ""
			"a0",                 //   AckURL ""
			"00",                 //   AckDelayMs
			"00",                 //   AckRetries
			"a0",                 //   FlowKey ""
			"01",                 // Status scheduled
			"ff",                 // NextDue -1
			"02",                 // FireSeq
			"98",                 // Inflight: fixarray of 8
			"02",                 //   Seq
			"cf0000010000000000", // Due 1<<40
			"01",                 //   Attempt
			"00",                 //   NextAttemptAt
			"00",                 //   StartedAt
			"c3",                 //   Trigger
			"c2",                 //   Misfired
			"c2",                 //   Ack
			"9105",               // Triggers [5]
			"01",                 // CreatedAt
			"d1ff38",             // UpdatedAt -200
			"00",                 // FireCount
			"00",                 // FailCount
			"c0",                 // LastFire nil
			"00",                 // HistSeq
			"cfffffffffffffffff", // Version MaxUint64
			"00",                 // Runs
			"c0",                 // TriggerDues nil
			"00",                 // SkippedFires
			"c0",                 // Backfill nil
			"00",                 // FinishedAt
			"00",                 // ExpireAt
			"a0",                 // ParentID ""
			"a0",                 // ParentFire ""
			"c0",                 // Children nil
			"c0",                 // Notices nil
			"a0",                 // FailReason ""
		}},
		{"execution", func() ([]byte, error) { return EncodeExecution(exec) }, []string{
			"9b",         // fixarray of 11
			"01",         // format version
			"a3613a32",   // FireID "a:2"
			"ce00011170", // DueAt 70000
			"00",         // StartedAt
			"00",         // FinishedAt
			"01",         // Attempt
			"cd01f7",     // StatusCode 503
			"a178",       // Error "x"
			"c0",         // Result nil
			"c0",         // Children nil
			"c2",         // Ack
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.encode()
			if err != nil {
				t.Fatal(err)
			}
			if want := strings.Join(tt.want, ""); hex.EncodeToString(got) != want {
				t.Errorf("encoding =\n%x\nwant\n%s", got, want)
			}
		})
	}
}

// TestEncodeTaskDeterministic encodes equal tasks whose maps were built in
// different orders (and Go randomizes map iteration) and wants equal bytes.
func TestEncodeTaskDeterministic(t *testing.T) {
	for _, n := range []int{0, 1, 2, 16, 17, 40} {
		t.Run(fmt.Sprintf("keys=%d", n), func(t *testing.T) {
			keys := make([]string, n)
			for i := range keys {
				keys[i] = fmt.Sprintf("k%02d-%s", (i*7)%n, unicodeWords[i%len(unicodeWords)])
			}
			build := func(reverse bool) *Task {
				tk := newTask(1, "det", 5)
				tk.Spec.Headers, tk.Spec.Labels = map[string]string{}, map[string]string{}
				for i := range keys {
					k := keys[i]
					if reverse {
						k = keys[n-1-i]
					}
					tk.Spec.Headers[k], tk.Spec.Labels["l"+k] = "v"+k, k
				}
				return tk
			}
			want, _ := EncodeTask(build(false))
			for i := range 20 {
				got, _ := EncodeTask(build(i%2 == 1))
				if !bytes.Equal(got, want) {
					t.Fatalf("encoding %d differs:\n%x\nwant\n%x", i, got, want)
				}
			}
		})
	}
}

// TestDecodeGeneric checks that a stored record is plain msgpack: a generic
// decoder reads it as nested arrays, for debugging tools.
func TestDecodeGeneric(t *testing.T) {
	tk := benchTaskFull()
	enc, _ := EncodeTask(tk)
	var v []any
	if err := msgpack.Unmarshal(enc, &v); err != nil {
		t.Fatalf("msgpack.Unmarshal: %v", err)
	}
	if len(v) != taskFields || v[1] != tk.ID {
		t.Fatalf("generic decode = %d elements, ID %v; want %d, %q", len(v), v[1], taskFields, tk.ID)
	}
	spec, ok := v[3].([]any)
	if !ok || len(spec) != specFields {
		t.Fatalf("generic Spec = %#v, want an array of %d", v[3], specFields)
	}
	if got := spec[9].(map[string]any)["X-Tenant"]; got != "acme" {
		t.Errorf("generic Spec.Headers[X-Tenant] = %v, want acme", got)
	}
	if got := spec[8].([]byte); !bytes.Equal(got, tk.Spec.Payload) {
		t.Errorf("generic Spec.Payload = %q, want %q", got, tk.Spec.Payload)
	}
}

// genericTree decodes enc with the msgpack library into nested []any.
func genericTree(t *testing.T, enc []byte) []any {
	t.Helper()
	var v []any
	if err := msgpack.Unmarshal(enc, &v); err != nil {
		t.Fatalf("msgpack.Unmarshal: %v", err)
	}
	return v
}

func marshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := msgpack.Marshal(v)
	if err != nil {
		t.Fatalf("msgpack.Marshal: %v", err)
	}
	return b
}

// zeroFrom zeroes the fields of the struct at p from index i on: what a
// record written before those fields existed decodes to. Record positions
// follow field declaration order (codec.go).
func zeroFrom(p any, i int) {
	v := reflect.ValueOf(p).Elem()
	for ; i < v.NumField(); i++ {
		if v.Type().Field(i).IsExported() { // unexported ones are not stored
			v.Field(i).SetZero()
		}
	}
}

// fullTask is a task with every nested record present.
func fullTask() *Task {
	tk := benchTaskFull()
	tk.Spec.Cron, tk.Spec.Timezone, tk.Spec.MaxFails = "*/5 * * * *", "Europe/Berlin", 3
	tk.Spec.DSTGap, tk.Spec.DSTOverlap = DSTGapSkip, DSTOverlapBoth
	tk.Spec.EndAt, tk.Spec.MaxRuns, tk.Runs = 1<<60, 5, 4
	tk.Triggers = []int64{7, 8}
	tk.LastFire.Error = "boom"
	tk.Inflight.Trigger, tk.Inflight.Misfired, tk.Inflight.Ack = true, true, true
	tk.Spec.AckURL, tk.Spec.AckDelayMs, tk.Spec.AckRetries = "https://a/ack", 1000, 3
	tk.FailReason = "ack"
	return tk
}

// TestDecodeOlderRecord decodes records cut short, as an older writer with
// fewer fields wrote them: the missing fields decode as zero.
func TestDecodeOlderRecord(t *testing.T) {
	enc, _ := EncodeTask(fullTask())
	cuts := []struct {
		name        string
		first, last int                              // range of element counts to keep
		cut         func(tree []any, keep int) []any // keeps the first elements of one array
		zero        func(tk *Task, keep int)         // zeroes the fields that were cut
	}{
		{"Task", 1, taskFields, // the version always stays
			func(tr []any, k int) []any { return tr[:k] },
			func(tk *Task, k int) { zeroFrom(tk, k-1) }},
		{"Spec", 0, specFields,
			func(tr []any, k int) []any { tr[3] = tr[3].([]any)[:k]; return tr },
			func(tk *Task, k int) { zeroFrom(&tk.Spec, k) }},
		{"Inflight", 0, inflightFields,
			func(tr []any, k int) []any { tr[7] = tr[7].([]any)[:k]; return tr },
			func(tk *Task, k int) { zeroFrom(tk.Inflight, k) }},
		{"LastFire", 0, lastFireFields,
			func(tr []any, k int) []any { tr[13] = tr[13].([]any)[:k]; return tr },
			func(tk *Task, k int) { zeroFrom(tk.LastFire, k) }},
	}
	for _, c := range cuts {
		for keep := c.first; keep <= c.last; keep++ {
			t.Run(fmt.Sprintf("%s/keep=%d", c.name, keep), func(t *testing.T) {
				want := fullTask()
				c.zero(want, keep)
				var got Task
				if err := DecodeTask(marshal(t, c.cut(genericTree(t, enc), keep)), &got); err != nil {
					t.Fatalf("DecodeTask: %v", err)
				}
				if !reflect.DeepEqual(&got, want) {
					t.Errorf("DecodeTask = %+v\nwant %+v", got, *want)
				}
			})
		}
	}
	t.Run("Execution", func(t *testing.T) {
		e := &Execution{FireID: "f:1", DueAt: 1, StartedAt: 2, FinishedAt: 3, Attempt: 4, StatusCode: 500, Error: "e", Result: []byte("r"), Children: []string{"c"}, Ack: true}
		enc, _ := EncodeExecution(e)
		for keep := 1; keep <= executionFields; keep++ {
			want := *e
			zeroFrom(&want, keep-1)
			var got Execution
			if err := DecodeExecution(marshal(t, genericTree(t, enc)[:keep]), &got); err != nil {
				t.Fatalf("keep=%d: DecodeExecution: %v", keep, err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("keep=%d: DecodeExecution = %+v, want %+v", keep, got, want)
			}
		}
	})
}

// extraValues are values a newer writer might append to any array; the
// decoder must skip each of them.
var extraValues = []any{
	nil, true, int64(-5), uint64(math.MaxUint64), 1.5, float32(2.5), "new field", []byte{1, 2, 3},
	[]any{1, "x", []any{map[string]any{"k": []any{}}}}, map[string]any{"a": 1, "b": []any{nil}},
	strings.Repeat("s", 300), make([]any, 20), msgpack.RawMessage{0xd4, 0x01, 0x02}, // fixext1
	msgpack.RawMessage{0xc7, 0x03, 0x05, 'e', 'x', 't'}, // ext8
}

// TestDecodeNewerRecord decodes records with extra trailing elements, as a
// newer writer with more fields wrote them: they are skipped.
func TestDecodeNewerRecord(t *testing.T) {
	full := fullTask()
	enc, _ := EncodeTask(full)
	paths := []struct {
		name string
		grow func(tree []any) []any
	}{
		{"Task", func(tr []any) []any { return append(tr, extraValues...) }},
		{"Spec", func(tr []any) []any { tr[3] = append(tr[3].([]any), extraValues...); return tr }},
		{"Inflight", func(tr []any) []any { tr[7] = append(tr[7].([]any), extraValues...); return tr }},
		{"LastFire", func(tr []any) []any { tr[13] = append(tr[13].([]any), extraValues...); return tr }},
	}
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			var got Task
			if err := DecodeTask(marshal(t, p.grow(genericTree(t, enc))), &got); err != nil {
				t.Fatalf("DecodeTask: %v", err)
			}
			if !reflect.DeepEqual(&got, full) {
				t.Errorf("DecodeTask = %+v\nwant %+v", got, *full)
			}
		})
	}
	t.Run("Execution", func(t *testing.T) {
		e := &Execution{FireID: "f:1", Attempt: 1, Result: []byte{}}
		enc, _ := EncodeExecution(e)
		var got Execution
		if err := DecodeExecution(marshal(t, append(genericTree(t, enc), extraValues...)), &got); err != nil {
			t.Fatalf("DecodeExecution: %v", err)
		}
		if !reflect.DeepEqual(&got, e) {
			t.Errorf("DecodeExecution = %+v, want %+v", got, *e)
		}
	})
}

// TestDecodeLenient covers the inputs the decoder accepts although the
// encoder never writes them: nil for any field, other integer forms, str
// and bin swapped.
func TestDecodeLenient(t *testing.T) {
	base := genericTree(t, func() []byte { b, _ := EncodeTask(fullTask()); return b }())
	tests := []struct {
		name string
		edit func(tr []any)
		want func(tk *Task)
	}{
		{"nil id", func(tr []any) { tr[1] = nil }, func(tk *Task) { tk.ID = "" }},
		{"nil spec", func(tr []any) { tr[3] = nil }, func(tk *Task) { tk.Spec = Spec{} }},
		{"nil counter", func(tr []any) { tr[11] = nil }, func(tk *Task) { tk.FireCount = 0 }},
		{"nil bool", func(tr []any) { tr[7].([]any)[5] = nil }, func(tk *Task) { tk.Inflight.Trigger = false }},
		{"int64 form for slot", func(tr []any) { tr[2] = int64(7) }, func(tk *Task) { tk.Slot = 7 }},
		{"int8 form for counter", func(tr []any) { tr[11] = int8(9) }, func(tk *Task) { tk.FireCount = 9 }},
		{"uint64 form for int", func(tr []any) { tr[5] = uint64(12) }, func(tk *Task) { tk.NextDue = 12 }},
		{"bin id", func(tr []any) { tr[1] = []byte("b") }, func(tk *Task) { tk.ID = "b" }},
		{"str payload", func(tr []any) { tr[3].([]any)[8] = "p" }, func(tk *Task) { tk.Spec.Payload = []byte("p") }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tree := genericTree(t, marshal(t, base)) // a fresh copy
			tt.edit(tree)
			want := fullTask()
			tt.want(want)
			var got Task
			if err := DecodeTask(marshal(t, tree), &got); err != nil {
				t.Fatalf("DecodeTask: %v", err)
			}
			if !reflect.DeepEqual(&got, want) {
				t.Errorf("DecodeTask = %+v\nwant %+v", got, *want)
			}
		})
	}
}

// TestDecodeErrors feeds malformed records; each must fail with an error
// that says where, and leave the task zero.
func TestDecodeErrors(t *testing.T) {
	valid, _ := EncodeTask(fullTask())
	tree := func(edit func(tr []any)) []byte {
		tr := genericTree(t, valid)
		edit(tr)
		return marshal(t, tr)
	}
	tests := []struct {
		name string
		in   []byte
		want string // substring of the error
	}{
		{"empty", nil, "unexpected end"},
		{"nil", []byte{0xc0}, "without a format version"},
		{"empty array", []byte{0x90}, "without a format version"},
		{"map", []byte{0x81, 0xa1, 'i', 0x01}, "where array expected"},
		{"never used byte", []byte{0x92, 0x01, 0xc1, 0x00}, "type 0xc1 where str or bin expected"},
		{"unknown version", []byte{0x91, 0x02}, "unknown task format version 2"},
		{"negative version", []byte{0x91, 0xff}, "out of range"},
		{"truncated", valid[:len(valid)-1], "unexpected end"},
		{"trailing bytes", append(bytes.Clone(valid), 0x00), "1 bytes after the record"},
		{"huge array", []byte{0xdd, 0xff, 0xff, 0xff, 0xff, 0x01}, "array of 4294967295 elements in 1 bytes"},
		{"huge string", []byte{0x92, 0x01, 0xdb, 0xff, 0xff, 0xff, 0xff, 'a'}, "unexpected end"},
		{"huge map", []byte{0x94, 0x01, 0xa0, 0x00, 0x9a, 0xa0, 0x00, 0x00, 0x00, 0x00, 0xa0, 0xa0, 0x00, 0xc0, 0xdf, 0x7f, 0xff, 0xff, 0xff},
			"map of 2147483647 pairs in 0 bytes"}, // [1, "", 0, [..., Headers: map32 of 2^31-1]]
		{"slot out of range", tree(func(tr []any) { tr[2] = 70000 }), "out of range [0, 65535]"},
		{"negative counter", tree(func(tr []any) { tr[11] = -1 }), "out of range"},
		{"int64 overflow", tree(func(tr []any) { tr[5] = uint64(math.MaxInt64 + 1) }), "overflows int64"},
		{"status out of range", tree(func(tr []any) { tr[4] = 256 }), "out of range [0, 255]"},
		{"string for int", tree(func(tr []any) { tr[5] = "1" }), "where integer expected"},
		{"int for string", tree(func(tr []any) { tr[1] = 1 }), "where str or bin expected"},
		{"float for int", tree(func(tr []any) { tr[5] = 1.0 }), "where integer expected"},
		{"int for bool", tree(func(tr []any) { tr[7].([]any)[5] = 1 }), "where bool expected"},
		{"string for spec", tree(func(tr []any) { tr[3] = "s" }), "where array expected"},
		{"array for map", tree(func(tr []any) { tr[3].([]any)[9] = []any{} }), "where map expected"},
		{"int map value", tree(func(tr []any) { tr[3].([]any)[9] = map[string]any{"a": 1} }), "where str or bin expected"},
		{"deep extra", func() []byte {
			var deep any = 0
			for range 100 {
				deep = []any{deep}
			}
			return marshal(t, append(genericTree(t, valid), deep))
		}(), "nested too deep"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := fullTask()
			err := DecodeTask(tt.in, got)
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "at byte") {
				t.Fatalf("DecodeTask(%x) error = %v, want one containing %q and the offset", tt.in, err, tt.want)
			}
			if !reflect.DeepEqual(got, &Task{}) {
				t.Errorf("DecodeTask left %+v after an error, want the zero Task", got)
			}
		})
	}
	t.Run("execution version", func(t *testing.T) {
		var e Execution
		if err := DecodeExecution([]byte{0x91, 0x07}, &e); err == nil || !strings.Contains(err.Error(), "unknown execution format version 7") {
			t.Errorf("DecodeExecution error = %v, want unknown version", err)
		}
	})
}

// TestDecodeCorrupted decodes every strict prefix of random encodings (each
// must fail: the top-level array promises more) and a bit flip in every
// byte (each must fail or give a record that round-trips unchanged),
// without panicking. FuzzDecodeTask explores further.
func TestDecodeCorrupted(t *testing.T) {
	g := newRecordGen(4)
	for i := 0; i < 12; {
		tk := g.task()
		enc, _ := EncodeTask(tk)
		if len(enc) > 1024 {
			continue // keep the loops short; big fields add no new paths
		}
		i++
		var got Task
		for n := range len(enc) {
			if err := DecodeTask(enc[:n], &got); err == nil {
				t.Fatalf("task #%d: DecodeTask of a %d/%d-byte prefix succeeded", i, n, len(enc))
			}
		}
		flipped := bytes.Clone(enc)
		for j := range enc {
			bit := byte(1) << ((i + j) % 8)
			flipped[j] ^= bit
			if err := DecodeTask(flipped, &got); err == nil {
				checkStable(t, &got)
			}
			flipped[j] ^= bit
		}
	}
}

// checkStable asserts that a decoded task survives another round trip.
func checkStable(t *testing.T, tk *Task) {
	t.Helper()
	enc, _ := EncodeTask(tk)
	var again Task
	if err := DecodeTask(enc, &again); err != nil {
		t.Fatalf("re-encoded task does not decode: %v", err)
	}
	if !reflect.DeepEqual(&again, tk) {
		t.Fatalf("re-encoded task decodes to %+v, want %+v", again, *tk)
	}
}

// TestStoreRoundTripRandom writes random tasks and executions through one
// batch (so the batch's reused encode buffer is exercised) and reads them
// back equal.
func TestStoreRoundTripRandom(t *testing.T) {
	s := openMem(t, Options{HistoryLimit: 1000})
	g := newRecordGen(5)
	b := s.NewBatch()
	var tasks []*Task
	var execs [][]Execution
	for i := range 50 {
		tk := g.task()
		tk.ID, tk.Slot, tk.HistSeq = fmt.Sprintf("rt-%d", i), uint16(i%7), 0
		tk.Inflight, tk.Triggers, tk.Backfill, tk.Children, tk.Notices, tk.Status = nil, nil, nil, nil, nil, StatusDone // wake 0: no due key
		var es []Execution
		for range i % 4 {
			e := g.execution()
			b.AppendExecution(tk, e)
			es = append(es, *e)
		}
		b.PutTask(tk, 0)
		tasks, execs = append(tasks, tk), append(execs, es)
	}
	if err := b.Commit(true); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	for i, want := range tasks {
		got, err := s.Get(want.Slot, want.ID)
		if err != nil {
			t.Fatalf("Get(%s): %v", want.ID, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("Get(%s) = %+v\nwant %+v", want.ID, got, want)
		}
		gotE, err := s.Executions(want.Slot, want.ID, 0)
		if err != nil {
			t.Fatalf("Executions(%s): %v", want.ID, err)
		}
		slices.Reverse(gotE) // Executions returns newest first
		if len(gotE) != len(execs[i]) || len(gotE) > 0 && !reflect.DeepEqual(gotE, execs[i]) {
			t.Fatalf("Executions(%s) = %+v\nwant %+v", want.ID, gotE, execs[i])
		}
	}
}
