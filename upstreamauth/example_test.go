package upstreamauth_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"

	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/upstreamauth"
)

// A client credentials connection: the first Token asks the token
// endpoint, the second is served from the cache.
func ExampleTokens_Token() {
	requests := 0
	endpoint := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests++
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"access_token":"example-access-token","token_type":"Bearer","expires_in":3600}`)
	}))
	defer endpoint.Close()

	ctx := context.Background()
	key, _ := credvault.GenerateMasterKey()
	vault, _ := credvault.New(ctx, credvault.Config{Store: &credvault.MemoryStore{}, MasterKey: key, PollInterval: -1})
	defer vault.Close()
	_, err := vault.Create(ctx, &credvault.Connection{
		ID: "graph", BaseURL: "https://graph.microsoft.com/v1.0", AuthMode: credvault.AuthOAuth2ClientCredentials,
		OAuthTokenURL: endpoint.URL, OAuthClientID: "app-id", OAuthScopes: []string{"https://graph.microsoft.com/.default"},
		AuthSecretKey: "client_secret",
	}, map[string]string{"client_secret": "example-client-secret"})
	if err != nil {
		fmt.Println(err)
		return
	}

	tokens, _ := upstreamauth.New(upstreamauth.Config{Vault: vault})
	res, _ := vault.Lookup("graph")
	for range 2 {
		tok, err := tokens.Token(ctx, res, "")
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(tok.Value)
	}
	fmt.Println("token requests:", requests)
	// Output:
	// example-access-token
	// example-access-token
	// token requests: 1
}

// An MCP server that answers 401, with its authorization server on the
// same host: ConnectMCP finds the authorization server, registers the
// gateway there and redeems the code the owner's browser brings back.
func ExampleTokens_ConnectMCP() {
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	defer srv.Close()
	writeJSON := func(w http.ResponseWriter, status int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(v)
	}
	mux.HandleFunc("/mcp", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("WWW-Authenticate", `Bearer resource_metadata="`+srv.URL+`/.well-known/oauth-protected-resource/mcp"`)
		w.WriteHeader(http.StatusUnauthorized)
	})
	mux.HandleFunc("/.well-known/oauth-protected-resource/mcp", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"resource": srv.URL + "/mcp", "authorization_servers": []string{srv.URL}})
	})
	mux.HandleFunc("/.well-known/oauth-authorization-server", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"issuer": srv.URL, "authorization_endpoint": srv.URL + "/authorize",
			"token_endpoint": srv.URL + "/token", "registration_endpoint": srv.URL + "/register",
			"code_challenge_methods_supported": []string{"S256"}})
	})
	mux.HandleFunc("/register", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusCreated, map[string]any{"client_id": "registered-client"})
	})
	mux.HandleFunc("/token", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"access_token": "mcp-access-token", "refresh_token": "mcp-refresh-token",
			"token_type": "Bearer", "expires_in": 3600})
	})

	ctx := context.Background()
	key, _ := credvault.GenerateMasterKey()
	vault, _ := credvault.New(ctx, credvault.Config{Store: &credvault.MemoryStore{}, MasterKey: key, PollInterval: -1})
	defer vault.Close()
	res, _ := credvault.NewResolved(&credvault.Connection{ID: "files", Protocol: credvault.ProtocolMCP, BaseURL: srv.URL,
		AuthMode: credvault.AuthOAuth2AuthorizationCode}, "")
	tokens, _ := upstreamauth.New(upstreamauth.Config{Vault: vault})
	g, err := tokens.ConnectMCP(ctx, res, upstreamauth.MCPConnect{
		Endpoint: srv.URL + "/mcp", RedirectURI: "http://127.0.0.1:8976/callback",
		Authorize: func(ctx context.Context, authURL string) (url.Values, error) {
			// The owner's browser: the authorization server redirects
			// back at once with a code for this request's state.
			u, _ := url.Parse(authURL)
			return url.Values{"code": {"the-code"}, "state": {u.Query().Get("state")}}, nil
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(g.Registration, g.Client.ClientID, g.Client.Resource == srv.URL+"/mcp", g.Grant.RefreshToken != "")
	// Output:
	// dynamic registered-client true true
}
