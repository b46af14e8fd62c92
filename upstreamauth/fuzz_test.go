package upstreamauth_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/upstreamauth"
)

// FuzzComplete feeds authorization responses to Complete. Whatever the
// query, a response without the flow's state is ErrStateMismatch, one
// naming another issuer is ErrIssuerMismatch, and nothing panics or
// returns a token the provider did not grant. "STATE" in the input
// stands for the flow's state.
func FuzzComplete(f *testing.F) {
	for _, seed := range []string{
		"state=STATE&code=abc",
		"state=STATE&code=abc&iss=https%3A%2F%2Fattacker.example",
		"state=STATE&error=access_denied&error_description=no",
		"state=STATE&error=%00%ff",
		"state=other&code=abc",
		"state=STATE&state=STATE&code=a&code=b",
		"",
	} {
		f.Add(seed)
	}
	endpoint := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"error":"invalid_grant"}`))
	}))
	f.Cleanup(endpoint.Close)
	ctx := context.Background()
	key, _ := credvault.GenerateMasterKey()
	vault, err := credvault.New(ctx, credvault.Config{Store: &credvault.MemoryStore{}, MasterKey: key, PollInterval: -1})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { vault.Close() })
	if _, err := vault.Create(ctx, &credvault.Connection{ID: "c", BaseURL: "https://api.example.com", AuthMode: credvault.AuthOAuth2AuthorizationCode,
		OAuthIssuer: "https://issuer.example", OAuthAuthURL: endpoint.URL + "/authorize", OAuthTokenURL: endpoint.URL + "/token",
		OAuthRevocationURL: endpoint.URL + "/revoke", OAuthClientID: "client"}, nil); err != nil {
		f.Fatal(err)
	}
	tokens, _ := upstreamauth.New(upstreamauth.Config{Vault: vault})
	f.Fuzz(func(t *testing.T, raw string) {
		res, _ := vault.Lookup("c")
		auth, err := tokens.Authorize(ctx, res, "http://127.0.0.1:1/callback")
		if err != nil {
			t.Fatal(err)
		}
		u, _ := url.Parse(auth.URL)
		state := u.Query().Get("state")
		q, err := url.ParseQuery(strings.ReplaceAll(raw, "STATE", state))
		if err != nil {
			return
		}
		refresh, err := auth.Complete(ctx, q)
		switch {
		case refresh != "":
			t.Fatalf("a refresh token from a provider that granted none: %q", refresh)
		case len(q["state"]) == 0 || q.Get("state") != state:
			if !errors.Is(err, upstreamauth.ErrStateMismatch) {
				t.Fatalf("state %q: %v", q.Get("state"), err)
			}
		case q.Has("iss") && (len(q["iss"]) != 1 || q.Get("iss") != "https://issuer.example"):
			if !errors.Is(err, upstreamauth.ErrIssuerMismatch) {
				t.Fatalf("iss %q: %v", q["iss"], err)
			}
		case err == nil:
			t.Fatal("Complete succeeded without a grant")
		}
	})
}
