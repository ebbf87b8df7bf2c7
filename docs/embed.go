// Package docs holds the project's documents. It embeds one of them, the
// OpenAPI document of the HTTP API, so that a node can serve it
// (GET /v1/openapi.yaml, node/httpapi).
package docs

import _ "embed"

// OpenAPI is openapi.yaml: the OpenAPI 3.1 document of the HTTP API, the
// machine-readable companion of API.md.
//
//go:embed openapi.yaml
var OpenAPI string
