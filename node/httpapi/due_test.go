package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chime-scheduler/chime/storage"
)

// TestDueValidation: a bad query of GET /v1/stats/due is a 400 naming the
// field, and counts nothing.
func TestDueValidation(t *testing.T) {
	for _, tc := range []struct{ query, field string }{
		{"hours=0", "hours"},
		{"hours=169", "hours"},
		{"hours=-1", "hours"},
		{"hours=abc", "hours"},
		{"hours=", "hours"},
		{"hours=24&hours=24", "hours"},
		{"hours=99999999999999999999", "hours"},
		{"by=task", "by"},
		{"by=", "by"},
		{"by=node&by=slot", "by"},
		{"hour=3", "hour"},
		{"by=node&hour=3", "hour"},
		{"by=slot&hour=24", "hour"},
		{"by=slot&hours=2&hour=2", "hour"},
		{"by=slot&hour=-1", "hour"},
		{"by=slot&hour=x", "hour"},
		{"node=", "node"},
		{"node=nobody", "node"},
		{"node=" + strings.Repeat("n", 300), "node"},
		{"at=5", "at"},
		{"limit=5", "limit"},
	} {
		f := newFake()
		w := serve(t, f, Config{Clustered: true}, "GET", "/v1/stats/due?"+tc.query, "")
		if w.Code != 400 {
			t.Errorf("%s: %d %s", tc.query, w.Code, w.Body)
			continue
		}
		if e := errorOf(t, w); e.Field != tc.field || e.Code != CodeInvalidArgument {
			t.Errorf("%s: field %q code %q, want %q", tc.query, e.Field, e.Code, tc.field)
		}
		if len(f.dueQ) != 0 || len(f.forwards) != 0 {
			t.Errorf("%s: counted %v, forwarded %v", tc.query, f.dueQ, f.forwards)
		}
	}
}

