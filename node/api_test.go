package node

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/chime-scheduler/chime/node/health"
	"github.com/chime-scheduler/chime/node/httpapi"
)

type errorBody struct {
	Error Error `json:"error"`
}

func TestCreateRejectsBadInput(t *testing.T) {
	tn := startNode(t, func(c *Config) { c.Limits.MaxPayloadBytes = 1024 })
	const cb = `"callback_url":"http://127.0.0.1:9/cb"`
	big := `"` + strings.Repeat("x", 1100) + `"`
	tests := []struct {
		name  string
		body  string
		code  string
		field string
	}{
		{"bad json", `{"callback_url":`, "invalid_argument", "*"},
		{"not an object", `[1,2]`, "invalid_argument", ""},
		{"empty body", ``, "invalid_argument", ""},
		{"no schedule", `{` + cb + `}`, "invalid_argument", "schedule"},
		{"two schedules", `{` + cb + `,"delay_ms":5,"cron":"* * * * *"}`, "invalid_argument", "cron"},
		{"unknown field", `{` + cb + `,"dealy_ms":5}`, "invalid_argument", "dealy_ms"},
		{"negative delay", `{` + cb + `,"delay_ms":-1}`, "invalid_argument", "delay_ms"},
		{"delay wrong type", `{` + cb + `,"delay_ms":"soon"}`, "invalid_argument", "delay_ms"},
		{"bad due_at", `{` + cb + `,"due_at":"tomorrow"}`, "invalid_argument", "due_at"},
		{"every too small", `{` + cb + `,"every_ms":10}`, "invalid_argument", "every_ms"},
		{"bad cron", `{` + cb + `,"cron":"61 * * * *"}`, "invalid_argument", "cron"},
		{"cron too few fields", `{` + cb + `,"cron":"* * *"}`, "invalid_argument", "cron"},
		{"unknown timezone", `{` + cb + `,"cron":"0 9 * * *","timezone":"Mars/Olympus"}`, "invalid_argument", "timezone"},
		{"timezone without cron", `{` + cb + `,"delay_ms":5,"timezone":"UTC"}`, "invalid_argument", "timezone"},
		{"dst without cron", `{` + cb + `,"every_ms":1000,"dst":{"gap":"skip"}}`, "invalid_argument", "dst"},
		{"dst unknown gap", `{` + cb + `,"cron":"30 2 * * *","timezone":"Europe/Berlin","dst":{"gap":"later"}}`, "invalid_argument", "dst.gap"},
		{"dst unknown overlap", `{` + cb + `,"cron":"30 2 * * *","timezone":"Europe/Berlin","dst":{"overlap":"twice"}}`, "invalid_argument", "dst.overlap"},
		{"missing url", `{"delay_ms":5}`, "invalid_argument", "callback_url"},
		{"relative url", `{"callback_url":"/cb","delay_ms":5}`, "invalid_argument", "callback_url"},
		{"non-http url", `{"callback_url":"ftp://127.0.0.1/cb","delay_ms":5}`, "invalid_argument", "callback_url"},
		{"id bad chars", `{"id":"a b",` + cb + `,"delay_ms":5}`, "invalid_argument", "id"},
		{"id is a path segment", `{"id":"..",` + cb + `,"delay_ms":5}`, "invalid_argument", "id"},
		{"id too long", `{"id":"` + strings.Repeat("a", 129) + `",` + cb + `,"delay_ms":5}`, "invalid_argument", "id"},
		{"payload too large", `{` + cb + `,"delay_ms":5,"payload":` + big + `}`, "too_large", "payload"},
		{"host header", `{` + cb + `,"delay_ms":5,"headers":{"Host":"x"}}`, "invalid_argument", "headers.Host"},
		{"chime header", `{` + cb + `,"delay_ms":5,"headers":{"X-Chime-Fire-Id":"x"}}`, "invalid_argument", "headers.X-Chime-Fire-Id"},
		{"timeout out of range", `{` + cb + `,"delay_ms":5,"timeout_ms":0}`, "invalid_argument", "timeout_ms"},
		{"retries out of range", `{` + cb + `,"delay_ms":5,"max_retries":101}`, "invalid_argument", "max_retries"},
		{"bad misfire", `{` + cb + `,"every_ms":1000,"misfire":"sometimes"}`, "invalid_argument", "misfire"},
		{"start_at on one-shot", `{` + cb + `,"delay_ms":5,"start_at":"2030-01-01T00:00:00Z"}`, "invalid_argument", "start_at"},
		{"too many labels", `{` + cb + `,"delay_ms":5,"labels":{` + manyLabels(17) + `}}`, "invalid_argument", "labels"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var eb errorBody
			code := tn.do(t, "POST", "/v1/tasks", tc.body, &eb)
			if code != 400 {
				t.Fatalf("status %d, want 400 (%+v)", code, eb.Error)
			}
			if string(eb.Error.Code) != tc.code || (tc.field != "*" && eb.Error.Field != tc.field) {
				t.Errorf("error %+v, want code %s field %q", eb.Error, tc.code, tc.field)
			}
			if eb.Error.Message == "" {
				t.Error("error has no message")
			}
		})
	}
	// Nothing was stored by any of them.
	var list struct {
		Tasks []map[string]any `json:"tasks"`
	}
	tn.do(t, "GET", "/v1/tasks", nil, &list)
	if len(list.Tasks) != 0 {
		t.Errorf("%d tasks stored after only bad requests", len(list.Tasks))
	}
}

