package upstreamauth_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/upstreamauth"
)

// mcpWorld is an MCP server (srv) and its authorization server (as).
// Their metadata can be bent to play the attacks.
type mcpWorld struct {
	srv, as *httptest.Server
	// resource overrides the protected resource metadata's resource.
	resource string
	// authServer overrides its authorization_servers entry.
	authServer string
	// issuer overrides the authorization server metadata's issuer.
	issuer string
	// pad makes the authorization server metadata that many bytes longer.
	pad int
	// cimd: the authorization server takes Client ID Metadata Documents.
	cimd bool
	// method is the token_endpoint_auth_method registration answers;
	// empty: client_secret_post. A refresh authenticating otherwise is
	// refused.
	method string

	mu        sync.Mutex
	refreshes []refresh

	authorized, registered atomic.Int32
	tokenForm              atomic.Pointer[url.Values]
}

// refresh is a refresh request the authorization server got.
type refresh struct {
	form  url.Values
	basic bool
}

func newMCPWorld(t *testing.T) *mcpWorld {
	w := &mcpWorld{}
	mux, asMux := http.NewServeMux(), http.NewServeMux()
	w.srv, w.as = httptest.NewServer(mux), httptest.NewServer(asMux)
	t.Cleanup(w.srv.Close)
	t.Cleanup(w.as.Close)
	base, as := w.srv.URL, w.as.URL
	writeJSON := func(rw http.ResponseWriter, v any) {
		rw.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(rw).Encode(v)
	}
	mux.HandleFunc("/mcp", func(rw http.ResponseWriter, r *http.Request) {
		rw.Header().Set("WWW-Authenticate", `Bearer resource_metadata="`+base+`/.well-known/oauth-protected-resource/mcp", scope="files:read"`)
		rw.WriteHeader(http.StatusUnauthorized)
	})
	mux.HandleFunc("/.well-known/oauth-protected-resource/mcp", func(rw http.ResponseWriter, r *http.Request) {
		writeJSON(rw, map[string]any{"resource": or(w.resource, base+"/mcp"), "authorization_servers": []string{or(w.authServer, as)}})
	})
	asMux.HandleFunc("/.well-known/oauth-authorization-server", func(rw http.ResponseWriter, r *http.Request) {
		writeJSON(rw, map[string]any{"issuer": or(w.issuer, as), "authorization_endpoint": as + "/authorize",
			"token_endpoint": as + "/token", "registration_endpoint": as + "/register", "revocation_endpoint": as + "/revoke",
			"code_challenge_methods_supported": []string{"S256"}, "client_id_metadata_document_supported": w.cimd,
			"padding": strings.Repeat("x", w.pad)})
	})
	asMux.HandleFunc("/register", func(rw http.ResponseWriter, r *http.Request) {
		w.registered.Add(1)
		rw.WriteHeader(http.StatusCreated)
		writeJSON(rw, map[string]any{"client_id": "dyn-client", "client_secret": "dyn-client-secret", "token_endpoint_auth_method": or(w.method, "client_secret_post")})
	})
	asMux.HandleFunc("/token", func(rw http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		f := r.PostForm
		if f.Get("grant_type") == "refresh_token" {
			id, secret, basic := r.BasicAuth()
			w.mu.Lock()
			w.refreshes = append(w.refreshes, refresh{form: f, basic: basic})
			w.mu.Unlock()
			if basic != (or(w.method, "client_secret_post") == "client_secret_basic") {
				rw.WriteHeader(http.StatusUnauthorized)
				writeJSON(rw, map[string]any{"error": "invalid_client"})
				return
			}
			if !basic {
				id, secret = f.Get("client_id"), f.Get("client_secret")
			}
			if id != "dyn-client" || secret != "dyn-client-secret" || f.Get("refresh_token") != "mcp-refresh-token" {
				rw.WriteHeader(http.StatusBadRequest)
				writeJSON(rw, map[string]any{"error": "invalid_grant"})
				return
			}
			tokenJSON(rw, "mcp-access-refreshed", 3600)
			return
		}
		w.tokenForm.Store(&f)
		rw.Header().Set("Content-Type", "application/json")
		_, _ = fmt.Fprint(rw, `{"access_token":"mcp-access-token","refresh_token":"mcp-refresh-token","token_type":"Bearer","expires_in":3600}`)
	})
	return w
}

