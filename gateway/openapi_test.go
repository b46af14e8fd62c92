package gateway_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/idnhq/idn/gateway"
	"github.com/idnhq/idn/kit/openapicheck"
)

// composedRoutes are the routes the gateway's own dispatch serves before
// handing a path to the admin API or the MCP proxy. They are not mux
// patterns, so TestOpenAPIMatchesRoutes checks each against the running
// gateway instead.
var composedRoutes = []string{
	"GET /health", "GET /health/live", "GET /health/ready", "GET /metrics", "GET /openapi.json",
	"GET /proxy/{connection_id}/{path}", "PUT /proxy/{connection_id}/{path}", "POST /proxy/{connection_id}/{path}",
	"DELETE /proxy/{connection_id}/{path}", "PATCH /proxy/{connection_id}/{path}", "HEAD /proxy/{connection_id}/{path}",
	"OPTIONS /proxy/{connection_id}/{path}",
}

// muxSources are the files whose ServeMux registrations are part of the
// gateway: the admin API and the MCP routes.
var muxSources = []string{"../admin/admin.go", "../mcpproxy/handler.go"}

// TestOpenAPIMatchesRoutes: the document the gateway serves at
// /openapi.json describes exactly the routes it serves: every pattern
// registered on the admin and MCP muxes, and the gateway's own routes
// (each probed on a running gateway). A route added without its operation,
// or the reverse, fails here; edit gateway/openapi.json and docs/gateway.md
// together with the route.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(openapicheck.Watch(t, newGateway(t)))
	t.Cleanup(srv.Close)
	doc := servedDocument(t, srv.URL)

	routes := append([]string(nil), composedRoutes...)
	for _, file := range muxSources {
		found, err := muxRoutes(file)
		if err != nil {
			t.Fatal(err)
		}
		if len(found) == 0 {
			t.Fatalf("%s: no route registrations found; the scan is broken", file)
		}
		routes = append(routes, found...)
	}
	missing, extra := openapicheck.Diff(routes, doc.Operations())
	for _, r := range missing {
		t.Errorf("route %s is served but not in openapi.json", r)
	}
	for _, o := range extra {
		t.Errorf("openapi.json describes %s, which is not served", o)
	}

	// The composed routes exist on the running gateway: none of them is
	// answered as an unknown route.
	for _, route := range composedRoutes {
		method, path, _ := strings.Cut(route, " ")
		path = strings.NewReplacer("{connection_id}", "github", "{path}", "user").Replace(path)
		req, _ := http.NewRequest(method, srv.URL+path, nil)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode == http.StatusNotFound || res.StatusCode == http.StatusMethodNotAllowed {
			t.Errorf("%s %s: %d %s; the route is not served", method, path, res.StatusCode, body)
		}
	}
	res, err := http.Get(srv.URL + "/no-such-route")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusNotFound {
		t.Fatalf("GET /no-such-route: %d; the probe cannot tell served routes from others", res.StatusCode)
	}
}

// TestReferenceListsRoutes: docs/gateway.md names every path of the
// document in backticks.
func TestReferenceListsRoutes(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(openapicheck.Watch(t, newGateway(t)))
	t.Cleanup(srv.Close)
	doc := servedDocument(t, srv.URL)
	ref, err := os.ReadFile("../docs/gateway.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range doc.Operations() {
		_, path, _ := strings.Cut(op, " ")
		if !bytes.Contains(ref, []byte("`"+path+"`")) {
			t.Errorf("docs/gateway.md does not list %s", op)
		}
	}
}

func newGateway(t *testing.T) *gateway.Gateway {
	t.Helper()
	gw, err := gateway.New(minimalConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Close() })
	return gw
}

