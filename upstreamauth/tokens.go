package upstreamauth

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/idnhq/idn/credvault"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
)

// Vault is what Tokens needs of the credential store; *credvault.Vault
// implements it.
type Vault interface {
	Lookup(id string) (*credvault.Resolved, bool)
	PutRefreshToken(ctx context.Context, id, subject, prev, next string) error
	MarkNeedsReconnecting(ctx context.Context, id, subject, prev string) error
}

var _ Vault = (*credvault.Vault)(nil)

// Config configures Tokens. Vault is required.
type Config struct {
	Vault Vault
	// HTTPClient's transport reaches the providers. Nil means
	// http.DefaultTransport. Its timeout and redirect policy are not
	// used: see Timeout.
	HTTPClient *http.Client
	// Timeout bounds one exchange with a provider, its answer's body
	// included (a slow body is cut). Zero means DefaultTimeout.
	Timeout time.Duration
	// MaxResponseBytes bounds a provider's answer. Zero means
	// DefaultMaxResponseBytes.
	MaxResponseBytes int64
	// RefreshAhead is how long before its expiry a token is refreshed in
	// the background (at most a quarter of its lifetime). Zero means
	// DefaultRefreshAhead.
	RefreshAhead time.Duration
	// Metrics receives the token request counts; nil means an
	// unregistered set.
	Metrics *Metrics
	// Logger receives one line per failed token request (never a token
	// or an answer). Nil discards.
	Logger *slog.Logger
	// Clock is the time source of expiry decisions. Nil means time.Now.
	Clock func() time.Time
}

// Tokens hands out access tokens for OAuth connections, one cache entry
// per connection and account. It is safe for concurrent use.
type Tokens struct {
	cfg       Config
	client    *http.Client
	metrics   *Metrics
	log       *slog.Logger
	mu        sync.Mutex
	entries   map[entryKey]*entry
	discovery discoveryCache
	issued    sync.Map // connection id: *issued
}

type entryKey struct{ conn, subject string }

// entry is one account's token and the fetch in flight for it.
type entry struct {
	mu        sync.Mutex
	conn      *credvault.Connection // the snapshot's connection stamp was computed from
	stamp     string                // the configuration and account the token is for
	token     *credvault.AccessToken
	expiry    time.Time // zero: none given, valid until a 401
	refreshAt time.Time
	fetching  chan struct{} // closed when the fetch in flight ends
	err       error         // the last fetch's failure
	notBefore time.Time     // no fetch before, after a failure
	refused   string        // the refresh token the provider refused
	noted     time.Time     // when token was last recorded as issued
}

// refusedWait is how long an account whose refresh token the provider
// refused is not refreshed again, unless its token changes meanwhile.
const refusedWait = 30 * time.Second