func manyLabels(n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = fmt.Sprintf(`"k%d":"v"`, i)
	}
	return strings.Join(parts, ",")
}

func TestBodyAndBatchLimits(t *testing.T) {
	tn := startNode(t, func(c *Config) { c.Limits.MaxBodyBytes = 4096; c.Limits.MaxBatchTasks = 3 })
	var eb errorBody
	if code := tn.do(t, "POST", "/v1/tasks", `{"payload":"`+strings.Repeat("x", 5000)+`"}`, &eb); code != 413 || eb.Error.Code != CodeTooLarge {
		t.Errorf("oversized body: %d %+v, want 413 too_large", code, eb.Error)
	}
	task := map[string]any{"callback_url": "http://127.0.0.1:9/", "delay_ms": 1000}
	code := tn.do(t, "POST", "/v1/tasks:batch", map[string]any{"tasks": []any{task, task, task, task}}, &eb)
	if code != 400 || eb.Error.Field != "tasks" {
		t.Errorf("batch over the task limit: %d %+v, want 400 naming tasks", code, eb.Error)
	}
}

func TestBatchMixedValidAndInvalid(t *testing.T) {
	tn := startNode(t, nil)
	body := `{"tasks":[
		{"id":"b1","callback_url":"http://127.0.0.1:9/","delay_ms":60000},
		{"id":"b2","callback_url":"nope","delay_ms":60000},
		{"id":"b3","callback_url":"http://127.0.0.1:9/","cron":"bad"},
		{"id":"b1","callback_url":"http://127.0.0.1:9/","delay_ms":60000},
		{"callback_url":"http://127.0.0.1:9/","every_ms":60000}
	]}`
	var res struct {
		Results []httpapi.BatchResult `json:"results"`
	}
	if code := tn.do(t, "POST", "/v1/tasks:batch", body, &res); code != 200 {
		t.Fatalf("status %d", code)
	}
	want := []struct {
		status int
		field  string
		code   httpapi.Code
	}{{201, "", ""}, {400, "callback_url", CodeInvalidArgument}, {400, "cron", CodeInvalidArgument}, {409, "", CodeConflict}, {201, "", ""}}
	if len(res.Results) != len(want) {
		t.Fatalf("%d results, want %d", len(res.Results), len(want))
	}
	for i, w := range want {
		r := res.Results[i]
		if r.Index != i || r.Status != w.status {
			t.Errorf("result %d = %+v, want status %d", i, r, w.status)
			continue
		}
		if w.code != "" && (r.Error == nil || r.Error.Code != w.code || r.Error.Field != w.field) {
			t.Errorf("result %d error %+v, want %s on %q", i, r.Error, w.code, w.field)
		}
	}
	if res.Results[4].ID == "" {
		t.Error("a task without an id got no generated id")
	}
	for _, id := range []string{"b1", res.Results[4].ID} {
		if code := tn.do(t, "GET", "/v1/tasks/"+id, nil, nil); code != 200 {
			t.Errorf("GET %s = %d, want 200", id, code)
		}
	}
	for _, id := range []string{"b2", "b3"} {
		if code := tn.do(t, "GET", "/v1/tasks/"+id, nil, nil); code != 404 {
			t.Errorf("GET %s = %d, want 404 (nothing half-stored)", id, code)
		}
	}
}

func TestAuth(t *testing.T) {
	tn := startNode(t, func(c *Config) { c.APIToken = "s3cret" })
	tests := []struct {
		name, method, path, auth string
		want                     int
	}{
		{"no token", "GET", "/v1/tasks", "", 401},
		{"wrong token", "GET", "/v1/tasks", "Bearer nope", 401},
		{"not bearer", "GET", "/v1/tasks", "Basic s3cret", 401},
		{"right token", "GET", "/v1/tasks", "Bearer s3cret", 200},
		{"metrics without token", "GET", "/metrics", "", 401},
		{"metrics with token", "GET", "/metrics", "Bearer s3cret", 200},
		{"healthz is open", "GET", "/healthz", "", 200},
		{"readyz is open", "GET", "/readyz", "", 200},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var hdr []string
			if tc.auth != "" {
				hdr = []string{"Authorization", tc.auth}
			}
			var eb errorBody
			code := tn.do(t, tc.method, tc.path, nil, &eb, hdr...)
			if code != tc.want {
				t.Fatalf("status %d, want %d", code, tc.want)
			}
			if code == 401 && eb.Error.Code != CodeUnauthenticated {
				t.Errorf("error %+v, want unauthenticated", eb.Error)
			}
		})
	}
}

