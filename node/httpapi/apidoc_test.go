package httpapi

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestAPIDocListsEveryRoute checks that docs/API.md names every route the
// code serves: each "METHOD /path" pattern registered with mux.HandleFunc
// in routes() (node/httpapi/server.go), the /internal/v1/ ones included, and each path
// the `chime serve` handler (cmd/chime/handler.go) routes itself: the
// dashboard's /ui/ and /v1/ws. The routes are read from the source with
// go/ast, so a route added to the code without a line in the reference
// fails here.
func TestAPIDocListsEveryRoute(t *testing.T) {
	docBytes, err := os.ReadFile("../../docs/API.md")
	if err != nil {
		t.Fatalf("read the API reference: %v", err)
	}
	doc := string(docBytes)

	routes := muxPatterns(t, "server.go", "routes")
	if len(routes) < 20 {
		t.Fatalf("found %d patterns in routes() (%q): the parse no longer finds them", len(routes), routes)
	}
	var missing []string
	for _, p := range routes {
		method, path, ok := strings.Cut(p, " ")
		if !ok {
			t.Errorf("pattern %q has no method: document it and teach this test", p)
			continue
		}
		if !docNames(doc, method+" "+path) {
			missing = append(missing, method+" "+path)
		}
	}

	served, redirects := servePaths(t, "../../cmd/chime/handler.go")
	for _, want := range []string{"/ui/", "/v1/ws"} {
		if !slices.Contains(served, want) {
			t.Errorf("cmd/chime/handler.go no longer serves %s itself: update this test", want)
		}
	}
	for _, p := range served { // the dashboard: GETs
		if !docNames(doc, "GET "+p) {
			missing = append(missing, "GET "+p+" (cmd/chime/handler.go)")
		}
	}
	for _, p := range redirects { // "/": naming it is enough
		if !strings.Contains(doc, "`"+p+"`") {
			missing = append(missing, p+" (redirect, cmd/chime/handler.go)")
		}
	}
	for _, m := range missing {
		t.Errorf("docs/API.md does not document %s", m)
	}
}

// docNames reports whether a table row of doc names route ("GET
// /v1/tasks") in backquotes, alone or followed by a query ("?limit="): a
// mention in prose, or as the start of a longer path ("GET
// /v1/tasks:batch"), does not count.
func docNames(doc, route string) bool {
	re := regexp.MustCompile("(?m)^\\|.*`" + regexp.QuoteMeta(route) + "[`?]")
	return re.MatchString(doc)
}

// muxPatterns returns the string literal patterns of the HandleFunc and
// Handle calls in function fn of file.
func muxPatterns(t *testing.T, file, fn string) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	found := false
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Name.Name != fn || fd.Body == nil {
			continue
		}
		found = true
		ast.Inspect(fd.Body, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) == 0 {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || (sel.Sel.Name != "HandleFunc" && sel.Sel.Name != "Handle") {
				return true
			}
			// The fallback patterns are registered from a slice in a loop
			// (not literals): they answer 404/405 and are not routes.
			if s, ok := stringLit(call.Args[0]); ok {
				out = append(out, s)
			}
			return true
		})
	}
	if !found {
		t.Fatalf("%s has no func %s", file, fn)
	}
	return out
}

// servePaths returns the paths (string literals starting with "/") that
// the ServeHTTP method in file compares the request path with: served
// ones, and those whose case only redirects (http.Redirect).
func servePaths(t *testing.T, file string) (served, redirects []string) {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Name.Name != "ServeHTTP" || fd.Recv == nil || fd.Body == nil {
			continue
		}
		ast.Inspect(fd.Body, func(n ast.Node) bool {
			c, ok := n.(*ast.CaseClause)
			if !ok {
				return true
			}
			redirect := false
			for _, st := range c.Body {
				ast.Inspect(st, func(n ast.Node) bool {
					if sel, ok := n.(*ast.SelectorExpr); ok && sel.Sel.Name == "Redirect" {
						redirect = true
					}
					return true
				})
			}
			for _, e := range c.List {
				ast.Inspect(e, func(n ast.Node) bool {
					s, ok := stringLit(n)
					switch {
					case !ok || !strings.HasPrefix(s, "/"):
					case redirect && !slices.Contains(redirects, s):
						redirects = append(redirects, s)
					case !redirect && !slices.Contains(served, s):
						served = append(served, s)
					}
					return true
				})
			}
			return false
		})
	}
	if len(served) == 0 {
		t.Fatalf("%s: no paths found in ServeHTTP", file)
	}
	return served, redirects
}

func stringLit(n ast.Node) (string, bool) {
	lit, ok := n.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(lit.Value)
	return s, err == nil
}
