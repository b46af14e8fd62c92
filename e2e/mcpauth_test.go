package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/credvault/sqlitestore"
	"github.com/idnhq/idn/e2e/internal/oauthoptest"
	"github.com/idnhq/idn/gateway"
	"github.com/idnhq/idn/identity"
	"github.com/idnhq/idn/mcpproxy"
	"github.com/idnhq/idn/upstreamauth"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// protectedMCP is the go-sdk's MCP server behind its own auth middleware
// (auth.RequireBearerToken), with the provider as its authorization
// server: whoami needs files:read, write needs files:write too, which
// the server asks for with a 403 insufficient_scope (a step-up). seen
// collects every Authorization it was sent.
type protectedMCP struct {
	srv  *httptest.Server
	mu   sync.Mutex
	seen []string
}

func newProtectedMCP(t *testing.T, as *oauthoptest.Server) *protectedMCP {
	p := &protectedMCP{}
	server := mcp.NewServer(&mcp.Implementation{Name: "files", Version: "1"}, nil)
	whoami := func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		info := req.Extra.TokenInfo
		// A careless server echoes the token it got.
		bearer := req.Extra.Header.Get("Authorization")
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "user=" + info.UserID + " auth=" + bearer}}}, nil, nil
	}
	mcp.AddTool(server, &mcp.Tool{Name: "whoami"}, whoami)
	mcp.AddTool(server, &mcp.Tool{Name: "write"}, whoami)
	// A server that echoes the token JSON-escaped, which no byte-for-byte
	// search finds.
	mcp.AddTool(server, &mcp.Tool{Name: "echo_escaped"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		token := strings.TrimPrefix(req.Extra.Header.Get("Authorization"), "Bearer ")
		escaped := fmt.Sprintf(`\u%04x`, token[0]) + token[1:]
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echoed"}},
			StructuredContent: json.RawMessage(`{"authorization":"Bearer ` + escaped + `"}`)}, nil, nil
	})
	mux := http.NewServeMux()
	p.srv = httptest.NewServer(mux)
	t.Cleanup(p.srv.Close)
	resource, prm := p.srv.URL+"/mcp", p.srv.URL+"/.well-known/oauth-protected-resource/mcp"
	mux.Handle("/.well-known/oauth-protected-resource/mcp", auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{
		Resource: resource, AuthorizationServers: []string{as.URL()}, ScopesSupported: []string{"openid", "files:read"}}))
	verify := func(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		user, scopes, expires, ok := as.Grant(token)
		if !ok {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: user, Scopes: scopes, Expiration: expires}, nil
	}
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)
	protected := auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{ResourceMetadataURL: prm, Scopes: []string{"files:read"}})(stepUp(handler, prm))
	mux.Handle("/mcp", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.seen = append(p.seen, r.Header.Get("Authorization"))
		p.mu.Unlock()
		protected.ServeHTTP(w, r)
	}))
	return p
}

// stepUp answers a tools/call of write without files:write 403
// insufficient_scope, naming the scopes it needs (RFC 6750 §3.1).
func stepUp(next http.Handler, prm string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		var msg struct {
			Method string `json:"method"`
			Params struct {
				Name string `json:"name"`
			} `json:"params"`
		}
		_ = json.Unmarshal(body, &msg)
		info := auth.TokenInfoFromContext(r.Context())
		if msg.Method == "tools/call" && msg.Params.Name == "write" && !slices.Contains(info.Scopes, "files:write") {
			w.Header().Set("WWW-Authenticate", `Bearer error="insufficient_scope", scope="files:read files:write", resource_metadata="`+prm+`"`)
			http.Error(w, "insufficient scope", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (p *protectedMCP) tokens() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, s := range p.seen {
		if t, ok := strings.CutPrefix(s, "Bearer "); ok {
			out = append(out, t)
		}
	}
	return out
}

// browser follows the provider's pages as a signed-in user's browser
// would, and returns the query of the redirect to redirectURI.
func browser(as *oauthoptest.Server, user, redirectURI string) func(context.Context, string) (url.Values, error) {
	return func(ctx context.Context, authURL string) (url.Values, error) {
		as.SignIn(user)
		var got url.Values
		client := &http.Client{CheckRedirect: func(req *http.Request, _ []*http.Request) error {
			if strings.HasPrefix(req.URL.String(), redirectURI) {
				got = req.URL.Query()
				return http.ErrUseLastResponse
			}
			return nil
		}}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, authURL, nil)
		if err != nil {
			return nil, err
		}
		resp, err := client.Do(req)
		if err != nil {
			return nil, err
		}
		resp.Body.Close()
		if got == nil {
			return nil, errors.New("the provider did not redirect back")
		}
		return got, nil
	}
}

// mcpAs opens an MCP session with the gateway's endpoint for connection
// id as agent acting for subject.
func mcpAs(t *testing.T, endpoint string, agent *identity.Identity, subject string) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, nil)
	cs, err := client.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: endpoint,
		HTTPClient: &http.Client{Transport: agent.Transport(nil, identity.SignOptions{Subject: subject})}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// callText calls tool and returns its text, or the error's with its
