package upstreamauth

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/idnhq/idn/credvault"
	"golang.org/x/oauth2"
)

// Revoke asks the provider of res's connection to revoke a refresh token
// (RFC 7009), authenticating as the client. It reports false, and no
// error, when the provider offers no revocation endpoint.
func (t *Tokens) Revoke(ctx context.Context, res *credvault.Resolved, refreshToken string) (bool, error) {
	c := res.Connection
	ep, err := t.Endpoints(ctx, res)
	if err != nil {
		return false, err
	}
	if ep.RevocationURL == "" {
		return false, nil
	}
	form := url.Values{"token": {refreshToken}, "token_type_hint": {"refresh_token"}}
	var secret string
	if c.AuthSecretKey != "" {
		if secret, err = res.Secret(); err != nil {
			return false, err
		}
	}
	inForm := authStyle(c.OAuthTokenAuthMethod) == oauth2.AuthStyleInParams
	if secret == "" || inForm {
		form.Set("client_id", c.OAuthClientID)
	}
	if secret != "" && inForm {
		form.Set("client_secret", secret)
	}
	ctx, cancel := context.WithTimeout(ctx, t.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ep.RevocationURL, strings.NewReader(form.Encode()))
	if err != nil {
		return false, fmt.Errorf("upstreamauth: connection %q: revocation endpoint unusable", c.ID)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if secret != "" && !inForm {
		req.SetBasicAuth(url.QueryEscape(c.OAuthClientID), url.QueryEscape(secret)) // RFC 6749 §2.3.1
	}
	resp, err := t.client.Do(req)
	if err != nil {
		return false, classify(c.ID, "", err, false)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		return false, &UnavailableError{Connection: c.ID, Reason: fmt.Sprintf("revocation status %d", resp.StatusCode), RetryAfter: retryAfter(resp.Header)}
	}
	return true, nil
}
