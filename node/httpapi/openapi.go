package httpapi

// This file serves GET /v1/openapi.yaml: the OpenAPI document of this API
// (docs/openapi.yaml, embedded by package docs). It is a /v1/ route like
// the others, so the edge checks apply to it: with an API token it needs
// a token (the read token suffices), and a stopping node answers 503.

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"

	"github.com/chime-scheduler/chime/docs"
)

// openAPIETag is the ETag of the embedded document: a digest of it.
var openAPIETag = func() string {
	sum := sha256.Sum256([]byte(docs.OpenAPI))
	return `"` + hex.EncodeToString(sum[:8]) + `"`
}()

// handleOpenAPI answers the OpenAPI document, or 304 when If-None-Match
// names its ETag.
func handleOpenAPI(w http.ResponseWriter, r *http.Request) {
	writeTagged(w, r, openAPIETag, "application/yaml", []byte(docs.OpenAPI))
}

// writeTagged answers body with its ETag, which a client revalidates on
// every use (no-cache), or 304 when If-None-Match names the ETag.
func writeTagged(w http.ResponseWriter, r *http.Request, etag, contentType string, body []byte) {
	w.Header().Set("ETag", etag)
	w.Header().Set("Cache-Control", "no-cache")
	if etagMatch(r.Header.Get("If-None-Match"), etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	w.Header().Set("Content-Type", contentType)
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}
