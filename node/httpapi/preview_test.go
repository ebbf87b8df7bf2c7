package httpapi

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// TestTaskDSTValidation: the dst field's 400s name the field (dst,
// dst.gap, dst.overlap) and a valid one is stored resolved and echoed.
func TestTaskDSTValidation(t *testing.T) {
	bad := []struct {
		name, body, field string
	}{
		{"on a one-shot task", `{` + cb + `,"delay_ms":1000,"dst":{"gap":"skip"}}`, "dst"},
		{"on a due_at task", `{` + cb + `,"due_at":"2026-03-02T00:00:00Z","dst":{}}`, "dst"},
		{"on an every_ms task", `{` + cb + `,"every_ms":1000,"dst":{"overlap":"both"}}`, "dst"},
		{"on @every", `{` + cb + `,"cron":"@every 1h","timezone":"Europe/Berlin","dst":{"gap":"skip"}}`, "dst"},
		{"unknown gap", `{` + cb + `,"cron":"30 2 * * *","timezone":"Europe/Berlin","dst":{"gap":"later"}}`, "dst.gap"},
		{"unknown overlap", `{` + cb + `,"cron":"30 2 * * *","timezone":"Europe/Berlin","dst":{"overlap":"second"}}`, "dst.overlap"},
		{"case matters", `{` + cb + `,"cron":"30 2 * * *","timezone":"Europe/Berlin","dst":{"gap":"Skip"}}`, "dst.gap"},
		{"unknown member", `{` + cb + `,"cron":"30 2 * * *","dst":{"gap":"skip","when":"now"}}`, "dst.when"},
		{"member twice", `{` + cb + `,"cron":"30 2 * * *","dst":{"gap":"skip","gap":"shift"}}`, "dst.gap"},
		{"gap not a string", `{` + cb + `,"cron":"30 2 * * *","dst":{"gap":1}}`, "dst.gap"},
		{"not an object", `{` + cb + `,"cron":"30 2 * * *","dst":"skip"}`, "dst"},
		{"an array", `{` + cb + `,"cron":"30 2 * * *","dst":["skip"]}`, "dst"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			w := serve(t, newFake(), Config{}, "POST", "/v1/tasks", tt.body)
			if w.Code != http.StatusBadRequest {
				t.Fatalf("%d %s, want 400", w.Code, w.Body)
			}
			if e := errorOf(t, w); e.Field != tt.field || e.Code != CodeInvalidArgument {
				t.Errorf("error %+v, want field %q", e, tt.field)
			}
		})
	}
	good := []struct {
		name, body, want string // want: the echoed dst, "" = absent
	}{
		{"absent", `{` + cb + `,"cron":"30 2 * * *","timezone":"Europe/Berlin"}`, ""},
		{"null", `{` + cb + `,"cron":"30 2 * * *","timezone":"Europe/Berlin","dst":null}`, ""},
		{"gap only", `{` + cb + `,"cron":"30 2 * * *","timezone":"Europe/Berlin","dst":{"gap":"skip"}}`, `{"gap":"skip","overlap":"first"}`},
		{"overlap only", `{` + cb + `,"cron":"30 2 * * *","timezone":"Europe/Berlin","dst":{"overlap":"both"}}`, `{"gap":"shift","overlap":"both"}`},
		{"empty object is the default, spelled out", `{` + cb + `,"cron":"30 2 * * *","timezone":"Europe/Berlin","dst":{}}`, `{"gap":"shift","overlap":"first"}`},
		{"without a timezone (UTC: no effect)", `{` + cb + `,"cron":"0 9 * * *","dst":{"gap":"skip","overlap":"both"}}`, `{"gap":"skip","overlap":"both"}`},
		{"6 fields", `{` + cb + `,"cron":"30 30 2 * * *","timezone":"Europe/Berlin","dst":{"gap":"shift","overlap":"both"}}`, `{"gap":"shift","overlap":"both"}`},
	}
	for _, tt := range good {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake()
			w := serve(t, f, Config{}, "POST", "/v1/tasks", tt.body)
			if w.Code != http.StatusCreated {
				t.Fatalf("%d %s, want 201", w.Code, w.Body)
			}
			var got struct {
				DST json.RawMessage `json:"dst"`
			}
			if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil || string(got.DST) != tt.want {
				t.Errorf("echoed dst %s (%v), want %q", got.DST, err, tt.want)
			}
		})
	}
}

