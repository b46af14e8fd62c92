package gateway_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idnhq/idn/gateway"
	"github.com/idnhq/idn/kit/openapicheck"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// annotatedServer is the MCP Go SDK's own server with tools that carry
// hints, answering only requests with the bearer token.
func annotatedServer(t *testing.T, token string) *httptest.Server {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: "docs-server", Version: "2.4.0"}, nil)
	yes, no := true, false
	noop := func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{}, nil, nil
	}
	mcp.AddTool(s, &mcp.Tool{Name: "docs.search", Title: "Search", Description: "Searches the docs.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: &no}}, noop)
	mcp.AddTool(s, &mcp.Tool{Name: "docs.delete", Description: "Deletes a page.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: &yes, IdempotentHint: true}}, noop)
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, "no token", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestAdminTestsAnMCPConnectionWithAHandshake: the admin test route
// tests an mcp connection with initialize and tools/list, with the stored
// credential, and says what the server is or what failed; it is not an
// HTTP GET of the base URL (which an MCP server answers 404 or 405).
// Discovery keeps the tools' hints. The answers are checked against the
// OpenAPI document.
func TestAdminTestsAnMCPConnectionWithAHandshake(t *testing.T) {
	t.Parallel()
	const token = "mcp-token-3c9d0e5a71"
	up := annotatedServer(t, token)
	cfg := minimalConfig(t)
	cfg.InsecureUnsignedAdminChecks = true
	cfg.ServiceAPIKey = "idn_sk_docs" // the connections' claims are not under test
	gw, err := gateway.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer gw.Close()
	srv := httptest.NewServer(openapicheck.Watch(t, gw))
	defer srv.Close()
	post := func(path, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("POST", srv.URL+path, strings.NewReader(body))
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	for _, c := range []struct{ id, endpoint, secret string }{{"docs", "/mcp", token}, {"wrong-token", "/mcp", "not-the-token-1"}} {
		if status, body := post("/api/admin/connections", fmt.Sprintf(`{"id":%q,"protocol":"mcp","base_url":%q,"mcp_endpoint":%q,
			"auth_mode":"bearer","auth_secret_key":"token","secrets":{"token":%q}}`, c.id, up.URL, c.endpoint, c.secret)); status != http.StatusCreated {
			t.Fatalf("create %s: %d %s", c.id, status, body)
		}
	}

	got := adminJSON(t, "POST", srv.URL+"/api/admin/connections/docs/test", "")
	hs, _ := got["mcp"].(map[string]any)
	if got["ok"] != true || got["status"] != 200.0 || hs["server_name"] != "docs-server" || hs["server_version"] != "2.4.0" ||
		hs["protocol_version"] == "" || hs["tools"] != 2.0 {
		t.Fatalf("test of a working MCP server = %v", got)
	}
	if last := adminJSON(t, "GET", srv.URL+"/api/admin/connections/docs", "")["last_test"].(map[string]any); last["ok"] != true {
		t.Fatalf("last_test = %v", last)
	}

	got = adminJSON(t, "POST", srv.URL+"/api/admin/connections/wrong-token/test", "")
	if got["ok"] != false || got["status"] != 401.0 || got["error"] != "initialize: the MCP endpoint answered HTTP 401 Unauthorized" || got["mcp"] != nil {
		t.Fatalf("test with a credential the server refuses = %v", got)
	}
	for _, body := range []string{`{"path":"/"}`, `{"method":"GET"}`} {
		if status, answer := post("/api/admin/connections/docs/test", body); status != http.StatusBadRequest || !strings.Contains(answer, `"VALIDATION_ERROR"`) {
			t.Errorf("test of an mcp connection with %s: %d %s", body, status, answer)
		}
	}

	d := adminJSON(t, "POST", srv.URL+"/api/admin/connections/docs/discover", "")
	hints := map[string]any{}
	for _, tool := range d["tools"].([]any) {
		tool := tool.(map[string]any)
		hints[tool["name"].(string)] = tool["annotations"]
	}
	if fmt.Sprint(hints["docs.search"]) != "map[idempotent_hint:false open_world_hint:false read_only_hint:true]" ||
		fmt.Sprint(hints["docs.delete"]) != "map[destructive_hint:true idempotent_hint:true read_only_hint:false]" {
		t.Fatalf("discovered hints = %v", hints)
	}
}
