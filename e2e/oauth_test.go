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
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/credvault/sqlitestore"
	"github.com/idnhq/idn/e2e/internal/oauthoptest"
	"github.com/idnhq/idn/gateway"
	"github.com/idnhq/idn/identity"
	"github.com/idnhq/idn/upstreamauth"
)

// lockedBuffer is a log sink the gateway writes from many goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// tokenUpstream is an API that takes only the provider's live access
// tokens; it answers the user a token was issued to, and echoes the
// Authorization it got in a header and the body, as a careless API
// would. seen collects every Authorization it was sent.
type tokenUpstream struct {
	srv  *httptest.Server
	mu   sync.Mutex
	seen []string
}

func newTokenUpstream(t *testing.T, as *oauthoptest.Server) *tokenUpstream {
	u := &tokenUpstream{}
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Get("Authorization")
		u.mu.Lock()
		u.seen = append(u.seen, auth)
		u.mu.Unlock()
		w.Header().Set("X-Echo", auth)
		user, ok := as.UserOf(auth)
		if !ok {
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprintf(w, `{"error":"invalid token %s"}`, auth)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"user":%q,"auth":%q}`, user, auth)
	}))
	t.Cleanup(u.srv.Close)
	return u
}

func (u *tokenUpstream) tokens() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	var out []string
	for _, s := range u.seen {
		if t := strings.TrimPrefix(s, "Bearer "); t != "" && t != s {
			out = append(out, t)
		}
	}
	return out
}

// up waits until gw serves: its claims are loaded.
func up(t *testing.T, gw *inproc) {
	t.Helper()
	ready, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if err := gw.gw.Up(ready); err != nil {
		t.Fatal(err)
	}
}

// callAs sends one request signed by agent for subject.
func callAs(t *testing.T, method, url string, agent *identity.Identity, subject string) answer {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := agent.Sign(req, identity.SignOptions{Subject: subject}); err != nil {
		t.Fatal(err)
	}
	a, err := do(http.DefaultClient, req)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// noSecrets fails when any of secrets is in what an agent or operator can
// read: the answers, the admin API's view of the connection, the metrics
// and the gateway's log.
func noSecrets(t *testing.T, gw *inproc, logs *lockedBuffer, secrets []string, answers ...answer) {
	t.Helper()
	var seen strings.Builder
	for _, a := range answers {
		fmt.Fprintf(&seen, "%d %v %s\n", a.status, a.header, a.body)
	}
	for _, path := range []string{"/api/admin/connections", "/metrics", "/health/ready"} {
		a := call(t, http.DefaultClient, "GET", gw.url+path, nil, nil)
		fmt.Fprintf(&seen, "%s %d %s\n", path, a.status, a.body)
	}
	seen.WriteString(logs.String())
	for _, s := range secrets {
		if s != "" && strings.Contains(seen.String(), s) {
			t.Fatalf("a secret (%.6s…) is readable by an agent or in the log:\n%s", s, seen.String())
		}
	}
}

func TestOAuthClientCredentialsAgainstARealProvider(t *testing.T) {
	t.Parallel()
	as := oauthoptest.New(t)
	api := newTokenUpstream(t, as)
	w := newWorld(t)
	logs := &lockedBuffer{}
	gw := startGateway(t, w, func(c *gateway.Config) {
		c.Logger = slog.New(slog.NewJSONHandler(logs, nil))
		c.Claims.TTL = time.Minute // a busy machine must not make the claims stale mid-test
	},
		conn{c: credvault.Connection{ID: "m2m", Service: "github", BaseURL: api.srv.URL, AuthMode: credvault.AuthOAuth2ClientCredentials,
			OAuthTokenURL: as.URL() + "/oauth/token", OAuthClientID: oauthoptest.ServiceID, OAuthScopes: []string{"read"}, AuthSecretKey: "client_secret"},
			secrets: map[string]string{"client_secret": oauthoptest.ServiceKey}})
	up(t, gw)

	const calls = 50
	answers := make([]answer, calls)
	var wg sync.WaitGroup
	for i := range calls {
		wg.Go(func() {
			a, err := try(http.DefaultClient, "GET", gw.url+"/proxy/m2m/items", w.agent, nil)
			if err != nil {
				t.Error(err)
			}
			answers[i] = a
		})
	}
	wg.Wait()
	for _, a := range answers {
		if a.status != http.StatusOK || !strings.Contains(string(a.body), `"user":"`+oauthoptest.ServiceID+`"`) {
			t.Fatalf("status %d: %s", a.status, a.body)
		}
	}
	if n := as.TokenRequests(); n != 1 {
		t.Fatalf("%d calls cost %d token requests, want 1", calls, n)
	}
	metrics := call(t, http.DefaultClient, "GET", gw.url+"/metrics", nil, nil)
	if !strings.Contains(string(metrics.body), `idn_gateway_oauth_token_requests_total{result="success"} 1`) {
		t.Fatalf("metrics lack the token request:\n%s", metrics.body)
	}

	// The provider revokes the token: the next call is retried once with
	// a fresh one.
	as.ExpireAccess()
	a := call(t, http.DefaultClient, "GET", gw.url+"/proxy/m2m/items", w.agent, nil)
	if a.status != http.StatusOK || as.TokenRequests() != 2 {
		t.Fatalf("after revocation: status %d after %d token requests: %s", a.status, as.TokenRequests(), a.body)
	}
	// The admin test route probes with a token too.
	probe := call(t, http.DefaultClient, "POST", gw.url+"/api/admin/connections/m2m/test", w.agent, nil)
	if probe.status != http.StatusOK || !strings.Contains(string(probe.body), `"ok":true`) {
		t.Fatalf("test route: %d %s", probe.status, probe.body)
	}
	noSecrets(t, gw, logs, append(api.tokens(), oauthoptest.ServiceKey), append(answers, a, probe)...)
}

// connectAccount runs the owner's connect flow as gateway connect does:
// the provider's login page signs in user, and the redirect comes back to
// a loopback listener.
func connectAccount(t *testing.T, as *oauthoptest.Server, tokens *upstreamauth.Tokens, vault *credvault.Vault, ln net.Listener, subject, user string) {
	t.Helper()
	ctx := context.Background()
	res, _ := vault.Lookup("drive")
	auth, err := tokens.Authorize(ctx, res, "http://"+ln.Addr().String()+"/callback")
	if err != nil {
		t.Fatal(err)
	}
	handler, results := auth.RedirectHandler(ctx)
	srv := &http.Server{Handler: handler}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()

	// A forged redirect with another state is refused and ends nothing.
	forged := call(t, http.DefaultClient, "GET", "http://"+ln.Addr().String()+"/callback?state=forged&code=stolen", nil, nil)
	if forged.status != http.StatusBadRequest {
		t.Fatalf("forged state: %d %s", forged.status, forged.body)
	}
	as.SignIn(user)
	page := call(t, http.DefaultClient, "GET", auth.URL, nil, nil) // the browser, through login and back
	if page.status != http.StatusOK {
		t.Fatalf("connect page: %d %s", page.status, page.body)
	}
	r := <-results
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	if err := vault.ConnectAccount(ctx, "drive", subject, r.RefreshToken); err != nil {
		t.Fatal(err)
	}
}

// relisten listens on addr again (the redirect URI the provider knows).
func relisten(t *testing.T, addr string) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

func TestOAuthOwnerConnectedAccountsAgainstARealProvider(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	as := oauthoptest.New(t, "http://"+addr+"/callback")
	api := newTokenUpstream(t, as)
	w := newWorld(t)
	logs := &lockedBuffer{}
	var dataDir string
	var key credvault.MasterKey
	gw := startGateway(t, w, func(c *gateway.Config) {
		c.Logger = slog.New(slog.NewJSONHandler(logs, nil))
		c.Claims.TTL = time.Minute
		dataDir, key = c.DataDir, c.MasterKey
	}, conn{c: credvault.Connection{ID: "drive", Service: "github", BaseURL: api.srv.URL, AuthMode: credvault.AuthOAuth2AuthorizationCode,
		OAuthIssuer: as.URL(), OAuthClientID: oauthoptest.ClientID, OAuthScopes: []string{"openid", "offline_access"},
		OAuthPerSubject: true, AuthSecretKey: "client_secret"}, secrets: map[string]string{"client_secret": oauthoptest.ClientSecret}})
	up(t, gw)
	vault := gw.gw.Vault()
	tokens, err := upstreamauth.New(upstreamauth.Config{Vault: vault})
	if err != nil {
		t.Fatal(err)
	}
	refreshOf := func(subject string) string {
		res, _ := vault.Lookup("drive")
		tok, _ := res.RefreshToken(subject)
		return tok
	}

	t.Run("a subject without an account is told what the owner must do", func(t *testing.T) {
		a := callAs(t, "GET", gw.url+"/proxy/drive/files", w.agent, "alice")
		a.want(t, http.StatusForbidden, "UPSTREAM_AUTH_REQUIRED")
		if !strings.Contains(string(a.body), `gateway connect drive --subject \"alice\"`) {
			t.Fatalf("the refusal does not say what to run: %s", a.body)
		}
	})

	connectAccount(t, as, tokens, vault, relisten(t, addr), "alice", "alice-user")
	connectAccount(t, as, tokens, vault, relisten(t, addr), "bob", "bob-user")

	t.Run("each subject is served its own account, never another's", func(t *testing.T) {
		for subject, user := range map[string]string{"alice": "alice-user", "bob": "bob-user"} {
			a := callAs(t, "GET", gw.url+"/proxy/drive/files", w.agent, subject)
			if a.status != http.StatusOK || !strings.Contains(string(a.body), `"user":"`+user+`"`) {
				t.Fatalf("subject %s: %d %s", subject, a.status, a.body)
			}
		}
		for _, subject := range []string{"carol", "Alice", "alice-user", "acme"} {
			callAs(t, "GET", gw.url+"/proxy/drive/files", w.agent, subject).want(t, http.StatusForbidden, "UPSTREAM_AUTH_REQUIRED")
		}
	})

	t.Run("a redirect URI other than the registered one is refused by the provider", func(t *testing.T) {
		res, _ := vault.Lookup("drive")
		auth, err := tokens.Authorize(ctx, res, "http://127.0.0.1:1/elsewhere")
		if err != nil {
			t.Fatal(err)
		}
		as.SignIn("alice-user")
		client := &http.Client{CheckRedirect: func(r *http.Request, _ []*http.Request) error {
			if r.URL.Host == "127.0.0.1:1" {
				return errors.New("the provider redirected to an unregistered URI")
			}
			return nil
		}}
		a, err := do(client, mustRequest(t, auth.URL))
		if err != nil || a.status < 400 {
			t.Fatalf("unregistered redirect URI: %v, status %d", err, a.status)
		}
	})

	t.Run("an authorization response naming another issuer is refused", func(t *testing.T) {
		res, _ := vault.Lookup("drive")
		auth, err := tokens.Authorize(ctx, res, "http://"+addr+"/callback")
		if err != nil {
			t.Fatal(err)
		}
		u, _ := url.Parse(auth.URL)
		state := u.Query().Get("state")
		for name, q := range map[string]url.Values{
			"mismatched iss":   {"state": {state}, "code": {"x"}, "iss": {"https://attacker.example"}},
			"two iss":          {"state": {state}, "code": {"x"}, "iss": {as.URL(), "https://attacker.example"}},
			"mismatched state": {"state": {state + "x"}, "code": {"x"}, "iss": {as.URL()}},
		} {
			_, err := auth.Complete(ctx, q)
			if !errors.Is(err, upstreamauth.ErrIssuerMismatch) && !errors.Is(err, upstreamauth.ErrStateMismatch) {
				t.Errorf("%s: Complete = %v", name, err)
			}
		}
	})

	t.Run("a rotated refresh token is stored", func(t *testing.T) {
		before := refreshOf("alice")
		as.ExpireAccess() // every access token dies: the next call refreshes
		a := callAs(t, "GET", gw.url+"/proxy/drive/files", w.agent, "alice")
		after := refreshOf("alice")
		if a.status != http.StatusOK || after == before || !as.HasRefresh(after) || as.HasRefresh(before) {
			t.Fatalf("status %d; stored token changed %v, live %v", a.status, after != before, as.HasRefresh(after))
		}
	})

	t.Run("concurrent refreshes racing a rotation lose no refresh token", func(t *testing.T) {
		// A second process on the same store file.
		st, err := sqlitestore.Open(ctx, filepath.Join(dataDir, sqlitestore.DefaultFileName))
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		other, err := credvault.New(ctx, credvault.Config{Store: st, MasterKey: key, PollInterval: 10 * time.Millisecond,
			Extensions: gateway.VaultExtensions()})
		if err != nil {
			t.Fatal(err)
		}
		defer other.Close()
		racers := []*upstreamauth.Tokens{tokens}
		if t2, err := upstreamauth.New(upstreamauth.Config{Vault: other}); err == nil {
			racers = append(racers, t2)
		}
		vaults := []*credvault.Vault{vault, other}
		before := as.RefreshTries()
		var wg sync.WaitGroup
		for i, tk := range racers {
			wg.Go(func() {
				res, _ := vaults[i].Lookup("drive")
				_, _ = tk.Token(ctx, res, "bob") // a loser may be refused once
			})
		}
		wg.Wait()
		if n := as.RefreshTries() - before; n < 2 {
			t.Fatalf("%d refreshes, want one per process", n)
		}
		eventually(t, 5*time.Second, "the stored refresh token to be live at the provider", func() bool {
			return as.HasRefresh(refreshOf("bob"))
		})
		a := callAs(t, "GET", gw.url+"/proxy/drive/files", w.agent, "bob")
		if a.status != http.StatusOK {
			t.Fatalf("bob after the race: %d %s", a.status, a.body)
		}
	})

	t.Run("an expired refresh token needs reconnecting", func(t *testing.T) {
		as.ExpireAccess()
		as.Forget(refreshOf("alice"))
		callAs(t, "GET", gw.url+"/proxy/drive/files", w.agent, "alice") // the upstream's 401: the retry's refresh is refused
		a := callAs(t, "GET", gw.url+"/proxy/drive/files", w.agent, "alice")
		a.want(t, http.StatusForbidden, "UPSTREAM_AUTH_REQUIRED")
		var env struct {
			NeedsReconnecting bool `json:"needs_reconnecting"`
		}
		if json.Unmarshal(a.body, &env) != nil || !env.NeedsReconnecting {
			t.Fatalf("refusal: %s", a.body)
		}
		c := call(t, http.DefaultClient, "GET", gw.url+"/api/admin/connections/drive", nil, nil)
		if !strings.Contains(string(c.body), `"subject":"alice","status":"needs_reconnecting"`) {
			t.Fatalf("connection: %s", c.body)
		}
	})

	t.Run("disconnecting revokes the refresh token at the provider", func(t *testing.T) {
		bob := refreshOf("bob")
		req, _ := http.NewRequest("DELETE", gw.url+"/api/admin/connections/drive/accounts?subject=bob", nil)
		a, err := do(http.DefaultClient, req)
		if err != nil || a.status != http.StatusOK || !strings.Contains(string(a.body), `"revoked_at_provider":true`) || as.HasRefresh(bob) {
			t.Fatalf("disconnect: %v %d %s", err, a.status, a.body)
		}
		callAs(t, "GET", gw.url+"/proxy/drive/files", w.agent, "bob").want(t, http.StatusForbidden, "UPSTREAM_AUTH_REQUIRED")
	})

	noSecrets(t, gw, logs, append(append(as.RefreshTokens(), api.tokens()...), oauthoptest.ClientSecret))
}

