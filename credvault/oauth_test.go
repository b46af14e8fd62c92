package credvault

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

func authCodeConn(id string, perSubject bool) *Connection {
	return &Connection{
		ID: id, BaseURL: "https://www.googleapis.com", AuthMode: AuthOAuth2AuthorizationCode,
		OAuthIssuer: "https://accounts.google.com", OAuthClientID: "client-1", AuthSecretKey: "client_secret",
		OAuthScopes: []string{"openid", "https://www.googleapis.com/auth/drive.readonly"}, OAuthPerSubject: perSubject,
	}
}

func TestOAuthValidation(t *testing.T) {
	t.Parallel()
	v := newTestVault(t)
	secrets := map[string]string{"client_secret": "s3cret-value"}
	cc := func(edit func(c *Connection)) *Connection {
		c := &Connection{ID: "cc", BaseURL: "https://api.example.com", AuthMode: AuthOAuth2ClientCredentials,
			OAuthTokenURL: "https://auth.example.com/token", OAuthClientID: "client", AuthSecretKey: "client_secret"}
		edit(c)
		return c
	}
	for _, tc := range []struct {
		name, field string
		c           *Connection
	}{
		{"client credentials without token url", "oauth_token_url", cc(func(c *Connection) { c.OAuthTokenURL = "" })},
		{"client credentials without client id", "oauth_client_id", cc(func(c *Connection) { c.OAuthClientID = "" })},
		{"token url with user info", "oauth_token_url", cc(func(c *Connection) { c.OAuthTokenURL = "https://u:p@auth.example.com/token" })},
		{"scope with a space", "oauth_scopes", cc(func(c *Connection) { c.OAuthScopes = []string{"a b"} })},
		{"client credentials per subject", "oauth_per_subject", cc(func(c *Connection) { c.OAuthPerSubject = true })},
		{"an unknown token endpoint auth method", "oauth_token_endpoint_auth_method", cc(func(c *Connection) { c.OAuthTokenAuthMethod = "private_key_jwt" })},
		{"a token endpoint auth method on a bearer connection", "oauth_token_endpoint_auth_method", &Connection{ID: "b", BaseURL: "https://api.example.com",
			AuthMode: AuthBearer, AuthSecretKey: "client_secret", OAuthTokenAuthMethod: TokenAuthPost}},
		{"mcp client secret without a client", "oauth_client_id", &Connection{ID: "m", Protocol: ProtocolMCP, BaseURL: "https://mcp.example.com",
			AuthMode: AuthOAuth2AuthorizationCode, AuthSecretKey: "client_secret"}},
		{"mcp client credentials without token url", "oauth_token_url", cc(func(c *Connection) { c.Protocol, c.OAuthTokenURL = ProtocolMCP, "" })},
		{"oauth field on a bearer connection", "oauth_client_id", &Connection{ID: "b", BaseURL: "https://api.example.com",
			AuthMode: AuthBearer, AuthSecretKey: "client_secret", OAuthClientID: "x"}},
		{"authorization code without endpoints", "oauth_issuer", &Connection{ID: "ac", BaseURL: "https://api.example.com",
			AuthMode: AuthOAuth2AuthorizationCode, OAuthClientID: "x", OAuthTokenURL: "https://auth.example.com/token"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := v.Create(context.Background(), tc.c, secrets)
			var ve *ValidationError
			if !errors.As(err, &ve) || ve.Field != tc.field {
				t.Fatalf("Create = %v, want a validation error on %s", err, tc.field)
			}
		})
	}
	// An MCP connection may leave the authorization server and the
	// client to its server's 401 and the connect flow.
	mcp := &Connection{ID: "mcp", Protocol: ProtocolMCP, BaseURL: "https://mcp.example.com", AuthMode: AuthOAuth2AuthorizationCode}
	if _, err := v.Create(context.Background(), mcp, nil); err != nil {
		t.Fatal(err)
	}
	// A public client (PKCE, no secret) is fine.
	pub := authCodeConn("public", false)
	pub.AuthSecretKey = ""
	if _, err := v.Create(context.Background(), pub, nil); err != nil {
		t.Fatal(err)
	}
}