type previewAnswer struct {
	Timezone string `json:"timezone"`
	Fires    []struct {
		At, Local, Moved string
	} `json:"fires"`
	NextTransition *struct {
		At           string `json:"at"`
		OffsetBefore string `json:"offset_before"`
		OffsetAfter  string `json:"offset_after"`
	} `json:"next_transition"`
}

func decodePreview(t *testing.T, w interface{ Result() *http.Response }, body []byte) previewAnswer {
	t.Helper()
	var p previewAnswer
	if err := json.Unmarshal(body, &p); err != nil {
		t.Fatalf("preview answer %s: %v", body, err)
	}
	return p
}

func fireList(p previewAnswer) []string {
	var out []string
	for _, f := range p.Fires {
		s := f.At + " " + f.Local
		if f.Moved != "" {
			s += " " + f.Moved
		}
		out = append(out, s)
	}
	return out
}

func TestSchedulePreview(t *testing.T) {
	tests := []struct {
		name, query string
		tz          string
		fires       []string
		transition  string // "at before after", "" = null
	}{
		{"Berlin spring, shift", "cron=30+2+*+*+*&timezone=Europe/Berlin&start_at=2026-03-27T00:00:00Z&n=4", "Europe/Berlin", []string{
			"2026-03-27T01:30:00Z 2026-03-27T02:30:00+01:00",
			"2026-03-28T01:30:00Z 2026-03-28T02:30:00+01:00",
			"2026-03-29T01:00:00Z 2026-03-29T03:00:00+02:00 gap-shift",
			"2026-03-30T00:30:00Z 2026-03-30T02:30:00+02:00",
		}, "2026-03-29T01:00:00Z +01:00 +02:00"},
		{"Berlin spring, skip", "cron=30+2+*+*+*&timezone=Europe/Berlin&start_at=2026-03-28T00:00:00Z&n=2&gap=skip", "Europe/Berlin", []string{
			"2026-03-28T01:30:00Z 2026-03-28T02:30:00+01:00",
			"2026-03-30T00:30:00Z 2026-03-30T02:30:00+02:00",
		}, "2026-03-29T01:00:00Z +01:00 +02:00"},
		{"New York fall, both", "cron=30+1+*+*+*&timezone=America/New_York&start_at=2026-11-01T00:00:00Z&n=3&overlap=both", "America/New_York", []string{
			"2026-11-01T05:30:00Z 2026-11-01T01:30:00-04:00",
			"2026-11-01T06:30:00Z 2026-11-01T01:30:00-05:00 overlap-second",
			"2026-11-02T06:30:00Z 2026-11-02T01:30:00-05:00",
		}, "2026-11-01T06:00:00Z -04:00 -05:00"},
		{"Lord Howe spring, shift", "cron=15+2+*+*+*&timezone=Australia/Lord_Howe&start_at=2026-10-03T00:00:00Z&n=2&gap=shift&overlap=first", "Australia/Lord_Howe", []string{
			"2026-10-03T15:30:00Z 2026-10-04T02:30:00+11:00 gap-shift",
			"2026-10-04T15:15:00Z 2026-10-05T02:15:00+11:00",
		}, "2026-10-03T15:30:00Z +10:30 +11:00"},
		{"Tokyo: no transition", "cron=30+2+*+*+*&timezone=Asia/Tokyo&start_at=2026-03-28T00:00:00Z&n=1", "Asia/Tokyo", []string{
			"2026-03-28T17:30:00Z 2026-03-29T02:30:00+09:00",
		}, ""},
		{"end_at bounds the window, inclusive", "cron=0+*+*+*+*&start_at=2026-03-28T00:00:00Z&end_at=2026-03-28T02:00:00Z&n=1000", "UTC", []string{
			"2026-03-28T00:00:00Z 2026-03-28T00:00:00Z",
			"2026-03-28T01:00:00Z 2026-03-28T01:00:00Z",
			"2026-03-28T02:00:00Z 2026-03-28T02:00:00Z",
		}, ""},
		{"every_ms from start_at", "every_ms=3600000&start_at=2026-03-29T00:00:00Z&n=2", "UTC", []string{
			"2026-03-29T00:00:00Z 2026-03-29T00:00:00Z",
			"2026-03-29T01:00:00Z 2026-03-29T01:00:00Z",
		}, ""},
		// fakeNow is 2026-03-01: a window in the past is previewed as well.
		{"Berlin fall 2025, in the past, both", "cron=30+2+*+*+*&timezone=Europe/Berlin&start_at=2025-10-26T00:00:00Z&n=3&overlap=both", "Europe/Berlin", []string{
			"2025-10-26T00:30:00Z 2025-10-26T02:30:00+02:00",
			"2025-10-26T01:30:00Z 2025-10-26T02:30:00+01:00 overlap-second",
			"2025-10-27T01:30:00Z 2025-10-27T02:30:00+01:00",
		}, "2025-10-26T01:00:00Z +02:00 +01:00"}, // the next transition after start_at
		{"every_ms from now", "every_ms=60000&n=1", "UTC", []string{
			"2026-03-01T12:01:00Z 2026-03-01T12:01:00Z",
		}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := serve(t, newFake(), Config{}, "GET", "/v1/schedule:preview?"+tt.query, "")
			if w.Code != http.StatusOK {
				t.Fatalf("%d %s", w.Code, w.Body)
			}
			p := decodePreview(t, w, w.Body.Bytes())
			if got := fireList(p); p.Timezone != tt.tz || !slices.Equal(got, tt.fires) {
				t.Errorf("zone %s fires\n%s\nwant %s\n%s", p.Timezone, strings.Join(got, "\n"), tt.tz, strings.Join(tt.fires, "\n"))
			}
			tr := ""
			if p.NextTransition != nil {
				tr = p.NextTransition.At + " " + p.NextTransition.OffsetBefore + " " + p.NextTransition.OffsetAfter
			}
			if tr != tt.transition {
				t.Errorf("next_transition %q, want %q", tr, tt.transition)
			}
		})
	}
}

