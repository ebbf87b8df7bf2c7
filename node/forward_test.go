package node

import (
	"encoding/json"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chime-scheduler/chime/slots"
	"github.com/chime-scheduler/chime/storage"
)

func TestWithID(t *testing.T) {
	tests := []struct{ in, want string }{
		{`{"callback_url":"http://x/","delay_ms":5}`, `{"id":"A1","callback_url":"http://x/","delay_ms":5}`},
		{`  { "delay_ms":5 }  `, `{"id":"A1","delay_ms":5 }`},
		{`{}`, `{"id":"A1"}`},
		{`{ }`, `{"id":"A1"}`},
	}
	for _, tt := range tests {
		got := string(withID([]byte(tt.in), "A1"))
		if got != tt.want {
			t.Errorf("withID(%s) = %s, want %s", tt.in, got, tt.want)
		}
		if !json.Valid([]byte(got)) {
			t.Errorf("withID(%s) = %s is not valid JSON", tt.in, got)
		}
	}
}

func TestVerifyCall(t *testing.T) {
	secret := []byte("s3cret")
	now := time.Unix(1_800_000_000, 0)
	tests := []struct {
		name      string
		signWith  []byte
		signURI   string
		signBody  string
		signAt    time.Time
		sendURI   string
		sendBody  string
		verifyKey []byte
		want      bool
	}{
		{"good", secret, "/internal/v1/tasks?limit=5", "", now, "/internal/v1/tasks?limit=5", "", secret, true},
		{"good with body", secret, "/v1/tasks", `{"id":"a"}`, now, "/v1/tasks", `{"id":"a"}`, secret, true},
		{"clock skew within bound", secret, "/v1/tasks", "", now.Add(-29 * time.Second), "/v1/tasks", "", secret, true},
		{"too old: replay", secret, "/v1/tasks", "", now.Add(-31 * time.Second), "/v1/tasks", "", secret, false},
		{"from the future", secret, "/v1/tasks", "", now.Add(31 * time.Second), "/v1/tasks", "", secret, false},
		{"other secret", []byte("other"), "/v1/tasks", "", now, "/v1/tasks", "", secret, false},
		{"other path", secret, "/v1/tasks?limit=5", "", now, "/v1/tasks?limit=500", "", secret, false},
		{"other body", secret, "/v1/tasks", `{"id":"a"}`, now, "/v1/tasks", `{"id":"b"}`, secret, false},
		{"unsigned", nil, "/v1/tasks", "", now, "/v1/tasks", "", secret, false},
		{"no secret configured accepts", nil, "/v1/tasks", "", now, "/v1/tasks", "", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", tt.sendURI, strings.NewReader(tt.sendBody))
			if tt.signWith != nil {
				(&forwarder{secret: tt.signWith}).sign(r.Header, "POST", tt.signURI, []byte(tt.signBody), tt.signAt)
			}
			if got := verifyCall(tt.verifyKey, r, []byte(tt.sendBody), now); got != tt.want {
				t.Errorf("verifyCall = %v, want %v (header %q)", got, tt.want, r.Header.Get(hdrAuth))
			}
		})
	}
	// A malformed header is refused, never a panic.
	for _, h := range []string{"", "x", "1:", ":ab", "abc:00", "1800000000000:zz"} {
		r := httptest.NewRequest("GET", "/internal/v1/tasks", nil)
		r.Header.Set(hdrAuth, h)
		if verifyCall(secret, r, nil, now) {
			t.Errorf("verifyCall accepted %s = %q", hdrAuth, h)
		}
	}
}

func TestMergePages(t *testing.T) {
	task := func(slot uint16, id string) TaskResponse { return TaskResponse{ID: id, Slot: slot} }
	cur := func(slot uint16, id string) string {
		return encodeCursor(storage.Position{Slot: slot, ID: id, Exclusive: true})
	}
	ids := func(p listPage) string {
		var out []string
		for _, t := range p.Tasks {
			out = append(out, strconv.Itoa(int(t.Slot))+"/"+t.ID)
		}
		return strings.Join(out, " ")
	}
	tests := []struct {
		name     string
		pages    []listPage
		limit    int
		wantIDs  string
		wantNext string
	}{
		{"all exhausted, fewer than limit", []listPage{
			{Tasks: []TaskResponse{task(3, "b"), task(9, "a")}},
			{Tasks: []TaskResponse{task(1, "z"), task(3, "a")}},
		}, 10, "1/z 3/a 3/b 9/a", ""},
		{"more than limit: cut at limit", []listPage{
			{Tasks: []TaskResponse{task(3, "b"), task(9, "a")}},
			{Tasks: []TaskResponse{task(1, "z"), task(3, "a")}},
		}, 3, "1/z 3/a 3/b", cur(3, "b")},
		{"a node that stopped early bounds the page", []listPage{
			{Tasks: []TaskResponse{task(1, "a"), task(2, "a")}, NextCursor: cur(2, "a")},
			{Tasks: []TaskResponse{task(1, "b"), task(5, "a"), task(7, "a")}},
		}, 10, "1/a 1/b 2/a", cur(2, "a")},
		{"stopped after reading past its last match", []listPage{
			{Tasks: []TaskResponse{}, NextCursor: cur(4, "q")},
			{Tasks: []TaskResponse{task(1, "b"), task(5, "a")}},
		}, 10, "1/b", cur(4, "q")},
		{"exactly limit with a bound", []listPage{
			{Tasks: []TaskResponse{task(1, "a"), task(2, "a")}, NextCursor: cur(2, "a")},
			{Tasks: []TaskResponse{task(9, "b")}},
		}, 2, "1/a 2/a", cur(2, "a")},
		{"the same task from two nodes (views in flux) once", []listPage{
			{Tasks: []TaskResponse{task(1, "a"), task(2, "a")}},
			{Tasks: []TaskResponse{task(2, "a")}},
		}, 10, "1/a 2/a", ""},
		{"nothing", []listPage{{}, {}}, 10, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := mergePages(tt.pages, tt.limit)
			if err != nil {
				t.Fatal(err)
			}
			if ids(got) != tt.wantIDs || got.NextCursor != tt.wantNext {
				t.Errorf("merge = %q next %q, want %q next %q", ids(got), got.NextCursor, tt.wantIDs, tt.wantNext)
			}
			if got.Tasks == nil {
				t.Error("Tasks is nil: it must encode as [], not null")
			}
		})
	}
	if _, err := mergePages([]listPage{{NextCursor: "!!"}}, 5); err == nil {
		t.Error("a malformed member cursor was accepted")
	}
}

func TestOwnedSet(t *testing.T) {
	var a, b ownedSet
	for _, s := range []uint16{0, 1, 63, 64, 100, slots.Count - 1} {
		a.set(s)
	}
	b.set(1)
	b.set(100)
	if got := a.minus(&b); len(got) != 4 || got[0] != 0 || got[1] != 63 || got[2] != 64 || got[3] != slots.Count-1 {
		t.Errorf("minus = %v", got)
	}
	if a.count() != 6 || a.has(2) || !a.has(slots.Count-1) || a.has(slots.Count) || a.has(65535) {
		t.Errorf("count %d, has(2) %v, has(last) %v, has(Count) %v", a.count(), a.has(2), a.has(slots.Count-1), a.has(slots.Count))
	}
}