func TestCreateGetPutListExecutions(t *testing.T) {
	tn := startNode(t, nil)
	var created map[string]any
	code := tn.do(t, "POST", "/v1/tasks", `{"id":"t1","callback_url":"http://127.0.0.1:9/","cron":"0 9 * * *","timezone":"Europe/Berlin","labels":{"team":"a"}}`, &created)
	if code != 201 {
		t.Fatalf("create: %d %v", code, created)
	}
	if created["slot"] == nil || created["status"] != "scheduled" || created["next_due_at"] == nil || created["owner"] != "test-node" {
		t.Errorf("created task %v lacks slot/status/next_due_at/owner", created)
	}
	if code := tn.do(t, "POST", "/v1/tasks", `{"id":"t1","callback_url":"http://127.0.0.1:9/","delay_ms":5}`, nil); code != 409 {
		t.Errorf("duplicate create: %d, want 409", code)
	}
	if code := tn.do(t, "PUT", "/v1/tasks/t1", `{"callback_url":"http://127.0.0.1:9/","every_ms":60000,"labels":{"team":"b"}}`, nil); code != 200 {
		t.Errorf("replace: %d, want 200", code)
	}
	if code := tn.do(t, "PUT", "/v1/tasks/t2", `{"callback_url":"http://127.0.0.1:9/","every_ms":60000,"labels":{"team":"a"}}`, nil); code != 201 {
		t.Errorf("put new: %d, want 201", code)
	}
	if code := tn.do(t, "PUT", "/v1/tasks/t3", `{"id":"other","callback_url":"http://127.0.0.1:9/","every_ms":60000}`, nil); code != 400 {
		t.Errorf("put with mismatching body id: %d, want 400", code)
	}
	for i := range 5 {
		tn.do(t, "POST", "/v1/tasks", fmt.Sprintf(`{"id":"x%d","callback_url":"http://127.0.0.1:9/","delay_ms":600000,"labels":{"team":"a"}}`, i), nil)
	}
	tn.do(t, "POST", "/v1/tasks/x0/pause", nil, nil)
	// Page through everything two at a time.
	seen := map[string]bool{}
	cursor := ""
	for pages := 0; ; pages++ {
		var page struct {
			Tasks      []map[string]any `json:"tasks"`
			NextCursor string           `json:"next_cursor"`
		}
		if code := tn.do(t, "GET", "/v1/tasks?limit=2&cursor="+cursor, nil, &page); code != 200 {
			t.Fatalf("list: %d", code)
		}
		for _, task := range page.Tasks {
			id := task["id"].(string)
			if seen[id] {
				t.Errorf("task %s listed twice", id)
			}
			seen[id] = true
		}
		if page.NextCursor == "" {
			break
		}
		if pages > 10 {
			t.Fatal("cursor never ends")
		}
		cursor = page.NextCursor
	}
	if len(seen) != 7 {
		t.Errorf("listed %d tasks, want 7: %v", len(seen), seen)
	}
	count := func(q string) int {
		var page struct {
			Tasks []map[string]any `json:"tasks"`
		}
		tn.do(t, "GET", "/v1/tasks?"+q, nil, &page)
		return len(page.Tasks)
	}
	if got := count("label=team:a"); got != 6 {
		t.Errorf("label=team:a lists %d, want 6", got)
	}
	if got := count("status=paused"); got != 1 {
		t.Errorf("status=paused lists %d, want 1", got)
	}
	var eb errorBody
	for _, q := range []string{"status=nope", "limit=0", "limit=x", "label=nocolon", "cursor=abc"} {
		if code := tn.do(t, "GET", "/v1/tasks?"+q, nil, &eb); code != 400 {
			t.Errorf("list?%s: %d, want 400", q, code)
		}
	}
	if code := tn.do(t, "GET", "/v1/tasks/nope", nil, &eb); code != 404 || eb.Error.Code != CodeNotFound {
		t.Errorf("get missing: %d %+v", code, eb.Error)
	}
	if code := tn.do(t, "DELETE", "/v1/tasks/nope", nil, nil); code != 404 {
		t.Errorf("delete missing: %d", code)
	}
	if code := tn.do(t, "POST", "/v1/tasks/nope/pause", nil, nil); code != 404 {
		t.Errorf("pause missing: %d", code)
	}
	if code := tn.do(t, "PATCH", "/v1/tasks/t1", nil, &eb); code != 405 {
		t.Errorf("PATCH: %d, want 405", code)
	}
	if code := tn.do(t, "GET", "/v1/nothing", nil, &eb); code != 404 || eb.Error.Code != CodeNotFound {
		t.Errorf("unknown path: %d %+v", code, eb.Error)
	}
	var st health.Stats
	if code := tn.do(t, "GET", "/v1/stats", nil, &st); code != 200 || st.Metrics["chime_tasks_created_total"] != 7 {
		t.Errorf("stats: %d created=%v, want 7", code, st.Metrics["chime_tasks_created_total"])
	}
	var cl map[string]any
	if code := tn.do(t, "GET", "/v1/cluster", nil, &cl); code != 200 || cl["self"] != "test-node" {
		t.Errorf("cluster: %d %v", code, cl)
	}
	raw, _ := json.Marshal(cl)
	if !strings.Contains(string(raw), `"slots_owned":16384`) {
		t.Errorf("cluster %s: the single node should own every slot", raw)
	}
}
