package proxy

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type echoArgs struct {
	Text string `json:"text"`
}

// mcpUpstream is a real go-sdk MCP server that insists on the injected
// credential.
func mcpUpstream(t *testing.T) (*httptest.Server, *atomic.Int32) {
	s := mcp.NewServer(&mcp.Implementation{Name: "upstream", Version: "1.0.0"}, nil)
	for _, name := range []string{"docs.search", "admin.wipe"} {
		mcp.AddTool(s, &mcp.Tool{Name: name}, func(_ context.Context, _ *mcp.CallToolRequest, a echoArgs) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echo:" + a.Text}}}, nil, nil
		})
	}
	var calls atomic.Int32
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+upstreamToken || r.Header.Get("Idn-Namespace") != "" {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		calls.Add(1)
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, &calls
}

// The MCP routes run through the same signed pipeline as /proxy.
func TestMCPThroughPipeline(t *testing.T) {
	up, calls := mcpUpstream(t)
	g := newGateway(t, gatewayOptions{mcpUpstream: up.URL})

	a := g.do(g.request(g.agent, "GET", "/mcp/tools/tools", ""))
	if a.status != 200 || !strings.Contains(string(a.body), "docs.search") || strings.Contains(string(a.body), "admin.wipe") {
		t.Fatalf("tools: %d %s", a.status, a.body)
	}
	a = g.do(g.request(g.agent, "POST", "/mcp/tools/tools/docs.search/call", `{"text":"hi"}`))
	if a.status != 200 || !strings.Contains(string(a.body), "echo:hi") || a.env["is_error"] != false {
		t.Fatalf("call: %d %s", a.status, a.body)
	}
	before := calls.Load()
	a = g.do(g.request(g.agent, "POST", "/mcp/tools/tools/admin.wipe/call", `{"text":"x"}`))
	if a.status != 403 || a.env["code"] != "MCP_TOOL_FORBIDDEN" || calls.Load() != before {
		t.Fatalf("denied tool: %d %v, upstream calls %d→%d", a.status, a.env["code"], before, calls.Load())
	}

	// Unsigned, unapproved and wrong-protocol requests never reach the MCP proxy.
	unsigned, _ := http.NewRequest("GET", g.srv.URL+"/mcp/tools/tools", nil)
	if a := g.do(unsigned); a.status != 403 || a.env["code"] != "AUTH_IDENTITY_INVALID" {
		t.Errorf("unsigned: %d %v", a.status, a.env["code"])
	}
	if a := g.do(g.request(g.stranger, "GET", "/mcp/tools/tools", "")); a.status != 403 || a.env["code"] != "AUTH_CLAIM_REQUIRED" {
		t.Errorf("unapproved: %d %v", a.status, a.env["code"])
	}
	if a := g.do(g.request(g.agent, "GET", "/mcp/github/tools", "")); a.status != 400 || a.env["code"] != CodeProtocolMismatch {
		t.Errorf("http connection on /mcp: %d %v", a.status, a.env["code"])
	}
	if a := g.do(g.request(g.agent, "GET", "/proxy/tools/x", "")); a.status != 400 || a.env["code"] != CodeProtocolMismatch {
		t.Errorf("mcp connection on /proxy: %d %v", a.status, a.env["code"])
	}
}

// A request that did not pass the pipeline is refused by MCPCaller.
func TestMCPCallerRequiresPipeline(t *testing.T) {
	if _, err := MCPCaller(httptest.NewRequest("GET", "/mcp/x/tools", nil)); err == nil {
		t.Fatal("MCPCaller accepted a request that bypassed the pipeline")
	}
}