// servedDocument fetches /openapi.json and checks it is a valid 3.1
// document.
func servedDocument(t *testing.T, base string) *openapicheck.Document {
	t.Helper()
	res, err := http.Get(base + "/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "application/json" || !json.Valid(raw) {
		t.Fatalf("GET /openapi.json: %d %q", res.StatusCode, res.Header.Get("Content-Type"))
	}
	doc, err := openapicheck.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// muxRoutes reads the ServeMux registrations of a source file, as "METHOD
// /path": X.Handle or X.HandleFunc with a pattern that is a string literal
// "METHOD /path"; a literal "/path" whose handler is
// h.methods(map[string]http.HandlerFunc{http.MethodGet: …}), the admin
// API's per-path method table; or method+" /path" inside a range over
// []string{http.MethodPost, …}. The catch-all "/" is the 404 of the mux
// and is left out. Any other shape of registration is an error, so a route
// cannot slip past unseen.
func muxRoutes(file string) ([]string, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, file, nil, 0)
	if err != nil {
		return nil, err
	}
	ranged := map[string][]string{} // range variable → the methods it takes
	ast.Inspect(f, func(n ast.Node) bool {
		if rs, ok := n.(*ast.RangeStmt); ok {
			if v, ok := rs.Value.(*ast.Ident); ok {
				if lit, ok := rs.X.(*ast.CompositeLit); ok {
					ranged[v.Name] = methodNames(lit.Elts)
				}
			}
		}
		return true
	})
	var routes []string
	var problems []string
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok || (sel.Sel.Name != "Handle" && sel.Sel.Name != "HandleFunc") || len(call.Args) != 2 {
			return true
		}
		at := fset.Position(call.Pos()).String()
		switch p := call.Args[0].(type) {
		case *ast.BasicLit:
			pattern, _ := strconv.Unquote(p.Value)
			if strings.Contains(pattern, " ") {
				routes = append(routes, pattern)
				return true
			}
			if pattern == "/" {
				return true
			}
			methods := tableMethods(call.Args[1])
			if len(methods) == 0 {
				problems = append(problems, fmt.Sprintf("%s: pattern %q has no method and no method table", at, pattern))
			}
			for _, m := range methods {
				routes = append(routes, m+" "+pattern)
			}
		case *ast.BinaryExpr:
			v, okV := p.X.(*ast.Ident)
			lit, okL := p.Y.(*ast.BasicLit)
			if !okV || !okL || len(ranged[v.Name]) == 0 {
				problems = append(problems, at+": a pattern built in a way this scan cannot read")
				return true
			}
			path, _ := strconv.Unquote(lit.Value)
			for _, m := range ranged[v.Name] {
				routes = append(routes, m+path)
			}
		default:
			problems = append(problems, at+": a pattern that is not a literal")
		}
		return true
	})
	if len(problems) > 0 {
		return nil, fmt.Errorf("%s", strings.Join(problems, "; "))
	}
	for i, r := range routes {
		if routes[i], err = openapicheck.Route(r); err != nil {
			return nil, err
		}
	}
	return routes, nil
}

// tableMethods reads h.methods(map[string]http.HandlerFunc{http.MethodGet: …}).
func tableMethods(e ast.Expr) []string {
	call, ok := e.(*ast.CallExpr)
	if !ok || len(call.Args) != 1 {
		return nil
	}
	if sel, ok := call.Fun.(*ast.SelectorExpr); !ok || sel.Sel.Name != "methods" {
		return nil
	}
	lit, ok := call.Args[0].(*ast.CompositeLit)
	if !ok {
		return nil
	}
	var keys []ast.Expr
	for _, el := range lit.Elts {
		if kv, ok := el.(*ast.KeyValueExpr); ok {
			keys = append(keys, kv.Key)
		}
	}
	return methodNames(keys)
}

// methodNames turns http.MethodGet, … into GET, …; anything else is left out.
func methodNames(exprs []ast.Expr) []string {
	var out []string
	for _, e := range exprs {
		sel, ok := e.(*ast.SelectorExpr)
		if !ok {
			continue
		}
		if x, ok := sel.X.(*ast.Ident); !ok || x.Name != "http" || !strings.HasPrefix(sel.Sel.Name, "Method") {
			continue
		}
		out = append(out, strings.ToUpper(strings.TrimPrefix(sel.Sel.Name, "Method")))
	}
	return out
}