// data (the gateway's code).
func callText(t *testing.T, cs *mcp.ClientSession, tool string) (string, bool) {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: tool})
	if err != nil {
		var rpc *jsonrpc.Error
		if errors.As(err, &rpc) {
			return rpc.Message + " " + string(rpc.Data), false
		}
		return err.Error(), false
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String(), !res.IsError
}

func TestOAuthMCPAuthorizationAgainstARealProvider(t *testing.T) {
	t.Parallel()
	const redirect = "http://127.0.0.1:1/callback" // never reached: the browser stops at it
	as := oauthoptest.New(t, redirect)
	server := newProtectedMCP(t, as)
	w := newWorld(t)
	logs := &lockedBuffer{}
	gw := startGateway(t, w, func(c *gateway.Config) {
		c.Logger = slog.New(slog.NewJSONHandler(logs, nil))
	}, conn{c: credvault.Connection{ID: "files", Service: "github", Protocol: credvault.ProtocolMCP, BaseURL: server.srv.URL,
		Extensions: mcpproxy.Settings{Endpoint: "/mcp"}.Members(), AuthMode: credvault.AuthOAuth2AuthorizationCode,
		OAuthClientID: oauthoptest.ClientID, AuthSecretKey: "client_secret", OAuthPerSubject: true},
		secrets: map[string]string{"client_secret": oauthoptest.ClientSecret}},
		conn{c: credvault.Connection{ID: "svc", Service: "github", Protocol: credvault.ProtocolMCP, BaseURL: server.srv.URL,
			Extensions: mcpproxy.Settings{Endpoint: "/mcp"}.Members(), AuthMode: credvault.AuthOAuth2ClientCredentials,
			OAuthTokenURL: as.URL() + "/oauth/token", OAuthClientID: oauthoptest.ServiceID, OAuthScopes: []string{"files:read"},
			AuthSecretKey: "client_secret"}, secrets: map[string]string{"client_secret": oauthoptest.ServiceKey}})
	up(t, gw)
	vault := gw.gw.Vault()
	tokens, err := upstreamauth.New(upstreamauth.Config{Vault: vault})
	if err != nil {
		t.Fatal(err)
	}
	endpoint := gw.url + "/mcp/files"
	connect := func(t *testing.T, subject, user string) *upstreamauth.MCPGrant {
		t.Helper()
		g, err := gateway.ConnectMCPAccount(t.Context(), vault, tokens, "files",
			upstreamauth.MCPConnect{Subject: subject, RedirectURI: redirect, Authorize: browser(as, user, redirect)})
		if err != nil {
			t.Fatal(err)
		}
		return g
	}

	t.Run("a subject without an account is told what the owner must do", func(t *testing.T) {
		text, ok := callText(t, mcpAs(t, endpoint, w.agent, "alice"), "whoami")
		if ok || !strings.Contains(text, `gateway connect files --subject "alice"`) || !strings.Contains(text, `"code":"UPSTREAM_AUTH_REQUIRED"`) {
			t.Fatalf("call without an account: %v %s", ok, text)
		}
	})

	t.Run("a client credentials connection serves the gateway's own token", func(t *testing.T) {
		text, ok := callText(t, mcpAs(t, gw.url+"/mcp/svc", w.agent, "alice"), "whoami")
		if !ok || !strings.HasPrefix(text, "user="+oauthoptest.ServiceID+" ") {
			t.Fatalf("whoami on the client credentials connection: %v %s", ok, text)
		}
	})

	g := connect(t, "alice", "alice-user")
	connect(t, "bob", "bob-user")

	t.Run("the connect flow found the server's authorization server and asked for its resource", func(t *testing.T) {
		c, _ := vault.Connection("files")
		if g.Registration != upstreamauth.RegistrationPreregistered || g.Client.Issuer != as.URL() ||
			g.Client.Resource != server.srv.URL+"/mcp" || c.OAuthResource != g.Client.Resource || c.OAuthIssuer != as.URL() {
			t.Fatalf("grant %+v, connection %+v", g, c)
		}
		if g.Grant.RefreshToken == "" || !slices.Contains(g.Scopes, "files:read") || !slices.Contains(g.Scopes, "offline_access") {
			t.Fatalf("grant: refresh token %t, scopes %v", g.Grant.RefreshToken != "", g.Scopes)
		}
	})

	alice := mcpAs(t, endpoint, w.agent, "alice")
	t.Run("each subject is served its own account", func(t *testing.T) {
		for subject, cs := range map[string]*mcp.ClientSession{"alice": alice, "bob": mcpAs(t, endpoint, w.agent, "bob")} {
			text, ok := callText(t, cs, "whoami")
			if !ok || !strings.HasPrefix(text, "user="+subject+"-user ") {
				t.Fatalf("%s: %v %s", subject, ok, text)
			}
			if !strings.Contains(text, "auth=[redacted]") && !strings.Contains(text, "auth=Bearer [redacted]") {
				t.Fatalf("%s: the echoed token was not redacted: %s", subject, text)
			}
		}
	})

	t.Run("each subject's REST tool calls use its own upstream session and account", func(t *testing.T) {
		// The go-sdk server refuses a session to a user other than the one
		// who opened it: a shared session would fail the second subject.
		for range 2 {
			for _, subject := range []string{"alice", "bob"} {
				client := &http.Client{Transport: w.agent.Transport(nil, identity.SignOptions{Subject: subject})}
				a := call(t, client, "POST", gw.url+"/mcp/files/tools/whoami/call", nil, []byte(`{}`))
				var res struct{ Content []struct{ Text string } }
				if err := json.Unmarshal(a.body, &res); err != nil || a.status != http.StatusOK || len(res.Content) != 1 {
					t.Fatalf("%s: %d %s", subject, a.status, a.body)
				}
				if text := res.Content[0].Text; !strings.HasPrefix(text, "user="+subject+"-user ") || !strings.HasSuffix(text, "[redacted]") {
					t.Fatalf("%s was served %q", subject, text)
				}
			}
		}
	})

	t.Run("attack: a server echoes the token JSON-escaped", func(t *testing.T) {
		check := func(t *testing.T, route string, answer []byte) {
			t.Helper()
			if !strings.Contains(string(answer), "[redacted]") {
				t.Fatalf("%s: nothing was redacted: %s", route, answer)
			}
			for _, tok := range server.tokens() {
				if strings.Contains(string(answer), tok) {
					t.Fatalf("%s: the token reached the agent: %s", route, answer)
				}
			}
		}
		res, err := alice.CallTool(t.Context(), &mcp.CallToolParams{Name: "echo_escaped"})
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := json.Marshal(res.StructuredContent)
		check(t, "the MCP endpoint", raw)
		for _, route := range []string{"/mcp/files/tools/echo_escaped/call", "/mcp/svc/tools/echo_escaped/call"} {
			client := &http.Client{Transport: w.agent.Transport(nil, identity.SignOptions{Subject: "bob"})}
			a := call(t, client, "POST", gw.url+route, nil, []byte(`{}`))
			var out map[string]any
			if a.status != http.StatusOK || json.Unmarshal(a.body, &out) != nil {
				t.Fatalf("%s: %d %s", route, a.status, a.body)
			}
			raw, _ := json.Marshal(out) // decoded: the escapes are gone
			check(t, route, raw)
		}
	})

	t.Run("subjects without an account cannot open the circuit for the others", func(t *testing.T) {
		carol := mcpAs(t, endpoint, w.agent, "carol")
		for range 12 {
			if text, ok := callText(t, carol, "whoami"); ok || !strings.Contains(text, `"code":"UPSTREAM_AUTH_REQUIRED"`) {
				t.Fatalf("carol: %v %s", ok, text)
			}
		}
		if text, ok := callText(t, alice, "whoami"); !ok {
			t.Fatalf("alice after carol's refusals: %s", text)
		}
	})

	t.Run("a token the server no longer takes is replaced once", func(t *testing.T) {
		as.ExpireAccess()
		text, ok := callText(t, alice, "whoami")
		if !ok || !strings.HasPrefix(text, "user=alice-user ") {
			t.Fatalf("after the access tokens expired: %v %s", ok, text)
		}
	})

	t.Run("insufficient_scope asks the owner to reconnect with the wider scope", func(t *testing.T) {
		text, ok := callText(t, alice, "write")
		if ok || !strings.Contains(text, `gateway connect files --subject "alice"`) || !strings.Contains(text, `not granted ("files:read files:write")`) ||
			!strings.Contains(text, `"code":"UPSTREAM_AUTH_REQUIRED"`) {
			t.Fatalf("write without files:write: %v %s", ok, text)
		}
		c, _ := vault.Connection("files")
		a, _ := c.Account("alice")
		if a.Status != credvault.AccountNeedsReconnecting || !slices.Contains(a.Scopes, "files:write") {
			t.Fatalf("alice's account after the step-up: %+v", a)
		}
		// The narrower calls go on meanwhile.
		if text, ok := callText(t, alice, "whoami"); !ok {
			t.Fatalf("whoami while waiting for the step-up: %s", text)
		}
		g := connect(t, "alice", "alice-user")
		if !slices.Contains(g.Scopes, "files:write") {
			t.Fatalf("reconnect asked for %v", g.Scopes)
		}
		if text, ok := callText(t, alice, "write"); !ok || !strings.HasPrefix(text, "user=alice-user ") {
			t.Fatalf("write after the step-up: %v %s", ok, text)
		}
	})

	t.Run("no token reaches an agent, the admin API or the log", func(t *testing.T) {
		secrets := append(server.tokens(), as.RefreshTokens()...)
		secrets = append(secrets, oauthoptest.ClientSecret)
		if len(secrets) < 4 {
			t.Fatalf("the server saw %d tokens", len(secrets))
		}
		noSecrets(t, gw, logs, secrets)
	})
}

