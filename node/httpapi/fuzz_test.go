package httpapi

import (
	"strings"
	"testing"

	"github.com/chime-scheduler/chime/storage"
)

// Fuzz targets for what clients send the API (issue 11): none may panic,
// and none may accept what it should refuse.

func FuzzBatchEnvelope(f *testing.F) {
	f.Add([]byte(`{"tasks":[{"delay_ms":1}]}`))
	f.Add([]byte(`{"tasks":[]}`))
	f.Add([]byte(`{"tasks":[` + strings.Repeat(`{},`, 10) + `{}],"x":1}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		tasks, e := decodeBatchEnvelope(body, 5)
		if e == nil && (len(tasks) == 0 || len(tasks) > 5) {
			t.Fatalf("accepted %d tasks", len(tasks))
		}
	})
}

func FuzzListCursor(f *testing.F) {
	f.Add(encodeCursor(storage.Position{Slot: 7, ID: "a"}))
	f.Add("")
	f.Add("__8")
	f.Fuzz(func(t *testing.T, s string) {
		p, ok := decodeCursor(s)
		if !ok {
			return
		}
		if p.Slot >= 16384 || validateID(p.ID) != nil {
			t.Fatalf("accepted %+v", p)
		}
		if encodeCursor(p) != s {
			t.Fatalf("%q decodes to %+v, which encodes to %q", s, p, encodeCursor(p))
		}
	})
}
