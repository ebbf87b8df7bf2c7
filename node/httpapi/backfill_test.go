package httpapi

import (
	"testing"
	"time"
)

func TestParseTriggerAndBackfillBody(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name, body string
		backfill   bool
		field      string // "" = valid
	}{
		{"trigger empty", ``, false, ""},
		{"trigger empty object", `{}`, false, ""},
		{"trigger due_at", `{"due_at":"2026-01-01T00:00:00Z"}`, false, ""},
		{"trigger due_at null", `{"due_at":null}`, false, ""},
		{"trigger due_at far past", `{"due_at":"2010-01-01T00:00:00Z"}`, false, "due_at"},
		{"trigger due_at far future", `{"due_at":"2040-01-01T00:00:00Z"}`, false, "due_at"},
		{"trigger due_at not a time", `{"due_at":"soon"}`, false, "due_at"},
		{"trigger due_at a number", `{"due_at":5}`, false, "due_at"},
		{"trigger unknown field", `{"when":"2026-01-01T00:00:00Z"}`, false, "when"},
		{"trigger repeated", `{"due_at":"2026-01-01T00:00:00Z","due_at":"2026-01-01T00:00:00Z"}`, false, "due_at"},
		{"trigger not an object", `[1]`, false, ""},
		{"trigger malformed", `{"due_at":`, false, ""},
		{"backfill ok", `{"from":"2026-01-01T00:00:00Z","to":"2026-01-02T00:00:00Z"}`, true, ""},
		{"backfill empty", ``, true, ""},
		{"backfill missing to", `{"from":"2026-01-01T00:00:00Z"}`, true, "to"},
		{"backfill missing from", `{"to":"2026-01-01T00:00:00Z"}`, true, "from"},
		{"backfill from after to", `{"from":"2026-01-02T00:00:00Z","to":"2026-01-01T00:00:00Z"}`, true, "from"},
		{"backfill over 10 years", `{"from":"2017-01-01T00:00:00Z","to":"2035-01-01T00:00:00Z"}`, true, "to"},
		{"backfill from far past", `{"from":"2000-01-01T00:00:00Z","to":"2026-01-01T00:00:00Z"}`, true, "from"},
		{"backfill bad to", `{"from":"2026-01-01T00:00:00Z","to":"tomorrow"}`, true, "to"},
		{"backfill unknown", `{"from":"2026-01-01T00:00:00Z","to":"2026-01-01T00:00:00Z","n":1}`, true, "n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var e *Error
			if tc.backfill {
				_, _, e = parseBackfillBody([]byte(tc.body), now)
			} else {
				_, e = parseTriggerBody([]byte(tc.body), now)
			}
			wantErr := tc.field != "" || tc.name == "trigger not an object" || tc.name == "trigger malformed" || tc.name == "backfill empty"
			if (e != nil) != wantErr {
				t.Fatalf("error %v, want error %v", e, wantErr)
			}
			if e != nil && e.Field != tc.field {
				t.Errorf("field %q (%s), want %q", e.Field, e.Message, tc.field)
			}
		})
	}
	due, e := parseTriggerBody([]byte(`{"due_at":"2026-01-01T00:00:00.5Z"}`), now)
	if e != nil || due != time.Date(2026, 1, 1, 0, 0, 0, 5e8, time.UTC).UnixNano() {
		t.Errorf("due %d %v", due, e)
	}
}
