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
