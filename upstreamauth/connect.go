package upstreamauth

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"

	"github.com/idnhq/idn/credvault"
	"golang.org/x/oauth2"
)

// Errors of an authorization response (Authorization.Complete).
var (
	// ErrStateMismatch: the response's state is not the one sent. It may
	// be another browser's response, or forged (RFC 6749 §10.12).
	ErrStateMismatch = errors.New("upstreamauth: the authorization response's state does not match")
	// ErrIssuerMismatch: the response's iss names another issuer, or is
	// missing from a server that promised it (RFC 9207 mix-up defence).
	ErrIssuerMismatch = errors.New("upstreamauth: the authorization response's issuer does not match")
	// ErrNoRefreshToken: the provider granted no refresh token, so the
	// account would stop working within the hour.
	ErrNoRefreshToken = errors.New("upstreamauth: the provider granted no refresh token (ask for offline access)")
)

// DeniedError is the provider's refusal of an authorization request (the
// owner said no, or the request was wrong): its OAuth error code.
type DeniedError struct{ Code string }

func (e *DeniedError) Error() string {
	return "upstreamauth: the provider refused the authorization: " + e.Code
}

// Authorization is an owner's connect flow in progress: send the owner's
// browser to URL, then pass the redirect's query to Complete.
type Authorization struct {
	// URL is the provider's authorization URL, with state and the PKCE
	// challenge (S256).
	URL string

	tokens   *Tokens
	conn     string
	cfg      *oauth2.Config
	ep       Endpoints
	state    string
	verifier string
}

// Authorize starts the connect flow of res's oauth2_authorization_code
// connection; redirectURI must be one registered with the provider.
func (t *Tokens) Authorize(ctx context.Context, res *credvault.Resolved, redirectURI string) (*Authorization, error) {
	c := res.Connection
	if c.AuthMode != credvault.AuthOAuth2AuthorizationCode {
		return nil, fmt.Errorf("upstreamauth: connection %q does not use %q", c.ID, credvault.AuthOAuth2AuthorizationCode)
	}
	ep, err := t.Endpoints(ctx, res)
	if err != nil {
		return nil, err
	}
	cfg, err := t.oauthConfig(ctx, res)
	if err != nil {
		return nil, err
	}
	cfg.RedirectURL = redirectURI
	a := &Authorization{tokens: t, conn: c.ID, cfg: cfg, ep: ep, state: oauth2.GenerateVerifier(), verifier: oauth2.GenerateVerifier()}
	opts := []oauth2.AuthCodeOption{oauth2.S256ChallengeOption(a.verifier), oauth2.AccessTypeOffline}
	if c.OAuthResource != "" {
		opts = append(opts, oauth2.SetAuthURLParam("resource", c.OAuthResource))
	}
	if c.OAuthAudience != "" {
		opts = append(opts, oauth2.SetAuthURLParam("audience", c.OAuthAudience))
	}
	a.URL = cfg.AuthCodeURL(a.state, opts...)
	return a, nil
}

// State is the flow's state parameter, which a relay of the redirect may
// use to find the flow it belongs to.
func (a *Authorization) State() string { return a.state }

// Complete checks the authorization response (its query: state, iss per
// RFC 9207, error or code), redeems the code with the PKCE verifier and
// returns the refresh token, for the caller to store with
// credvault.Vault.ConnectAccount.
func (a *Authorization) Complete(ctx context.Context, q url.Values) (string, error) {
	if subtle.ConstantTimeCompare([]byte(q.Get("state")), []byte(a.state)) != 1 {
		return "", ErrStateMismatch
	}
	iss, hasIss := q["iss"]
	switch {
	case hasIss && a.ep.Issuer != "" && (len(iss) != 1 || iss[0] != a.ep.Issuer):
		return "", ErrIssuerMismatch
	case !hasIss && a.ep.IssParameter:
		return "", ErrIssuerMismatch
	}
	if code := q.Get("error"); code != "" {
		if !errorCodePattern.MatchString(code) {
			code = "unknown_error"
		}
		return "", &DeniedError{Code: code}
	}
	code := q.Get("code")
	if code == "" {
		return "", &DeniedError{Code: "missing_code"}
	}
	tok, err := a.tokens.exchange(a.conn, "", false, func(ctx context.Context) (*oauth2.Token, error) {
		return a.cfg.Exchange(ctx, code, oauth2.VerifierOption(a.verifier))
	})
	if err != nil {
		return "", err
	}
	if tok.RefreshToken == "" {
		return "", ErrNoRefreshToken
	}
	return tok.RefreshToken, nil
}

// Result is the outcome of a redirect handled by RedirectHandler.
type Result struct {
	RefreshToken string
	Err          error
}

// RedirectHandler returns a handler for the redirect URI that completes
// the flow and sends its result on the channel once. A request whose
// state does not match is answered 400 and ignored, so that a stray or
// forged request cannot end the flow. The pages it shows hold no token.
func (a *Authorization) RedirectHandler(ctx context.Context) (http.Handler, <-chan Result) {
	results := make(chan Result, 1)
	u, _ := url.Parse(a.cfg.RedirectURL)
	var finished atomic.Bool
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u == nil || r.URL.Path != u.Path || r.Method != http.MethodGet {
			http.NotFound(w, r)
			return
		}
		if finished.Load() {
			page(w, http.StatusGone, "This connect flow is over. You can close this tab.")
			return
		}
		refresh, err := a.Complete(ctx, r.URL.Query())
		if errors.Is(err, ErrStateMismatch) {
			page(w, http.StatusBadRequest, "This response does not belong to the connect flow in progress.")
			return
		}
		if !finished.CompareAndSwap(false, true) {
			page(w, http.StatusGone, "This connect flow is over. You can close this tab.")
			return
		}
		results <- Result{RefreshToken: refresh, Err: err}
		if err != nil {
			page(w, http.StatusBadRequest, "The account was not connected: "+strings.TrimPrefix(err.Error(), "upstreamauth: "))
			return
		}
		page(w, http.StatusOK, "The account is connected. You can close this tab.")
	})
	return h, results
}

func page(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Referrer-Policy", "no-referrer")
	w.WriteHeader(status)
	fmt.Fprintf(w, "<!doctype html><title>idn gateway</title><p>%s</p>\n", html.EscapeString(msg))
}
