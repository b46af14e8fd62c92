package mcpproxy_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idnhq/idn/mcpproxy"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestProbe: a connection test is a handshake of its own (initialize,
// then tools/list) with the credential, whatever the shared session and
// the breaker say, and its failure says what failed without a secret.
func TestProbe(t *testing.T) {
	t.Parallel()
	const token = "PROBE-SECRET-5e0c1a"
	cred := &credTransport{token: token}
	e := newEnv(t, mcpproxy.Config{Options: mcpproxy.Options{BreakerFailures: 1, MaxRetries: -1}}, mcpproxy.Connection{Transport: cred, Redact: []string{token}})
	conn, _ := e.src.MCPConnection(context.Background(), "mcp1")

	p, err := e.proxy.Probe(context.Background(), conn)
	if err != nil {
		t.Fatal(err)
	}
	if p.ServerName != "test-upstream" || p.ServerVersion != "1.2.3" || p.ProtocolVersion == "" || p.Tools != 6 || p.Status != http.StatusOK {
		t.Fatalf("probe = %+v", p)
	}
	if e.up.count("initialize") != 1 || e.up.count("tools/list") != 1 {
		t.Fatalf("upstream saw initialize %d, tools/list %d", e.up.count("initialize"), e.up.count("tools/list"))
	}
	e.up.mu.Lock()
	auth := e.up.seen[0].Get("Authorization")
	e.up.mu.Unlock()
	if auth != "Bearer "+token {
		t.Fatalf("the probe sent Authorization %q", auth)
	}
	// A second probe is a second handshake, not the first one's session.
	if _, err := e.proxy.Probe(context.Background(), conn); err != nil || e.up.count("initialize") != 2 {
		t.Fatalf("second probe: %v, %d initializes", err, e.up.count("initialize"))
	}

	for _, tc := range []struct {
		name   string
		method string
		status int
		want   string
	}{
		{"initialize refused", "initialize", http.StatusUnauthorized, "initialize: the MCP endpoint answered HTTP 401 Unauthorized"},
		{"listing fails", "tools/list", http.StatusInternalServerError, "tools/list: the MCP endpoint answered HTTP 500 Internal Server Error"},
	} {
		e.up.fail(tc.method, tc.status)
		p, err := e.proxy.Probe(context.Background(), conn)
		var ue *mcpproxy.UpstreamError
		if !errors.As(err, &ue) || ue.Message != tc.want || p.Status != tc.status {
			t.Errorf("%s: probe = %+v, %v; want %q", tc.name, p, err, tc.want)
		}
		if tc.method == "tools/list" && p.ServerName != "test-upstream" {
			t.Errorf("%s: what initialize said is lost: %+v", tc.name, p)
		}
	}
	// Both failures above would have opened a breaker of one failure; the
	// probes neither met nor fed it.
	if _, err := e.proxy.Probe(context.Background(), conn); err != nil {
		t.Fatalf("probe after failures: %v", err)
	}

	e.up.srv.Close()
	p, err = e.proxy.Probe(context.Background(), conn)
	if err == nil || p.Status != 0 || !strings.HasPrefix(err.(*mcpproxy.UpstreamError).Message, "initialize: ") {
		t.Fatalf("probe of a closed server = %+v, %v", p, err)
	}
	cred.leakErr.Store(true)
	if _, err := e.proxy.Probe(context.Background(), conn); err == nil || strings.Contains(err.Error(), token) {
		t.Fatalf("a transport error that quotes the secret: %v", err)
	}
}

// TestDiscoveryKeepsAnnotations: discovery records each tool's hints as
// the server declared them, absent ones absent.
func TestDiscoveryKeepsAnnotations(t *testing.T) {
	t.Parallel()
	s := mcp.NewServer(&mcp.Implementation{Name: "hints", Version: "1"}, nil)
	yes, no := true, false
	noop := func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{}, nil, nil
	}
	mcp.AddTool(s, &mcp.Tool{Name: "read", Annotations: &mcp.ToolAnnotations{Title: "Read it", ReadOnlyHint: true, OpenWorldHint: &no}}, noop)
	mcp.AddTool(s, &mcp.Tool{Name: "wipe", Annotations: &mcp.ToolAnnotations{DestructiveHint: &yes, IdempotentHint: true}}, noop)
	mcp.AddTool(s, &mcp.Tool{Name: "plain"}, noop)
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(srv.Close)
	p, err := mcpproxy.New(mcpproxy.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	d, err := p.Discover(context.Background(), &mcpproxy.Connection{ID: "h", BaseURL: srv.URL}, mcpproxy.RefreshForce)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*mcpproxy.ToolAnnotations{}
	for _, tool := range d.Tools {
		got[tool.Name] = tool.Annotations
	}
	if a := got["read"]; a == nil || a.Title != "Read it" || !a.ReadOnlyHint || a.DestructiveHint != nil || a.OpenWorldHint == nil || *a.OpenWorldHint {
		t.Errorf("read: %+v", a)
	}
	if a := got["wipe"]; a == nil || a.ReadOnlyHint || a.DestructiveHint == nil || !*a.DestructiveHint || !a.IdempotentHint || a.OpenWorldHint != nil {
		t.Errorf("wipe: %+v", a)
	}
	if a := got["plain"]; a != nil {
		t.Errorf("plain has annotations %+v", a)
	}
}