func or(v, def string) string {
	if v != "" {
		return v
	}
	return def
}

// authorize plays the owner's browser: the authorization server answers
// at once with a code for the request's state.
func (w *mcpWorld) authorize(_ context.Context, authURL string) (url.Values, error) {
	w.authorized.Add(1)
	u, err := url.Parse(authURL)
	if err != nil {
		return nil, err
	}
	return url.Values{"code": {"the-code"}, "state": {u.Query().Get("state")}}, nil
}

func mcpConnection(t *testing.T, base string, edit func(*credvault.Connection)) *credvault.Resolved {
	c := &credvault.Connection{ID: "files", Protocol: credvault.ProtocolMCP, BaseURL: base, AuthMode: credvault.AuthOAuth2AuthorizationCode}
	if edit != nil {
		edit(c)
	}
	res, err := credvault.NewResolved(c, "")
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestConnectMCPRegistersAndAsksForTheResource(t *testing.T) {
	t.Parallel()
	w := newMCPWorld(t)
	tokens, err := upstreamauth.New(upstreamauth.Config{Vault: testVault(t, w.srv.URL+"/token")})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, cimdURL, want string
		cimd                bool
	}{
		{"dynamic registration", "", upstreamauth.RegistrationDynamic, false},
		{"a server taking metadata documents, without one to offer", "", upstreamauth.RegistrationDynamic, true},
		{"client id metadata document", "https://gateway.example.com/oauth/client.json", upstreamauth.RegistrationMetadataDocument, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w.cimd = tc.cimd
			g, err := tokens.ConnectMCP(t.Context(), mcpConnection(t, w.srv.URL, nil), upstreamauth.MCPConnect{
				Endpoint: w.srv.URL + "/mcp", RedirectURI: "http://127.0.0.1:8976/callback", ClientIDMetadataURL: tc.cimdURL, Authorize: w.authorize})
			if err != nil {
				t.Fatal(err)
			}
			form := *w.tokenForm.Load()
			if g.Registration != tc.want || g.Client.Resource != w.srv.URL+"/mcp" || form.Get("resource") != g.Client.Resource ||
				form.Get("code_verifier") == "" || g.Client.Issuer != w.as.URL || g.Client.RevocationURL != w.as.URL+"/revoke" {
				t.Fatalf("grant %+v, token request %v", g, form)
			}
			if g.MetadataDocumentUnused != (tc.cimd && tc.cimdURL == "") {
				t.Fatalf("MetadataDocumentUnused = %v", g.MetadataDocumentUnused)
			}
			if tc.want == upstreamauth.RegistrationDynamic && (g.Client.ClientID != "dyn-client" || g.Client.ClientSecret != "dyn-client-secret") {
				t.Fatalf("registered client %+v", g.Client)
			}
			if g.Grant.AccessToken != "mcp-access-token" || g.Grant.Expiry.IsZero() || len(g.Scopes) != 1 || g.Scopes[0] != "files:read" {
				t.Fatalf("grant %+v", g)
			}
		})
	}
}

// Attacks on the discovery: each is refused before the owner is sent to
// any authorization server. Refused protected resource metadata leaves
// the 2025-03-26 fallback (the MCP server's origin as its authorization
// server), which this one is not.
func TestConnectMCPRefusesBentMetadata(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		bend func(w *mcpWorld)
	}{
		{"resource metadata for another resource", func(w *mcpWorld) { w.resource = "https://evil.example.com/mcp" }},
		{"authorization server metadata naming another issuer", func(w *mcpWorld) { w.issuer = "https://evil.example.com" }},
		{"authorization server at a private address", func(w *mcpWorld) { w.authServer = "http://10.0.0.1" }},
		{"authorization server over plain http", func(w *mcpWorld) { w.authServer = "http://as.example.com" }},
		{"huge authorization server metadata", func(w *mcpWorld) { w.pad = upstreamauth.DefaultMaxResponseBytes }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := newMCPWorld(t)
			tc.bend(w)
			tokens, err := upstreamauth.New(upstreamauth.Config{Vault: testVault(t, w.srv.URL+"/token")})
			if err != nil {
				t.Fatal(err)
			}
			_, err = tokens.ConnectMCP(t.Context(), mcpConnection(t, w.srv.URL, nil), upstreamauth.MCPConnect{
				Endpoint: w.srv.URL + "/mcp", RedirectURI: "http://127.0.0.1:8976/callback", Authorize: w.authorize})
			if err == nil || w.authorized.Load() != 0 || w.registered.Load() != 0 {
				t.Fatalf("ConnectMCP = %v; owner sent to authorize %d times, registrations %d", err, w.authorized.Load(), w.registered.Load())
			}
		})
	}
}

