package upstreamauth

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/idnhq/idn/credvault"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"
)

// ErrNotProtected: the MCP server answered unauthenticated requests
// without asking for authorization, so there is no account to connect.
var ErrNotProtected = errors.New("upstreamauth: the MCP server did not ask for authorization (no 401 to unauthenticated requests)")

// How the gateway is known to an MCP server's authorization server
// (MCPGrant.Registration).
const (
	RegistrationMetadataDocument = "client_id_metadata_document"
	RegistrationPreregistered    = "preregistered"
	RegistrationDynamic          = "dynamic"
)

// MCPConnect configures an MCP connect flow (Tokens.ConnectMCP).
type MCPConnect struct {
	// Endpoint is the MCP server's endpoint URL. Required.
	Endpoint string
	// Subject names the account, for a connection with oauth_per_subject.
	Subject string
	// RedirectURI receives the authorization response. Required.
	RedirectURI string
	// ClientIDMetadataURL is the https URL at which the gateway's Client
	// ID Metadata Document is published. Empty: the gateway has none,
	// and registers dynamically (RFC 7591) where it may.
	ClientIDMetadataURL string
	// Authorize sends the owner's browser to authURL and returns the
	// query of the authorization response. Required.
	Authorize func(ctx context.Context, authURL string) (url.Values, error)
}

// MCPGrant is what an MCP connect flow got: the authorization server and
// client (Client, ready for credvault.MCPAccounts.Connect), the
// scopes asked for, and the tokens.
type MCPGrant struct {
	Client       credvault.OAuthClient
	Registration string
	// MetadataDocumentUnused: the authorization server accepts Client ID
	// Metadata Documents, but MCPConnect.ClientIDMetadataURL was empty.
	MetadataDocumentUnused bool
	Scopes                 []string
	Grant                  credvault.Grant
}

// ConnectMCP runs the MCP authorization flow for res's connection: an
// unauthenticated request to the server, whose 401 names its protected
// resource metadata (RFC 9728), then the authorization server's metadata,
// the client (a Client ID Metadata Document where the server takes one,
// the connection's own client, else dynamic registration), and the
// authorization code grant with PKCE and the resource parameter (RFC 8707).
// The go-sdk's auth.AuthorizationCodeHandler runs the protocol.
func (t *Tokens) ConnectMCP(ctx context.Context, res *credvault.Resolved, m MCPConnect) (*MCPGrant, error) {
	c := res.Connection
	if c.AuthMode != credvault.AuthOAuth2AuthorizationCode || c.Protocol != credvault.ProtocolMCP {
		return nil, fmt.Errorf("upstreamauth: connection %q is not an %q connection in mode %q", c.ID, credvault.ProtocolMCP, credvault.AuthOAuth2AuthorizationCode)
	}
	req, resp, err := t.challenge(ctx, m.Endpoint)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	g := &MCPGrant{}
	asm := t.serverMetadata(ctx, resp, m.Endpoint)
	if asm != nil {
		g.Client.Issuer, g.Client.RevocationURL = asm.Issuer, asm.RevocationEndpoint
		g.MetadataDocumentUnused = asm.ClientIDMetadataDocumentSupported && m.ClientIDMetadataURL == ""
	}
	cfg, err := t.handlerConfig(res, m, g)
	if err != nil {
		return nil, err
	}
	h, err := auth.NewAuthorizationCodeHandler(cfg)
	if err != nil {
		return nil, fmt.Errorf("upstreamauth: connection %q: %w", c.ID, err)
	}
	if err := h.Authorize(ctx, req, resp); err != nil {
		return nil, connectError(c.ID, err)
	}
	if g.Grant.RefreshToken == "" && g.Grant.AccessToken == "" {
		return nil, fmt.Errorf("upstreamauth: connection %q: the authorization server granted no token", c.ID)
	}
	return g, nil
}

// challenge sends unauthenticated requests until one is refused with the
// server's WWW-Authenticate: initialize, then, from a server that lets
// anyone initialize, tools/list in the session it opened.
func (t *Tokens) challenge(ctx context.Context, endpoint string) (*http.Request, *http.Response, error) {
	var session string
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"idn-gateway","version":"1"}}}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
	} {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(body))
		if err != nil {
			return nil, nil, fmt.Errorf("upstreamauth: the MCP endpoint %q is not a URL", endpoint)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
			req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		}
		resp, err := t.client.Do(req)
		if err != nil {
			return nil, nil, fmt.Errorf("upstreamauth: the MCP server did not answer: %w", classify("", "", err, false))
		}
		if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
			return req, resp, nil
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			return nil, nil, fmt.Errorf("%w: it answered %d", ErrNotProtected, resp.StatusCode)
		}
		session = resp.Header.Get("Mcp-Session-Id")
	}
	return nil, nil, fmt.Errorf("%w: it answered initialize and tools/list", ErrNotProtected)
}

