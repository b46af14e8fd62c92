package credvault_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"

	"github.com/idnhq/idn/credvault"
)

// A Vault seals what it stores and looks a connection's credential up on
// each request. This one keeps its records in memory; the gateway's are
// in a SQLite file (package sqlitestore).
func ExampleNew() {
	ctx := context.Background()
	key, _ := credvault.ParseMasterKey("AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=")
	v, err := credvault.New(ctx, credvault.Config{Store: &credvault.MemoryStore{}, MasterKey: key})
	if err != nil {
		log.Fatal(err)
	}
	defer v.Close()

	_, _, _ = v.PutVariable(ctx, "GITHUB_TOKEN", "ghp_example", "alice")
	_, err = v.Create(ctx, &credvault.Connection{
		ID: "github", BaseURL: "https://api.github.com",
		AuthMode: credvault.AuthBearer, AuthSecretKey: "token",
	}, map[string]string{"token": "{{GITHUB_TOKEN}}"})
	if err != nil {
		log.Fatal(err)
	}

	r, _ := v.Lookup("github")
	secret, _ := r.Secret()
	fmt.Println(r.Connection.ServiceSlug(), r.Connection.AuthPrefix+secret, r.Connection.CredentialKeys)
	// Output: github Bearer ghp_example [token]
}

func ExampleInject() {
	c := &credvault.Connection{AuthMode: credvault.AuthQueryParam, AuthQueryParam: "key"}
	req, _ := http.NewRequest("GET", "https://maps.example.com/geocode?q=Paris", nil)
	credvault.Inject(req, c, "s3cret")
	fmt.Println(req.URL)
	// Output: https://maps.example.com/geocode?q=Paris&key=s3cret
}

// A Vault's Transport injects the credential on a clone of each request,
// only for the connection's own upstream.
func ExampleVault_Transport() {
	ctx := context.Background()
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "upstream saw %s", r.Header.Get("X-API-Key"))
	}))
	defer upstream.Close()

	key, _ := credvault.GenerateMasterKey()
	v, _ := credvault.New(ctx, credvault.Config{Store: &credvault.MemoryStore{}, MasterKey: key, PollInterval: -1})
	defer v.Close()
	_, _ = v.Create(ctx, &credvault.Connection{
		ID: "svc", BaseURL: upstream.URL, AuthMode: credvault.AuthHeaderKey, AuthSecretKey: "api_key",
	}, map[string]string{"api_key": "k-123456"})

	client := &http.Client{Transport: v.Transport("svc", nil)}
	resp, err := client.Get(upstream.URL + "/status")
	if err != nil {
		log.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Println(string(body))
	// Output: upstream saw k-123456
}

func ExampleParseMasterKey() {
	_, err := credvault.ParseMasterKey("not-a-key")
	fmt.Println(err)
	// Output: credvault: master key must be the standard base64 encoding of exactly 32 random bytes: the key is not valid base64
}

// An admin API asks for more than a local caller before a change that
// decides where or how the stored secret is sent, the extensions the
// owning package names included.
func ExampleVault_SecretRouteChanges() {
	ctx := context.Background()
	key, _ := credvault.GenerateMasterKey()
	v, _ := credvault.New(ctx, credvault.Config{Store: &credvault.MemoryStore{}, MasterKey: key, PollInterval: -1,
		Extensions: credvault.Extensions{SecretRoute: []string{"mcp_endpoint"}}})
	defer v.Close()

	before := &credvault.Connection{ID: "gh", BaseURL: "https://api.github.com", AuthMode: credvault.AuthBearer, AuthSecretKey: "token"}
	renamed := before.Clone()
	renamed.Name = "GitHub"
	redirected := before.Clone()
	redirected.BaseURL = "http://127.0.0.1:9"
	elsewhere := before.Clone()
	elsewhere.Extensions = map[string]json.RawMessage{"mcp_endpoint": json.RawMessage(`"https://evil.example/mcp"`)}
	fmt.Println(v.SecretRouteChanges(before, renamed))
	fmt.Println(v.SecretRouteChanges(before, redirected))
	fmt.Println(v.SecretRouteChanges(before, elsewhere))
	// Output:
	// []
	// [base_url]
	// [mcp_endpoint]
}

// The MCP connect flow stores the client it registered and the account
// it connected; a server's insufficient_scope later widens the account.
func ExampleMCPAccounts() {
	ctx := context.Background()
	key, _ := credvault.GenerateMasterKey()
	v, _ := credvault.New(ctx, credvault.Config{Store: &credvault.MemoryStore{}, MasterKey: key, PollInterval: -1})
	defer v.Close()
	if _, err := v.Create(ctx, &credvault.Connection{ID: "linear", Protocol: credvault.ProtocolMCP,
		BaseURL: "https://mcp.linear.app/mcp", AuthMode: credvault.AuthOAuth2AuthorizationCode}, nil); err != nil {
		log.Fatal(err)
	}
	accounts := credvault.MCPAccounts{Vault: v}
	client := credvault.OAuthClient{Issuer: "https://mcp.linear.app", AuthURL: "https://mcp.linear.app/authorize",
		TokenURL: "https://mcp.linear.app/token", Resource: "https://mcp.linear.app/mcp",
		ClientID: "registered-client", ClientSecret: "registered-client-secret"}
	if err := accounts.Connect(ctx, "linear", "", credvault.Grant{RefreshToken: "example-refresh-token"}, client, []string{"read"}); err != nil {
		log.Fatal(err)
	}
	if err := accounts.RequireScopes(ctx, "linear", "", []string{"write"}); err != nil {
		log.Fatal(err)
	}
	c, _ := v.Connection("linear")
	a, _ := c.Account("")
	fmt.Println(c.OAuthClientID, c.AuthSecretKey, a.Status, a.Scopes)
	// Output:
	// registered-client oauth_client_secret needs_reconnecting [read write]
}
