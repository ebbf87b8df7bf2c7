package httpapi

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/chime-scheduler/chime/node/schedule"
	"github.com/chime-scheduler/chime/storage"
	"github.com/oklog/ulid/v2"
)

// specNow is the request time of the validation tests.
var specNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// specBody returns a request body with a valid callback_url plus extra, a
// comma-separated list of JSON members (may be empty).
func specBody(extra string) string {
	if extra == "" {
		return `{"callback_url":"http://127.0.0.1:9/cb"}`
	}
	return `{"callback_url":"http://127.0.0.1:9/cb",` + extra + `}`
}

// decodeValid decodes and validates body at specNow.
func decodeValid(body string, lim Limits) (string, storage.Spec, *Error) {
	r, e := decodeTaskRequest([]byte(body))
	if e != nil {
		return "", storage.Spec{}, e
	}
	return r.validate(specNow, lim)
}

// manyMembers returns n comma-separated JSON members from format, which
// takes the member's index.
func manyMembers(n int, format string) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = fmt.Sprintf(format, i)
	}
	return strings.Join(parts, ",")
}

// manyPairs returns a map of n keys from format (which takes the index),
// all with value "v".
func manyPairs(n int, format string) map[string]string {
	m := make(map[string]string, n)
	for i := range n {
		m[fmt.Sprintf(format, i)] = "v"
	}
	return m
}

func TestDecodeTaskRequestErrors(t *testing.T) {
	tests := []struct {
		name      string
		body      string
		wantField string
		wantMsg   string // substring of the message
	}{
		{"unknown field", `{"dealy_ms":5}`, "dealy_ms", "unknown field"},
		{"names are case-sensitive", `{"Delay_ms":5}`, "Delay_ms", "unknown field"},
		{"string for integer", `{"delay_ms":"5"}`, "delay_ms", "must be an integer, got string"},
		{"fraction for integer", `{"timeout_ms":1.5}`, "timeout_ms", "must be an integer"},
		{"integer overflow", `{"every_ms":1e30}`, "every_ms", "must be an integer"},
		{"number for string", `{"callback_url":5}`, "callback_url", "must be a string, got number"},
		{"object for string", `{"cron":{}}`, "cron", "must be a string"},
		{"bool for RFC 3339", `{"due_at":true}`, "due_at", "must be an RFC 3339 string"},
		{"header value not a string", `{"headers":{"X-A":1}}`, "headers.X-A", "must be a string"},
		{"headers not an object", `{"headers":[1]}`, "headers", "object of strings"},
		{"headers a string", `{"headers":"a"}`, "headers", "object of strings"},
		{"label value an object", `{"labels":{"k":{}}}`, "labels.k", "must be a string"},
		{"label key twice", `{"labels":{"k":"a","k":"b"}}`, "labels.k", "twice"},
		{"field twice", `{"id":"a","id":"b"}`, "id", "given twice"},
		{"field twice, first null", `{"delay_ms":null,"delay_ms":5}`, "delay_ms", "given twice"},
		{"empty body", ``, "", "empty"},
		{"whitespace body", " \r\n\t", "", "empty"},
		{"array body", `[{"id":"a"}]`, "", "must be a JSON object"},
		{"null body", `null`, "", "must be a JSON object"},
		{"string body", `"x"`, "", "must be a JSON object"},
		{"trailing garbage", `{"id":"a"} x`, "", "after the JSON object"},
		{"two objects", `{}{}`, "", "after the JSON object"},
		{"truncated object", `{"id":"a"`, "", "malformed JSON"},
		{"truncated value", `{"payload":{"a":`, "", "unexpected end of body"},
		{"malformed payload", `{"payload":{"a":}}`, "", "malformed JSON at byte 17"},
		{"missing colon", `{"id" "a"}`, "", "malformed JSON"},
		{"escaped unknown field", `{"dela\u0079_m":5}`, "delay_m", "unknown field"},
		{"escaped duplicate field", `{"id":"a","\u0069d":"b"}`, "id", "given twice"},
		{"escaped duplicate header", `{"headers":{"X-A":"1","X\u002dA":"2"}}`, "headers.X-A", "given twice"},
		{"header key twice", `{"headers":{"X-A":"1","X-A":"1"}}`, "headers.X-A", "given twice"},
		{"65 headers", `{"headers":{` + manyMembers(65, `"X-H%d":"v"`) + `}}`, "headers", "at most 64 headers"},
		{"17 labels", `{"labels":{` + manyMembers(17, `"k%d":"v"`) + `}}`, "labels", "at most 16 labels"},
		{"long unknown field is clipped", `{"` + strings.Repeat("x", 300) + `":1}`, strings.Repeat("x", 128) + "…", "unknown field"},
		{"type error after unknown field", `{"delay_ms":"5","x":1}`, "x", "unknown field"},
		{"trailing comma", `{"id":"a",}`, "", "malformed JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, e := decodeTaskRequest([]byte(tt.body))
			if e == nil {
				t.Fatalf("decodeTaskRequest(%q) = %+v, nil; want an error", tt.body, r)
			}
			if e.Code != CodeInvalidArgument || e.Field != tt.wantField || !strings.Contains(e.Message, tt.wantMsg) {
				t.Errorf("decodeTaskRequest(%q) error = %q (code %s, field %q); want code %s, field %q, message containing %q",
					tt.body, e.Message, e.Code, e.Field, CodeInvalidArgument, tt.wantField, tt.wantMsg)
			}
		})
	}
}

