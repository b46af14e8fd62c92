package controlplane

import (
	_ "embed"
	"net/http"
)

// openAPI describes every route the Server registers, as OpenAPI 3.1; a
// test fails when a registered pattern is missing from it or it names a
// route that is not registered.
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

// routeMux is an http.ServeMux that remembers the patterns registered on
// it, so the routes the Server really serves can be compared with its
// OpenAPI document.
type routeMux struct {
	*http.ServeMux
	patterns []string
}

func newRouteMux() *routeMux { return &routeMux{ServeMux: http.NewServeMux()} }

func (m *routeMux) Handle(pattern string, h http.Handler) {
	m.patterns = append(m.patterns, pattern)
	m.ServeMux.Handle(pattern, h)
}

func (m *routeMux) HandleFunc(pattern string, h func(http.ResponseWriter, *http.Request)) {
	m.Handle(pattern, http.HandlerFunc(h))
}