func TestConnectMCPUsesThePreregisteredClient(t *testing.T) {
	t.Parallel()
	w := newMCPWorld(t)
	tokens, err := upstreamauth.New(upstreamauth.Config{Vault: testVault(t, w.srv.URL+"/token")})
	if err != nil {
		t.Fatal(err)
	}
	res := mcpConnection(t, w.srv.URL, func(c *credvault.Connection) { c.OAuthClientID = "owner-client" })
	g, err := tokens.ConnectMCP(t.Context(), res, upstreamauth.MCPConnect{
		Endpoint: w.srv.URL + "/mcp", RedirectURI: "http://127.0.0.1:8976/callback", Authorize: w.authorize})
	if err != nil {
		t.Fatal(err)
	}
	if g.Registration != upstreamauth.RegistrationPreregistered || g.Client.ClientID != "owner-client" || g.Client.ClientSecret != "" || w.registered.Load() != 0 {
		t.Fatalf("grant %+v, registrations %d", g, w.registered.Load())
	}
	// A server that asks for nothing has nothing to connect.
	open := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {}))
	defer open.Close()
	_, err = tokens.ConnectMCP(t.Context(), res, upstreamauth.MCPConnect{Endpoint: open.URL, RedirectURI: "http://127.0.0.1:8976/callback", Authorize: w.authorize})
	if !errors.Is(err, upstreamauth.ErrNotProtected) {
		t.Fatalf("an open server: %v", err)
	}
}

// A refresh asks again for the resource the account was connected for
// (RFC 8707 §2.2), and authenticates the client as its registration said,
// never by trying Basic first.
func TestRefreshSendsTheResourceAndTheRegisteredAuthMethod(t *testing.T) {
	t.Parallel()
	for _, method := range []string{credvault.TokenAuthPost, credvault.TokenAuthBasic} {
		t.Run(method, func(t *testing.T) {
			t.Parallel()
			w := newMCPWorld(t)
			w.method = method
			key, _ := credvault.GenerateMasterKey()
			v, err := credvault.New(t.Context(), credvault.Config{Store: &credvault.MemoryStore{}, MasterKey: key, PollInterval: -1})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { v.Close() })
			if _, err := v.Create(t.Context(), &credvault.Connection{ID: "files", Protocol: credvault.ProtocolMCP, BaseURL: w.srv.URL,
				AuthMode: credvault.AuthOAuth2AuthorizationCode}, nil); err != nil {
				t.Fatal(err)
			}
			tokens, err := upstreamauth.New(upstreamauth.Config{Vault: v})
			if err != nil {
				t.Fatal(err)
			}
			res, _ := v.Lookup("files")
			g, err := tokens.ConnectMCP(t.Context(), res, upstreamauth.MCPConnect{
				Endpoint: w.srv.URL + "/mcp", RedirectURI: "http://127.0.0.1:8976/callback", Authorize: w.authorize})
			if err != nil {
				t.Fatal(err)
			}
			if g.Client.TokenAuthMethod != method {
				t.Fatalf("recorded %q", g.Client.TokenAuthMethod)
			}
			if err := (credvault.MCPAccounts{Vault: v}).Connect(t.Context(), "files", "", g.Grant, g.Client, g.Scopes); err != nil {
				t.Fatal(err)
			}
			res, _ = v.Lookup("files")
			tok, err := tokens.Token(t.Context(), res, "")
			if err != nil || tok.Value != "mcp-access-refreshed" {
				t.Fatalf("Token = %v, %v", tok, err)
			}
			w.mu.Lock()
			defer w.mu.Unlock()
			if len(w.refreshes) != 1 {
				t.Fatalf("%d refresh requests: %+v", len(w.refreshes), w.refreshes)
			}
			if r := w.refreshes[0]; r.form.Get("resource") != w.srv.URL+"/mcp" || r.basic != (method == credvault.TokenAuthBasic) ||
				r.form.Has("client_secret") == r.basic {
				t.Fatalf("refresh request %+v", r)
			}
		})
	}
}