func TestDecodeTaskRequestValues(t *testing.T) {
	i64 := func(v int64) *int64 { return &v }
	str := func(v string) *string { return &v }
	tests := []struct {
		name string
		body string
		want TaskRequest
	}{
		{
			name: "every field",
			body: `  {"id":"a-1","callback_url":"https://x.example/cb","cron":"@daily","timezone":"Europe/Berlin",
				"start_at":"2026-04-01T00:00:00Z","payload":{"k": [1, 2]},"headers":{"X-A":"1"},"timeout_ms":100,
				"max_retries":0,"misfire":"skip","max_fails":2,"labels":{"team":"core"}}` + "\n",
			want: TaskRequest{
				ID: "a-1", CallbackURL: "https://x.example/cb", Cron: str("@daily"), Timezone: "Europe/Berlin",
				StartAt: "2026-04-01T00:00:00Z", Payload: json.RawMessage(`{"k": [1, 2]}`),
				Headers: map[string]string{"X-A": "1"}, TimeoutMs: i64(100), MaxRetries: new(int),
				Misfire: "skip", MaxFails: func() *int { v := 2; return &v }(), Labels: map[string]string{"team": "core"},
				decoded: true, scheduleKeys: []string{fieldCron},
			},
		},
		{
			name: "null means absent",
			body: `{"delay_ms":0,"due_at":null,"every_ms":null,"cron":null,"payload":null,"headers":null,"labels":null,"timeout_ms":null}`,
			want: TaskRequest{DelayMs: i64(0), decoded: true, scheduleKeys: []string{fieldDelayMs}},
		},
		{
			name: "schedule keys in body order",
			body: `{"every_ms":100,"due_at":"x","delay_ms":1}`,
			want: TaskRequest{EveryMs: i64(100), DueAt: str("x"), DelayMs: i64(1), decoded: true, scheduleKeys: []string{fieldEveryMs, fieldDueAt, fieldDelayMs}},
		},
		{
			name: "escaped keys",
			body: `{"dela\u0079_ms":7,"h\u0065aders":{"X\u002dA":"1"}}`,
			want: TaskRequest{DelayMs: i64(7), Headers: map[string]string{"X-A": "1"}, decoded: true, scheduleKeys: []string{fieldDelayMs}},
		},
		{
			name: "nested values are skipped whole",
			body: `{"payload":{"delay_ms":[{"}":"]"},"\"{"],"x":"\\"},"id":"a"}`,
			want: TaskRequest{ID: "a", Payload: json.RawMessage(`{"delay_ms":[{"}":"]"},"\"{"],"x":"\\"}`), decoded: true},
		},
		{
			name: "empty object",
			body: `{}`,
			want: TaskRequest{decoded: true},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, e := decodeTaskRequest([]byte(tt.body))
			if e != nil {
				t.Fatalf("decodeTaskRequest(%q) error = %v", tt.body, e)
			}
			if !reflect.DeepEqual(*got, tt.want) {
				t.Errorf("decodeTaskRequest(%q) = %+v, want %+v", tt.body, *got, tt.want)
			}
		})
	}
}