func TestAccountsAreSealedAndPerSubject(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	v := newTestVault(t)
	if _, err := v.Create(ctx, authCodeConn("drive", true), map[string]string{"client_secret": "s3cret-value"}); err != nil {
		t.Fatal(err)
	}
	if err := v.ConnectAccount(ctx, "drive", "alice", "refresh-alice-1"); err != nil {
		t.Fatal(err)
	}
	if err := v.ConnectAccount(ctx, "drive", "bob", "refresh-bob-1"); err != nil {
		t.Fatal(err)
	}
	r, _ := v.Lookup("drive")
	for subject, want := range map[string]string{"alice": "refresh-alice-1", "bob": "refresh-bob-1", "carol": ""} {
		if got, _ := r.RefreshToken(subject); got != want {
			t.Errorf("RefreshToken(%s) = %q, want %q", subject, got, want)
		}
	}
	c, _ := v.Connection("drive")
	doc, _ := json.Marshal(c)
	if strings.Contains(string(doc), "refresh-") || strings.Contains(string(doc), "oauth:") {
		t.Fatalf("connection JSON shows a refresh token or its slot: %s", doc)
	}
	if len(c.OAuthAccounts) != 2 || c.OAuthAccounts[0].Subject != "alice" || c.CredentialKeys[0] != "client_secret" || len(c.CredentialKeys) != 1 {
		t.Fatalf("accounts %+v, credential keys %v", c.OAuthAccounts, c.CredentialKeys)
	}
	// A rotation of the client secret keeps the accounts.
	s := "n3w-secret-value"
	if _, err := v.Rotate(ctx, "drive", Rotation{Secrets: map[string]*string{"client_secret": &s}}); err != nil {
		t.Fatal(err)
	}
	r, _ = v.Lookup("drive")
	if got, _ := r.RefreshToken("alice"); got != "refresh-alice-1" {
		t.Fatalf("after rotation alice's token = %q", got)
	}
	if got, _ := r.Secret(); got != s {
		t.Fatalf("after rotation secret = %q", got)
	}
	old, err := v.DisconnectAccount(ctx, "drive", "bob")
	if err != nil || old != "refresh-bob-1" {
		t.Fatalf("DisconnectAccount = %q, %v", old, err)
	}
	if _, err := v.DisconnectAccount(ctx, "drive", "bob"); !errors.Is(err, ErrAccountNotFound) {
		t.Fatalf("second DisconnectAccount = %v", err)
	}
}

// Refreshes racing a provider's rotation: each racer replaces the token it
// read; exactly one wins, and the stored token is the winner's.
func TestPutRefreshTokenRacingRotation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	v := newTestVault(t)
	if _, err := v.Create(ctx, authCodeConn("drive", false), map[string]string{"client_secret": "s3cret-value"}); err != nil {
		t.Fatal(err)
	}
	if err := v.ConnectAccount(ctx, "drive", "", "refresh-0"); err != nil {
		t.Fatal(err)
	}
	const racers = 16
	var wg sync.WaitGroup
	wins := make(chan string, racers)
	for i := range racers {
		wg.Go(func() {
			next := "refresh-next-" + string(rune('a'+i))
			switch err := v.PutRefreshToken(ctx, "drive", "anyone", "refresh-0", next); {
			case err == nil:
				wins <- next
			case !errors.Is(err, ErrRefreshTokenChanged):
				t.Error(err)
			}
		})
	}
	wg.Wait()
	close(wins)
	var won []string
	for w := range wins {
		won = append(won, w)
	}
	r, _ := v.Lookup("drive")
	got, _ := r.RefreshToken("")
	if len(won) != 1 || got != won[0] {
		t.Fatalf("winners %v, stored %q", won, got)
	}
	if err := v.MarkNeedsReconnecting(ctx, "drive", "", "refresh-0"); !errors.Is(err, ErrRefreshTokenChanged) {
		t.Fatalf("marking a stale token = %v", err)
	}
	if err := v.MarkNeedsReconnecting(ctx, "drive", "", got); err != nil {
		t.Fatal(err)
	}
	c, _ := v.Connection("drive")
	if a, _ := c.Account(""); a.Status != AccountNeedsReconnecting {
		t.Fatalf("account %+v", a)
	}
}

