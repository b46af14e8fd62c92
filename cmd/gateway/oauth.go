package main

import (
	"context"
	"crypto/subtle"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/gateway"
	"github.com/idnhq/idn/upstreamauth"
)

func init() {
	register(&command{name: "connect", summary: "connect an OAuth account to an oauth2_authorization_code connection, http or mcp (prints a URL to open)", run: runConnect})
}

// oauthFlags adds the OAuth fields of a connection to add's flags.
func oauthFlags(fs *flag.FlagSet, c *credvault.Connection, scopes *listFlag) {
	fs.StringVar(&c.OAuthTokenURL, "oauth-token-url", "", "OAuth token endpoint (oauth2_* modes)")
	fs.StringVar(&c.OAuthAuthURL, "oauth-authorization-url", "", "OAuth authorization endpoint (oauth2_authorization_code)")
	fs.StringVar(&c.OAuthIssuer, "oauth-issuer", "", "issuer to discover the endpoints from (RFC 8414 or OpenID discovery)")
	fs.StringVar(&c.OAuthRevocationURL, "oauth-revocation-url", "", "RFC 7009 revocation endpoint, used when an account is disconnected")
	fs.StringVar(&c.OAuthClientID, "oauth-client-id", "", "the gateway's OAuth client id")
	fs.Var(scopes, "oauth-scope", "OAuth scope to ask for; repeatable")
	fs.StringVar(&c.OAuthAudience, "oauth-audience", "", "audience parameter of token requests")
	fs.StringVar(&c.OAuthResource, "oauth-resource", "", "resource parameter (RFC 8707)")
	fs.BoolVar(&c.OAuthPerSubject, "oauth-per-subject", false, "one account per idn-subject (oauth2_authorization_code)")
}

// connectTimeout bounds how long connect waits for the owner's browser.
const connectTimeout = 10 * time.Minute

func runConnect(ctx context.Context, env *cliEnv, args []string) error {
	const synopsis = "ID [--subject SUBJECT] [--listen 127.0.0.1:PORT] [--redirect-path /callback] [--client-id-metadata-url URL]"
	fs := newFlagSet("connect")
	id := idFlag(fs)
	subject := fs.String("subject", "", "the idn-subject the account serves (connections with oauth_per_subject)")
	listen := fs.String("listen", "127.0.0.1:0", "loopback address for the redirect; fix the port when the provider needs the exact redirect URI")
	path := fs.String("redirect-path", "/callback", "path of the redirect URI")
	cimd := fs.String("client-id-metadata-url", "", "https URL where the gateway's Client ID Metadata Document is published (mcp connections)")
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") { // gateway connect ID [flags]
		*id, args = args[0], args[1:]
	}
	if err := parseFlags(env, fs, synopsis, args); err != nil {
		return err
	}
	if err := requireID(*id); err != nil {
		return err
	}
	host, _, err := net.SplitHostPort(*listen)
	if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
		return usagef("--listen must be a loopback address and port, such as 127.0.0.1:8976")
	}
	v, closeVault, err := openVault(ctx, env, fs)
	if err != nil {
		return err
	}
	defer closeVault()
	res, ok := v.Lookup(*id)
	if !ok {
		return fmt.Errorf("%w: %q", credvault.ErrNotFound, *id)
	}
	c := res.Connection
	switch {
	case c.AuthMode != credvault.AuthOAuth2AuthorizationCode:
		return usagef("connection %s uses auth_mode %q; only %q connections have accounts to connect", c.ID, c.AuthMode, credvault.AuthOAuth2AuthorizationCode)
	case c.OAuthPerSubject && *subject == "":
		return usagef("connection %s has one account per subject: name it with --subject", c.ID)
	case !c.OAuthPerSubject && *subject != "":
		return usagef("connection %s has one account for every subject: drop --subject", c.ID)
	}
	tokens, err := upstreamauth.New(upstreamauth.Config{Vault: v})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	defer ln.Close()
	redirect := "http://" + ln.Addr().String() + *path
	if c.Protocol == credvault.ProtocolMCP {
		return connectMCP(ctx, env, v, tokens, c, upstreamauth.MCPConnect{Subject: *subject, RedirectURI: redirect, ClientIDMetadataURL: *cimd}, ln, *path)
	}
	auth, err := tokens.Authorize(ctx, res, redirect)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	handler, results := auth.RedirectHandler(ctx)
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }() // ends with Close below
	defer srv.Close()
	fmt.Fprintf(env.stdout, "Open this URL in a browser and sign in to the account to connect:\n\n  %s\n\n"+
		"Waiting for the provider to redirect to %s (register it as a redirect URI of client %s) ...\n",
		auth.URL, redirect, strconv.Quote(c.OAuthClientID))
	var result upstreamauth.Result
	select {
	case result = <-results:
	case <-ctx.Done():
		return errors.New("no redirect came back before the time ran out; run connect again")
	}
	if result.Err != nil {
		return result.Err
	}
	if err := v.ConnectAccount(ctx, c.ID, *subject, result.RefreshToken); err != nil {
		return err
	}
	who := "its account"
	if *subject != "" {
		who = "the account of subject " + strconv.Quote(*subject)
	}
	fmt.Fprintf(env.stdout, "%s: connected %s; its refresh token is sealed in the store.\n", c.ID, who)
	return nil
}