func TestSchedulePreviewRefusals(t *testing.T) {
	tests := []struct{ name, query, field string }{
		{"n over 1000", "cron=@daily&n=1001", "n"},
		{"n zero", "cron=@daily&n=0", "n"},
		{"n not a number", "cron=@daily&n=ten", "n"},
		{"end_at before start_at", "cron=@daily&start_at=2026-03-10T00:00:00Z&end_at=2026-03-09T00:00:00Z", "end_at"},
		{"end_at before now", "cron=@daily&end_at=2026-02-01T00:00:00Z", "end_at"},
		{"bad end_at", "cron=@daily&end_at=tomorrow", "end_at"},
		{"bad start_at", "cron=@daily&start_at=tomorrow", "start_at"},
		{"no schedule", "timezone=Europe/Berlin", "schedule"},
		{"both schedules", "cron=@daily&every_ms=1000", "cron"},
		{"bad cron", "cron=61+*+*+*+*", "cron"},
		{"bad every_ms", "every_ms=5", "every_ms"},
		{"every_ms not a number", "every_ms=soon", "every_ms"},
		{"unknown zone", "cron=@daily&timezone=Mars/Olympus", "timezone"},
		{"timezone with every_ms", "every_ms=1000&timezone=Europe/Berlin", "timezone"},
		{"bad gap", "cron=@daily&gap=later", "gap"},
		{"bad overlap", "cron=@daily&overlap=twice", "overlap"},
		{"gap with every_ms", "every_ms=1000&gap=skip", "gap"},
		{"overlap with @every", "cron=@every+1h&overlap=both", "overlap"},
		{"unknown parameter", "cron=@daily&count=5", "count"},
		{"dst as json is not a parameter", "cron=@daily&dst={}", "dst"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := serve(t, newFake(), Config{}, "GET", "/v1/schedule:preview?"+tt.query, "")
			if w.Code != http.StatusBadRequest {
				t.Fatalf("%d %s, want 400", w.Code, w.Body)
			}
			if e := errorOf(t, w); e.Field != tt.field {
				t.Errorf("error %+v, want field %q", e, tt.field)
			}
		})
	}
}

