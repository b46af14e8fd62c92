package admin

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
	"testing"
	"time"

	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/upstreamauth"
)

// authServer is an authorization server that publishes its metadata
// (with the RFC 9207 iss parameter) and redeems one code, "code-ok", for
// a refresh token when the PKCE verifier comes with it.
func authServer(t *testing.T) *httptest.Server {
	t.Helper()
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/.well-known/oauth-authorization-server":
			json.NewEncoder(w).Encode(map[string]any{"issuer": srv.URL, "authorization_endpoint": srv.URL + "/authorize",
				"token_endpoint": srv.URL + "/token", "authorization_response_iss_parameter_supported": true})
		case "/token":
			if r.FormValue("code") != "code-ok" || r.FormValue("code_verifier") == "" || r.FormValue("grant_type") != "authorization_code" {
				w.WriteHeader(http.StatusBadRequest)
				w.Write([]byte(`{"error":"invalid_grant"}`))
				return
			}
			w.Write([]byte(`{"access_token":"access-of-the-account","token_type":"Bearer","expires_in":3600,"refresh_token":"refresh-of-the-account"}`))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// newConnector returns a Connector over a vault holding "drive" (one
// account per subject) and "mail" (one account), both at srv.
func newConnector(t *testing.T, srv *httptest.Server, now func() time.Time) (*Connector, *credvault.Vault) {
	t.Helper()
	v := testVault(t)
	for _, c := range []*credvault.Connection{
		{ID: "drive", BaseURL: "https://drive.example.com", OAuthPerSubject: true},
		{ID: "mail", BaseURL: "https://mail.example.com"},
	} {
		c.AuthMode, c.OAuthIssuer, c.OAuthClientID = credvault.AuthOAuth2AuthorizationCode, srv.URL, "client"
		if _, err := v.Create(context.Background(), c, nil); err != nil {
			t.Fatal(err)
		}
	}
	tokens, err := upstreamauth.New(upstreamauth.Config{Vault: v})
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewConnector(ConnectorConfig{Vault: v, Tokens: tokens, Clock: now})
	if err != nil {
		t.Fatal(err)
	}
	return c, v
}

const callbackURL = "https://dashboard.example.com/oauth/callback"

// TestConnectorFinishes: a flow started for alice of drive, finished
// with the provider's code, seals alice's refresh token; the URL carries
// the PKCE challenge and the relay's redirect URI, never the verifier.
func TestConnectorFinishes(t *testing.T) {
	t.Parallel()
	srv := authServer(t)
	c, v := newConnector(t, srv, nil)
	ctx := context.Background()
	s, err := c.Start(ctx, "drive", "alice", callbackURL)
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(s.AuthorizationURL)
	q := u.Query()
	if !strings.HasPrefix(s.AuthorizationURL, srv.URL+"/authorize?") || q.Get("state") != s.State || q.Get("redirect_uri") != callbackURL ||
		q.Get("code_challenge_method") != "S256" || q.Get("code_verifier") != "" {
		t.Fatalf("authorization URL %s", s.AuthorizationURL)
	}
	got, err := c.Finish(ctx, "drive", "alice", url.Values{"state": {s.State}, "iss": {srv.URL}, "code": {"code-ok"}})
	if err != nil {
		t.Fatal(err)
	}
	if got.ConnectionID != "drive" || got.Subject != "alice" || got.Status != credvault.AccountConnected {
		t.Fatalf("finish = %+v", got)
	}
	res, _ := v.Lookup("drive")
	if r, ok := res.RefreshToken("alice"); !ok || r != "refresh-of-the-account" {
		t.Fatal("alice's refresh token is not sealed in the vault")
	}
	b, _ := json.Marshal(got)
	if strings.Contains(string(b), "refresh-of-the-account") || strings.Contains(string(b), "access-of-the-account") {
		t.Fatalf("the answer carries a token: %s", b)
	}
}

// TestConnectorAttacks: each redirect is refused, and connects no
// account. A flow is used once, whatever its outcome.
func TestConnectorAttacks(t *testing.T) {
	t.Parallel()
	srv := authServer(t)
	now := time.Now()
	ctx := context.Background()
	for _, tc := range []struct {
		name          string
		conn, subject string // what the relay says the flow is for
		query         func(state string) url.Values
		late          bool // the redirect comes after ConnectTTL
		want          string
		keeps         bool // the flow in progress is left alone
	}{
		{name: "state of another subject's flow", conn: "drive", subject: "bob",
			query: func(s string) url.Values { return url.Values{"state": {s}, "iss": {srv.URL}, "code": {"code-ok"}} },
			want:  "another connection or subject"},
		{name: "state of another connection's flow", conn: "mail", subject: "",
			query: func(s string) url.Values { return url.Values{"state": {s}, "iss": {srv.URL}, "code": {"code-ok"}} },
			want:  "another connection or subject"},
		{name: "forged state", conn: "drive", subject: "alice",
			query: func(string) url.Values {
				return url.Values{"state": {"forged-state"}, "iss": {srv.URL}, "code": {"code-ok"}}
			},
			want: "no connect flow in progress", keeps: true},
		{name: "mix-up: iss of another issuer", conn: "drive", subject: "alice",
			query: func(s string) url.Values {
				return url.Values{"state": {s}, "iss": {"https://evil.example"}, "code": {"code-ok"}}
			},
			want: "iss is not the connection's issuer"},
		{name: "mix-up: iss missing from a server that sends it", conn: "drive", subject: "alice",
			query: func(s string) url.Values { return url.Values{"state": {s}, "code": {"code-ok"}} },
			want:  "iss is not the connection's issuer"},
		{name: "expired flow", conn: "drive", subject: "alice", late: true,
			query: func(s string) url.Values { return url.Values{"state": {s}, "iss": {srv.URL}, "code": {"code-ok"}} },
			want:  "no connect flow in progress"},
		{name: "provider refused", conn: "drive", subject: "alice",
			query: func(s string) url.Values {
				return url.Values{"state": {s}, "iss": {srv.URL}, "error": {"access_denied"}}
			},
			want: "refused the authorization: access_denied"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			at := now
			c, v := newConnector(t, srv, func() time.Time { return at })
			s, err := c.Start(ctx, "drive", "alice", callbackURL)
			if err != nil {
				t.Fatal(err)
			}
			if tc.late {
				at = at.Add(ConnectTTL)
			}
			_, err = c.Finish(ctx, tc.conn, tc.subject, tc.query(s.State))
			if _, msg, _ := Problem(err); err == nil || !strings.Contains(msg, tc.want) {
				t.Fatalf("finish: %v, want an answer saying %q", err, tc.want)
			}
			for _, id := range []string{"drive", "mail"} {
				if res, _ := v.Lookup(id); len(res.Connection.OAuthAccounts) != 0 {
					t.Fatalf("%s has accounts %+v", id, res.Connection.OAuthAccounts)
				}
			}
			// A refused redirect ends its flow: the right one no longer
			// connects. A state that names none leaves the flow alone.
			_, err = c.Finish(ctx, "drive", "alice", url.Values{"state": {s.State}, "iss": {srv.URL}, "code": {"code-ok"}})
			if (err == nil) != tc.keeps {
				t.Fatalf("the right redirect afterwards: %v", err)
			}
		})
	}
}

