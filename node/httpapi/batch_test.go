package httpapi

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
)

func TestDecodeBatchEnvelope(t *testing.T) {
	for _, c := range []struct {
		name, body string
		want       []string // the raw tasks; nil: refused
		field      string   // of the refusal
	}{
		{"one", `{"tasks":[{"delay_ms":1}]}`, []string{`{"delay_ms":1}`}, ""},
		{"spaces", " {\n\"tasks\" :\t[ {\"a\":1} ,  {\"b\":\"]}\\\"\"} ] } ", []string{`{"a":1}`, `{"b":"]}\""}`}, ""},
		{"any values", `{"tasks":[null,[1,{"x":[]}],"s"]}`, []string{`null`, `[1,{"x":[]}]`, `"s"`}, ""},
		{"numbers", `{"tasks":[-1.5e3 ,true]}`, []string{`-1.5e3`, `true`}, ""},
		{"escaped key", `{"\u0074asks":[{}]}`, []string{`{}`}, ""},
		{"repeated key: the last", `{"tasks":[{"a":1}],"tasks":[{"b":2},{}]}`, []string{`{"b":2}`, `{}`}, ""},
		{"empty", `{"tasks":[]}`, nil, "tasks"},
		{"null", `{"tasks":null}`, nil, "tasks"},
		{"no field", `{}`, nil, "tasks"},
		{"unknown field", `{"tasks":[{}],"x":1}`, nil, "tasks"},
		{"other case", `{"Tasks":[{}]}`, nil, "tasks"},
		{"not an array", `{"tasks":{}}`, nil, "tasks"},
		{"not an object", `[{"tasks":[]}]`, nil, "tasks"},
		{"malformed", `{"tasks":[{]}`, nil, "tasks"},
		{"truncated", `{"tasks":[{}`, nil, "tasks"},
		{"data after it", `{"tasks":[{}]} {}`, nil, "tasks"},
		{"too many", `{"tasks":[{},{},{},{}]}`, nil, "tasks"},
		{"the most", `{"tasks":[{},{},{}]}`, []string{`{}`, `{}`, `{}`}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, e := decodeBatchEnvelope([]byte(c.body), 3)
			if c.want == nil {
				if e == nil {
					t.Fatalf("accepted %q", got)
				}
				if e.Field != c.field || e.Status >= 500 {
					t.Fatalf("refused with %+v, want field %q and a 4xx", e, c.field)
				}
				return
			}
			if e != nil {
				t.Fatalf("refused: %+v", e)
			}
			var s []string
			for _, r := range got {
				s = append(s, string(r))
			}
			if strings.Join(s, "|") != strings.Join(c.want, "|") {
				t.Fatalf("got %q, want %q", s, c.want)
			}
		})
	}
}

// BenchmarkBatchEnvelope: splitting a batch of 1,000 tasks into their
// raw JSON with jsonScan (after json.Valid), against encoding/json's
// Decode into []json.RawMessage as the code did before: why the
// hand-written split stays.
func BenchmarkBatchEnvelope(b *testing.B) {
	var buf bytes.Buffer
	buf.WriteString(`{"tasks":[`)
	for i := range 1000 {
		if i > 0 {
			buf.WriteByte(',')
		}
		buf.WriteString(`{"id":"bench-` + strconv.Itoa(i) + `","callback_url":"http://127.0.0.1:9/cb","delay_ms":60000,"payload":{"n":` +
			strconv.Itoa(i) + `,"s":"some text [with] {brackets}"},"headers":{"x-a":"1"}}`)
	}
	buf.WriteString(`]}`)
	body := buf.Bytes()
	b.Run("scan", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			if _, e := decodeBatchEnvelope(body, 1000); e != nil {
				b.Fatal(e)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			var req batchEnvelope
			dec := json.NewDecoder(bytes.NewReader(body))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&req); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func TestReadBody(t *testing.T) {
	const limit = 16
	for _, c := range []struct {
		name   string
		body   string
		length int64 // Content-Length; -1: unknown (chunked)
		code   Code
	}{
		{"known length", "0123456789", 10, ""},
		{"at the limit", strings.Repeat("x", limit), limit, ""},
		{"unknown length", "0123456789", -1, ""},
		{"known, over the limit", strings.Repeat("x", limit+1), limit + 1, CodeTooLarge},
		{"unknown, over the limit", strings.Repeat("x", limit+1), -1, CodeTooLarge},
		{"a huge length announced", strings.Repeat("x", limit+1), 1 << 40, CodeTooLarge},
		{"shorter than announced", "0123", 10, CodeInvalidArgument}, // the server's reader: io.ErrUnexpectedEOF
	} {
		t.Run(c.name, func(t *testing.T) {
			var body io.Reader = strings.NewReader(c.body)
			if c.length > int64(len(c.body)) && c.length <= limit {
				body = io.MultiReader(body, iotest.ErrReader(io.ErrUnexpectedEOF))
			}
			r := httptest.NewRequest("POST", "/v1/tasks", body)
			r.ContentLength = c.length
			got, e := ReadBody(httptest.NewRecorder(), r, limit)
			switch {
			case c.code == "" && e != nil:
				t.Fatalf("refused: %+v", e)
			case c.code == "" && string(got) != c.body:
				t.Fatalf("read %q, want %q", got, c.body)
			case c.code != "" && (e == nil || e.Code != c.code):
				t.Fatalf("got %q, %+v; want the error %s", got, e, c.code)
			}
		})
	}
}