func TestValidateErrors(t *testing.T) {
	tests := []struct {
		name       string
		body       string
		lim        Limits
		wantCode   Code // "" = invalid_argument
		wantField  string
		wantStatus int // "" = 400
	}{
		{name: "id too long", body: specBody(`"delay_ms":1,"id":"` + strings.Repeat("a", 129) + `"`), wantField: "id"},
		{name: "id with slash", body: specBody(`"delay_ms":1,"id":"a/b"`), wantField: "id"},
		{name: "id with space", body: specBody(`"delay_ms":1,"id":"a b"`), wantField: "id"},
		{name: "id non-ASCII", body: specBody(`"delay_ms":1,"id":"é"`), wantField: "id"},

		{name: "callback_url missing", body: `{"delay_ms":1}`, wantField: "callback_url"},
		{name: "callback_url ftp", body: `{"delay_ms":1,"callback_url":"ftp://x/cb"}`, wantField: "callback_url"},
		{name: "callback_url relative", body: `{"delay_ms":1,"callback_url":"/cb"}`, wantField: "callback_url"},
		{name: "callback_url no host", body: `{"delay_ms":1,"callback_url":"http:///cb"}`, wantField: "callback_url"},
		{name: "callback_url port only", body: `{"delay_ms":1,"callback_url":"http://:80/cb"}`, wantField: "callback_url"},
		{name: "callback_url unparsable", body: `{"delay_ms":1,"callback_url":"http://x/%zz"}`, wantField: "callback_url"},
		{name: "callback_url too long", body: `{"delay_ms":1,"callback_url":"http://x/` + strings.Repeat("a", 4096) + `"}`, wantField: "callback_url"},

		{name: "no schedule", body: specBody(""), wantField: "schedule"},
		{name: "two schedules names the second", body: specBody(`"cron":"@daily","delay_ms":5`), wantField: "delay_ms"},
		{name: "two schedules other order", body: specBody(`"delay_ms":5,"cron":"@daily"`), wantField: "cron"},
		{name: "three schedules", body: specBody(`"every_ms":500,"due_at":"2026-03-02T00:00:00Z","cron":"@daily"`), wantField: "due_at"},

		{name: "delay_ms negative", body: specBody(`"delay_ms":-1`), wantField: "delay_ms"},
		{name: "delay_ms over 10 years", body: specBody(fmt.Sprintf(`"delay_ms":%d`, maxSpanMs+1)), wantField: "delay_ms"},
		{name: "due_at not RFC 3339", body: specBody(`"due_at":"tomorrow"`), wantField: "due_at"},
		{name: "due_at date only", body: specBody(`"due_at":"2026-03-02"`), wantField: "due_at"},
		{name: "due_at empty", body: specBody(`"due_at":""`), wantField: "due_at"},
		{name: "due_at before 1970", body: specBody(`"due_at":"1969-12-31T23:59:59Z"`), wantField: "due_at"},
		{name: "due_at over 10 years ahead", body: specBody(`"due_at":"2036-03-02T12:00:00Z"`), wantField: "due_at"},
		{name: "every_ms below 100", body: specBody(`"every_ms":99`), wantField: "every_ms"},
		{name: "every_ms zero", body: specBody(`"every_ms":0`), wantField: "every_ms"},
		{name: "every_ms over 10 years", body: specBody(fmt.Sprintf(`"every_ms":%d`, maxSpanMs+1)), wantField: "every_ms"},

		{name: "cron empty", body: specBody(`"cron":""`), wantField: "cron"},
		{name: "cron blank", body: specBody(`"cron":"  "`), wantField: "cron"},
		{name: "cron 3 fields", body: specBody(`"cron":"* * *"`), wantField: "cron"},
		{name: "cron 7 fields", body: specBody(`"cron":"0 0 0 * * * *"`), wantField: "cron"},
		{name: "cron minute 61", body: specBody(`"cron":"61 * * * *"`), wantField: "cron"},
		{name: "cron unknown descriptor", body: specBody(`"cron":"@fortnightly"`), wantField: "cron"},
		{name: "cron CRON_TZ prefix", body: specBody(`"cron":"CRON_TZ=Europe/Berlin 0 9 * * *"`), wantField: "cron"},
		{name: "cron TZ prefix without space", body: specBody(`"cron":"TZ=UTC"`), wantField: "cron"},
		{name: "cron TZ prefix after blank", body: specBody(`"cron":" TZ=UTC 0 9 * * *"`), wantField: "cron"},
		{name: "cron @every over 10 years", body: specBody(`"cron":"@every 87661h"`), wantField: "cron"},
		{name: "cron never matches", body: specBody(`"cron":"0 0 30 2 *"`), wantField: "cron"},
		{name: "cron too long", body: specBody(`"cron":"` + strings.Repeat("1,", 200) + `1 * * * *"`), wantField: "cron"},

		{name: "timezone with every_ms", body: specBody(`"every_ms":1000,"timezone":"UTC"`), wantField: "timezone"},
		{name: "timezone with delay_ms", body: specBody(`"delay_ms":1000,"timezone":"UTC"`), wantField: "timezone"},
		{name: "timezone unknown", body: specBody(`"cron":"@daily","timezone":"Mars/Olympus"`), wantField: "timezone"},
		{name: "timezone Local", body: specBody(`"cron":"@daily","timezone":"Local"`), wantField: "timezone"},
		{name: "timezone path", body: specBody(`"cron":"@daily","timezone":"../../etc/passwd"`), wantField: "timezone"},

		{name: "start_at with delay_ms", body: specBody(`"delay_ms":1,"start_at":"2026-03-02T00:00:00Z"`), wantField: "start_at"},
		{name: "start_at with due_at", body: specBody(`"due_at":"2026-03-02T00:00:00Z","start_at":"2026-03-02T00:00:00Z"`), wantField: "start_at"},
		{name: "start_at malformed", body: specBody(`"every_ms":1000,"start_at":"2026-03-02 00:00:00"`), wantField: "start_at"},
		{name: "start_at over 10 years ahead", body: specBody(`"cron":"@daily","start_at":"2040-01-01T00:00:00Z"`), wantField: "start_at"},

		{name: "payload too large", body: specBody(`"delay_ms":1,"payload":"123456789"`), lim: Limits{MaxPayloadBytes: 8},
			wantCode: CodeTooLarge, wantField: "payload", wantStatus: 400},

		{name: "header Host", body: specBody(`"delay_ms":1,"headers":{"Host":"x"}`), wantField: "headers.Host"},
		{name: "header host lower case", body: specBody(`"delay_ms":1,"headers":{"host":"x"}`), wantField: "headers.host"},
		{name: "header X-Chime", body: specBody(`"delay_ms":1,"headers":{"X-Chime-Task-Id":"x"}`), wantField: "headers.X-Chime-Task-Id"},
		{name: "header x-chime mixed case", body: specBody(`"delay_ms":1,"headers":{"x-CHIME-other":"x"}`), wantField: "headers.x-CHIME-other"},
		{name: "header Content-Length", body: specBody(`"delay_ms":1,"headers":{"Content-Length":"5"}`), wantField: "headers.Content-Length"},
		{name: "header Transfer-Encoding", body: specBody(`"delay_ms":1,"headers":{"Transfer-Encoding":"chunked"}`), wantField: "headers.Transfer-Encoding"},
		{name: "header name with space", body: specBody(`"delay_ms":1,"headers":{"A B":"x"}`), wantField: "headers.A B"},
		{name: "header name with colon", body: specBody(`"delay_ms":1,"headers":{"A:B":"x"}`), wantField: "headers.A:B"},
		{name: "header name empty", body: specBody(`"delay_ms":1,"headers":{"":"x"}`), wantField: "headers."},
		{name: "header value CRLF", body: specBody(`"delay_ms":1,"headers":{"X-A":"a\r\nEvil: 1"}`), wantField: "headers.X-A"},
		{name: "header value LF", body: specBody(`"delay_ms":1,"headers":{"X-A":"a\nb"}`), wantField: "headers.X-A"},
		{name: "header value NUL", body: specBody(`"delay_ms":1,"headers":{"X-A":"a\u0000b"}`), wantField: "headers.X-A"},
		{name: "header value too long", body: specBody(`"delay_ms":1,"headers":{"X-A":"` + strings.Repeat("a", 8193) + `"}`), wantField: "headers.X-A"},
		{name: "header twice ignoring case", body: specBody(`"delay_ms":1,"headers":{"X-A":"1","x-a":"2"}`), wantField: "headers.x-a"},
		{name: "smallest bad header reported", body: specBody(`"delay_ms":1,"headers":{"X-Chime-B":"x","Host":"x","X-OK":"y"}`), wantField: "headers.Host"},
		{name: "65 headers", body: specBody(`"delay_ms":1,"headers":{` + manyMembers(65, `"X-H%d":"v"`) + `}`), wantField: "headers"},

		{name: "timeout_ms zero", body: specBody(`"delay_ms":1,"timeout_ms":0`), wantField: "timeout_ms"},
		{name: "timeout_ms over 300000", body: specBody(`"delay_ms":1,"timeout_ms":300001`), wantField: "timeout_ms"},
		{name: "max_retries negative", body: specBody(`"delay_ms":1,"max_retries":-1`), wantField: "max_retries"},
		{name: "max_retries over 100", body: specBody(`"delay_ms":1,"max_retries":101`), wantField: "max_retries"},
		{name: "misfire unknown", body: specBody(`"every_ms":1000,"misfire":"sometimes"`), wantField: "misfire"},
		{name: "misfire with one-shot", body: specBody(`"delay_ms":1,"misfire":"skip"`), wantField: "misfire"},
		{name: "max_fails negative", body: specBody(`"every_ms":1000,"max_fails":-1`), wantField: "max_fails"},
		{name: "max_fails over a million", body: specBody(`"cron":"@daily","max_fails":1000001`), wantField: "max_fails"},
		{name: "max_fails with one-shot", body: specBody(`"delay_ms":1,"max_fails":0`), wantField: "max_fails"},
		{name: "max_runs zero", body: specBody(`"every_ms":1000,"max_runs":0`), wantField: "max_runs"},
		{name: "max_runs negative", body: specBody(`"cron":"@daily","max_runs":-3`), wantField: "max_runs"},
		{name: "max_runs over 2^53", body: specBody(`"every_ms":1000,"max_runs":9007199254740993`), wantField: "max_runs"},
		{name: "max_runs with delay_ms", body: specBody(`"delay_ms":1,"max_runs":3`), wantField: "max_runs"},
		{name: "max_runs with due_at", body: specBody(`"due_at":"2026-03-02T00:00:00Z","max_runs":3`), wantField: "max_runs"},
		{name: "max_catchup zero", body: specBody(`"every_ms":1000,"max_catchup":0`), wantField: "max_catchup"},
		{name: "max_catchup over 10000", body: specBody(`"cron":"@daily","max_catchup":10001`), wantField: "max_catchup"},
		{name: "max_catchup with delay_ms", body: specBody(`"delay_ms":1,"max_catchup":3`), wantField: "max_catchup"},
		{name: "max_catchup not an integer", body: specBody(`"every_ms":1000,"max_catchup":"5"`), wantField: "max_catchup"},
		{name: "max_runs a string", body: specBody(`"every_ms":1000,"max_runs":"3"`), wantField: "max_runs"},
		{name: "end_at with delay_ms", body: specBody(`"delay_ms":1,"end_at":"2026-03-02T00:00:00Z"`), wantField: "end_at"},
		{name: "end_at with due_at", body: specBody(`"due_at":"2026-03-02T00:00:00Z","end_at":"2026-03-03T00:00:00Z"`), wantField: "end_at"},
		{name: "end_at not RFC 3339", body: specBody(`"every_ms":1000,"end_at":"tomorrow"`), wantField: "end_at"},
		{name: "end_at before start_at", body: specBody(`"every_ms":1000,"start_at":"2026-04-01T00:00:00Z","end_at":"2026-03-31T23:59:59Z"`), wantField: "end_at"},
		{name: "end_at before cron start_at", body: specBody(`"cron":"@daily","start_at":"2026-04-01T00:00:00Z","end_at":"2026-03-02T00:00:00Z"`), wantField: "end_at"},
		{name: "end_at over 10 years", body: specBody(`"every_ms":1000,"end_at":"2036-03-02T00:00:00Z"`), wantField: "end_at"},
		{name: "end_at before 1970", body: specBody(`"every_ms":1000,"end_at":"1969-12-31T00:00:00Z"`), wantField: "end_at"},
		{name: "retention_ms negative", body: specBody(`"delay_ms":1,"retention_ms":-1`), wantField: "retention_ms"},
		{name: "retention_ms over 10 years", body: specBody(`"every_ms":1000,"retention_ms":315576000001`), wantField: "retention_ms"},
		{name: "retention_ms a string", body: specBody(`"delay_ms":1,"retention_ms":"1d"`), wantField: "retention_ms"},
		{name: "retention_ms a fraction", body: specBody(`"delay_ms":1,"retention_ms":1.5`), wantField: "retention_ms"},

		{name: "17 labels", body: specBody(`"delay_ms":1,"labels":{` + manyMembers(17, `"k%d":"v"`) + `}`), wantField: "labels"},
		{name: "label key with colon", body: specBody(`"delay_ms":1,"labels":{"a:b":"v"}`), wantField: "labels.a:b"},
		{name: "label key empty", body: specBody(`"delay_ms":1,"labels":{"":"v"}`), wantField: "labels."},
		{name: "label key 64 chars", body: specBody(`"delay_ms":1,"labels":{"` + strings.Repeat("k", 64) + `":"v"}`), wantField: "labels." + strings.Repeat("k", 64)},
		{name: "label value 256 characters", body: specBody(`"delay_ms":1,"labels":{"k":"` + strings.Repeat("é", 256) + `"}`), wantField: "labels.k"},
		{name: "smallest bad label reported", body: specBody(`"delay_ms":1,"labels":{"z:":"v","b:":"v","a":"v"}`), wantField: "labels.b:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.wantCode == "" {
				tt.wantCode = CodeInvalidArgument
			}
			if tt.wantStatus == 0 {
				tt.wantStatus = 400
			}
			id, spec, e := decodeValid(tt.body, tt.lim)
			if e == nil {
				t.Fatalf("validate(%s) = %q, %+v, nil; want an error on field %q", tt.body, id, spec, tt.wantField)
			}
			if e.Code != tt.wantCode || e.Field != tt.wantField || e.HTTPStatus() != tt.wantStatus || e.Message == "" {
				t.Errorf("validate(%s) error = %q (code %s, field %q, status %d); want code %s, field %q, status %d",
					tt.body, e.Message, e.Code, e.Field, e.HTTPStatus(), tt.wantCode, tt.wantField, tt.wantStatus)
			}
		})
	}
}

