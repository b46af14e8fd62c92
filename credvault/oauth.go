package credvault

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Statuses of an OAuth account.
const (
	// AccountConnected: the refresh token was accepted when last used.
	AccountConnected = "connected"
	// AccountNeedsReconnecting: the provider refused the refresh token
	// (invalid_grant); the owner must connect the account again.
	AccountNeedsReconnecting = "needs_reconnecting"
)

// OAuthAccount is the metadata of an account an owner connected to an
// oauth2_authorization_code connection. Its refresh token stays sealed
// with the connection's secrets and is never part of it.
//
// Subject is the idn-subject the account serves when the connection has
// oauth_per_subject; it is empty for the connection's one account.
type OAuthAccount struct {
	Subject     string    `json:"subject,omitempty"`
	Status      string    `json:"status"`
	ConnectedAt time.Time `json:"connected_at,omitzero"`
	RefreshedAt time.Time `json:"refreshed_at,omitzero"`
	// ExpiresAt is when the account stops serving unless connected
	// again: an MCP account whose server granted no refresh token serves
	// its access token until then. Zero: no known end.
	ExpiresAt time.Time `json:"expires_at,omitzero"`
	// Scopes are those the account was connected with on an MCP
	// connection, widened when its server answered insufficient_scope
	// (Status is then needs_reconnecting). Empty: the connection's.
	Scopes []string `json:"scopes,omitempty"`
}

// How a client authenticates to the token endpoint
// (oauth_token_endpoint_auth_method, RFC 7591 §2). Empty: HTTP Basic,
// then the form for a provider that refuses Basic.
const (
	TokenAuthBasic = "client_secret_basic" // HTTP Basic
	TokenAuthPost  = "client_secret_post"  // client_id and client_secret in the form
	TokenAuthNone  = "none"                // a public client: client_id in the form
)

// ErrRefreshTokenChanged is returned by Vault.PutRefreshToken when the
// stored refresh token is no longer the one the caller replaced: another
// process rotated it first, and its token is the one to use.
var ErrRefreshTokenChanged = errors.New("credvault: the stored refresh token changed")

// ErrAccountNotFound: the connection has no account for that subject.
var ErrAccountNotFound = errors.New("credvault: no connected account")

// accountSecretPrefix starts the names under which refresh tokens are
// sealed with a connection's secrets. A secret name given by a user
// cannot contain ':', so the two never meet.
const accountSecretPrefix = "oauth:refresh_token:"

// maxScopes bounds oauth_scopes.
const maxScopes = 64

// OAuth reports whether the connection uses one of the OAuth modes.
func (c *Connection) OAuth() bool {
	return c.AuthMode == AuthOAuth2ClientCredentials || c.AuthMode == AuthOAuth2AuthorizationCode
}

// Account returns the metadata of subject's account ("" for the
// connection's one account).
func (c *Connection) Account(subject string) (OAuthAccount, bool) {
	i := slices.IndexFunc(c.OAuthAccounts, func(a OAuthAccount) bool { return a.Subject == subject })
	if i < 0 {
		return OAuthAccount{}, false
	}
	return c.OAuthAccounts[i], true
}

// AccountSubject is the account that serves subject: subject itself when
// the connection has oauth_per_subject, else "" (the one account).
func (c *Connection) AccountSubject(subject string) string {
	if c.OAuthPerSubject {
		return subject
	}
	return ""
}

