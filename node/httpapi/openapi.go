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
	w.Header().Set("ETag", openAPIETag)
	w.Header().Set("Cache-Control", "no-cache")
	if etagMatch(r.Header.Get("If-None-Match"), openAPIETag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	w.Header().Set("Content-Type", "application/yaml")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte(docs.OpenAPI))
}