func TestValidateSpec(t *testing.T) {
	ns := func(s string) int64 {
		t.Helper()
		v, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return v.UnixNano()
	}
	const cb = "http://127.0.0.1:9/cb"
	tests := []struct {
		name   string
		body   string
		wantID string // "" = a generated ULID
		want   storage.Spec
	}{
		{
			name: "delay_ms with defaults",
			body: specBody(`"delay_ms":1500`),
			want: storage.Spec{CallbackURL: cb, Kind: storage.KindOnce, DelayMs: 1500, DueAt: specNow.UnixNano() + 1500e6,
				TimeoutMs: 5000, MaxRetries: 3, Misfire: storage.MisfireFireOnce},
		},
		{
			name: "delay_ms zero is due now",
			body: specBody(`"delay_ms":0`),
			want: storage.Spec{CallbackURL: cb, Kind: storage.KindOnce, DueAt: specNow.UnixNano(),
				TimeoutMs: 5000, MaxRetries: 3, Misfire: storage.MisfireFireOnce},
		},
		{
			name: "delay_ms of exactly 10 years",
			body: specBody(fmt.Sprintf(`"delay_ms":%d`, maxSpanMs)),
			want: storage.Spec{CallbackURL: cb, Kind: storage.KindOnce, DelayMs: maxSpanMs, DueAt: specNow.Add(maxSpan).UnixNano(),
				TimeoutMs: 5000, MaxRetries: 3, Misfire: storage.MisfireFireOnce},
		},
		{
			name: "due_at in the past with an offset and nanoseconds",
			body: specBody(`"due_at":"2026-03-01T09:30:00.123456789+01:00"`),
			want: storage.Spec{CallbackURL: cb, Kind: storage.KindOnce, DueAt: ns("2026-03-01T08:30:00.123456789Z"),
				TimeoutMs: 5000, MaxRetries: 3, Misfire: storage.MisfireFireOnce},
		},
		{
			name:   "every_ms with every option",
			body:   `{"id":"Az09._~:-","callback_url":"https://u:p@x.example:8443/cb?a=1#f","every_ms":100,"start_at":"2026-03-02T00:00:00Z","payload":{"a": 1},"headers":{"X-A":"tab\tok","Authorization":"Bearer t"},"timeout_ms":300000,"max_retries":100,"misfire":"fire_all","max_fails":1000000,"labels":{"team/a.b_c-d":"` + strings.Repeat("é", 255) + `","k":""}}`,
			wantID: "Az09._~:-",
			want: storage.Spec{CallbackURL: "https://u:p@x.example:8443/cb?a=1#f", Kind: storage.KindEvery, EveryMs: 100,
				StartAt: ns("2026-03-02T00:00:00Z"), Payload: []byte(`{"a": 1}`),
				Headers:   map[string]string{"X-A": "tab\tok", "Authorization": "Bearer t"},
				TimeoutMs: 300000, MaxRetries: 100, Misfire: storage.MisfireFireAll, MaxFails: 1000000,
				Labels: map[string]string{"team/a.b_c-d": strings.Repeat("é", 255), "k": ""}},
		},
		{
			name: "cron with seconds, timezone and skip",
			body: specBody(`"cron":"0 30 9 * * MON-FRI","timezone":"Europe/Berlin","misfire":"skip","max_retries":0,"timeout_ms":1`),
			want: storage.Spec{CallbackURL: cb, Kind: storage.KindCron, Cron: "0 30 9 * * MON-FRI", Timezone: "Europe/Berlin",
				TimeoutMs: 1, MaxRetries: 0, Misfire: storage.MisfireSkip},
		},
		{
			name: "cron descriptor with start_at in the past",
			body: specBody(`"cron":"@every 1h30m","start_at":"2020-01-01T00:00:00Z"`),
			want: storage.Spec{CallbackURL: cb, Kind: storage.KindCron, Cron: "@every 1h30m", StartAt: ns("2020-01-01T00:00:00Z"),
				TimeoutMs: 5000, MaxRetries: 3, Misfire: storage.MisfireFireOnce},
		},
		{
			name: "null and empty optional values",
			body: specBody(`"delay_ms":1,"payload":null,"headers":{},"labels":{},"timezone":"","start_at":"","misfire":"","id":""`),
			want: storage.Spec{CallbackURL: cb, Kind: storage.KindOnce, DelayMs: 1, DueAt: specNow.UnixNano() + 1e6,
				TimeoutMs: 5000, MaxRetries: 3, Misfire: storage.MisfireFireOnce},
		},
		{
			name: "payload at the limit",
			body: specBody(`"delay_ms":1,"payload":"123456"`),
			want: storage.Spec{CallbackURL: cb, Kind: storage.KindOnce, DelayMs: 1, DueAt: specNow.UnixNano() + 1e6,
				Payload: []byte(`"123456"`), TimeoutMs: 5000, MaxRetries: 3, Misfire: storage.MisfireFireOnce},
		},
	}
	lim := Limits{MaxPayloadBytes: 8}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id, spec, e := decodeValid(tt.body, lim)
			if e != nil {
				t.Fatalf("validate(%s) error = %v", tt.body, e)
			}
			if tt.wantID != "" && id != tt.wantID {
				t.Errorf("validate(%s) id = %q, want %q", tt.body, id, tt.wantID)
			}
			if tt.wantID == "" {
				if _, err := ulid.ParseStrict(id); err != nil {
					t.Errorf("validate(%s) id = %q, want a ULID: %v", tt.body, id, err)
				}
			}
			if !reflect.DeepEqual(spec, tt.want) {
				t.Errorf("validate(%s) spec =\n%+v\nwant\n%+v", tt.body, spec, tt.want)
			}
		})
	}
}

