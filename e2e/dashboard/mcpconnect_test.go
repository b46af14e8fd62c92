package dashboard_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/idnhq/idn/e2e/internal/oauthoptest"
	"github.com/idnhq/idn/identity"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// TestGatewayMCPOAuthConnectFromDashboard: the owner connects alice's
// account to a protected MCP server (the go-sdk's, behind its bearer
// middleware) from the gateway page. The gateway finds the server's
// authorization server from its 401; Chromium signs in there, and the
// control plane relays the redirect. An agent acting for alice then
// calls a tool as alice.
func TestGatewayMCPOAuthConnectFromDashboard(t *testing.T) {
	chromium(t)
	agent, err := identity.New("agent-files")
	if err != nil {
		t.Fatal(err)
	}
	p := pairFromDashboard(t, agent, "files", "Files", "mcp-connect-laptop")
	b, gwAddr := p.b, p.addr
	callback := p.w.base + "/oauth/callback"
	as := oauthoptest.New(t, callback)
	server := protectedFiles(t, as)

	step(t, "add an MCP connection in oauth2_authorization_code mode")
	choose := func(id, value string) {
		t.Helper()
		eval[bool](b, `(() => { const s = document.getElementById("`+id+`"); s.value = "`+value+`"; s.dispatchEvent(new Event("change", {bubbles: true})); return true; })()`)
	}
	choose("conn-protocol", "mcp")
	choose("conn-mode", "oauth2_authorization_code")
	b.fill("Connection id", "files")
	b.fill("Name", "Files")
	b.fill("Service", "files")
	b.fill("Base URL", server)
	b.fill("MCP endpoint", "/mcp")
	b.fill("Issuer", as.URL())
	b.fill("Client id", oauthoptest.ClientID)
	b.fill("Client secret", oauthoptest.ClientSecret)
	b.press("checkbox", "One account per subject")
	b.press("button", "Add connection")
	b.said("Connection files added.")
	b.waitFor(`document.querySelector("tr[data-connection=files] form.connect")`, 10*time.Second)

	step(t, "Connect alice: the gateway discovers the server's authorization server")
	as.SignIn("alice-user")
	b.fill("Subject whose account to connect to Files", "alice")
	b.press("button", "Connect an account to Files")
	b.waitFor(`!!document.querySelector("[data-connected=files]")`, 20*time.Second)
	if got := eval[string](b, `document.querySelector("[data-connected=files]").textContent`); !strings.Contains(got, "The account of alice is connected to files.") {
		t.Fatalf("the result page says %q", got)
	}

	step(t, "an agent acting for alice calls a tool as alice")
	call := func(subject string) (int, string) {
		req, _ := http.NewRequest("POST", "http://"+gwAddr+"/mcp/files/tools/whoami/call", strings.NewReader(`{}`))
		req.Header.Set("Content-Type", "application/json")
		if err := agent.Sign(req, identity.SignOptions{Subject: subject}); err != nil {
			t.Fatal(err)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(body)
	}
	// The serving process reads the account the link's process stored.
	eventually(t, 10*time.Second, "alice's tool call served", func() bool {
		status, body := call("alice")
		return status == http.StatusOK && strings.Contains(body, "user=alice-user")
	})
	if status, body := call("bob"); status != http.StatusForbidden || !strings.Contains(body, "UPSTREAM_AUTH_REQUIRED") {
		t.Fatalf("bob's call, who has no account: %d %s", status, body)
	}

	step(t, "the Activity page names the account that served alice's tool call")
	eventually(t, 20*time.Second, "alice's tool call on the Activity page", func() bool {
		b.open("/activity?connection=files")
		return eval[bool](b, `[...document.querySelectorAll("[data-account]")].some(a => a.textContent === "account alice")`)
	})
}

// protectedFiles is the go-sdk's MCP server at /mcp behind
// auth.RequireBearerToken, with as as its authorization server (RFC 9728
// metadata); its whoami tool names the token's user.
func protectedFiles(t *testing.T, as *oauthoptest.Server) string {
	t.Helper()
	server := mcp.NewServer(&mcp.Implementation{Name: "files", Version: "1"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "whoami"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "user=" + req.Extra.TokenInfo.UserID}}}, nil, nil
	})
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	prm := srv.URL + "/.well-known/oauth-protected-resource/mcp"
	mux.Handle("/.well-known/oauth-protected-resource/mcp", auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{
		Resource: srv.URL + "/mcp", AuthorizationServers: []string{as.URL()}, ScopesSupported: []string{"openid", "files:read"}}))
	verify := func(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		user, scopes, expires, ok := as.Grant(token)
		if !ok {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: user, Scopes: scopes, Expiration: expires}, nil
	}
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)
	mux.Handle("/mcp", auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{ResourceMetadataURL: prm, Scopes: []string{"files:read"}})(handler))
	return srv.URL
}