func TestConnectMCPAccountStoresTheRegisteredClient(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	v := newTestVault(t)
	conn := &Connection{ID: "mcp", Protocol: ProtocolMCP, BaseURL: "https://mcp.example.com", AuthMode: AuthOAuth2AuthorizationCode, OAuthPerSubject: true}
	if _, err := v.Create(ctx, conn, nil); err != nil {
		t.Fatal(err)
	}
	accounts := MCPAccounts{v}
	client := OAuthClient{Issuer: "https://as.example.com", AuthURL: "https://as.example.com/authorize", TokenURL: "https://as.example.com/token",
		Resource: "https://mcp.example.com/mcp", ClientID: "registered-1", ClientSecret: "registered-secret-1"}
	if err := accounts.Connect(ctx, "mcp", "alice", Grant{RefreshToken: "refresh-alice"}, client, []string{"files:read"}); err != nil {
		t.Fatal(err)
	}
	r, _ := v.Lookup("mcp")
	c := r.Connection
	if c.OAuthClientID != "registered-1" || c.OAuthTokenURL != client.TokenURL || c.OAuthResource != client.Resource || c.AuthSecretKey != MCPClientSecret {
		t.Fatalf("connection after connect: %+v", c)
	}
	if s, _ := r.Secret(); s != "registered-secret-1" {
		t.Fatalf("client secret %q", s)
	}
	if got, _ := r.RefreshToken("alice"); got != "refresh-alice" {
		t.Fatalf("refresh token %q", got)
	}
	doc, _ := json.Marshal(c)
	if strings.Contains(string(doc), "registered-secret-1") || strings.Contains(string(doc), "refresh-alice") {
		t.Fatalf("connection JSON shows a secret: %s", doc)
	}
	// A second subject through the same client keeps it and its secret.
	client.ClientSecret = ""
	expiry := time.Unix(2000000000, 0)
	if err := accounts.Connect(ctx, "mcp", "bob", Grant{AccessToken: "access-bob", Expiry: expiry}, client, nil); err != nil {
		t.Fatal(err)
	}
	r, _ = v.Lookup("mcp")
	if s, _ := r.Secret(); s != "registered-secret-1" || len(r.Connection.OAuthAccounts) != 2 {
		t.Fatalf("after bob: secret %q, accounts %+v", s, r.Connection.OAuthAccounts)
	}
	// Bob's server granted no refresh token: his account serves its
	// access token until it expires, and has nothing to revoke.
	if _, ok := r.RefreshToken("bob"); ok {
		t.Fatal("bob's access token reads as a refresh token")
	}
	if tok, exp, ok := r.AccessGrant("bob"); !ok || tok != "access-bob" || !exp.Equal(expiry) {
		t.Fatalf("AccessGrant(bob) = %q, %v, %v", tok, exp, ok)
	}
	// The owner sees when bob's account stops serving; alice's, which
	// refreshes, has no known end.
	if a, _ := r.Connection.Account("bob"); !a.ExpiresAt.Equal(expiry) {
		t.Fatalf("bob's account expires at %v, want %v", a.ExpiresAt, expiry)
	}
	if a, _ := r.Connection.Account("alice"); !a.ExpiresAt.IsZero() {
		t.Fatalf("alice's account expires at %v, want no known end", a.ExpiresAt)
	}
	if got := r.AccountTokens(); len(got) != 1 || got[0] != "refresh-alice" {
		t.Fatalf("AccountTokens = %v", got)
	}

	// insufficient_scope widens alice's scopes once; bob is untouched.
	for range 2 {
		if err := accounts.RequireScopes(ctx, "mcp", "alice", []string{"files:write", "files:read", "bad scope"}); err != nil {
			t.Fatal(err)
		}
	}
	c, _ = v.Connection("mcp")
	alice, _ := c.Account("alice")
	bob, _ := c.Account("bob")
	if alice.Status != AccountNeedsReconnecting || strings.Join(alice.Scopes, " ") != "files:read files:write" || bob.Status != AccountConnected {
		t.Fatalf("alice %+v, bob %+v", alice, bob)
	}
	if err := accounts.RequireScopes(ctx, "mcp", "carol", []string{"x"}); !errors.Is(err, ErrAccountNotFound) {
		t.Fatalf("RequireScopes for a subject without an account = %v", err)
	}
}