// TestConnectorReplay: a redirect replayed after it connected the
// account is refused.
func TestConnectorReplay(t *testing.T) {
	t.Parallel()
	srv := authServer(t)
	c, _ := newConnector(t, srv, nil)
	ctx := context.Background()
	s, err := c.Start(ctx, "mail", "", callbackURL)
	if err != nil {
		t.Fatal(err)
	}
	q := url.Values{"state": {s.State}, "iss": {srv.URL}, "code": {"code-ok"}}
	if _, err := c.Finish(ctx, "mail", "", q); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Finish(ctx, "mail", "", q); err == nil {
		t.Fatal("a replayed redirect was accepted")
	}
}

// TestConnectorStartRefuses: what cannot start a flow.
func TestConnectorStartRefuses(t *testing.T) {
	t.Parallel()
	srv := authServer(t)
	c, _ := newConnector(t, srv, nil)
	for _, tc := range []struct{ name, id, subject, redirect, want string }{
		{"per-subject connection without a subject", "drive", "", callbackURL, "name the subject"},
		{"one-account connection with a subject", "mail", "alice", callbackURL, "name no subject"},
		{"relative redirect URI", "mail", "", "/oauth/callback", "redirect_uri"},
		{"subject with a control character", "drive", "al\nice", callbackURL, "control characters"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.Start(context.Background(), tc.id, tc.subject, tc.redirect)
			if _, msg, _ := Problem(err); err == nil || !strings.Contains(msg, tc.want) {
				t.Fatalf("start: %v, want %q", err, tc.want)
			}
		})
	}
	mcp := &credvault.Connection{ID: "tools", Protocol: credvault.ProtocolMCP, BaseURL: "https://mcp.example.com", AuthMode: credvault.AuthOAuth2AuthorizationCode}
	if _, err := c.cfg.Vault.Create(context.Background(), mcp, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Start(context.Background(), "tools", "", callbackURL); err == nil || !strings.Contains(err.Error(), "gateway connect") {
		t.Fatalf("an MCP connection without ConnectorConfig.ConnectMCP: %v", err)
	}
	if _, err := c.Start(context.Background(), "nope", "", callbackURL); err != credvault.ErrNotFound {
		t.Fatalf("unknown connection: %v", err)
	}
}

