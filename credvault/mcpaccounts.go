package credvault

import (
	"context"
	"slices"
	"strings"
	"time"
)

// OAuthClient is what an MCP connect flow found out: the authorization
// server the MCP server names (RFC 9728) and the client the gateway is
// known by there. ClientSecret is set only for a client registered by the
// flow itself (RFC 7591); it is sealed with the connection's secrets.
type OAuthClient struct {
	Issuer        string
	AuthURL       string
	TokenURL      string
	RevocationURL string
	Resource      string // the RFC 8707 resource the tokens are for
	ClientID      string
	ClientSecret  string
	// TokenAuthMethod is how the client authenticates to the token
	// endpoint (TokenAuthBasic, TokenAuthPost, TokenAuthNone; empty:
	// Basic, then the form).
	TokenAuthMethod string
}

// Grant is what an authorization server granted an account: a refresh
// token, or, from a server that grants none, the access token with its
// expiry, which the account serves until then.
type Grant struct {
	RefreshToken string
	AccessToken  string
	Expiry       time.Time
}

// MCPClientSecret names the sealed secret that holds the client secret
// of a client the MCP connect flow registered.
const MCPClientSecret = "oauth_client_secret"

// MCPAccounts writes the accounts of MCP connections, for the MCP
// authorization flow (package upstreamauth, through the gateway): what
// it connects, and what a server's insufficient_scope asks of them.
type MCPAccounts struct{ Vault *Vault }

// Connect stores what an MCP connect flow found and the account it
// connected: the authorization server's endpoints and resource go to
// the connection's oauth_* fields, a newly registered client to
// oauth_client_id (its secret sealed as MCPClientSecret), and the grant to
// the account serving subject, connected with scopes.
func (m MCPAccounts) Connect(ctx context.Context, id, subject string, grant Grant, client OAuthClient, scopes []string) error {
	stored := grant.RefreshToken
	if stored == "" {
		if grant.Expiry.IsZero() {
			return invalid("refresh_token", "is required when the access token has no expiry")
		}
		if err := checkRefreshToken(grant.AccessToken); err != nil {
			return invalid("access_token", "must be 1-%d bytes without control characters", maxSecretLen)
		}
		stored = encodeAccessGrant(grant.AccessToken, grant.Expiry)
	} else if err := checkRefreshToken(stored); err != nil {
		return err
	}
	if len(subject) > maxSubjectLen || hasControl(subject) {
		return invalid("subject", "must be at most %d bytes without control characters", maxSubjectLen)
	}
	return m.Vault.updateSealed(ctx, id, func(c *Connection, secrets, accounts map[string]string) error {
		if c.Protocol != ProtocolMCP {
			return invalid("protocol", "connection %q is not an %q connection", id, ProtocolMCP)
		}
		c.OAuthIssuer, c.OAuthAuthURL, c.OAuthTokenURL = client.Issuer, client.AuthURL, client.TokenURL
		c.OAuthRevocationURL, c.OAuthResource = client.RevocationURL, client.Resource
		c.OAuthTokenAuthMethod = client.TokenAuthMethod
		if client.ClientID != c.OAuthClientID {
			// Another client than the one configured: registered by the
			// flow, or the server's own metadata document URL.
			c.OAuthClientID = client.ClientID
			delete(secrets, MCPClientSecret)
			c.AuthSecretKey = ""
			if client.ClientSecret != "" {
				if err := validateSecretValue(MCPClientSecret, client.ClientSecret); err != nil {
					return err
				}
				secrets[MCPClientSecret] = client.ClientSecret
				c.AuthSecretKey = MCPClientSecret
			}
		}
		if err := c.validateSettings(sortedKeys(secrets)); err != nil {
			return err
		}
		key := c.AccountSubject(subject)
		now := m.Vault.now()
		accounts[key] = stored
		a := OAuthAccount{Subject: key, Status: AccountConnected, ConnectedAt: now, RefreshedAt: now, Scopes: slices.Clone(scopes)}
		if grant.RefreshToken == "" {
			a.ExpiresAt = grant.Expiry
		}
		setAccount(c, a)
		return nil
	})
}

// RequireScopes records that the MCP server refused a call of the account
// serving subject for want of scopes (insufficient_scope): the account
// needs reconnecting with them added to its own. It writes nothing when
// that is recorded already.
func (m MCPAccounts) RequireScopes(ctx context.Context, id, subject string, scopes []string) error {
	return m.Vault.updateAccounts(ctx, id, func(c *Connection, _ map[string]string) error {
		key := c.AccountSubject(subject)
		a, ok := c.Account(key)
		if !ok {
			return ErrAccountNotFound
		}
		wider := slices.Clone(a.Scopes)
		for _, s := range scopes {
			if s != "" && len(s) <= maxNameLen && !strings.ContainsAny(s, " \"\\") && !hasControl(s) && !slices.Contains(wider, s) {
				wider = append(wider, s)
			}
		}
		if len(wider) > maxScopes {
			return invalid("scope", "the server asks for more than %d scopes", maxScopes)
		}
		if a.Status == AccountNeedsReconnecting && len(wider) == len(a.Scopes) {
			return errUnchanged
		}
		a.Status, a.Scopes = AccountNeedsReconnecting, wider
		setAccount(c, a)
		return nil
	})
}