// validateOAuth checks the OAuth fields against the auth mode.
func (c *Connection) validateOAuth() error {
	if !c.OAuth() {
		for _, f := range []struct {
			name string
			set  bool
		}{
			{"oauth_token_url", c.OAuthTokenURL != ""}, {"oauth_authorization_url", c.OAuthAuthURL != ""},
			{"oauth_issuer", c.OAuthIssuer != ""}, {"oauth_revocation_url", c.OAuthRevocationURL != ""},
			{"oauth_client_id", c.OAuthClientID != ""}, {"oauth_scopes", len(c.OAuthScopes) > 0},
			{"oauth_audience", c.OAuthAudience != ""}, {"oauth_resource", c.OAuthResource != ""},
			{"oauth_per_subject", c.OAuthPerSubject}, {"oauth_token_endpoint_auth_method", c.OAuthTokenAuthMethod != ""},
		} {
			if f.set {
				return invalid(f.name, "applies to the %q and %q auth modes only", AuthOAuth2ClientCredentials, AuthOAuth2AuthorizationCode)
			}
		}
		return nil
	}
	// An MCP server names its authorization server in its 401 answer, and
	// the connect flow registers a client there: both may be left out.
	discovered := c.Protocol == ProtocolMCP && c.AuthMode == AuthOAuth2AuthorizationCode
	switch {
	case discovered && c.OAuthClientID == "" && c.AuthSecretKey != "":
		return invalid("oauth_client_id", "is required with auth_secret_key (the client secret of a pre-registered client)")
	case !discovered && c.OAuthClientID == "":
		return invalid("oauth_client_id", "is required for %q", c.AuthMode)
	case len(c.OAuthClientID) > maxURLLen || hasControl(c.OAuthClientID):
		// A client id may be a URL (a Client ID Metadata Document's).
		return invalid("oauth_client_id", "must be at most %d bytes without control characters", maxURLLen)
	}
	urls := []struct{ name, v string }{
		{"oauth_token_url", c.OAuthTokenURL}, {"oauth_authorization_url", c.OAuthAuthURL},
		{"oauth_issuer", c.OAuthIssuer}, {"oauth_revocation_url", c.OAuthRevocationURL},
	}
	for _, u := range urls {
		if u.v != "" {
			if err := ValidateUpstreamURL(u.name, u.v); err != nil {
				return err
			}
		}
	}
	for _, s := range c.OAuthScopes {
		if s == "" || len(s) > maxNameLen || strings.ContainsAny(s, " \"\\") || hasControl(s) {
			return invalid("oauth_scopes", "entries must be 1-%d bytes without spaces, quotes, backslashes or control characters", maxNameLen)
		}
	}
	if len(c.OAuthScopes) > maxScopes {
		return invalid("oauth_scopes", "has more than %d entries", maxScopes)
	}
	for _, f := range []struct{ name, v string }{{"oauth_audience", c.OAuthAudience}, {"oauth_resource", c.OAuthResource}} {
		if len(f.v) > maxURLLen || hasControl(f.v) {
			return invalid(f.name, "must be at most %d bytes without control characters", maxURLLen)
		}
	}
	switch c.OAuthTokenAuthMethod {
	case "", TokenAuthBasic, TokenAuthPost, TokenAuthNone:
	default:
		return invalid("oauth_token_endpoint_auth_method", "must be %q, %q or %q", TokenAuthBasic, TokenAuthPost, TokenAuthNone)
	}
	switch c.AuthMode {
	case AuthOAuth2ClientCredentials:
		if c.OAuthTokenURL == "" {
			return invalid("oauth_token_url", "is required for %q", c.AuthMode)
		}
		if c.OAuthIssuer != "" || c.OAuthAuthURL != "" {
			return invalid("oauth_issuer", "applies to %q only; give oauth_token_url", AuthOAuth2AuthorizationCode)
		}
		if c.OAuthPerSubject {
			return invalid("oauth_per_subject", "applies to %q only: a client has one token", AuthOAuth2AuthorizationCode)
		}
	case AuthOAuth2AuthorizationCode:
		if !discovered && c.OAuthIssuer == "" && (c.OAuthTokenURL == "" || c.OAuthAuthURL == "") {
			return invalid("oauth_issuer", "or both oauth_authorization_url and oauth_token_url are required for %q", c.AuthMode)
		}
	}
	return nil
}

// accountSecret is the sealed-secret name of subject's refresh token.
func accountSecret(subject string) string { return accountSecretPrefix + subject }

// splitAccounts moves the refresh tokens out of a connection's opened
// secrets, returning them by subject.
func splitAccounts(secrets map[string]string) map[string]string {
	var accounts map[string]string
	for name, v := range secrets {
		if subject, ok := strings.CutPrefix(name, accountSecretPrefix); ok {
			if accounts == nil {
				accounts = map[string]string{}
			}
			accounts[subject] = v
			delete(secrets, name)
		}
	}
	return accounts
}

// joinAccounts puts refresh tokens back among a connection's secrets.
func joinAccounts(secrets, accounts map[string]string) {
	for subject, v := range accounts {
		secrets[accountSecret(subject)] = v
	}
}

