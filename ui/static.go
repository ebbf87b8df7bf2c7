package ui

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"net/http"
	"path"
	"time"
)

// The page: plain HTML, CSS and JavaScript, no build step and no
// third-party code. Charts are drawn on <canvas>.
//
//go:embed static
var staticFS embed.FS

// contentTypes is fixed here rather than taken from mime.TypeByExtension,
// which reads the machine's mime tables and so varies between hosts.
var contentTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".svg":  "image/svg+xml",
	".png":  "image/png",
	".json": "application/json",
}

// contentSecurityPolicy allows only the page's own files and connections
// to its own origin (CSP level 3 'self' includes ws: and wss: there). No
// inline script or style, so text from tasks and events cannot run.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// staticFile is one embedded file with its precomputed headers.
type staticFile struct {
	body  []byte
	ctype string
	etag  string
}

// staticFiles maps a name under /ui/ to its file; "" is index.html.
type staticFiles map[string]staticFile

// loadStatic reads the embedded files once.
func loadStatic() staticFiles {
	files := make(staticFiles)
	err := fs.WalkDir(staticFS, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := staticFS.ReadFile(p)
		if err != nil {
			return err
		}
		ctype, ok := contentTypes[path.Ext(p)]
		if !ok {
			ctype = "application/octet-stream"
		}
		sum := sha256.Sum256(body)
		files[p[len("static/"):]] = staticFile{body: body, ctype: ctype, etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
		return nil
	})
	if err != nil {
		panic("ui: reading the embedded files: " + err.Error()) // the binary itself is broken
	}
	files[""] = files["index.html"]
	return files
}

// serve answers GET and HEAD for name, revalidated by ETag on every load.
func (sf staticFiles) serve(w http.ResponseWriter, r *http.Request, name string) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeError(w, http.StatusMethodNotAllowed, "invalid_argument", "method "+r.Method+" is not allowed on "+r.URL.Path)
		return
	}
	f, ok := sf[name]
	if !ok {
		writeError(w, http.StatusNotFound, "not_found", "no such dashboard file: "+r.URL.Path)
		return
	}
	h := w.Header()
	h.Set("Content-Type", f.ctype)
	h.Set("ETag", f.etag)
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	if f.ctype == contentTypes[".html"] {
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("X-Frame-Options", "DENY")
	}
	http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(f.body))
}
