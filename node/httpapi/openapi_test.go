package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/chime-scheduler/chime/docs"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.yaml.in/yaml/v3"
)

// The OpenAPI document (docs/openapi.yaml, served at GET /v1/openapi.yaml)
// is checked against the code and against itself:
//
//   - TestOpenAPIListsEveryRoute: every route routes() registers (read
//     from server.go with go/ast, as TestAPIDocListsEveryRoute does) and
//     every path cmd/chime/handler.go serves itself is a path and method
//     of the document, and the document has no path or method nobody
//     serves.
//   - TestOpenAPIExamples: every example (media type example/examples,
//     parameter and header examples, schema-level examples) validates
//     against its schema with a JSON Schema 2020-12 validator; every $ref
//     resolves; every operation with a JSON body, and every 2xx JSON
//     answer, has an example.
//   - TestOpenAPIAnswersMatchSchemas: real answers of the server (over the
//     fake backend) validate against the schemas documented for them.
//   - TestOpenAPIChecksCanFail: the checks above report a missing route,
//     an undocumented one and invalid examples.

// openAPIDoc is the embedded document as JSON values (what
// jsonschema.UnmarshalJSON returns: maps, slices, json.Number, …).
func openAPIDoc(t *testing.T) map[string]any {
	t.Helper()
	var y any
	if err := yaml.Unmarshal([]byte(docs.OpenAPI), &y); err != nil {
		t.Fatalf("docs/openapi.yaml: %v", err)
	}
	j, err := json.Marshal(y)
	if err != nil {
		t.Fatalf("docs/openapi.yaml is not JSON-compatible: %v", err)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(j))
	if err != nil {
		t.Fatal(err)
	}
	doc, ok := v.(map[string]any)
	if !ok || doc["openapi"] != "3.1.0" {
		t.Fatalf("docs/openapi.yaml is not an OpenAPI 3.1.0 document (openapi: %v)", doc["openapi"])
	}
	return doc
}

// openAPIMethods are the operation keys of an OpenAPI path item.
var openAPIMethods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

// documentedRoutes returns "METHOD /path" for every operation of doc.
func documentedRoutes(doc map[string]any) []string {
	var out []string
	paths, _ := doc["paths"].(map[string]any)
	for p, item := range paths {
		ops, _ := item.(map[string]any)
		for _, m := range openAPIMethods {
			if _, ok := ops[m]; ok {
				out = append(out, strings.ToUpper(m)+" "+p)
			}
		}
	}
	slices.Sort(out)
	return out
}

// goWildcard matches a ServeMux wildcard, {name} or {name...}.
var goWildcard = regexp.MustCompile(`\{([A-Za-z_][A-Za-z0-9_]*)(\.\.\.)?\}`)

// openAPIRoute turns a ServeMux pattern ("GET /v1/tasks/{id}") into the
// document's spelling: {name...} becomes {name}; literal paths such as
// /v1/tasks:batch stay as they are.
func openAPIRoute(pattern string) string {
	return goWildcard.ReplaceAllString(pattern, "{$1}")
}

// compareRoutes returns the served routes the document lacks and the
// documented ones nobody serves.
func compareRoutes(served, documented []string) (missing, extra []string) {
	for _, r := range served {
		if !slices.Contains(documented, r) {
			missing = append(missing, r)
		}
	}
	for _, r := range documented {
		if !slices.Contains(served, r) {
			extra = append(extra, r)
		}
	}
	return missing, extra
}