// New returns Tokens for cfg.
func New(cfg Config) (*Tokens, error) {
	if cfg.Vault == nil {
		return nil, errors.New("upstreamauth: Config.Vault is required")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.MaxResponseBytes <= 0 {
		cfg.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if cfg.RefreshAhead <= 0 {
		cfg.RefreshAhead = DefaultRefreshAhead
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	t := &Tokens{cfg: cfg, metrics: cfg.Metrics, log: cfg.Logger, entries: map[entryKey]*entry{}}
	if t.metrics == nil {
		t.metrics, _ = NewMetrics(nil)
	}
	if t.log == nil {
		t.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	t.client = newClient(cfg.HTTPClient, cfg.Timeout, cfg.MaxResponseBytes)
	return t, nil
}

// Token returns an access token for res's connection, for the account
// that serves subject. A valid cached token is returned at once (and
// refreshed in the background when close to expiry); otherwise the call
// waits for the one fetch in flight. Errors match ErrUnavailable or
// ErrAuthRequired, or are ctx's.
func (t *Tokens) Token(ctx context.Context, res *credvault.Resolved, subject string) (*credvault.AccessToken, error) {
	c := res.Connection
	account := c.AccountSubject(subject)
	if c.AuthMode == credvault.AuthOAuth2AuthorizationCode {
		if _, ok := res.RefreshToken(account); !ok {
			// An MCP account granted no refresh token serves its access
			// token until it expires.
			value, expiry, granted := res.AccessGrant(account)
			if granted && t.cfg.Clock().Before(expiry) {
				t.note(c.ID, value)
				return res.AccessToken(value), nil
			}
			// Refused before any state is kept: subjects are the
			// agent's to choose, so each must not cost memory.
			a, _ := c.Account(account)
			return nil, &AuthRequiredError{Connection: c.ID, Subject: account, NeedsReconnecting: granted || a.Status == credvault.AccountNeedsReconnecting}
		}
	}
	e := t.entry(entryKey{c.ID, account})
	for {
		now := t.cfg.Clock()
		e.mu.Lock()
		if e.conn != c { // a snapshot not seen before: compare what the token is for
			if stamp := stampOf(c, account); stamp != e.stamp {
				e.stamp, e.token, e.err, e.notBefore = stamp, nil, nil, time.Time{}
			}
			e.conn = c
		}
		stamp := e.stamp
		if e.token != nil && (e.expiry.IsZero() || now.Before(e.expiry)) {
			tok := e.token
			if e.fetching == nil && !e.refreshAt.IsZero() && !now.Before(e.refreshAt) && !now.Before(e.notBefore) {
				t.start(e, c.ID, account, stamp) // off the request path
			}
			// Recorded now and then, well within IssuedRetention: the
			// record costs a lock the cached path need not take.
			note := now.Sub(e.noted) > IssuedRetention/8
			if note {
				e.noted = now
			}
			e.mu.Unlock()
			if note {
				t.note(c.ID, tok.Value)
			}
			return tok, nil
		}
		if e.fetching == nil {
			if e.err != nil && now.Before(e.notBefore) && !replaced(res, account, e.refused) {
				err := e.err
				e.mu.Unlock()
				return nil, err
			}
			t.start(e, c.ID, account, stamp)
		}
		done := e.fetching
		e.mu.Unlock()
		select {
		case <-done:
			// Look again: the fetch failed (its error is kept), or its
			// token is there, or was refused meanwhile (fetch again).
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Invalidate drops token, which the upstream refused (401), so that the
// next Token fetches a fresh one. A token already replaced is left alone.
func (t *Tokens) Invalidate(res *credvault.Resolved, subject string, token *credvault.AccessToken) {
	c := res.Connection
	e := t.entry(entryKey{c.ID, c.AccountSubject(subject)})
	e.mu.Lock()
	if e.token == token {
		e.token = nil
	}
	e.mu.Unlock()
}

func (t *Tokens) entry(k entryKey) *entry {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.entries[k]
	if !ok {
		e = &entry{}
		t.entries[k] = e
	}
	return e
}

// stampOf names what a cached token was got for: the connection's OAuth
// configuration and secrets, and the account's connection time (a
// reconnected account may be another user's).
func stampOf(c *credvault.Connection, account string) string {
	a, _ := c.Account(account)
	return strings.Join(append([]string{c.AuthMode, c.OAuthTokenURL, c.OAuthAuthURL, c.OAuthIssuer, c.OAuthClientID,
		c.OAuthAudience, c.OAuthResource, strconv.FormatInt(c.SecretVersion, 10), strconv.FormatInt(a.ConnectedAt.UnixNano(), 10)},
		c.OAuthScopes...), "\x00")
}

// start runs a fetch for e in the background; e.mu is held.
func (t *Tokens) start(e *entry, conn, account, stamp string) {
	done := make(chan struct{})
	e.fetching = done
	go func() {
		res, tok, used, err := t.fetch(conn, account)
		now := t.cfg.Clock()
		e.mu.Lock()
		defer e.mu.Unlock()
		e.fetching = nil
		close(done)
		if e.stamp != stamp {
			return // the connection changed while this ran
		}
		if err != nil {
			e.err, e.notBefore, e.refused = err, now.Add(time.Second), ""
			if ue, ok := errors.AsType[*UnavailableError](err); ok {
				e.notBefore = now.Add(ue.RetryAfter)
			}
			if errors.Is(err, ErrAuthRequired) {
				// Until the account is reconnected, or its token replaced
				// by another process's refresh.
				e.notBefore, e.refused = now.Add(refusedWait), used
			}
			return
		}
		e.token, e.expiry, e.err, e.notBefore, e.noted = res.AccessToken(tok.AccessToken), tok.Expiry, nil, time.Time{}, time.Time{}
		e.refreshAt = time.Time{}
		if !tok.Expiry.IsZero() {
			ahead := min(t.cfg.RefreshAhead, tok.Expiry.Sub(now)/4)
			e.refreshAt = tok.Expiry.Add(-ahead)
		}
	}()
}

// fetch gets a new token for the account of connection conn.
func (t *Tokens) fetch(conn, account string) (res *credvault.Resolved, tok *oauth2.Token, used string, err error) {
	res, ok := t.cfg.Vault.Lookup(conn)
	if !ok {
		return nil, nil, "", fmt.Errorf("%w: %q", credvault.ErrNotFound, conn)
	}
	start := time.Now()
	var result string
	switch res.Connection.AuthMode {
	case credvault.AuthOAuth2ClientCredentials:
		tok, err = t.clientCredentials(res)
	case credvault.AuthOAuth2AuthorizationCode:
		tok, used, err = t.refresh(res, account)
	default:
		return nil, nil, "", fmt.Errorf("upstreamauth: connection %q does not use an OAuth mode", conn)
	}
	switch {
	case err == nil:
		result = "success"
	case errors.Is(err, ErrAuthRequired):
		result = "reconnect_required"
	default:
		result = "unavailable"
	}
	t.metrics.observe(result, time.Since(start))
	if err != nil {
		var reason string
		if ue, ok := errors.AsType[*UnavailableError](err); ok {
			reason = ue.Reason
		}
		// The error text names the subject; the log keeps the class only.
		t.log.Warn("upstreamauth: no access token", "connection_id", conn, "result", result, "reason", reason)
	}
	return res, tok, used, err
}

// exchange runs one token request under the timeout and classifies its
// failure.
func (t *Tokens) exchange(conn, account string, refreshing bool, do func(ctx context.Context) (*oauth2.Token, error)) (*oauth2.Token, error) {
	ctx, cancel := context.WithTimeout(context.Background(), t.cfg.Timeout)
	defer cancel()
	ctx, n := withNote(context.WithValue(ctx, oauth2.HTTPClient, t.client))
	tok, err := do(ctx)
	if err == nil {
		return tok, nil
	}
	switch {
	case n.tooLarge.Load():
		err = &responseTooLargeError{}
	case ctx.Err() != nil:
		err = context.DeadlineExceeded
	}
	return nil, classify(conn, account, err, refreshing)
}

func (t *Tokens) clientCredentials(res *credvault.Resolved) (*oauth2.Token, error) {
	c := res.Connection
	secret, err := res.Secret()
	if err != nil {
		return nil, err
	}
	params := url.Values{}
	if c.OAuthAudience != "" {
		params.Set("audience", c.OAuthAudience)
	}
	if c.OAuthResource != "" {
		params.Set("resource", c.OAuthResource) // RFC 8707
	}
	cc := &clientcredentials.Config{ClientID: c.OAuthClientID, ClientSecret: secret, TokenURL: c.OAuthTokenURL,
		Scopes: c.OAuthScopes, EndpointParams: params, AuthStyle: authStyle(c.OAuthTokenAuthMethod)}
	return t.exchange(c.ID, "", false, cc.Token)
}

// refresh uses the account's refresh token. A rotated refresh token is
// stored only if the stored one is still the one used: when another
// process rotated it first, that process's token is kept and this access
// token is still good. invalid_grant on a token that was replaced
// meanwhile is retried once with the replacement.
func (t *Tokens) refresh(res *credvault.Resolved, account string) (*oauth2.Token, string, error) {
	c := res.Connection
	ctx, cancel := context.WithTimeout(context.Background(), t.cfg.Timeout)
	defer cancel()
	for attempt := 0; ; attempt++ {
		prev, ok := res.RefreshToken(account)
		if !ok {
			a, _ := c.Account(account)
			return nil, "", &AuthRequiredError{Connection: c.ID, Subject: account, NeedsReconnecting: a.Status == credvault.AccountNeedsReconnecting}
		}
		cfg, err := t.oauthConfig(ctx, res)
		if err != nil {
			return nil, prev, err
		}
		tok, err := t.exchange(c.ID, account, true, func(ctx context.Context) (*oauth2.Token, error) {
			if c.OAuthResource != "" {
				// The resource the account was connected for (RFC 8707 §2.2).
				ctx = context.WithValue(ctx, oauth2.HTTPClient, withForm(t.client, url.Values{"resource": {c.OAuthResource}}))
			}
			return cfg.TokenSource(ctx, &oauth2.Token{RefreshToken: prev}).Token()
		})
		if errors.Is(err, ErrAuthRequired) {
			if now, ok := t.cfg.Vault.Lookup(c.ID); ok && attempt == 0 && replaced(now, account, prev) {
				res = now // another process rotated it first
				continue
			}
			if merr := t.cfg.Vault.MarkNeedsReconnecting(ctx, c.ID, account, prev); merr != nil && !errors.Is(merr, credvault.ErrRefreshTokenChanged) {
				t.log.Error("upstreamauth: could not mark the account as needing reconnection", "connection_id", c.ID, "error", merr)
			}
			return nil, prev, err
		}
		if err != nil {
			return nil, prev, err
		}
		if tok.RefreshToken != "" && tok.RefreshToken != prev {
			if perr := t.cfg.Vault.PutRefreshToken(ctx, c.ID, account, prev, tok.RefreshToken); perr != nil && !errors.Is(perr, credvault.ErrRefreshTokenChanged) {
				// The provider may have retired prev: say so loudly.
				t.log.Error("upstreamauth: could not store the rotated refresh token", "connection_id", c.ID, "error", perr)
			}
		}
		return tok, prev, nil
	}
}

// replaced reports whether the account's stored refresh token is no
// longer refused (it is there, and not that one).
func replaced(res *credvault.Resolved, account, refused string) bool {
	if refused == "" || res.Connection.AuthMode != credvault.AuthOAuth2AuthorizationCode {
		return false
	}
	cur, ok := res.RefreshToken(account)
	return ok && cur != refused
}
