package proxy

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/identity"
)

const oauthClientSecret = "oauth-client-secret-value"

// tokenServer is an OAuth token endpoint for the client credentials
// grant: each answer is a new token, access-token-000001 and on.
type tokenServer struct {
	srv      *httptest.Server
	issued   atomic.Int32
	down     atomic.Bool
	refuse   atomic.Bool // the upstream refuses every token
	mu       sync.Mutex
	accepted map[string]bool // tokens the upstream takes
}

func newTokenServer(t *testing.T) *tokenServer {
	ts := &tokenServer{accepted: map[string]bool{}}
	ts.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if ts.down.Load() {
			w.Header().Set("Retry-After", "9")
			http.Error(w, "maintenance "+oauthClientSecret, http.StatusServiceUnavailable)
			return
		}
		if id, secret, _ := r.BasicAuth(); id != "gateway" || secret != oauthClientSecret {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		tok := fmt.Sprintf("access-token-%06d", ts.issued.Add(1))
		ts.mu.Lock()
		ts.accepted[tok] = true
		ts.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"access_token":%q,"token_type":"bearer","expires_in":3600}`, tok)
	}))
	t.Cleanup(ts.srv.Close)
	return ts
}

func (ts *tokenServer) revoke(tok string) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	delete(ts.accepted, tok)
}

// oauthUpstream answers 401 to a token the token server no longer
// accepts, and otherwise echoes the Authorization it got in a header and
// in the body: an agent reading the token would find it there.
func oauthUpstream(t *testing.T, ts *tokenServer) (*httptest.Server, *atomic.Value) {
	var last atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Get("Authorization")
		last.Store(auth)
		body := make([]byte, 64)
		n, _ := r.Body.Read(body)
		ts.mu.Lock()
		ok := ts.accepted[strings.TrimPrefix(auth, "Bearer ")] && !ts.refuse.Load()
		ts.mu.Unlock()
		w.Header().Set("X-Echo", auth)
		if !ok {
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprintf(w, `{"error":"bad token %s"}`, auth)
			return
		}
		fmt.Fprintf(w, `{"auth":%q,"body":%q}`, auth, body[:n])
	}))
	t.Cleanup(srv.Close)
	return srv, &last
}

func TestOAuthClientCredentialsThroughTheProxy(t *testing.T) {
	t.Parallel()
	g := newGateway(t, gatewayOptions{})
	ts := newTokenServer(t)
	up, last := oauthUpstream(t, ts)
	ctx := context.Background()
	if _, err := g.vault.Create(ctx, &credvault.Connection{ID: "m2m", Service: "github", BaseURL: up.URL,
		AuthMode: credvault.AuthOAuth2ClientCredentials, OAuthTokenURL: ts.srv.URL, OAuthClientID: "gateway",
		AuthSecretKey: "client_secret"}, map[string]string{"client_secret": oauthClientSecret}); err != nil {
		t.Fatal(err)
	}
	leaks := func(t *testing.T, a answer) {
		t.Helper()
		all := string(a.body) + fmt.Sprint(a.header) + g.logs.String()
		for _, secret := range []string{"access-token-0", oauthClientSecret} {
			if strings.Contains(all, secret) {
				t.Fatalf("%q reached the agent or the log: %s %v", secret, a.body, a.header)
			}
		}
	}

	t.Run("the token is injected and never shown", func(t *testing.T) {
		a := g.do(g.request(g.agent, "GET", "/proxy/m2m/items", ""))
		if a.status != http.StatusOK || last.Load() != "Bearer access-token-000001" {
			t.Fatalf("status %d, upstream saw %v: %s", a.status, last.Load(), a.body)
		}
		leaks(t, a)
	})

	t.Run("a 401 is retried once with a fresh token, body and all", func(t *testing.T) {
		ts.revoke("access-token-000001")
		a := g.do(g.request(g.agent, "POST", "/proxy/m2m/items", `{"n":1}`))
		if a.status != http.StatusOK || last.Load() != "Bearer access-token-000002" || !strings.Contains(string(a.body), `{\"n\":1}`) {
			t.Fatalf("status %d, upstream saw %v: %s", a.status, last.Load(), a.body)
		}
		leaks(t, a)
	})

	t.Run("a second 401 reaches the agent, redacted", func(t *testing.T) {
		ts.refuse.Store(true)
		a := g.do(g.request(g.agent, "GET", "/proxy/m2m/items", ""))
		if a.status != http.StatusUnauthorized || ts.issued.Load() != 3 {
			t.Fatalf("status %d after %d tokens: %s", a.status, ts.issued.Load(), a.body)
		}
		leaks(t, a)
	})

	t.Run("the token endpoint down answers 503 with retry_after_seconds", func(t *testing.T) {
		ts.down.Store(true)
		ts.refuse.Store(false)
		if _, err := g.vault.Update(ctx, "m2m", func(c *credvault.Connection) error { c.OAuthScopes = []string{"read"}; return nil }); err != nil {
			t.Fatal(err) // a changed configuration drops the cached token
		}
		a := g.do(g.request(g.agent, "GET", "/proxy/m2m/items", ""))
		if a.status != http.StatusServiceUnavailable || a.env["code"] != "UPSTREAM_AUTH_UNAVAILABLE" ||
			a.env["retry_after_seconds"] != float64(9) || a.header.Get("Retry-After") != "9" {
			t.Fatalf("status %d %v: %s", a.status, a.header, a.body)
		}
		leaks(t, a)
	})
}

// An account per subject: a subject without one is told what the owner
// must do, and no subject is ever served another's account.
func TestOAuthAccountPerSubject(t *testing.T) {
	t.Parallel()
	g := newGateway(t, gatewayOptions{})
	ctx := context.Background()
	if _, err := g.vault.Create(ctx, &credvault.Connection{ID: "drive", Service: "github", BaseURL: g.up.srv.URL,
		AuthMode: credvault.AuthOAuth2AuthorizationCode, OAuthAuthURL: "https://auth.example.com/authorize",
		OAuthTokenURL: "https://auth.example.com/token", OAuthClientID: "gateway", OAuthPerSubject: true}, nil); err != nil {
		t.Fatal(err)
	}
	if err := g.vault.ConnectAccount(ctx, "drive", "alice", "refresh-token-of-alice"); err != nil {
		t.Fatal(err)
	}
	// Subjects that are not alice's, however close to it.
	for _, subject := range []string{"bob", "alice-impostor", "Alice"} {
		r, _ := http.NewRequest("GET", g.srv.URL+"/proxy/drive/files", nil)
		if err := g.agent.Sign(r, identity.SignOptions{Created: g.clock.now(), Subject: subject}); err != nil {
			t.Fatal(err)
		}
		a := g.do(r)
		if a.status != http.StatusForbidden || a.env["code"] != "UPSTREAM_AUTH_REQUIRED" ||
			!strings.Contains(fmt.Sprint(a.env["error"]), "gateway connect drive --subject") {
			t.Fatalf("subject %q: status %d: %s", subject, a.status, a.body)
		}
		if strings.Contains(string(a.body), "refresh-token-of-alice") || strings.Contains(g.logs.String(), "refresh-token-of-alice") {
			t.Fatalf("alice's refresh token leaked")
		}
	}
}
