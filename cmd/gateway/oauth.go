package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/upstreamauth"
)

func init() {
	register(&command{name: "connect", summary: "connect an OAuth account to an oauth2_authorization_code connection (prints a URL to open)", run: runConnect})
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
	const synopsis = "ID [--subject SUBJECT] [--listen 127.0.0.1:PORT] [--redirect-path /callback]"
	fs := newFlagSet("connect")
	id := idFlag(fs)
	subject := fs.String("subject", "", "the idn-subject the account serves (connections with oauth_per_subject)")
	listen := fs.String("listen", "127.0.0.1:0", "loopback address for the redirect; fix the port when the provider needs the exact redirect URI")
	path := fs.String("redirect-path", "/callback", "path of the redirect URI")
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