func TestValidateGeneratesDistinctIDs(t *testing.T) {
	r, e := decodeTaskRequest([]byte(specBody(`"delay_ms":1`)))
	if e != nil {
		t.Fatal(e)
	}
	seen := make(map[string]bool)
	for range 100 {
		id, _, e := r.validate(specNow, DefaultLimits())
		if e != nil {
			t.Fatal(e)
		}
		if seen[id] {
			t.Fatalf("validate generated id %q twice", id)
		}
		seen[id] = true
	}
}

// A TaskRequest built in Go has no body order; the canonical order
// delay_ms, due_at, every_ms, cron decides which field is blamed.
func TestValidateBuiltInGo(t *testing.T) {
	delay, every := int64(5), int64(1000)
	cronExpr := "@daily"
	tests := []struct {
		name      string
		req       TaskRequest
		wantField string
	}{
		{"cron and delay_ms", TaskRequest{CallbackURL: "http://x/", Cron: &cronExpr, DelayMs: &delay}, "cron"},
		{"every_ms and delay_ms", TaskRequest{CallbackURL: "http://x/", EveryMs: &every, DelayMs: &delay}, "every_ms"},
		{"invalid payload", TaskRequest{CallbackURL: "http://x/", DelayMs: &delay, Payload: json.RawMessage(`{`)}, "payload"},
		{"65 headers", TaskRequest{CallbackURL: "http://x/", DelayMs: &delay, Headers: manyPairs(65, "X-H%d")}, "headers"},
		{"17 labels", TaskRequest{CallbackURL: "http://x/", DelayMs: &delay, Labels: manyPairs(17, "k%d")}, "labels"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, e := tt.req.validate(specNow, DefaultLimits())
			if e == nil || e.Field != tt.wantField {
				t.Errorf("validate(%+v) = %v, want an error on field %q", tt.req, e, tt.wantField)
			}
		})
	}
}

