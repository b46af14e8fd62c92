package gateway

import (
	_ "embed"
	"net/http"
)

// openAPI describes every route of the gateway, as OpenAPI 3.1; a test
// fails when a route the gateway serves is missing from it or it names a
// route that is not served.
//
//go:embed openapi.json
var openAPI []byte

// serveOpenAPI is GET /openapi.json.
func serveOpenAPI(w http.ResponseWriter, _ *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Content-Type-Options", "nosniff")
	w.Write(openAPI)
}