// RefreshToken returns the refresh token of the account serving subject
// (Connection.AccountSubject), as of the snapshot.
func (r *Resolved) RefreshToken(subject string) (string, bool) {
	t, ok := r.accounts[r.Connection.AccountSubject(subject)]
	return t, ok && t != "" && !isAccessGrant(t)
}

// An MCP server's authorization server may grant no refresh token. Such
// an account holds its access token instead, until it expires, in the
// slot of the refresh token, marked by a NUL no refresh token contains
// (checkRefreshToken).
const accessGrantMark = "\x00access\x00"

func isAccessGrant(v string) bool { return strings.HasPrefix(v, accessGrantMark) }

func encodeAccessGrant(token string, expiry time.Time) string {
	return accessGrantMark + strconv.FormatInt(expiry.Unix(), 10) + "\x00" + token
}

// AccessGrant returns the access token of the account serving subject,
// when the account holds one instead of a refresh token, and its expiry.
func (r *Resolved) AccessGrant(subject string) (string, time.Time, bool) {
	v := r.accounts[r.Connection.AccountSubject(subject)]
	rest, ok := strings.CutPrefix(v, accessGrantMark)
	if !ok {
		return "", time.Time{}, false
	}
	unix, token, ok := strings.Cut(rest, "\x00")
	sec, err := strconv.ParseInt(unix, 10, 64)
	if !ok || err != nil || token == "" {
		return "", time.Time{}, false
	}
	return token, time.Unix(sec, 0), true
}

// updateAccounts opens connection id's secrets inside a transaction, lets
// fn change its refresh tokens (by account subject) and metadata, and
// seals them again under the same secret version.
func (v *Vault) updateAccounts(ctx context.Context, id string, fn func(c *Connection, accounts map[string]string) error) error {
	return v.updateSealed(ctx, id, func(c *Connection, _, accounts map[string]string) error { return fn(c, accounts) })
}

// updateSealed is updateAccounts with the other secrets too, which fn
// may change.
func (v *Vault) updateSealed(ctx context.Context, id string, fn func(c *Connection, secrets, accounts map[string]string) error) error {
	err := v.write(ctx, func(r *Records) error {
		rec, ok := r.Connections[id]
		if !ok {
			return ErrNotFound
		}
		c := rec.Connection.Clone()
		if c.AuthMode != AuthOAuth2AuthorizationCode {
			return invalid("auth_mode", "connection %q does not use %q", id, AuthOAuth2AuthorizationCode)
		}
		secrets, err := v.openSecrets(c, rec.SealedSecrets)
		if err != nil {
			return fmt.Errorf("%w: the stored secrets of connection %q do not open", ErrCredentialUnresolved, id)
		}
		if secrets == nil { // a public client stored with no secrets
			secrets = map[string]string{}
		}
		accounts := splitAccounts(secrets)
		if accounts == nil {
			accounts = map[string]string{}
		}
		if err := fn(c, secrets, accounts); err != nil {
			return err
		}
		c.CredentialKeys = sortedKeys(secrets)
		joinAccounts(secrets, accounts)
		sealed, err := v.sealSecrets(id, c.SecretVersion, secrets)
		if err != nil {
			return err
		}
		rec.Connection, rec.SealedSecrets = *c, sealed
		return nil
	})
	if errors.Is(err, errUnchanged) {
		return nil
	}
	return err
}

// setAccount writes the metadata of subject's account.
func setAccount(c *Connection, a OAuthAccount) {
	i := slices.IndexFunc(c.OAuthAccounts, func(x OAuthAccount) bool { return x.Subject == a.Subject })
	if i < 0 {
		c.OAuthAccounts = append(c.OAuthAccounts, a)
		slices.SortFunc(c.OAuthAccounts, func(x, y OAuthAccount) int { return strings.Compare(x.Subject, y.Subject) })
		return
	}
	c.OAuthAccounts[i] = a
}