func TestClip(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"short", "abc", "abc"},
		{"exactly the limit", strings.Repeat("x", 128), strings.Repeat("x", 128)},
		{"over the limit", strings.Repeat("x", 129), strings.Repeat("x", 128) + "…"},
		{"cut on a rune boundary", "a" + strings.Repeat("é", 100), "a" + strings.Repeat("é", 63) + "…"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := clip(tt.in); got != tt.want {
				t.Errorf("clip(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestDefaultLimits(t *testing.T) {
	got := DefaultLimits()
	want := Limits{MaxPayloadBytes: 64 << 10, MaxBatchTasks: 10000, MaxBodyBytes: 8 << 20}
	if got != want {
		t.Errorf("DefaultLimits() = %+v, want %+v", got, want)
	}
	if z := (Limits{}).withDefaults(); z != want {
		t.Errorf("Limits{}.withDefaults() = %+v, want %+v", z, want)
	}
}

// FuzzDecodeTaskRequest checks that decoding and validating any body never
// panics, that every failure is a well-formed API error, and that every
// accepted task can be scheduled and rendered.
func FuzzDecodeTaskRequest(f *testing.F) {
	for _, seed := range []string{
		``, `{}`, `null`, `[]`, `{"dealy_ms":5}`,
		specBody(`"delay_ms":1000`),
		specBody(`"due_at":"2026-03-02T00:00:00Z","payload":{"a":[1,2,{"b":null}]}`),
		specBody(`"every_ms":250,"start_at":"2026-03-01T11:00:00Z","misfire":"fire_all","max_fails":3`),
		specBody(`"cron":"*/5 * * * * *","timezone":"America/New_York","labels":{"a":"b"},"headers":{"X-A":"b"}`),
		specBody(`"cron":"@every 90s"`),
		specBody(`"cron":"TZ=UTC"`),
		specBody(`"cron":"0 0 29 2 *"`),
		specBody(`"delay_ms":1,"delay_ms":2`),
		`{"headers":{"a":{"b":1}}}`,
		`{"payload":` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r, e := decodeTaskRequest(data)
		if e != nil {
			if e.Code == "" || e.Message == "" {
				t.Fatalf("decodeTaskRequest(%q) error %+v lacks code or message", data, e)
			}
			return
		}
		id, spec, e := r.validate(specNow, DefaultLimits())
		if e != nil {
			if e.Code == "" || e.Message == "" {
				t.Fatalf("validate(%q) error %+v lacks code or message", data, e)
			}
			return
		}
		if validateID(id) != nil || id == "" {
			t.Fatalf("validate(%q) accepted id %q", data, id)
		}
		due, err := schedule.FirstDue(&spec, specNow)
		if err != nil || due == 0 {
			t.Fatalf("schedule.FirstDue(%+v) = %d, %v after validate accepted %q", spec, due, err, data)
		}
		schedule.NextDue(&spec, due)
		schedule.FirstAfter(&spec, due, due+1)
		task := &storage.Task{ID: id, Spec: spec, Status: storage.StatusScheduled, NextDue: due, CreatedAt: specNow.UnixNano()}
		if _, err := json.Marshal(taskResponse(task, "n1")); err != nil {
			t.Fatalf("json.Marshal(taskResponse) of %q: %v", data, err)
		}
	})
}

func BenchmarkDecodeTaskRequest(b *testing.B) {
	body := []byte(`{"id":"order-12345","callback_url":"http://127.0.0.1:9/cb","delay_ms":60000,"payload":{"order":12345,"action":"expire"},"headers":{"Authorization":"Bearer abc"},"labels":{"team":"core"},"max_retries":5}`)
	b.Run("impl=strict", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, e := decodeTaskRequest(body); e != nil {
				b.Fatal(e)
			}
		}
	})
	b.Run("impl=stdlib-unmarshal", func(b *testing.B) { // baseline: lenient encoding/json
		b.ReportAllocs()
		for b.Loop() {
			var r TaskRequest
			if err := json.Unmarshal(body, &r); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkValidate(b *testing.B) {
	for _, bc := range []struct{ kind, extra string }{
		{"delay", `"delay_ms":60000,"headers":{"Authorization":"Bearer abc"},"labels":{"team":"core"}`},
		{"cron", `"cron":"0 9 * * MON-FRI","timezone":"Europe/Berlin"`},
	} {
		r, e := decodeTaskRequest([]byte(specBody(bc.extra)))
		if e != nil {
			b.Fatal(e)
		}
		b.Run("kind="+bc.kind, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, _, e := r.validate(specNow, DefaultLimits()); e != nil {
					b.Fatal(e)
				}
			}
		})
	}
}

// TestNewTaskEndAt: end_at before the first fire is a 400 on end_at, at the
// first fire or after it is accepted (end_at is inclusive).
func TestNewTaskEndAt(t *testing.T) {
	tests := []struct {
		name, body string
		wantField  string // "" = accepted
	}{
		{"every: end_at before first fire (now+1s)", specBody(`"every_ms":1000,"end_at":"2026-03-01T12:00:00.5Z"`), "end_at"},
		{"every: end_at in the past", specBody(`"every_ms":1000,"end_at":"2026-02-01T00:00:00Z"`), "end_at"},
		{"every: end_at at first fire", specBody(`"every_ms":1000,"end_at":"2026-03-01T12:00:01Z"`), ""},
		{"every: start_at equals end_at", specBody(`"every_ms":1000,"start_at":"2026-04-01T00:00:00Z","end_at":"2026-04-01T00:00:00Z"`), ""},
		{"cron: end_at before first occurrence", specBody(`"cron":"@daily","end_at":"2026-03-01T23:00:00Z"`), "end_at"},
		{"cron: end_at at first occurrence", specBody(`"cron":"@daily","end_at":"2026-03-02T00:00:00Z","max_runs":2`), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id, spec, e := decodeValid(tt.body, Limits{})
			if e != nil {
				t.Fatalf("validate(%s): %v", tt.body, e)
			}
			task, e := newTask(id, spec, specNow)
			switch {
			case tt.wantField == "" && e != nil:
				t.Fatalf("newTask(%s) = %v; want accepted", tt.body, e)
			case tt.wantField == "" && (task.NextDue > spec.EndAt || task.Status != storage.StatusScheduled):
				t.Errorf("newTask(%s): next due %d status %s; want <= end_at %d, scheduled", tt.body, task.NextDue, task.Status, spec.EndAt)
			case tt.wantField != "" && (e == nil || e.Field != tt.wantField || e.HTTPStatus() != 400):
				t.Errorf("newTask(%s) = %v; want a 400 on %q", tt.body, e, tt.wantField)
			}
		})
	}
}

// TestValidateRetention: retention_ms is kept as given, 0 included (keep
// forever), and absent leaves the node's default (RetentionSet false).
func TestValidateRetention(t *testing.T) {
	tests := []struct {
		body    string
		wantMs  int64
		wantSet bool
	}{
		{specBody(`"delay_ms":1`), 0, false},
		{specBody(`"delay_ms":1,"retention_ms":null`), 0, false},
		{specBody(`"delay_ms":1,"retention_ms":0`), 0, true},
		{specBody(`"cron":"@daily","retention_ms":86400000`), 86400000, true},
		{specBody(`"every_ms":1000,"retention_ms":315576000000`), 315576000000, true},
	}
	for _, tt := range tests {
		_, spec, e := decodeValid(tt.body, Limits{})
		if e != nil {
			t.Fatalf("validate(%s): %v", tt.body, e)
		}
		if spec.RetentionMs != tt.wantMs || spec.RetentionSet != tt.wantSet {
			t.Errorf("validate(%s): retention %d set %v, want %d %v", tt.body, spec.RetentionMs, spec.RetentionSet, tt.wantMs, tt.wantSet)
		}
	}
}
