package storage

import (
	"reflect"
	"testing"
)

// FuzzDecodeTask feeds arbitrary bytes to DecodeTask: it must never panic,
// and whatever it accepts must survive a round trip unchanged (so a record
// read from a damaged store can be rewritten and read back the same).
func FuzzDecodeTask(f *testing.F) {
	g := newRecordGen(6)
	seeds := []*Task{{}, newTask(1, "seed", 5), benchTaskFull(), fullTask()}
	for len(seeds) < 8 {
		seeds = append(seeds, g.task())
	}
	for _, tk := range seeds {
		enc, _ := EncodeTask(tk)
		if len(enc) > 2048 {
			continue // big seeds slow the fuzzer down without new coverage
		}
		f.Add(enc)
		f.Add(enc[:len(enc)/2])
		flipped := append([]byte(nil), enc...)
		flipped[len(flipped)/3] ^= 0x40
		f.Add(flipped)
	}
	f.Add([]byte{})
	f.Add([]byte{0xc0})
	f.Add([]byte{0xc1})
	f.Add([]byte{0x91, 0x02})
	f.Add([]byte{0xdd, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{0x92, 0x01, 0xdb, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{0x94, 0x01, 0xa0, 0x00, 0x9a, 0xa0, 0x00, 0x00, 0x00, 0x00, 0xa0, 0xa0, 0x00, 0xc0, 0xdf, 0x7f, 0xff, 0xff, 0xff})

	f.Fuzz(func(t *testing.T, b []byte) {
		var tk Task
		if err := DecodeTask(b, &tk); err != nil {
			if !reflect.DeepEqual(tk, Task{}) {
				t.Fatalf("DecodeTask(%x) = %v but left %+v", b, err, tk)
			}
			return
		}
		checkStable(t, &tk)
	})
}

// FuzzDecodeExecution is FuzzDecodeTask for history records.
func FuzzDecodeExecution(f *testing.F) {
	g := newRecordGen(7)
	for range 4 {
		enc, _ := EncodeExecution(g.execution())
		f.Add(enc)
		f.Add(enc[:len(enc)/2])
	}
	f.Add([]byte{0x91, 0x01})
	f.Add([]byte{0x91, 0x07})

	f.Fuzz(func(t *testing.T, b []byte) {
		var e Execution
		if err := DecodeExecution(b, &e); err != nil {
			if !reflect.DeepEqual(e, Execution{}) {
				t.Fatalf("DecodeExecution(%x) = %v but left %+v", b, err, e)
			}
			return
		}
		enc, _ := EncodeExecution(&e)
		var again Execution
		if err := DecodeExecution(enc, &again); err != nil || !reflect.DeepEqual(again, e) {
			t.Fatalf("re-encoded execution decodes to %+v, %v; want %+v", again, err, e)
		}
	})
}

// FuzzDecodeFlow: a flow record reaches a node from a member's snapshot or
// replicated write, so its decoder takes any bytes: an error leaves the
// Flow zero, and anything it accepts re-encodes to what decodes the same.
func FuzzDecodeFlow(f *testing.F) {
	for _, fl := range []Flow{
		{Key: "k"},
		{Key: "tenant-7:mail", Rate: 10, PeriodMs: 1000, Parallelism: 2, CreatedAt: 1, UpdatedAt: 2, Version: 3},
	} {
		enc := EncodeFlow(&fl)
		f.Add(enc)
		f.Add(enc[:len(enc)/2])
	}
	f.Add([]byte{0x91, 0x01})
	f.Fuzz(func(t *testing.T, b []byte) {
		var fl Flow
		if err := DecodeFlow(b, &fl); err != nil {
			if fl != (Flow{}) {
				t.Fatalf("DecodeFlow(%x) = %v but left %+v", b, err, fl)
			}
			return
		}
		var again Flow
		if err := DecodeFlow(EncodeFlow(&fl), &again); err != nil || again != fl {
			t.Fatalf("re-encoded flow decodes to %+v, %v; want %+v", again, err, fl)
		}
	})
}
