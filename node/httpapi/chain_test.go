package httpapi

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/chime-scheduler/chime/storage"
)

// child is a valid chain child body with extra members.
func child(extra string) string {
	if extra == "" {
		return `{"callback_url":"http://127.0.0.1:9/c","delay_ms":10}`
	}
	return `{"callback_url":"http://127.0.0.1:9/c","delay_ms":10,` + extra + `}`
}

// nested returns a child body whose on_success nests levels more children.
func nested(levels int) string {
	if levels == 0 {
		return child("")
	}
	return child(`"on_success":[` + nested(levels-1) + `]`)
}

func TestValidateChains(t *testing.T) {
	many := func(n int) string {
		parts := make([]string, n)
		for i := range parts {
			parts[i] = child("")
		}
		return strings.Join(parts, ",")
	}
	tests := []struct {
		name      string
		extra     string
		wantField string // "" = valid
		wantMsg   string
	}{
		{"one success child", `"delay_ms":5,"on_success":[` + child("") + `]`, "", ""},
		{"both lists", `"delay_ms":5,"on_success":[` + child("") + `],"on_failure":[` + child(`"payload_from_parent":true`) + `]`, "", ""},
		{"16 children", `"delay_ms":5,"on_success":[` + many(16) + `]`, "", ""},
		{"17 children", `"delay_ms":5,"on_success":[` + many(17) + `]`, "on_success", "at most 16"},
		{"17 failure children", `"delay_ms":5,"on_failure":[` + many(17) + `]`, "on_failure", "at most 16"},
		{"4 deep", `"delay_ms":5,"on_success":[` + nested(3) + `]`, "", ""},
		{"5 deep", `"delay_ms":5,"on_success":[` + nested(4) + `]`, "on_success[0].on_success[0].on_success[0].on_success[0].on_success", "at most 4 deep"},
		{"child callback missing", `"delay_ms":5,"on_success":[` + child("") + `,{"delay_ms":1}]`, "on_success[1].callback_url", "required"},
		{"child bad field", `"delay_ms":5,"on_failure":[` + child("") + `,` + child("") + `,` + child(`"max_retries":-1`) + `]`, "on_failure[2].max_retries", "between 0"},
		{"child unknown field", `"delay_ms":5,"on_success":[` + child(`"dealy":1`) + `]`, "on_success[0].dealy", "unknown field"},
		{"child no schedule", `"delay_ms":5,"on_success":[{"callback_url":"http://127.0.0.1:9/c"}]`, "on_success[0].schedule", "required"},
		{"child not an object", `"delay_ms":5,"on_success":[5]`, "on_success[0]", "JSON object"},
		{"child null", `"delay_ms":5,"on_success":[null]`, "on_success[0]", "task object"},
		{"child bad id", `"delay_ms":5,"on_success":[` + child(`"id":"a b"`) + `]`, "on_success[0].id", "may contain only"},
		{"deep child error", `"delay_ms":5,"on_success":[` + child(`"on_failure":[{"callback_url":"ftp://x","delay_ms":1}]`) + `]`, "on_success[0].on_failure[0].callback_url", ""},
		{"not an array", `"delay_ms":5,"on_success":{}`, "on_success", "array of task objects"},
		{"payload_from_parent at top", `"delay_ms":5,"payload_from_parent":true`, "payload_from_parent", "only to a task in on_success"},
		{"payload_from_parent false at top", `"delay_ms":5,"payload_from_parent":false`, "", ""},
		{"payload and payload_from_parent", `"delay_ms":5,"on_success":[` + child(`"payload":1,"payload_from_parent":true`) + `]`, "on_success[0].payload_from_parent", "not both"},
		{"child end_at before first fire", `"delay_ms":5,"on_success":[{"callback_url":"http://127.0.0.1:9/c","every_ms":1000,"start_at":"2026-03-02T00:00:00Z","end_at":"2026-03-02T00:00:00Z"}]`, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, spec, e := decodeValid(specBody(tt.extra), Limits{})
			if tt.wantField == "" {
				if e != nil {
					t.Fatalf("error %+v, want none", e)
				}
				return
			}
			if e == nil {
				t.Fatalf("no error, want field %q (spec %+v)", tt.wantField, spec)
			}
			if e.Field != tt.wantField || !strings.Contains(e.Message, tt.wantMsg) {
				t.Fatalf("error field %q message %q, want field %q message with %q", e.Field, e.Message, tt.wantField, tt.wantMsg)
			}
		})
	}
}