func TestTaskPreview(t *testing.T) {
	f := newFake()
	// Created at fakeNow (2026-03-01) with start_at the 7th: the first fire
	// is 02:30 EST on the 7th, then the spring-forward day.
	if w := serve(t, f, Config{}, "POST", "/v1/tasks", `{"id":"ny",`+cb+`,"cron":"30 2 * * *","timezone":"America/New_York","start_at":"2026-03-07T00:00:00Z","dst":{"gap":"shift"}}`); w.Code != http.StatusCreated {
		t.Fatalf("create: %d %s", w.Code, w.Body)
	}
	w := serve(t, f, Config{}, "GET", "/v1/tasks/ny/preview?n=3", "")
	if w.Code != http.StatusOK {
		t.Fatalf("preview: %d %s", w.Code, w.Body)
	}
	p := decodePreview(t, w, w.Body.Bytes())
	want := []string{
		"2026-03-07T07:30:00Z 2026-03-07T02:30:00-05:00",
		"2026-03-08T07:00:00Z 2026-03-08T03:00:00-04:00 gap-shift",
		"2026-03-09T06:30:00Z 2026-03-09T02:30:00-04:00",
	}
	if got := fireList(p); !slices.Equal(got, want) || p.NextTransition == nil || p.NextTransition.At != "2026-03-08T07:00:00Z" {
		t.Errorf("task preview %s", w.Body)
	}
	// end_at (inclusive) and max_runs bound a stored task's preview.
	if w := serve(t, f, Config{}, "PUT", "/v1/tasks/lim", `{`+cb+`,"cron":"30 2 * * *","timezone":"America/New_York","start_at":"2026-03-07T00:00:00Z","end_at":"2026-03-08T07:00:00Z"}`); w.Code != http.StatusCreated {
		t.Fatalf("create lim: %d %s", w.Code, w.Body)
	}
	if got := fireList(decodePreview(t, w, serve(t, f, Config{}, "GET", "/v1/tasks/lim/preview?n=5", "").Body.Bytes())); !slices.Equal(got, want[:2]) {
		t.Errorf("preview with end_at: %q, want %q", got, want[:2])
	}
	if w := serve(t, f, Config{}, "PUT", "/v1/tasks/lim", `{`+cb+`,"cron":"30 2 * * *","timezone":"America/New_York","start_at":"2026-03-07T00:00:00Z","max_runs":1}`); w.Code != http.StatusOK {
		t.Fatalf("replace lim: %d %s", w.Code, w.Body)
	}
	if got := fireList(decodePreview(t, w, serve(t, f, Config{}, "GET", "/v1/tasks/lim/preview?n=5", "").Body.Bytes())); !slices.Equal(got, want[:1]) {
		t.Errorf("preview with max_runs 1: %q, want %q", got, want[:1])
	}
	if w := serve(t, f, Config{}, "GET", "/v1/tasks/ny/preview?n=1001", ""); w.Code != http.StatusBadRequest || errorOf(t, w).Field != "n" {
		t.Errorf("n over 1000: %d %s", w.Code, w.Body)
	}
	if w := serve(t, f, Config{}, "GET", "/v1/tasks/nope/preview", ""); w.Code != http.StatusNotFound {
		t.Errorf("unknown task: %d %s", w.Code, w.Body)
	}
	// Another node's task: forwarded to its owner, like GET /v1/tasks/{id}.
	id := remoteID(f)
	f.answer = func(_, _ string, _ []byte) Answer { return Answer{Status: http.StatusOK, Body: []byte(`{}`)} }
	serve(t, f, Config{}, "GET", "/v1/tasks/"+id+"/preview?n=2", "")
	if len(f.forwards) != 1 || !strings.Contains(f.forwards[0], "/v1/tasks/"+id+"/preview?n=2") {
		t.Errorf("forwards = %q, want the preview forwarded to n2", f.forwards)
	}
}