// servedRoutes returns every route the node's router and `chime serve`'s
// own handler serve, in the document's spelling.
func servedRoutes(t *testing.T) []string {
	t.Helper()
	var out []string
	patterns := muxPatterns(t, "server.go", "routes")
	if len(patterns) < 20 {
		t.Fatalf("found %d patterns in routes() (%q): the parse no longer finds them", len(patterns), patterns)
	}
	for _, p := range patterns {
		if !strings.Contains(p, " ") {
			t.Errorf("pattern %q has no method: document it and teach this test", p)
			continue
		}
		out = append(out, openAPIRoute(p))
	}
	served, redirects := servePaths(t, "../../cmd/chime/handler.go")
	for _, p := range append(served, redirects...) { // the dashboard and its redirects: GETs
		out = append(out, "GET "+p)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func TestOpenAPIListsEveryRoute(t *testing.T) {
	doc := openAPIDoc(t)
	missing, extra := compareRoutes(servedRoutes(t), documentedRoutes(doc))
	for _, r := range missing {
		t.Errorf("docs/openapi.yaml does not document %s", r)
	}
	for _, r := range extra {
		t.Errorf("docs/openapi.yaml documents %s, which nothing serves", r)
	}

	// Every /internal/ operation is tagged internal and signed; every path
	// template's parameters are declared.
	paths := doc["paths"].(map[string]any)
	for p, item := range paths {
		item := item.(map[string]any)
		for _, m := range openAPIMethods {
			op, ok := item[m].(map[string]any)
			if !ok {
				continue
			}
			route := strings.ToUpper(m) + " " + p
			tags, _ := op["tags"].([]any)
			internal := slices.Contains(tags, any("internal"))
			if strings.HasPrefix(p, "/internal/") != internal {
				t.Errorf("%s: tagged internal is %v; want it exactly on /internal/ paths", route, internal)
			}
			if internal && !strings.Contains(fmt.Sprint(op["security"]), "internalSignature") {
				t.Errorf("%s: an internal operation needs the internalSignature security scheme", route)
			}
			if _, ok := op["operationId"].(string); !ok {
				t.Errorf("%s: no operationId", route)
			}
			for _, w := range goWildcard.FindAllStringSubmatch(p, -1) {
				if !declaresPathParam(doc, item, op, w[1]) {
					t.Errorf("%s: path parameter %q is not declared", route, w[1])
				}
			}
		}
	}
}

// declaresPathParam reports whether the path item or the operation
// declares the path parameter name.
func declaresPathParam(doc, item, op map[string]any, name string) bool {
	for _, list := range []any{item["parameters"], op["parameters"]} {
		ps, _ := list.([]any)
		for _, p := range ps {
			pm, _ := p.(map[string]any)
			if ref, ok := pm["$ref"].(string); ok {
				pm, _ = resolvePointer(doc, ref).(map[string]any)
			}
			if pm["in"] == "path" && pm["name"] == name && pm["required"] == true {
				return true
			}
		}
	}
	return false
}

// resolvePointer returns the value at ref ("#/components/…") in doc, or
// nil.
func resolvePointer(doc map[string]any, ref string) any {
	ptr, ok := strings.CutPrefix(ref, "#")
	if !ok {
		return nil
	}
	var v any = doc
	if ptr == "" {
		return v
	}
	for _, tok := range strings.Split(strings.TrimPrefix(ptr, "/"), "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch c := v.(type) {
		case map[string]any:
			v, ok = c[tok]
		case []any:
			var i int
			_, err := fmt.Sscan(tok, &i)
			ok = err == nil && i >= 0 && i < len(c)
			if ok {
				v = c[i]
			}
		default:
			ok = false
		}
		if !ok {
			return nil
		}
	}
	return v
}

// pointerTo returns the JSON pointer of path (its reference tokens).
func pointerTo(path []string) string {
	var b strings.Builder
	b.WriteByte('#')
	for _, tok := range path {
		b.WriteByte('/')
		b.WriteString(strings.ReplaceAll(strings.ReplaceAll(tok, "~", "~0"), "/", "~1"))
	}
	return b.String()
}

// openAPISchemas compiles schemas of one document by JSON pointer.
type openAPISchemas struct {
	c     *jsonschema.Compiler
	cache map[string]*jsonschema.Schema
}

const openAPIURL = "file:///chime/docs/openapi.json"

func newOpenAPISchemas(t *testing.T, doc map[string]any) *openAPISchemas {
	t.Helper()
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	if err := c.AddResource(openAPIURL, doc); err != nil {
		t.Fatal(err)
	}
	return &openAPISchemas{c: c, cache: map[string]*jsonschema.Schema{}}
}

// validate checks v against the schema at pointer ptr ("#/components/…").
func (s *openAPISchemas) validate(ptr string, v any) error {
	sch, ok := s.cache[ptr]
	if !ok {
		// The fragment is a URL's: escape what a URL may not hold.
		frag := strings.NewReplacer("%", "%25", "{", "%7B", "}", "%7D", " ", "%20", "*", "%2A").Replace(strings.TrimPrefix(ptr, "#"))
		var err error
		if sch, err = s.c.Compile(openAPIURL + "#" + frag); err != nil {
			return fmt.Errorf("compiling the schema: %w", err)
		}
		s.cache[ptr] = sch
	}
	return sch.Validate(v)
}

// openAPIExample is one example of the document and the schema it must
// validate against.
type openAPIExample struct {
	where  string // the example's pointer
	schema string // the schema's pointer
	value  any
}

// collectExamples walks doc and returns every example with its schema:
// the example and examples of media types, parameters and headers (an
// Example Object's value, or the one its $ref names), and the examples
// keyword of every schema. Unresolvable $refs are reported in bad.
func collectExamples(doc map[string]any) (out []openAPIExample, bad []string) {
	var walk func(v any, path []string, schema bool)
	walk = func(v any, path []string, schema bool) {
		switch n := v.(type) {
		case []any:
			for i, e := range n {
				walk(e, append(slices.Clone(path), fmt.Sprint(i)), schema && isSchemaList(path))
			}
			return
		case map[string]any:
			here := pointerTo(path)
			if ref, ok := n["$ref"].(string); ok && resolvePointer(doc, ref) == nil {
				bad = append(bad, here+": $ref "+ref+" does not resolve")
			}
			if schema {
				if exs, ok := n["examples"].([]any); ok {
					for i, ex := range exs {
						out = append(out, openAPIExample{fmt.Sprintf("%s/examples/%d", here, i), here, ex})
					}
				}
			} else if _, ok := n["schema"]; ok {
				sch := pointerTo(append(slices.Clone(path), "schema"))
				if ex, ok := n["example"]; ok {
					out = append(out, openAPIExample{here + "/example", sch, ex})
				}
				exs, _ := n["examples"].(map[string]any)
				for name, e := range exs {
					em, _ := e.(map[string]any)
					if ref, ok := em["$ref"].(string); ok {
						em, _ = resolvePointer(doc, ref).(map[string]any)
					}
					val, ok := em["value"]
					if !ok {
						bad = append(bad, here+"/examples/"+name+": no value")
						continue
					}
					out = append(out, openAPIExample{here + "/examples/" + name, sch, val})
				}
			}
			for k, c := range n {
				p := append(slices.Clone(path), k)
				switch {
				case schema:
					walk(c, p, isSchemaKeyword(k) || isSchemaMap(path))
				case k == "schema":
					walk(c, p, true)
				case len(path) == 2 && path[0] == "components" && path[1] == "schemas":
					walk(c, p, true)
				case k == "examples" && !schema:
					// Example Objects: not schemas, and their values are
					// checked above.
				default:
					walk(c, p, false)
				}
			}
		}
	}
	walk(doc, nil, false)
	return out, bad
}

// isSchemaKeyword reports whether the value of keyword k of a schema is a
// schema (or, for the applicators below, holds schemas).
func isSchemaKeyword(k string) bool {
	switch k {
	case "items", "additionalProperties", "not", "contains", "propertyNames", "if", "then", "else",
		"unevaluatedItems", "unevaluatedProperties", "contentSchema",
		"allOf", "anyOf", "oneOf", "prefixItems", "properties", "patternProperties", "$defs", "dependentSchemas":
		return true
	}
	return false
}

// isSchemaMap reports whether path ends in a keyword whose value maps
// names to schemas (so the value at path/name is a schema).
func isSchemaMap(path []string) bool {
	if len(path) == 0 {
		return false
	}
	switch path[len(path)-1] {
	case "properties", "patternProperties", "$defs", "dependentSchemas":
		return true
	}
	return false
}

// isSchemaList reports whether path ends in a keyword whose value is a
// list of schemas.
func isSchemaList(path []string) bool {
	if len(path) == 0 {
		return false
	}
	switch path[len(path)-1] {
	case "allOf", "anyOf", "oneOf", "prefixItems":
		return true
	}
	return false
}

func TestOpenAPIExamples(t *testing.T) {
	doc := openAPIDoc(t)
	schemas := newOpenAPISchemas(t, doc)
	examples, bad := collectExamples(doc)
	for _, b := range bad {
		t.Error(b)
	}
	if len(examples) < 50 {
		t.Fatalf("found only %d examples: the walk no longer finds them", len(examples))
	}
	for _, ex := range examples {
		if err := schemas.validate(ex.schema, ex.value); err != nil {
			t.Errorf("example %s does not validate against %s:\n%v", ex.where, ex.schema, err)
		}
	}
	// Every schema of components compiles (a broken $ref inside one fails
	// here even without an example).
	for name := range doc["components"].(map[string]any)["schemas"].(map[string]any) {
		ptr := pointerTo([]string{"components", "schemas", name})
		if err := schemas.validate(ptr, nil); err != nil && strings.HasPrefix(err.Error(), "compiling") {
			t.Errorf("%s: %v", ptr, err)
		}
	}
	for _, missing := range operationsWithoutExamples(doc) {
		t.Errorf("docs/openapi.yaml: %s has no example", missing)
	}
}

// operationsWithoutExamples names each JSON request body and each 2xx
// JSON answer of doc that has neither example nor examples.
func operationsWithoutExamples(doc map[string]any) []string {
	var out []string
	hasExample := func(content any) bool {
		mt, _ := content.(map[string]any)["application/json"].(map[string]any)
		if mt == nil {
			return true // not JSON
		}
		_, one := mt["example"]
		_, many := mt["examples"]
		return one || many
	}
	deref := func(v any) map[string]any {
		m, _ := v.(map[string]any)
		if ref, ok := m["$ref"].(string); ok {
			m, _ = resolvePointer(doc, ref).(map[string]any)
		}
		return m
	}
	for p, item := range doc["paths"].(map[string]any) {
		for _, m := range openAPIMethods {
			op, ok := item.(map[string]any)[m].(map[string]any)
			if !ok {
				continue
			}
			route := strings.ToUpper(m) + " " + p
			if body := deref(op["requestBody"]); body != nil && !hasExample(body["content"]) {
				out = append(out, route+" request body")
			}
			for code, resp := range op["responses"].(map[string]any) {
				r := deref(resp)
				if strings.HasPrefix(code, "2") && r["content"] != nil && !hasExample(r["content"]) {
					out = append(out, route+" answer "+code)
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

// TestOpenAPIChecksCanFail shows that the checks above catch what they are
// for: a route missing from the document, a documented route nobody
// serves, and examples that break their schema.
func TestOpenAPIChecksCanFail(t *testing.T) {
	doc := openAPIDoc(t)
	served, documented := servedRoutes(t), documentedRoutes(doc)

	without := slices.DeleteFunc(slices.Clone(documented), func(r string) bool { return r == "POST /v1/tasks:batch" })
	if missing, _ := compareRoutes(served, without); !slices.Equal(missing, []string{"POST /v1/tasks:batch"}) {
		t.Errorf("a document without POST /v1/tasks:batch: missing %q, want just that route", missing)
	}
	extraDoc := append(slices.Clone(documented), "GET /v1/stats/upcoming")
	if _, extra := compareRoutes(served, extraDoc); !slices.Equal(extra, []string{"GET /v1/stats/upcoming"}) {
		t.Errorf("a document with GET /v1/stats/upcoming: extra %q, want just that route", extra)
	}
	if got := openAPIRoute("GET /internal/v1/slots/{slot}"); got != "GET /internal/v1/slots/{slot}" {
		t.Errorf("openAPIRoute kept a wildcard as %q", got)
	}
	if got := openAPIRoute("GET /files/{path...}"); got != "GET /files/{path}" {
		t.Errorf("openAPIRoute({path...}) = %q", got)
	}

	schemas := newOpenAPISchemas(t, doc)
	task := func(edit func(m map[string]any)) any {
		m := map[string]any{
			"id": "poll-7", "callback_url": "https://example.com/hooks/poll", "every_ms": json.Number("60000"),
			"timeout_ms": json.Number("5000"), "max_retries": json.Number("3"), "misfire": "fire_once",
			"max_fails": json.Number("0"), "slot": json.Number("120"), "status": "scheduled",
			"fire_count": json.Number("0"), "fail_count": json.Number("0"), "owner": "n1",
		}
		edit(m)
		return m
	}
	for _, c := range []struct {
		name   string
		schema string
		value  any
		ok     bool
	}{
		{"a valid task", "#/components/schemas/Task", task(func(map[string]any) {}), true},
		{"every_ms a string", "#/components/schemas/Task", task(func(m map[string]any) { m["every_ms"] = "60000" }), false},
		{"an unknown field", "#/components/schemas/Task", task(func(m map[string]any) { m["dealy_ms"] = json.Number("5") }), false},
		{"two schedules", "#/components/schemas/Task", task(func(m map[string]any) { m["cron"] = "@daily" }), false},
		{"no schedule", "#/components/schemas/Task", task(func(m map[string]any) { delete(m, "every_ms") }), false},
		{"a periodic task without misfire", "#/components/schemas/Task", task(func(m map[string]any) { delete(m, "misfire") }), false},
		{"a bad instant", "#/components/schemas/Task", task(func(m map[string]any) { m["next_due_at"] = "tomorrow" }), false},
		{"a create with a null schedule too", "#/components/schemas/TaskCreate",
			map[string]any{"callback_url": "https://e.com/", "delay_ms": nil, "cron": "@daily"}, true},
		{"a create with an unknown field", "#/components/schemas/TaskCreate",
			map[string]any{"callback_url": "https://e.com/", "dealy_ms": json.Number("5")}, false},
		{"a create with an X-Chime header", "#/components/schemas/TaskCreate",
			map[string]any{"callback_url": "https://e.com/", "delay_ms": json.Number("5"), "headers": map[string]any{"X-Chime-Task-Id": "x"}}, false},
		{"an error without a message", "#/components/schemas/ErrorResponse",
			map[string]any{"error": map[string]any{"code": "not_found"}}, false},
		{"an unknown error code", "#/components/schemas/ErrorResponse",
			map[string]any{"error": map[string]any{"code": "teapot", "message": "x"}}, false},
		{"a slot map with a numeric version", "#/components/schemas/SlotMap",
			map[string]any{"version": json.Number("1"), "ranges": []any{}}, false},
	} {
		err := schemas.validate(c.schema, c.value)
		if (err == nil) != c.ok {
			t.Errorf("%s: valid = %v, want %v (%v)", c.name, err == nil, c.ok, err)
		}
	}

	// The walk finds a wrong example in the document itself.
	broken := openAPIDoc(t)
	ex := resolvePointer(broken, "#/components/examples/TaskPaused/value").(map[string]any)
	ex["every_ms"] = "60000"
	brokenSchemas := newOpenAPISchemas(t, broken)
	examples, _ := collectExamples(broken)
	var failed []string
	for _, e := range examples {
		if brokenSchemas.validate(e.schema, e.value) != nil {
			failed = append(failed, e.where)
		}
	}
	if !slices.Equal(failed, []string{"#/paths/~1v1~1tasks~1{id}~1pause/post/responses/200/content/application~1json/examples/paused"}) {
		t.Errorf("with every_ms a string in TaskPaused, the failing examples are %q", failed)
	}
}

// TestServeOpenAPI gets the document from a server: the embedded bytes,
// as YAML, with an ETag that answers 304, behind the token like every
// /v1/ route (the read token suffices).
func TestServeOpenAPI(t *testing.T) {
	get := func(cfg Config, hdr map[string]string) *httptest.ResponseRecorder {
		t.Helper()
		cfg.Name = "n1"
		r := httptest.NewRequest(http.MethodGet, "http://localhost:7070/v1/openapi.yaml", nil)
		for k, v := range hdr {
			r.Header.Set(k, v)
		}
		w := httptest.NewRecorder()
		New(cfg, newFake()).ServeHTTP(w, r)
		return w
	}
	w := get(Config{}, nil)
	if w.Code != http.StatusOK || w.Header().Get("Content-Type") != "application/yaml" {
		t.Fatalf("GET /v1/openapi.yaml: %d %q", w.Code, w.Header().Get("Content-Type"))
	}
	if w.Body.String() != docs.OpenAPI || !strings.HasPrefix(docs.OpenAPI, "openapi: 3.1.0\n") {
		t.Fatalf("the body (%d bytes) is not the embedded document (%d bytes)", w.Body.Len(), len(docs.OpenAPI))
	}
	etag := w.Header().Get("ETag")
	if !regexp.MustCompile(`^"[0-9a-f]+"$`).MatchString(etag) || w.Header().Get(HeaderTableVersion) == "" {
		t.Fatalf("ETag %q, table version %q", etag, w.Header().Get(HeaderTableVersion))
	}
	if w := get(Config{}, map[string]string{"If-None-Match": etag}); w.Code != http.StatusNotModified || w.Body.Len() != 0 {
		t.Errorf("If-None-Match with the ETag: %d, %d bytes", w.Code, w.Body.Len())
	}
	if w := get(Config{}, map[string]string{"If-None-Match": `"other"`}); w.Code != http.StatusOK {
		t.Errorf("If-None-Match with another ETag: %d", w.Code)
	}

	tokens := Config{APIToken: "full", ReadToken: "read"}
	if w := get(tokens, nil); w.Code != http.StatusUnauthorized {
		t.Errorf("without a token: %d, want 401", w.Code)
	}
	if w := get(tokens, map[string]string{"Authorization": "Bearer read"}); w.Code != http.StatusOK || w.Body.String() != docs.OpenAPI {
		t.Errorf("with the read token: %d", w.Code)
	}
}

// TestOpenAPIAnswersMatchSchemas runs requests through a server over the
// fake backend and validates each JSON answer against the schema the
// document gives for its route and status, so a shape changed in the code
// and not in the document (or the other way round) fails here.
func TestOpenAPIAnswersMatchSchemas(t *testing.T) {
	doc := openAPIDoc(t)
	schemas := newOpenAPISchemas(t, doc)
	f := newFake()
	s := New(Config{Name: "n1", HistoryLimit: 10}, f)
	for _, c := range []struct {
		method, path, route, body string
		status                    int
	}{
		{"POST", "/v1/tasks", "/v1/tasks", `{"id":"poll-7","callback_url":"https://example.com/p","every_ms":60000,"labels":{"team":"a"},"headers":{"X-T":"1"},"payload":{"a":1}}`, 201},
		{"POST", "/v1/tasks", "/v1/tasks", `{"callback_url":"https://example.com/p","delay_ms":0}`, 201},
		{"POST", "/v1/tasks", "/v1/tasks", `{"id":"rc-1","callback_url":"https://example.com/p","delay_ms":5,"success_url":"https://example.com/ok","failure_url":"https://example.com/ko"}`, 201},
		{"POST", "/v1/tasks", "/v1/tasks", `{"id":"poll-7","callback_url":"https://example.com/p","every_ms":60000}`, 409},
		{"POST", "/v1/tasks", "/v1/tasks", `{"callback_url":"https://example.com/p","dealy_ms":5}`, 400},
		{"PUT", "/v1/tasks/cron-1", "/v1/tasks/{id}", `{"callback_url":"https://example.com/c","cron":"0 9 * * 1-5","timezone":"Europe/Berlin","start_at":"2026-04-01T00:00:00Z"}`, 201},
		{"PUT", "/v1/tasks/cron-1", "/v1/tasks/{id}", `{"callback_url":"https://example.com/c","cron":"@daily","status":"paused"}`, 200},
		{"POST", "/v1/tasks:batch", "/v1/tasks:batch", `{"tasks":[{"id":"b1","callback_url":"https://example.com/b","due_at":"2026-03-02T00:00:00Z"},{"callback_url":"x"}]}`, 200},
		{"GET", "/v1/tasks/poll-7", "/v1/tasks/{id}", "", 200},
		{"GET", "/v1/tasks/nope", "/v1/tasks/{id}", "", 404},
		{"GET", "/v1/tasks?limit=2", "/v1/tasks", "", 200},
		{"GET", "/v1/tasks?limit=0", "/v1/tasks", "", 400},
		{"POST", "/v1/tasks/poll-7/pause", "/v1/tasks/{id}/pause", "{}", 200},
		{"POST", "/v1/tasks/poll-7/resume", "/v1/tasks/{id}/resume", "{}", 200},
		{"POST", "/v1/tasks/poll-7/trigger", "/v1/tasks/{id}/trigger", "{}", 202},
		{"GET", "/v1/tasks/poll-7/executions", "/v1/tasks/{id}/executions", "", 200},
		{"PUT", "/v1/tasks/ny", "/v1/tasks/{id}", `{"callback_url":"https://example.com/c","cron":"30 2 * * *","timezone":"America/New_York","dst":{"gap":"skip"}}`, 201},
		{"GET", "/v1/tasks/ny", "/v1/tasks/{id}", "", 200},
		{"GET", "/v1/tasks/ny/preview?n=3", "/v1/tasks/{id}/preview", "", 200},
		{"GET", "/v1/tasks/poll-7/preview", "/v1/tasks/{id}/preview", "", 200},
		{"GET", "/v1/tasks/ny/preview?n=1001", "/v1/tasks/{id}/preview", "", 400},
		{"GET", "/v1/tasks/nope/preview", "/v1/tasks/{id}/preview", "", 404},
		{"GET", "/v1/schedule:preview?cron=30+2+*+*+*&timezone=Europe/Berlin&start_at=2026-03-28T00:00:00Z&n=3", "/v1/schedule:preview", "", 200},
		{"GET", "/v1/schedule:preview?cron=30+2+*+*+*&timezone=Asia/Tokyo&n=2&gap=skip&overlap=both", "/v1/schedule:preview", "", 200},
		{"GET", "/v1/schedule:preview?every_ms=60000", "/v1/schedule:preview", "", 200},
		{"GET", "/v1/schedule:preview?cron=@daily&n=1001", "/v1/schedule:preview", "", 400},
		{"GET", "/v1/cluster/slots", "/v1/cluster/slots", "", 200},
		{"GET", "/v1/cluster", "/v1/cluster", "", 200},
		{"GET", "/v1/cluster?ranges=true", "/v1/cluster", "", 200},
		{"GET", "/v1/cluster?ranges=maybe", "/v1/cluster", "", 400},
		{"POST", "/v1/cluster/members/dead/forget", "/v1/cluster/members/{name}/forget", "{}", 200},
		{"POST", "/v1/test/callback", "/v1/test/callback", "", 200},
		{"GET", "/healthz", "/healthz", "", 200},
		{"GET", "/readyz", "/readyz", "", 200},
		{"POST", "/v1/tasks", "/v1/tasks", `{"callback_url":"https://example.com/p","delay_ms":5,"flow_key":"tenant-7"}`, 201},
		{"PUT", "/v1/flows/tenant-7", "/v1/flows/{key}", `{"rate":10,"period_ms":1000,"parallelism":2}`, 201},
		{"PUT", "/v1/flows/tenant-7", "/v1/flows/{key}", `{"parallelism":3}`, 200},
		{"PUT", "/v1/flows/tenant-7", "/v1/flows/{key}", `{"rate":10}`, 400},
		{"GET", "/v1/flows/tenant-7", "/v1/flows/{key}", "", 200},
		{"GET", "/v1/flows/nope", "/v1/flows/{key}", "", 404},
		{"GET", "/v1/flows?limit=5", "/v1/flows", "", 200},
		{"GET", "/v1/flows?limit=0", "/v1/flows", "", 400},
	} {
		r := httptest.NewRequest(c.method, "http://localhost:7070"+c.path, strings.NewReader(c.body))
		if c.body != "" {
			r.Header.Set("Content-Type", "application/json")
		}
		w := httptest.NewRecorder()
		s.ServeHTTP(w, r)
		name := c.method + " " + c.path
		if w.Code != c.status {
			t.Errorf("%s: %d %s, want %d", name, w.Code, w.Body, c.status)
			continue
		}
		ptr, ok := answerSchema(doc, c.route, c.method, w.Code)
		if !ok {
			t.Errorf("%s: docs/openapi.yaml has no JSON answer %d for %s %s", name, w.Code, c.method, c.route)
			continue
		}
		body := w.Body.String()
		v, err := jsonschema.UnmarshalJSON(strings.NewReader(body))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if err := schemas.validate(ptr, v); err != nil {
			t.Errorf("%s answered %d %s, which does not validate against %s:\n%v", name, w.Code, body, ptr, err)
		}
	}
}

// answerSchema returns the pointer of the JSON schema doc gives for the
// answer status of method on path (a response $ref followed).
func answerSchema(doc map[string]any, path, method string, status int) (string, bool) {
	resp := []string{"paths", path, strings.ToLower(method), "responses", fmt.Sprint(status)}
	m, _ := resolvePointer(doc, pointerTo(resp)).(map[string]any)
	if ref, ok := m["$ref"].(string); ok {
		resp = strings.Split(strings.TrimPrefix(ref, "#/"), "/")
	}
	ptr := pointerTo(append(resp, "content", "application/json", "schema"))
	return ptr, resolvePointer(doc, ptr) != nil
}