func TestValidateChainsStored(t *testing.T) {
	body := specBody(`"delay_ms":5,"on_success":[ {"callback_url" : "http://127.0.0.1:9/a", "delay_ms":1} ],"on_failure":[` + child(`"id":"x"`) + `,` + child("") + `]`)
	_, spec, e := decodeValid(body, Limits{})
	if e != nil {
		t.Fatal(e)
	}
	if len(spec.OnSuccess) != 1 || len(spec.OnFailure) != 2 {
		t.Fatalf("OnSuccess %d, OnFailure %d bodies, want 1 and 2", len(spec.OnSuccess), len(spec.OnFailure))
	}
	if got, want := string(spec.OnSuccess[0]), `{"callback_url":"http://127.0.0.1:9/a","delay_ms":1}`; got != want {
		t.Fatalf("stored body %s, want compact %s", got, want)
	}
	resp := taskResponse(mustTask(t, spec), "n1")
	out, _ := json.Marshal(resp)
	if !strings.Contains(string(out), `"on_failure":[{"callback_url":"http://127.0.0.1:9/c","delay_ms":10,"id":"x"}`) {
		t.Fatalf("response does not echo on_failure: %s", out)
	}
}

func mustTask(t *testing.T, spec storage.Spec) *storage.Task {
	t.Helper()
	tk, e := newTask("p", spec, specNow)
	if e != nil {
		t.Fatal(e)
	}
	return tk
}

func TestChildID(t *testing.T) {
	long := strings.Repeat("a", 120)
	tests := []struct {
		body, parent string
		seq          uint64
		index        int
		want         string
	}{
		{`{"callback_url":"x"}`, "p", 3, 1, "p.3.1"},
		{`{"id":"given"}`, "p", 3, 1, "given"},
		{`{"id":""}`, "{tag}p", 12, 0, "{tag}p.12.0"},
		{`{}`, long, 1, 0, long + ".1.0"},
	}
	for _, tt := range tests {
		if got := ChildID([]byte(tt.body), tt.parent, tt.seq, tt.index); got != tt.want {
			t.Errorf("ChildID(%s, %q, %d, %d) = %q, want %q", tt.body, tt.parent, tt.seq, tt.index, got, tt.want)
		}
	}
	// Too long for an id: the parent's id becomes a hash, the same every time.
	id := ChildID([]byte(`{}`), long+"bbbbbbbb", 123456, 15)
	if len(id) > maxIDLen || !strings.HasSuffix(id, ".123456.15") || validateID(id) != nil {
		t.Fatalf("long parent: child id %q (%d bytes) is not a valid id with the suffix", id, len(id))
	}
	if again := ChildID([]byte(`{}`), long+"bbbbbbbb", 123456, 15); again != id {
		t.Fatalf("long parent: %q then %q", id, again)
	}
}

func TestChildTask(t *testing.T) {
	at := specNow.Add(time.Hour)
	tests := []struct {
		name, body  string
		result      string
		wantPayload string
	}{
		{"own payload", child(`"payload":{"a":1}`), `{"r":2}`, `{"a":1}`},
		{"parent's JSON", child(`"payload_from_parent":true`), `{"r":2}`, `{"r":2}`},
		{"parent's text", child(`"payload_from_parent":true`), `ok "done"`, `"ok \"done\""`},
		{"parent's empty body", child(`"payload_from_parent":true`), ``, ``},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tk, e := ChildTask([]byte(tt.body), "p.1.0", []byte(tt.result), at, Limits{})
			if e != nil {
				t.Fatal(e)
			}
			if tk.ID != "p.1.0" || string(tk.Spec.Payload) != tt.wantPayload {
				t.Fatalf("id %q payload %s, want p.1.0 and %s", tk.ID, tk.Spec.Payload, tt.wantPayload)
			}
			if want := at.Add(10 * time.Millisecond).UnixNano(); tk.NextDue != want {
				t.Fatalf("due %v, want the finish + delay_ms %v", time.Unix(0, tk.NextDue).UTC(), time.Unix(0, want).UTC())
			}
		})
	}
}
