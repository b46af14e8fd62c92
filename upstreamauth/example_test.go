package upstreamauth_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"

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
