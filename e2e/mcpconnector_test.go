package e2e

import (
	"maps"
	"net/url"
	"strings"
	"testing"

	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/e2e/internal/oauthoptest"
	"github.com/idnhq/idn/mcpproxy"
)

// The dashboard connects an MCP server's accounts through the gateway's
// Connector: Start discovers the server's authorization server from its
// 401 and answers the authorization URL (PKCE, resource); the browser
// signs in at the real provider; Finish exchanges the code and stores
// the account, which then serves its subject's tool calls.
func TestOAuthMCPConnectThroughTheConnector(t *testing.T) {
	t.Parallel()
	const redirect = "http://127.0.0.1:1/oauth/callback" // the control plane's; the browser stops at it
	as := oauthoptest.New(t, redirect)
	server := newProtectedMCP(t, as)
	w := newWorld(t)
	gw := startGateway(t, w, nil, conn{c: credvault.Connection{ID: "files", Service: "github", Protocol: credvault.ProtocolMCP,
		BaseURL: server.srv.URL, Extensions: mcpproxy.Settings{Endpoint: "/mcp"}.Members(), AuthMode: credvault.AuthOAuth2AuthorizationCode,
		OAuthClientID: oauthoptest.ClientID, AuthSecretKey: "client_secret", OAuthPerSubject: true},
		secrets: map[string]string{"client_secret": oauthoptest.ClientSecret}})
	up(t, gw)
	connector := gw.gw.Connector()
	ctx := t.Context()

	started, err := connector.Start(ctx, "files", "alice", redirect)
	if err != nil {
		t.Fatal(err)
	}
	authURL, err := url.Parse(started.AuthorizationURL)
	if err != nil {
		t.Fatal(err)
	}
	if q := authURL.Query(); !strings.HasPrefix(started.AuthorizationURL, as.URL()) || q.Get("resource") != server.srv.URL+"/mcp" ||
		q.Get("code_challenge_method") != "S256" || q.Get("redirect_uri") != redirect || q.Get("state") != started.State {
		t.Fatalf("authorization URL %s", started.AuthorizationURL)
	}
	answer, err := browser(as, "alice-user", redirect)(ctx, started.AuthorizationURL)
	if err != nil {
		t.Fatal(err)
	}

	// Each attack spends a flow of its own: a refused answer ends it.
	other := func(subject string) url.Values {
		t.Helper()
		s, err := connector.Start(ctx, "files", subject, redirect)
		if err != nil {
			t.Fatal(err)
		}
		q, err := browser(as, "mallory-user", redirect)(ctx, s.AuthorizationURL)
		if err != nil {
			t.Fatal(err)
		}
		return q
	}
	with := func(q url.Values, k, v string) url.Values {
		q = maps.Clone(q)
		q.Set(k, v)
		return q
	}
	for _, tt := range []struct {
		name, subject string
		q             url.Values
	}{
		{name: "attack: a state no flow was started with", subject: "alice", q: with(answer, "state", "forged")},
		{name: "attack: bob's flow finished as alice's", subject: "alice", q: other("bob")},
		{name: "attack: a mix-up's issuer (RFC 9207)", subject: "bob", q: with(other("bob"), "iss", "https://evil.example")},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := connector.Finish(ctx, "files", tt.subject, tt.q)
			if err == nil {
				t.Fatal("finished")
			}
		})
	}
	if c, _ := gw.gw.Vault().Connection("files"); len(c.OAuthAccounts) != 0 {
		t.Fatalf("accounts after the attacks: %+v", c.OAuthAccounts)
	}

	got, err := connector.Finish(ctx, "files", "alice", answer)
	if err != nil {
		t.Fatal(err)
	}
	if got.ConnectionID != "files" || got.Subject != "alice" || got.Status != credvault.AccountConnected {
		t.Fatalf("finished: %+v", got)
	}
	c, _ := gw.gw.Vault().Connection("files")
	if a, ok := c.Account("alice"); !ok || a.Status != credvault.AccountConnected || c.OAuthIssuer != as.URL() {
		t.Fatalf("connection after the flow: %+v", c)
	}
	if text, ok := callText(t, mcpAs(t, gw.url+"/mcp/files", w.agent, "alice"), "whoami"); !ok || !strings.HasPrefix(text, "user=alice-user ") {
		t.Fatalf("alice's call after connecting: %v %s", ok, text)
	}
	t.Run("a flow's state is used once", func(t *testing.T) {
		if _, err := connector.Finish(ctx, "files", "alice", answer); err == nil {
			t.Fatal("finished twice")
		}
	})
}