// ConnectAccount seals refresh as the refresh token of the account that
// serves subject, replacing any, and marks it connected.
func (v *Vault) ConnectAccount(ctx context.Context, id, subject, refresh string) error {
	if err := checkRefreshToken(refresh); err != nil {
		return err
	}
	if len(subject) > maxSubjectLen || hasControl(subject) {
		return invalid("subject", "must be at most %d bytes without control characters", maxSubjectLen)
	}
	return v.updateAccounts(ctx, id, func(c *Connection, accounts map[string]string) error {
		key := c.AccountSubject(subject)
		now := v.now()
		accounts[key] = refresh
		setAccount(c, OAuthAccount{Subject: key, Status: AccountConnected, ConnectedAt: now, RefreshedAt: now})
		return nil
	})
}

// PutRefreshToken replaces the refresh token of the account serving
// subject by next, atomically, if it is still prev: a provider that
// rotates refresh tokens has made prev useless, so losing next would lose
// the account. Otherwise it fails with ErrRefreshTokenChanged and writes
// nothing.
func (v *Vault) PutRefreshToken(ctx context.Context, id, subject, prev, next string) error {
	if err := checkRefreshToken(next); err != nil {
		return err
	}
	return v.updateAccounts(ctx, id, func(c *Connection, accounts map[string]string) error {
		key := c.AccountSubject(subject)
		if accounts[key] != prev {
			return ErrRefreshTokenChanged
		}
		accounts[key] = next
		a, _ := c.Account(key)
		a.Subject, a.Status, a.RefreshedAt = key, AccountConnected, v.now()
		setAccount(c, a)
		return nil
	})
}

// MarkNeedsReconnecting records that the provider refused the refresh
// token prev of the account serving subject. The token is kept: when
// another process rotated it a moment ago, its PutRefreshToken still
// finds prev and stores the new one. A token changed since is left as it
// is (ErrRefreshTokenChanged).
func (v *Vault) MarkNeedsReconnecting(ctx context.Context, id, subject, prev string) error {
	return v.updateAccounts(ctx, id, func(c *Connection, accounts map[string]string) error {
		key := c.AccountSubject(subject)
		if accounts[key] != prev {
			return ErrRefreshTokenChanged
		}
		a, _ := c.Account(key)
		a.Subject, a.Status = key, AccountNeedsReconnecting
		setAccount(c, a)
		return nil
	})
}

// DisconnectAccount removes the account that serves subject and returns
// its refresh token, for the caller to revoke at the provider.
func (v *Vault) DisconnectAccount(ctx context.Context, id, subject string) (string, error) {
	var refresh string
	err := v.updateAccounts(ctx, id, func(c *Connection, accounts map[string]string) error {
		key := c.AccountSubject(subject)
		if _, ok := c.Account(key); !ok {
			return ErrAccountNotFound
		}
		if refresh = accounts[key]; isAccessGrant(refresh) {
			refresh = "" // nothing to revoke: it expires
		}
		delete(accounts, key)
		c.OAuthAccounts = slices.DeleteFunc(c.OAuthAccounts, func(a OAuthAccount) bool { return a.Subject == key })
		return nil
	})
	return refresh, err
}

// AccountTokens returns the refresh tokens of every account of a
// connection about to be deleted, for the caller to revoke.
func (r *Resolved) AccountTokens() []string {
	var tokens []string
	for _, t := range r.accounts {
		if !isAccessGrant(t) {
			tokens = append(tokens, t)
		}
	}
	slices.Sort(tokens)
	return tokens
}

func checkRefreshToken(t string) error {
	if t == "" || len(t) > maxSecretLen || hasControl(t) {
		return invalid("refresh_token", "must be 1-%d bytes without control characters", maxSecretLen)
	}
	return nil
}

// AccessToken is an OAuth access token for a connection, with every form
// in which it, or the connection's client secret, can come back from the
// upstream (as Resolved.Redactions, longest first).
type AccessToken struct {
	Value      string
	Redactions []string
}

// AccessToken returns value as the access token of r's connection.
func (r *Resolved) AccessToken(value string) *AccessToken {
	forms := append(slices.Clone(r.redactions), wireForms(value)...)
	forms = append(forms, DefaultBearerPrefix+value)
	slices.SortFunc(forms, func(a, b string) int {
		if len(a) != len(b) {
			return len(b) - len(a)
		}
		return strings.Compare(a, b)
	})
	return &AccessToken{Value: value, Redactions: slices.Compact(forms)}
}