// gateway connect on an mcp connection: the binary finds the server's
// authorization server from its 401, prints the URL, ignores a forged
// redirect, and stores the account.
func TestGatewayConnectCommandMCP(t *testing.T) {
	bin, err := buildGateway()
	if err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	as := oauthoptest.New(t, "http://"+addr+"/callback")
	server := newProtectedMCP(t, as)
	key, _ := credvault.GenerateMasterKey()
	dataDir := t.TempDir()
	env := append(os.Environ(), "GATEWAY_DATA_DIR="+dataDir, "GATEWAY_MASTER_KEY="+key.Encode())
	add := exec.Command(bin, "add", "--id", "files", "--protocol", "mcp", "--base-url", server.srv.URL, "--mcp-endpoint", "/mcp",
		"--auth-mode", credvault.AuthOAuth2AuthorizationCode, "--oauth-client-id", oauthoptest.ClientID,
		"--auth-secret-key", "client_secret", "--secret", "client_secret=-")
	add.Env, add.Stdin = env, strings.NewReader(oauthoptest.ClientSecret+"\n")
	if out, err := add.CombinedOutput(); err != nil {
		t.Fatalf("gateway add: %v: %s", err, out)
	}

	connect := exec.Command(bin, "connect", "files", "--listen", addr)
	connect.Env = env
	var stderr bytes.Buffer
	connect.Stderr = &stderr
	stdout, err := connect.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := connect.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = connect.Process.Kill() })
	var printed strings.Builder
	lines := bufio.NewScanner(stdout)
	var link string
	for lines.Scan() {
		printed.WriteString(lines.Text() + "\n")
		if l := strings.TrimSpace(lines.Text()); strings.HasPrefix(l, as.URL()) {
			link = l
		}
		if strings.HasPrefix(lines.Text(), "Waiting") {
			break
		}
	}
	if link == "" {
		_ = connect.Wait()
		t.Fatalf("no URL printed: %s %s", printed.String(), stderr.String())
	}
	if a := call(t, http.DefaultClient, "GET", "http://"+addr+"/callback?state=forged&code=stolen", nil, nil); a.status != http.StatusBadRequest {
		t.Fatalf("forged redirect: %d %s", a.status, a.body)
	}
	as.SignIn("owner-user")
	if a := call(t, http.DefaultClient, "GET", link, nil, nil); a.status != http.StatusOK {
		t.Fatalf("browser: %d %s", a.status, a.body)
	}
	rest, _ := io.ReadAll(stdout)
	printed.Write(rest)
	if err := connect.Wait(); err != nil || !strings.Contains(printed.String(), "files: connected its account at "+as.URL()) {
		t.Fatalf("gateway connect: %v: %s %s", err, printed.String(), stderr.String())
	}

	st, err := sqlitestore.Open(t.Context(), filepath.Join(dataDir, sqlitestore.DefaultFileName))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	v, err := credvault.New(t.Context(), credvault.Config{Store: st, MasterKey: key, PollInterval: -1, Extensions: gateway.VaultExtensions()})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	res, _ := v.Lookup("files")
	refresh, ok := res.RefreshToken("")
	if !ok || !as.HasRefresh(refresh) || res.Connection.OAuthResource != server.srv.URL+"/mcp" {
		t.Fatalf("stored: refresh token %v, connection %+v", ok, res.Connection)
	}
	if strings.Contains(printed.String()+stderr.String(), refresh) {
		t.Fatal("gateway connect printed the refresh token")
	}
}
