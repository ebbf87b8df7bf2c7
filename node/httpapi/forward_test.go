package httpapi

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/chime-scheduler/chime/storage"
)

func TestWithID(t *testing.T) {
	tests := []struct{ in, want string }{
		{`{"callback_url":"http://x/","delay_ms":5}`, `{"id":"A1","callback_url":"http://x/","delay_ms":5}`},
		{`  { "delay_ms":5 }  `, `{"id":"A1","delay_ms":5}`},
		{`{}`, `{"id":"A1"}`},
		{`{ }`, `{"id":"A1"}`},
		// An id the caller generated one for: left out, not given twice.
		{`{"id":null,"delay_ms":5}`, `{"id":"A1","delay_ms":5}`},
		{`{"delay_ms":5, "id" : "" ,"x":{"id":1}}`, `{"id":"A1","delay_ms":5,"x":{"id":1}}`},
		{`{"k\u0000":[1, "a"],"i\u0064":null}`, `{"id":"A1","k\u0000":[1, "a"]}`},
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

// TestRouteID: a batch's task is sent to its owner undecoded when its id
// (or the one generated for it) can be read off a plain string; anything
// else is decoded where it arrives.
func TestRouteID(t *testing.T) {
	for _, tt := range []struct {
		raw       string
		id        string // "ulid": a generated ULID; "{k}ulid": with hash tag k
		generated bool
		ok        bool
	}{
		{`{"id":"a1",` + cb + `}`, "a1", false, true},
		{` { "x":{"id":"nested"}, "id" : "a2" } `, "a2", false, true},
		{`{"id":"{t}.x","flow_key":"t"}`, "{t}.x", false, true},
		{`{` + cb + `}`, "ulid", true, true},
		{`{"flow_key":"tenant-7","delay_ms":1}`, "{tenant-7}ulid", true, true},
		{`{"flow_key":"t","id":"x"}`, "", false, false},                       // the id does not hash by the key
		{`{"id":"a","id":"b"}`, "", false, false},                             // twice
		{`{"id":null}`, "", false, false},                                     // decoded here
		{`{"id":""}`, "", false, false},                                       // decoded here
		{`{"id":7}`, "", false, false},                                        // not a string
		{`{"id":"a\u0062"}`, "", false, false},                                // escaped
		{`{"id":"a[b]"}`, "", false, false},                                   // not a valid id
		{`{"flow_key":"bad key"}`, "", false, false},                          // not a valid key
		{`{"flow_key":"` + strings.Repeat("k", 200) + `"}`, "", false, false}, // too long
		{`[1]`, "", false, false},
		{`"id"`, "", false, false},
	} {
		id, generated, ok := routeID([]byte(tt.raw))
		if ok != tt.ok || generated != tt.generated {
			t.Errorf("routeID(%s) = %q, %v, %v; want ok %v generated %v", tt.raw, id, generated, ok, tt.ok, tt.generated)
			continue
		}
		want := tt.id
		switch {
		case strings.HasSuffix(tt.id, "ulid"):
			tag := strings.TrimSuffix(tt.id, "ulid")
			if !strings.HasPrefix(id, tag) || len(id) != len(tag)+26 || validateID(id) != nil {
				t.Errorf("routeID(%s) = %q, want %s<ulid>", tt.raw, id, tag)
			}
		case id != want:
			t.Errorf("routeID(%s) = %q, want %q", tt.raw, id, want)
		}
	}
}

func TestMergePages(t *testing.T) {
	task := func(slot uint16, id string) TaskResponse { return TaskResponse{ID: id, Slot: slot} }
	cur := func(slot uint16, id string) string {
		return encodeCursor(storage.Position{Slot: slot, ID: id, Exclusive: true})
	}
	ids := func(p ListPage) string {
		var out []string
		for _, t := range p.Tasks {
			out = append(out, strconv.Itoa(int(t.Slot))+"/"+t.ID)
		}
		return strings.Join(out, " ")
	}
	tests := []struct {
		name     string
		pages    []ListPage
		limit    int
		wantIDs  string
		wantNext string
	}{
		{"all exhausted, fewer than limit", []ListPage{
			{Tasks: []TaskResponse{task(3, "b"), task(9, "a")}},
			{Tasks: []TaskResponse{task(1, "z"), task(3, "a")}},
		}, 10, "1/z 3/a 3/b 9/a", ""},
		{"more than limit: cut at limit", []ListPage{
			{Tasks: []TaskResponse{task(3, "b"), task(9, "a")}},
			{Tasks: []TaskResponse{task(1, "z"), task(3, "a")}},
		}, 3, "1/z 3/a 3/b", cur(3, "b")},
		{"a node that stopped early bounds the page", []ListPage{
			{Tasks: []TaskResponse{task(1, "a"), task(2, "a")}, NextCursor: cur(2, "a")},
			{Tasks: []TaskResponse{task(1, "b"), task(5, "a"), task(7, "a")}},
		}, 10, "1/a 1/b 2/a", cur(2, "a")},
		{"stopped after reading past its last match", []ListPage{
			{Tasks: []TaskResponse{}, NextCursor: cur(4, "q")},
			{Tasks: []TaskResponse{task(1, "b"), task(5, "a")}},
		}, 10, "1/b", cur(4, "q")},
		{"exactly limit with a bound", []ListPage{
			{Tasks: []TaskResponse{task(1, "a"), task(2, "a")}, NextCursor: cur(2, "a")},
			{Tasks: []TaskResponse{task(9, "b")}},
		}, 2, "1/a 2/a", cur(2, "a")},
		{"the same task from two nodes (views in flux) once", []ListPage{
			{Tasks: []TaskResponse{task(1, "a"), task(2, "a")}},
			{Tasks: []TaskResponse{task(2, "a")}},
		}, 10, "1/a 2/a", ""},
		{"nothing", []ListPage{{}, {}}, 10, "", ""},
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
	if _, err := mergePages([]ListPage{{NextCursor: "!!"}}, 5); err == nil {
		t.Error("a malformed member cursor was accepted")
	}
}
