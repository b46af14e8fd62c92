package controlplane

import (
	"bytes"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/idnhq/idn/kit/openapicheck"
)

// allRoutesEnv is a server with every optional route on: passkeys, test
// seeding and sign-in links.
func allRoutesEnv(t *testing.T) *env {
	return newAuthEnv(t, ProviderSQLite)
}

// TestOpenAPIMatchesRoutes: every pattern registered on the server's mux
// is an operation of openapi.json and every operation is registered, so
// the document cannot drift from the code. A route added without its
// operation (or the reverse) fails here; edit controlplane/openapi.json and
// docs/control-plane.md together with the route.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	t.Parallel()
	e := allRoutesEnv(t)
	doc, err := openapicheck.Parse(openAPI)
	if err != nil {
		t.Fatal(err)
	}
	var routes []string
	for _, p := range e.srv.mux.patterns {
		if p == "/" { // the JSON 404 for everything else
			continue
		}
		r, err := openapicheck.Route(p)
		if err != nil {
			t.Error(err)
			continue
		}
		routes = append(routes, r)
	}
	if len(routes) < 40 {
		t.Fatalf("only %d routes recorded; the recorder is broken", len(routes))
	}
	missing, extra := openapicheck.Diff(routes, doc.Operations())
	for _, r := range missing {
		t.Errorf("route %s is registered but not in openapi.json", r)
	}
	for _, o := range extra {
		t.Errorf("openapi.json describes %s, which is not registered", o)
	}
}

// TestReferenceListsRoutes: docs/control-plane.md names every path of the
// API in backticks.
func TestReferenceListsRoutes(t *testing.T) {
	t.Parallel()
	ref, err := os.ReadFile("../docs/control-plane.md")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := openapicheck.Parse(openAPI)
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range doc.Operations() {
		_, path, _ := strings.Cut(op, " ")
		if !bytes.Contains(ref, []byte("`"+path+"`")) {
			t.Errorf("docs/control-plane.md does not list %s", op)
		}
	}
}

func TestOpenAPIServed(t *testing.T) {
	t.Parallel()
	e := newEnv(t, openStore(t, storeConfig(t, ProviderSQLite)), nil)
	r := e.do("GET", "/openapi.json", nil)
	if r.status != http.StatusOK || r.header.Get("Content-Type") != "application/json" || !bytes.Equal(r.body, openAPI) {
		t.Fatalf("GET /openapi.json: %d %q, %d bytes", r.status, r.header.Get("Content-Type"), len(r.body))
	}
}
