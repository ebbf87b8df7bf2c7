package httpapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
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
	f.Add([]byte(` {"tasks" : [ {"a":"]}"} , [1,{"b":[]}] ,"x\\"", null,-1.5e3 ] } `))
	f.Fuzz(func(t *testing.T, body []byte) {
		tasks, e := decodeBatchEnvelope(body, 5)
		if e != nil {
			return
		}
		if len(tasks) == 0 || len(tasks) > 5 {
			t.Fatalf("accepted %d tasks", len(tasks))
		}
		// What it accepts, encoding/json decodes to the same raw tasks.
		var ref batchEnvelope
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&ref); err != nil {
			t.Fatalf("accepted %q, which encoding/json refuses: %v", body, err)
		}
		if len(ref.Tasks) != len(tasks) {
			t.Fatalf("%q: %d tasks, encoding/json %d", body, len(tasks), len(ref.Tasks))
		}
		for i := range tasks {
			if !bytes.Equal(tasks[i], ref.Tasks[i]) {
				t.Fatalf("%q: task %d is %q, encoding/json %q", body, i, tasks[i], ref.Tasks[i])
			}
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

// FuzzSchedulePreview: whatever query a client sends GET
// /v1/schedule:preview, the answer is a 200 with at most 1,000 fires or a
// 4xx in the error shape — never a panic or a 5xx.
func FuzzSchedulePreview(f *testing.F) {
	f.Add("cron=30+2+*+*+*&timezone=Europe/Berlin&n=10&gap=skip&overlap=both")
	f.Add("every_ms=1000&n=1000&end_at=2026-03-01T00:00:00Z")
	f.Add("cron=@every+1s&gap=shift")
	f.Add("cron=*+*+*+*+*+*&timezone=Australia/Lord_Howe&start_at=2026-04-04T14:00:00Z&n=1000")
	f.Add("n=0&x=1")
	f.Fuzz(func(t *testing.T, query string) {
		s := New(Config{Name: "n1"}, newFake())
		r := httptest.NewRequest("GET", "http://localhost:7070/v1/schedule:preview", nil)
		r.URL.RawQuery = query
		w := httptest.NewRecorder()
		s.ServeHTTP(w, r)
		switch {
		case w.Code == http.StatusOK:
			var ans struct {
				Fires []json.RawMessage `json:"fires"`
			}
			if err := json.Unmarshal(w.Body.Bytes(), &ans); err != nil || len(ans.Fires) > 1000 {
				t.Fatalf("%q: 200 with %d fires (%v): %.200s", query, len(ans.Fires), err, w.Body)
			}
		case w.Code >= 400 && w.Code < 500:
			if !strings.Contains(w.Body.String(), `"error":{`) {
				t.Fatalf("%q: %d without the error shape: %.200s", query, w.Code, w.Body)
			}
		default:
			t.Fatalf("%q: answered %d: %.200s", query, w.Code, w.Body)
		}
	})
}

// FuzzFlowRequest: whatever body a client PUTs to /v1/flows/{key}, the
// decoder panics never and accepts only limits within their bounds.
func FuzzFlowRequest(f *testing.F) {
	f.Add([]byte(`{"rate":10,"period_ms":1000,"parallelism":2}`))
	f.Add([]byte(`{"parallelism":1}`))
	f.Add([]byte(`{"rate":1e400,"period_ms":-0}`))
	f.Add([]byte(`{"rate":10,"period_ms":1000,"rate":1}`))
	f.Add([]byte(`{"\u0072ate":1,"period_ms":1}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		fl, e := decodeFlowRequest(body, "k")
		if e != nil {
			return
		}
		if fl.Rate == 0 && fl.Parallelism == 0 || fl.Rate < 0 || fl.Rate > maxFlowRate ||
			(fl.Rate > 0) != (fl.PeriodMs > 0) || fl.PeriodMs > maxFlowPeriodMs ||
			fl.Parallelism < 0 || fl.Parallelism > maxFlowParallelism {
			t.Fatalf("accepted %s as %+v", body, fl)
		}
	})
}