// revokeAccounts revokes at the provider the refresh tokens of a deleted
// connection's accounts (RFC 7009), saying how many the provider
// confirmed; the store has forgotten them already.
func revokeAccounts(ctx context.Context, env *cliEnv, v *credvault.Vault, res *credvault.Resolved) {
	refresh := res.AccountTokens()
	if len(refresh) == 0 {
		return
	}
	tokens, err := upstreamauth.New(upstreamauth.Config{Vault: v})
	if err != nil {
		return
	}
	revoked := 0
	for _, r := range refresh {
		if ok, err := tokens.Revoke(ctx, res, r); ok && err == nil {
			revoked++
		}
	}
	fmt.Fprintf(env.stdout, "%s: %d of %d connected accounts revoked at the provider\n", res.Connection.ID, revoked, len(refresh))
}

// connectMCP runs the MCP connect flow of connection c (an MCP server
// answering 401): it prints the authorization URL, waits on ln for the
// redirect to path, and stores the account and what was discovered.
func connectMCP(ctx context.Context, env *cliEnv, v *credvault.Vault, tokens *upstreamauth.Tokens, c *credvault.Connection,
	m upstreamauth.MCPConnect, ln net.Listener, path string) error {
	ctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	m.Authorize = func(ctx context.Context, authURL string) (url.Values, error) {
		u, err := url.Parse(authURL)
		if err != nil {
			return nil, err
		}
		handler, results := redirectWaiter(path, u.Query().Get("state"))
		srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = srv.Serve(ln) }() // ends with Close below
		defer srv.Close()
		fmt.Fprintf(env.stdout, "Open this URL in a browser and sign in to the account to connect:\n\n  %s\n\n"+
			"Waiting for the authorization server to redirect to %s ...\n", authURL, m.RedirectURI)
		select {
		case q := <-results:
			return q, nil
		case <-ctx.Done():
			return nil, errors.New("no redirect came back before the time ran out; run connect again")
		}
	}
	g, err := gateway.ConnectMCPAccount(ctx, v, tokens, c.ID, m)
	if err != nil {
		return err
	}
	if g.MetadataDocumentUnused {
		fmt.Fprintf(env.stdout, "The authorization server accepts Client ID Metadata Documents; the gateway has none to offer "+
			"(publish one and pass --client-id-metadata-url), so it used %s registration.\n", g.Registration)
	}
	who := "its account"
	if m.Subject != "" {
		who = "the account of subject " + strconv.Quote(m.Subject)
	}
	fmt.Fprintf(env.stdout, "%s: connected %s at %s (client %s, %s); its grant is sealed in the store.\n",
		c.ID, who, g.Client.Issuer, strconv.Quote(g.Client.ClientID), g.Registration)
	if g.Grant.RefreshToken == "" {
		fmt.Fprintf(env.stdout, "The authorization server granted no refresh token: the account serves until %s, then needs connecting again.\n",
			g.Grant.Expiry.UTC().Format(time.RFC3339))
	}
	return nil
}

// redirectWaiter answers the authorization response at path whose state
// is state, sending its query once; any other request is refused and
// ignored, so that a stray or forged one cannot end the flow.
func redirectWaiter(path, state string) (http.Handler, <-chan url.Values) {
	results := make(chan url.Values, 1)
	var once sync.Once
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if r.URL.Path != path || r.Method != http.MethodGet {
			http.NotFound(w, r)
			return
		}
		if subtle.ConstantTimeCompare([]byte(q.Get("state")), []byte(state)) != 1 {
			http.Error(w, "This response does not belong to the connect flow in progress.", http.StatusBadRequest)
			return
		}
		once.Do(func() { results <- q })
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		fmt.Fprintln(w, "The authorization response reached the gateway. You can close this tab.")
	}), results
}