func mustRequest(t *testing.T, u string) *http.Request {
	t.Helper()
	r, err := http.NewRequest("GET", u, nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestGatewayConnectCommand runs the built gateway connect against the
// provider: it prints the URL, the "browser" signs in, and the refresh
// token lands sealed in the store, printed nowhere.
func TestGatewayConnectCommand(t *testing.T) {
	bin, err := buildGateway()
	if err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	as := oauthoptest.New(t, "http://"+addr+"/callback")
	key, _ := credvault.GenerateMasterKey()
	dataDir := t.TempDir()
	env := append(os.Environ(), "GATEWAY_DATA_DIR="+dataDir, "GATEWAY_MASTER_KEY="+key.Encode())
	add := exec.Command(bin, "add", "--id", "drive", "--base-url", "https://api.example.com",
		"--auth-mode", credvault.AuthOAuth2AuthorizationCode, "--oauth-issuer", as.URL(), "--oauth-client-id", oauthoptest.ClientID,
		"--oauth-scope", "openid", "--oauth-scope", "offline_access", "--auth-secret-key", "client_secret", "--secret", "client_secret=-")
	add.Env, add.Stdin = env, strings.NewReader(oauthoptest.ClientSecret+"\n")
	if out, err := add.CombinedOutput(); err != nil {
		t.Fatalf("gateway add: %v: %s", err, out)
	}

	connect := exec.Command(bin, "connect", "drive", "--listen", addr)
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
	for link == "" && lines.Scan() {
		printed.WriteString(lines.Text() + "\n")
		if l := strings.TrimSpace(lines.Text()); strings.HasPrefix(l, as.URL()) {
			link = l
		}
	}
	if link == "" {
		_ = connect.Wait()
		t.Fatalf("no URL printed: %s %s", printed.String(), stderr.String())
	}
	for lines.Scan() { // waits for the listener line, then the result
		printed.WriteString(lines.Text() + "\n")
		if strings.HasPrefix(lines.Text(), "Waiting") {
			break
		}
	}
	as.SignIn("owner-user")
	if a := call(t, http.DefaultClient, "GET", link, nil, nil); a.status != http.StatusOK {
		t.Fatalf("browser: %d %s", a.status, a.body)
	}
	rest, _ := io.ReadAll(stdout)
	printed.Write(rest)
	if err := connect.Wait(); err != nil || !strings.Contains(printed.String(), "drive: connected its account") {
		t.Fatalf("gateway connect: %v: %s %s", err, printed.String(), stderr.String())
	}

	st, err := sqlitestore.Open(context.Background(), filepath.Join(dataDir, sqlitestore.DefaultFileName))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	v, err := credvault.New(context.Background(), credvault.Config{Store: st, MasterKey: key, PollInterval: -1, Extensions: gateway.VaultExtensions()})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	res, _ := v.Lookup("drive")
	refresh, ok := res.RefreshToken("")
	if !ok || !as.HasRefresh(refresh) {
		t.Fatalf("stored refresh token live at the provider: %v", ok)
	}
	if strings.Contains(printed.String()+stderr.String(), refresh) {
		t.Fatal("gateway connect printed the refresh token")
	}

	// Deleting the connection revokes its account at the provider.
	del := exec.Command(bin, "delete", "--id", "drive")
	del.Env = env
	out, err := del.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "1 of 1 connected accounts revoked") || as.HasRefresh(refresh) {
		t.Fatalf("gateway delete: %v: %s (token still live: %v)", err, out, as.HasRefresh(refresh))
	}
}