// serverMetadata finds the authorization server's metadata as the
// handler will (RFC 9728, then RFC 8414 or OpenID discovery), for what
// the handler keeps to itself: the issuer and revocation endpoint, and
// whether the server takes Client ID Metadata Documents. Nil: not found,
// which the handler may still get past (the 2025-03-26 fallbacks).
func (t *Tokens) serverMetadata(ctx context.Context, resp *http.Response, endpoint string) *oauthex.AuthServerMeta {
	challenges, _ := oauthex.ParseWWWAuthenticate(resp.Header.Values("WWW-Authenticate"))
	var where []string
	for _, ch := range challenges {
		if u := ch.Params["resource_metadata"]; u != "" {
			where = append(where, u)
		}
	}
	u, err := url.Parse(endpoint)
	if err != nil {
		return nil
	}
	wk := *u
	wk.RawQuery, wk.Path = "", "/.well-known/oauth-protected-resource/"+strings.TrimLeft(u.Path, "/")
	where = append(where, wk.String())
	for _, w := range where {
		prm, err := oauthex.GetProtectedResourceMetadata(ctx, w, endpoint, t.client)
		if err != nil || prm == nil || len(prm.AuthorizationServers) == 0 {
			continue
		}
		asm, err := auth.GetAuthServerMetadata(ctx, prm.AuthorizationServers[0], t.client)
		if err != nil {
			return nil
		}
		return asm
	}
	return nil
}

// handlerConfig is the go-sdk handler's configuration for the flow; what
// it decides is recorded in g.
func (t *Tokens) handlerConfig(res *credvault.Resolved, m MCPConnect, g *MCPGrant) (*auth.AuthorizationCodeHandlerConfig, error) {
	c := res.Connection
	if m.Authorize == nil || m.RedirectURI == "" {
		return nil, errors.New("upstreamauth: MCPConnect needs Authorize and RedirectURI")
	}
	account, _ := c.Account(c.AccountSubject(m.Subject))
	cfg := &auth.AuthorizationCodeHandlerConfig{
		RedirectURL:         m.RedirectURI,
		Client:              t.client,
		RequestRefreshToken: true,
		ScopeFilter: func(discovered []string) []string {
			// The connection's and the account's (widened by a step-up)
			// join what the server asks for.
			scopes := slices.Clone(discovered)
			for _, s := range slices.Concat(c.OAuthScopes, account.Scopes) {
				if !slices.Contains(scopes, s) {
					scopes = append(scopes, s)
				}
			}
			return scopes
		},
		AuthorizationCodeFetcher: func(ctx context.Context, args *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
			if u, err := url.Parse(args.URL); err == nil {
				g.Client.Resource = u.Query().Get("resource")
			}
			q, err := m.Authorize(ctx, args.URL)
			if err != nil {
				return nil, err
			}
			if code := q.Get("error"); code != "" {
				if !errorCodePattern.MatchString(code) {
					code = "unknown_error"
				}
				return nil, &DeniedError{Code: code}
			}
			return &auth.AuthorizationResult{Code: q.Get("code"), State: q.Get("state"), Iss: q.Get("iss")}, nil
		},
		NewTokenSource: func(ctx context.Context, oc *oauth2.Config, tok *oauth2.Token) (oauth2.TokenSource, error) {
			g.Client.AuthURL, g.Client.TokenURL, g.Client.ClientID = oc.Endpoint.AuthURL, oc.Endpoint.TokenURL, oc.ClientID
			g.Client.TokenAuthMethod = authMethod(oc.Endpoint.AuthStyle, oc.ClientSecret)
			g.Scopes = slices.Clone(oc.Scopes)
			g.Grant = credvault.Grant{RefreshToken: tok.RefreshToken, AccessToken: tok.AccessToken, Expiry: tok.Expiry}
			switch oc.ClientID {
			case m.ClientIDMetadataURL:
				g.Registration = RegistrationMetadataDocument
			case c.OAuthClientID:
				g.Registration = RegistrationPreregistered
			default:
				g.Registration, g.Client.ClientSecret = RegistrationDynamic, oc.ClientSecret
			}
			return oauth2.StaticTokenSource(tok), nil
		},
	}
	if m.ClientIDMetadataURL != "" && (c.OAuthClientID == "" || c.OAuthClientID == m.ClientIDMetadataURL) {
		cfg.ClientIDMetadataDocumentConfig = &auth.ClientIDMetadataDocumentConfig{URL: m.ClientIDMetadataURL}
	}
	if c.OAuthClientID != "" && c.OAuthClientID != m.ClientIDMetadataURL {
		pre := &oauthex.ClientCredentials{ClientID: c.OAuthClientID, Issuer: c.OAuthIssuer}
		if c.AuthSecretKey != "" {
			secret, err := res.Secret()
			if err != nil {
				return nil, err
			}
			pre.ClientSecretAuth = &oauthex.ClientSecretAuth{ClientSecret: secret}
		}
		cfg.PreregisteredClient = pre
	} else {
		cfg.DynamicClientRegistrationConfig = &auth.DynamicClientRegistrationConfig{Metadata: &oauthex.ClientRegistrationMetadata{
			RedirectURIs: []string{m.RedirectURI}, ClientName: "idn gateway",
			GrantTypes: []string{"authorization_code", "refresh_token"}, ResponseTypes: []string{"code"},
		}}
	}
	return cfg, nil
}

// connectError keeps what the owner may read of the handler's failure: a
// token endpoint's refusal loses its answer's body, as in classify.
func connectError(conn string, err error) error {
	var re *oauth2.RetrieveError
	var denied *DeniedError
	var tooLarge *responseTooLargeError
	switch {
	case errors.As(err, &denied):
		return denied
	case errors.As(err, &re), errors.As(err, &tooLarge):
		return classify(conn, "", err, false)
	}
	return fmt.Errorf("upstreamauth: connection %q: MCP authorization failed: %w", conn, err)
}