// TestDueCluster: the node asked counts its own slots, asks the other
// member for its row over the same window, and lists a member that does
// not answer as unavailable.
func TestDueCluster(t *testing.T) {
	f := newFake()
	f.due = storage.DueCounts{Hours: []int64{1, 2, 3}, Overdue: 4, OverdueComplete: true,
		CompleteUntil: fakeNow.Add(24 * time.Hour).UnixNano(), Keys: 9, Slots: map[uint16]int64{7: 3, 8: 5}}
	remote := DueNode{Node: "n2", Available: true, Hours: make([]int64, 24), Minutes: make([]int64, 60), Total: 10,
		Truncated: true, Slots: []DueSlot{{Slot: 9, Count: 4}, {Slot: 10, Count: 6}}}
	remote.Hours[5] = 10
	var uris []string
	f.answer = func(method, uri string, _ []byte) Answer {
		uris = append(uris, uri)
		b, _ := json.Marshal(remote)
		return Answer{Status: 200, Body: b}
	}
	w := serve(t, f, Config{Clustered: true}, "GET", "/v1/stats/due?by=slot", "")
	var got DueLoad
	if w.Code != 200 || json.Unmarshal(w.Body.Bytes(), &got) != nil {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	at := fakeNow.UnixNano()
	if want := fmt.Sprintf("/internal/v1/stats/due?at=%d&hours=24&by=slot", at); len(uris) != 1 || uris[0] != want {
		t.Errorf("forwarded %v, want %s", uris, want)
	}
	if len(f.dueQ) != 1 || f.dueQ[0] != (storage.DueCountQuery{From: at, Hours: 24, MaxKeys: DefaultDueScanKeys, PerSlot: true}) {
		t.Errorf("counted %+v", f.dueQ)
	}
	if got.Total != 16 || got.Overdue != 4 || !got.Truncated || got.Unavailable || len(got.Nodes) != 2 ||
		got.Nodes[0].Node != "n1" || got.Nodes[0].Total != 6 || got.Nodes[1].Hours[5] != 10 {
		t.Errorf("got %s", w.Body)
	}
	if fmt.Sprint(got.Slots) != "[{10 n2 6} {8 n1 5} {9 n2 4} {7 n1 3}]" {
		t.Errorf("slots %v", got.Slots)
	}

	// hour= narrows the window to that bucket; node= asks that member only.
	uris, f.dueQ = nil, nil
	w = serve(t, f, Config{Clustered: true, DueScanKeys: 5}, "GET", "/v1/stats/due?by=slot&hour=5&node=n2", "")
	if w.Code != 200 || json.Unmarshal(w.Body.Bytes(), &got) != nil {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	if want := fmt.Sprintf("/internal/v1/stats/due?at=%d&hours=1&by=slot", at+5*int64(time.Hour)); len(uris) != 1 || uris[0] != want || len(f.dueQ) != 0 {
		t.Errorf("forwarded %v, want %s; counted %v", uris, want, f.dueQ)
	}
	if got.Hour == nil || *got.Hour != 5 || len(got.Nodes) != 1 || got.From != formatInstant(at+5*int64(time.Hour)) {
		t.Errorf("got %s", w.Body)
	}

	// A member that does not answer (or answers nonsense) is listed as
	// unavailable; the rest is still counted.
	for _, breakIt := range []func(){
		func() { f.fwdErr = errors.New("connection refused") },
		func() { f.fwdErr = nil; remote.Minutes = nil },
		func() {
			f.answer = func(string, string, []byte) Answer { return Answer{Status: 503, Body: []byte("{}")} }
		},
	} {
		breakIt()
		f.dueQ, got = nil, DueLoad{}
		w = serve(t, f, Config{Clustered: true}, "GET", "/v1/stats/due", "")
		if w.Code != 200 || json.Unmarshal(w.Body.Bytes(), &got) != nil {
			t.Fatalf("%d %s", w.Code, w.Body)
		}
		if !got.Unavailable || len(got.Nodes) != 2 || got.Nodes[1].Available || got.Nodes[1].Error == "" ||
			got.Total != 6 || got.Slots != nil || f.dueQ[0].MaxKeys != DefaultDueScanKeys || f.dueQ[0].PerSlot {
			t.Errorf("got %s", w.Body)
		}
	}
}

// TestDueInternal: the per-node part needs a member's signature and at=.
func TestDueInternal(t *testing.T) {
	f := newFake()
	w := serve(t, f, Config{Clustered: true}, "GET", "/internal/v1/stats/due?at=5&hours=2", "")
	var row DueNode
	if w.Code != 200 || json.Unmarshal(w.Body.Bytes(), &row) != nil || !row.Available || len(row.Hours) != 2 {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	if len(f.dueQ) != 1 || f.dueQ[0].From != 5 {
		t.Errorf("counted %+v", f.dueQ)
	}
	for _, q := range []string{"hours=2", "at=5&hour=1&by=slot", "at=-5", "at=5&node=n1", "at=9223372036854775807"} {
		if w := serve(t, f, Config{Clustered: true}, "GET", "/internal/v1/stats/due?"+q, ""); w.Code != 400 {
			t.Errorf("%s: %d %s", q, w.Code, w.Body)
		}
	}
}

// TestDueCountsShared: one count answers the requests of the same shape
// whose windows start within dueCacheSlack of it while nothing was written
// (every open dashboard asks every 30 s); a later window, another shape or
// a write counts again.
func TestDueCountsShared(t *testing.T) {
	f := newFake()
	s := New(Config{Name: "n1", Clustered: true}, f)
	sec := int64(time.Second)
	for i, c := range []struct {
		q     string
		count int // CountDue calls so far
		write bool
	}{
		{"at=5&hours=2", 1, false},
		{"at=5&hours=2", 1, false},
		{fmt.Sprintf("at=%d&hours=2", 5+9*sec), 1, false},
		{"at=5&hours=3", 2, false},
		{"at=5&hours=2&by=slot", 3, false},
		{fmt.Sprintf("at=%d&hours=2", 5+11*sec), 4, false},
		{fmt.Sprintf("at=%d&hours=2", 5+11*sec), 4, false},
		{fmt.Sprintf("at=%d&hours=2", 5+11*sec), 5, true},
		{fmt.Sprintf("at=%d&hours=2", 5+12*sec), 5, false},
	} {
		if c.write {
			f.mu.Lock()
			f.dueVer++
			f.mu.Unlock()
		}
		w := httptest.NewRecorder()
		s.ServeHTTP(w, httptest.NewRequest("GET", "http://localhost:7070/internal/v1/stats/due?"+c.q, nil))
		if w.Code != 200 || len(f.dueQ) != c.count {
			t.Errorf("%d: %s: %d, %d counts, want %d", i, c.q, w.Code, len(f.dueQ), c.count)
		}
	}
}
