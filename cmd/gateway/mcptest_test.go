package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestCLITestsAnMCPConnectionWithAHandshake: gateway test on an mcp
// connection runs initialize and tools/list with the stored credential
// (an HTTP GET of the server's base URL would be answered 404), says what
// the server is, and fails with the handshake's reason when the
// credential is refused.
func TestCLITestsAnMCPConnectionWithAHandshake(t *testing.T) {
	t.Parallel()
	const token = "mcp-cli-token-58c1e2"
	s := mcp.NewServer(&mcp.Implementation{Name: "docs-server", Version: "2.4.0"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "docs.search", Description: "Searches the docs."},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{}, nil, nil
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/mcp" {
			http.NotFound(w, r)
			return
		}
		if r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, "no token", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	defer up.Close()
	c := newCLIRunner(t)
	for _, conn := range []struct{ id, secret string }{{"docs", token}, {"refused", "not-the-token-77"}} {
		if r := c.run("add", "--id", conn.id, "--protocol", "mcp", "--base-url", up.URL, "--mcp-endpoint", "/mcp",
			"--auth-mode", "bearer", "--auth-secret-key", "token", "--secret", "token="+conn.secret); r.code != 0 {
			t.Fatalf("add %s: %+v", conn.id, r)
		}
	}
	r := c.run("test", "--id", "docs")
	if r.code != 0 || !strings.Contains(r.stdout, `docs: ok server="docs-server" version="2.4.0"`) || !strings.Contains(r.stdout, "tools=1") {
		t.Fatalf("test of a working MCP server: %+v", r)
	}
	if r = c.run("test", "--id", "docs", "--json"); r.code != 0 || !strings.Contains(r.stdout, `"server_name": "docs-server"`) {
		t.Fatalf("test --json: %+v", r)
	}
	r = c.run("test", "--id", "refused")
	if r.code != 1 || !strings.Contains(r.stdout, "refused: failed status=401") || !strings.Contains(r.stderr, "test failed") {
		t.Fatalf("test with a refused credential: %+v", r)
	}
	if strings.Contains(r.stdout+r.stderr, "not-the-token-77") {
		t.Fatalf("the secret is in the output: %+v", r)
	}
	if r = c.run("list", "--json"); !strings.Contains(r.stdout, `"last_test"`) {
		t.Fatalf("the test was not recorded: %+v", r)
	}
}