// TestConnectorEndsMCPFlows: an MCP flow waits in ConnectMCP for its
// authorization response; a flow refused at Finish (another subject's)
// or expired ends there, instead of waiting out ConnectTTL.
func TestConnectorEndsMCPFlows(t *testing.T) {
	t.Parallel()
	srv := authServer(t)
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	c, v := newConnector(t, srv, clock)
	tools := &credvault.Connection{ID: "tools", Protocol: credvault.ProtocolMCP, BaseURL: "https://mcp.example.com",
		AuthMode: credvault.AuthOAuth2AuthorizationCode, OAuthPerSubject: true}
	if _, err := v.Create(context.Background(), tools, nil); err != nil {
		t.Fatal(err)
	}
	ended := make(chan error, 4)
	n := 0
	c.cfg.ConnectMCP = func(ctx context.Context, id string, m upstreamauth.MCPConnect) error {
		mu.Lock()
		n++
		state := fmt.Sprint("state-", n)
		mu.Unlock()
		_, err := m.Authorize(ctx, srv.URL+"/authorize?state="+state)
		ended <- err
		return err
	}
	for _, tt := range []struct {
		name   string
		finish func(t *testing.T, s *ConnectStarted) error
	}{
		{"attack: alice's flow finished as bob's", func(t *testing.T, s *ConnectStarted) error {
			_, err := c.Finish(context.Background(), "tools", "bob", url.Values{"state": {s.State}, "code": {"code-ok"}})
			return err
		}},
		{"expired", func(t *testing.T, s *ConnectStarted) error {
			mu.Lock()
			now = now.Add(ConnectTTL)
			mu.Unlock()
			_, err := c.Finish(context.Background(), "tools", "alice", url.Values{"state": {s.State}, "code": {"code-ok"}})
			return err
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, err := c.Start(context.Background(), "tools", "alice", callbackURL)
			if err != nil {
				t.Fatal(err)
			}
			if err := tt.finish(t, s); err == nil {
				t.Fatal("finished")
			}
			if err := <-ended; !errors.Is(err, context.Canceled) {
				t.Fatalf("the flow ended with %v", err)
			}
		})
	}
}
