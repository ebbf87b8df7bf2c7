package httpapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
)

// slotsOf serves GET /v1/cluster/slots over f and decodes the map.
func slotsOf(t *testing.T, f *fake) (SlotMap, *httptest.ResponseRecorder) {
	t.Helper()
	w := serve(t, f, Config{}, "GET", "/v1/cluster/slots", "")
	if w.Code != http.StatusOK {
		t.Fatalf("GET /v1/cluster/slots = %d %s, want 200", w.Code, w.Body)
	}
	var m SlotMap
	if err := json.Unmarshal(w.Body.Bytes(), &m); err != nil {
		t.Fatalf("decode the slot map: %v (%s)", err, w.Body)
	}
	return m, w
}

func TestSlotsMergesRanges(t *testing.T) {
	n1 := func(start, end uint16, epoch uint64) SlotRange {
		return SlotRange{Start: start, End: end, Owner: "n1", Follower: "n2", Epoch: epoch}
	}
	r2 := func(start, end uint16) SlotRange {
		return SlotRange{Start: start, End: end, Owner: "n2", HTTPAddr: n2.HTTPAddr, Follower: "n1"}
	}
	tests := []struct {
		name   string
		remote []uint16          // slots n2 owns
		epochs map[uint16]uint64 // known epochs
		want   []SlotRange
	}{
		{name: "one owner", want: []SlotRange{n1(0, 16383, 0)}},
		{name: "a hole in the middle", remote: []uint16{10, 11, 12},
			want: []SlotRange{n1(0, 9, 0), r2(10, 12), n1(13, 16383, 0)}},
		{name: "first and last slot", remote: []uint16{0, 16383},
			want: []SlotRange{r2(0, 0), n1(1, 16382, 0), r2(16383, 16383)}},
		{name: "epochs split a range", epochs: map[uint16]uint64{5: 3, 6: 3, 7: 4},
			want: []SlotRange{n1(0, 4, 0), n1(5, 6, 3), n1(7, 7, 4), n1(8, 16383, 0)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake()
			f.version = 42
			f.epochs = tt.epochs
			for _, s := range tt.remote {
				f.remote[s] = true
			}
			m, w := slotsOf(t, f)
			if m.Version != "42" || !reflect.DeepEqual(m.Ranges, tt.want) {
				t.Errorf("slot map = %+v, want version 42 and %+v", m, tt.want)
			}
			if got := w.Header().Get(HeaderTableVersion); got != "42" {
				t.Errorf("%s = %q, want 42", HeaderTableVersion, got)
			}
		})
	}
}

func TestSlotsNoOwnerYet(t *testing.T) {
	f := newFake()
	f.noOwner = true
	if m, _ := slotsOf(t, f); m.Ranges == nil || len(m.Ranges) != 0 {
		t.Errorf("ranges while no member owns a slot = %#v, want []", m.Ranges)
	}
}

func TestSlotsETag(t *testing.T) {
	f := newFake()
	f.version = 7
	_, w := slotsOf(t, f)
	etag := w.Header().Get("ETag")
	if !strings.HasPrefix(etag, `"7-`) {
		t.Fatalf("ETag = %q, want the version first", etag)
	}
	get := func(inm string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("GET", "http://localhost:7070/v1/cluster/slots", nil)
		r.Header.Set("If-None-Match", inm)
		w := httptest.NewRecorder()
		New(Config{Name: "n1"}, f).ServeHTTP(w, r)
		return w
	}
	for _, tt := range []struct {
		inm  string
		want int
	}{
		{etag, http.StatusNotModified},
		{"W/" + etag, http.StatusNotModified},
		{`"other", ` + etag, http.StatusNotModified},
		{"*", http.StatusNotModified},
		{`"7-0"`, http.StatusOK},
		{"", http.StatusOK},
	} {
		if w := get(tt.inm); w.Code != tt.want || w.Header().Get("ETag") != etag {
			t.Errorf("If-None-Match %q: %d ETag %q, want %d and %q", tt.inm, w.Code, w.Header().Get("ETag"), tt.want, etag)
		} else if tt.want == http.StatusNotModified && w.Body.Len() != 0 {
			t.Errorf("If-None-Match %q: 304 with a body %q", tt.inm, w.Body)
		}
	}

	// An epoch change, an owner change and a version change each give a
	// new ETag.
	seen := map[string]bool{etag: true}
	for _, change := range []func(){
		func() { f.epochs = map[uint16]uint64{100: 9} },
		func() { f.remote[100] = true },
		func() { f.version = 8 },
	} {
		change()
		_, w := slotsOf(t, f)
		e := w.Header().Get("ETag")
		if seen[e] {
			t.Errorf("ETag %q after a change, seen before", e)
		}
		seen[e] = true
	}
}

func TestSlotsHeaders(t *testing.T) {
	f := newFake()
	f.version = 5
	id := remoteID(f)
	f.answer = func(_, _ string, _ []byte) Answer {
		return Answer{Status: http.StatusOK, Header: http.Header{"X-Chime-Node": {"n2"}}, Body: []byte(`{}`)}
	}
	w := serve(t, f, Config{}, "GET", "/v1/tasks/"+id, "")
	if w.Header().Get(HeaderOwner) != "n2" || w.Header().Get(HeaderTableVersion) != "5" {
		t.Errorf("forwarded answer: %s %q, %s %q, want n2 and 5", HeaderOwner, w.Header().Get(HeaderOwner),
			HeaderTableVersion, w.Header().Get(HeaderTableVersion))
	}
	for _, path := range []string{"/v1/tasks/local-one", "/healthz", "/v1/nothing"} {
		w := serve(t, f, Config{}, "GET", path, "")
		if w.Header().Get(HeaderOwner) != "" || w.Header().Get(HeaderTableVersion) != "5" {
			t.Errorf("GET %s: %s %q, %s %q, want none and 5", path, HeaderOwner, w.Header().Get(HeaderOwner),
				HeaderTableVersion, w.Header().Get(HeaderTableVersion))
		}
	}
	// The read token reads the map; no token does not.
	cfg := Config{Name: "n1", APIToken: "full", ReadToken: "read"}
	for _, tt := range []struct {
		token string
		want  int
	}{{"read", http.StatusOK}, {"full", http.StatusOK}, {"", http.StatusUnauthorized}} {
		r := httptest.NewRequest("GET", "http://localhost:7070/v1/cluster/slots", nil)
		if tt.token != "" {
			r.Header.Set("Authorization", "Bearer "+tt.token)
		}
		w := httptest.NewRecorder()
		New(cfg, f).ServeHTTP(w, r)
		if w.Code != tt.want {
			t.Errorf("token %q: %d, want %d", tt.token, w.Code, tt.want)
		}
	}
}

func TestEtagMatch(t *testing.T) {
	tests := []struct {
		list, etag string
		want       bool
	}{
		{`"a"`, `"a"`, true},
		{`W/"a"`, `"a"`, true},
		{`"b", "a"`, `"a"`, true},
		{`*`, `"a"`, true},
		{`"b"`, `"a"`, false},
		{``, `"a"`, false},
		{` , `, `"a"`, false},
	}
	for _, tt := range tests {
		if got := etagMatch(tt.list, tt.etag); got != tt.want {
			t.Errorf("etagMatch(%q, %q) = %v, want %v", tt.list, tt.etag, got, tt.want)
		}
	}
}
