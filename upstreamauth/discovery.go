package upstreamauth

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/idnhq/idn/credvault"
	"golang.org/x/oauth2"
)

// Endpoints are an authorization server's endpoints, from the
// connection's fields or discovered from its issuer.
type Endpoints struct {
	Issuer        string
	AuthURL       string
	TokenURL      string
	RevocationURL string // empty: the provider offers no revocation
	// IssParameter: the server sends iss in its authorization responses
	// (RFC 9207), so a response without it is refused.
	IssParameter bool
}

// discoveryTTL is how long discovered metadata is kept.
const discoveryTTL = time.Hour

type discoveryCache struct {
	mu      sync.Mutex
	entries map[string]discovered
}

type discovered struct {
	ep Endpoints
	at time.Time
}

// metadata is the subset of RFC 8414 / OpenID Connect Discovery metadata
// used here.
type metadata struct {
	Issuer                string `json:"issuer"`
	AuthorizationEndpoint string `json:"authorization_endpoint"`
	TokenEndpoint         string `json:"token_endpoint"`
	RevocationEndpoint    string `json:"revocation_endpoint"`
	IssParameterSupported bool   `json:"authorization_response_iss_parameter_supported"`
}

// Endpoints returns the endpoints of res's connection: its
// oauth_authorization_url, oauth_token_url and oauth_revocation_url, each
// discovered from oauth_issuer when not set. With all three set, the
// issuer only checks the iss of authorization responses.
func (t *Tokens) Endpoints(ctx context.Context, res *credvault.Resolved) (Endpoints, error) {
	c := res.Connection
	ep := Endpoints{Issuer: c.OAuthIssuer}
	if c.OAuthIssuer != "" && (c.OAuthAuthURL == "" || c.OAuthTokenURL == "" || c.OAuthRevocationURL == "") {
		d, err := t.discover(ctx, c.ID, c.OAuthIssuer)
		if err != nil {
			return Endpoints{}, err
		}
		ep = d
	}
	for _, f := range []struct {
		dst *string
		v   string
	}{{&ep.AuthURL, c.OAuthAuthURL}, {&ep.TokenURL, c.OAuthTokenURL}, {&ep.RevocationURL, c.OAuthRevocationURL}} {
		if f.v != "" {
			*f.dst = f.v
		}
	}
	return ep, nil
}

// discover reads the issuer's metadata: RFC 8414's well-known location
// first, then OpenID Connect Discovery's. The metadata must name the
// issuer it was asked for (RFC 8414 §3.3).
func (t *Tokens) discover(ctx context.Context, conn, issuer string) (Endpoints, error) {
	t.discovery.mu.Lock()
	d, ok := t.discovery.entries[issuer]
	t.discovery.mu.Unlock()
	if ok && t.cfg.Clock().Sub(d.at) < discoveryTTL {
		return d.ep, nil
	}
	u, err := url.Parse(issuer)
	if err != nil {
		return Endpoints{}, &UnavailableError{Connection: conn, Reason: "issuer does not parse", RetryAfter: defaultRetryAfter}
	}
	path := strings.TrimSuffix(u.Path, "/")
	oauthMeta := *u
	oauthMeta.Path = "/.well-known/oauth-authorization-server" + path
	oidcMeta := *u
	oidcMeta.Path = path + "/.well-known/openid-configuration"
	var m metadata
	reason := "discovery failed"
	for _, where := range []string{oauthMeta.String(), oidcMeta.String()} {
		if m, err = t.fetchMetadata(ctx, where); err == nil {
			break
		}
	}
	switch {
	case err != nil:
	case m.Issuer != issuer:
		err, reason = fmt.Errorf("issuer mismatch"), "discovered issuer differs"
	default:
		for _, e := range []struct{ name, v string }{{"authorization_endpoint", m.AuthorizationEndpoint}, {"token_endpoint", m.TokenEndpoint}} {
			if verr := credvault.ValidateUpstreamURL(e.name, e.v); verr != nil {
				err, reason = verr, "discovered "+e.name+" unusable"
			}
		}
		if m.RevocationEndpoint != "" && credvault.ValidateUpstreamURL("revocation_endpoint", m.RevocationEndpoint) != nil {
			m.RevocationEndpoint = ""
		}
	}
	if err != nil {
		t.log.Warn("upstreamauth: discovery failed", "connection_id", conn, "reason", reason)
		return Endpoints{}, &UnavailableError{Connection: conn, Reason: reason, RetryAfter: defaultRetryAfter}
	}
	ep := Endpoints{Issuer: m.Issuer, AuthURL: m.AuthorizationEndpoint, TokenURL: m.TokenEndpoint,
		RevocationURL: m.RevocationEndpoint, IssParameter: m.IssParameterSupported}
	t.discovery.mu.Lock()
	if t.discovery.entries == nil {
		t.discovery.entries = map[string]discovered{}
	}
	t.discovery.entries[issuer] = discovered{ep: ep, at: t.cfg.Clock()}
	t.discovery.mu.Unlock()
	return ep, nil
}

func (t *Tokens) fetchMetadata(ctx context.Context, where string) (metadata, error) {
	var m metadata
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, where, nil)
	if err != nil {
		return m, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := t.client.Do(req)
	if err != nil {
		return m, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return m, fmt.Errorf("status %d", resp.StatusCode)
	}
	err = json.NewDecoder(resp.Body).Decode(&m)
	return m, err
}

// oauthConfig is x/oauth2's configuration for res's connection.
func (t *Tokens) oauthConfig(ctx context.Context, res *credvault.Resolved) (*oauth2.Config, error) {
	c := res.Connection
	ep, err := t.Endpoints(ctx, res)
	if err != nil {
		return nil, err
	}
	var secret string
	if c.AuthSecretKey != "" {
		if secret, err = res.Secret(); err != nil {
			return nil, err
		}
	}
	return &oauth2.Config{
		ClientID: c.OAuthClientID, ClientSecret: secret, Scopes: c.OAuthScopes,
		Endpoint: oauth2.Endpoint{AuthURL: ep.AuthURL, TokenURL: ep.TokenURL, AuthStyle: authStyle(c.OAuthTokenAuthMethod)},
	}, nil
}

// authStyle is how x/oauth2 sends the client's credentials for method
// (oauth_token_endpoint_auth_method): as recorded, never guessed, when
// there is a record.
func authStyle(method string) oauth2.AuthStyle {
	switch method {
	case credvault.TokenAuthBasic:
		return oauth2.AuthStyleInHeader
	case credvault.TokenAuthPost, credvault.TokenAuthNone:
		return oauth2.AuthStyleInParams
	}
	return oauth2.AuthStyleAutoDetect
}

// authMethod is the record of what the go-sdk's handler chose: style for
// a client with secret, or none.
func authMethod(style oauth2.AuthStyle, secret string) string {
	switch {
	case secret == "":
		return credvault.TokenAuthNone
	case style == oauth2.AuthStyleInHeader:
		return credvault.TokenAuthBasic
	case style == oauth2.AuthStyleInParams:
		return credvault.TokenAuthPost
	}
	return ""
}
