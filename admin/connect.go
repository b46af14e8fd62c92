package admin

import (
	"context"
	"errors"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/idnhq/idn/apierror"
	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/errcode"
	"github.com/idnhq/idn/kit/textcap"
	"github.com/idnhq/idn/upstreamauth"
)

// ConnectTTL is how long a connect flow started by Connector.Start may
// be finished.
const ConnectTTL = 10 * time.Minute

// maxConnectFlows bounds the flows kept at once; past it the oldest is
// dropped, so an owner who starts many loses only the first ones.
const maxConnectFlows = 64

// ConnectorConfig configures a Connector. Vault and Tokens are required.
type ConnectorConfig struct {
	Vault  *credvault.Vault
	Tokens *upstreamauth.Tokens
	// Logger receives one line per connected account (never a token). Nil
	// discards.
	Logger *slog.Logger
	// Clock tells the time of expiries. Nil means time.Now.
	Clock func() time.Time
	// ConnectMCP runs the MCP connect flow of connection id and stores the
	// account it got (gateway.ConnectMCPAccount does both). Nil: MCP
	// connections are refused.
	ConnectMCP func(ctx context.Context, id string, m upstreamauth.MCPConnect) error
}

// Connector runs the owner's connect flow of an oauth2_authorization_code
// connection when the redirect reaches another host, which relays it:
// the dashboard's control plane. The gateway keeps state and the PKCE
// verifier; the relay sees the code, useless without the verifier.
type Connector struct {
	cfg   ConnectorConfig
	log   *slog.Logger
	mu    sync.Mutex
	flows map[string]*connectFlow // by state
}

// connectFlow is a started flow: what it is for and until when. An MCP
// flow has mcp instead of auth.
type connectFlow struct {
	auth    *upstreamauth.Authorization
	mcp     *mcpFlow
	conn    string
	subject string
	expires time.Time
}

// mcpFlow is an MCP connect flow waiting for its authorization response.
// The go-sdk's handler runs the whole flow in one call, so it runs in a
// goroutine that Start leaves at the authorization URL and Finish resumes:
// the discovered endpoints, client and PKCE verifier stay in it.
type mcpFlow struct {
	answer chan url.Values // Finish's authorization response
	done   chan error      // the flow's outcome
	cancel context.CancelFunc
}

// ConnectStarted is Start's answer: where to send the owner's browser.
type ConnectStarted struct {
	AuthorizationURL string    `json:"authorization_url"`
	State            string    `json:"state"`
	ExpiresAt        time.Time `json:"expires_at"`
}

// AccountConnected is Finish's answer. It names the account, never its
// token.
type AccountConnected struct {
	ConnectionID string `json:"connection_id"`
	Subject      string `json:"subject,omitempty"`
	Status       string `json:"status"`
}

// NewConnector returns a Connector with no flow started.
func NewConnector(cfg ConnectorConfig) (*Connector, error) {
	if cfg.Vault == nil || cfg.Tokens == nil {
		return nil, errors.New("admin: ConnectorConfig.Vault and Tokens are required")
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	c := &Connector{cfg: cfg, log: cfg.Logger, flows: map[string]*connectFlow{}}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	return c, nil
}

// Start begins connecting subject's account ("" for a connection with one
// account) to connection id, with redirectURI as the provider's redirect.
// The answer's state binds the flow to id and subject for ConnectTTL. An
// MCP connection's flow first discovers the server's authorization server.
func (c *Connector) Start(ctx context.Context, id, subject, redirectURI string) (*ConnectStarted, error) {
	res, ok := c.cfg.Vault.Lookup(id)
	if !ok {
		return nil, credvault.ErrNotFound
	}
	conn := res.Connection
	switch {
	case conn.AuthMode != credvault.AuthOAuth2AuthorizationCode:
		return nil, badRequest("connection " + id + " has no accounts to connect: its auth_mode is not " + credvault.AuthOAuth2AuthorizationCode)
	case conn.Protocol == credvault.ProtocolMCP && c.cfg.ConnectMCP == nil:
		return nil, badRequest("connection " + id + " is an MCP server: connect its accounts with gateway connect on the gateway's host")
	case conn.OAuthPerSubject && subject == "":
		return nil, badRequest("connection " + id + " has one account per subject: name the subject")
	case !conn.OAuthPerSubject && subject != "":
		return nil, badRequest("connection " + id + " has one account for every subject: name no subject")
	case len(subject) > 256 || strings.ContainsFunc(subject, func(r rune) bool { return r < ' ' || r == 0x7f }):
		return nil, badRequest("subject must be at most 256 bytes without control characters")
	}
	u, err := url.Parse(redirectURI)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.Fragment != "" {
		return nil, badRequest("redirect_uri must be an absolute http(s) URL without a fragment")
	}
	if conn.Protocol == credvault.ProtocolMCP {
		return c.startMCP(ctx, id, subject, redirectURI)
	}
	a, err := c.cfg.Tokens.Authorize(ctx, res, redirectURI)
	if err != nil {
		return nil, connectProblem(err)
	}
	return c.keep(&connectFlow{auth: a, conn: id, subject: subject}, a.State(), a.URL), nil
}

// keep registers f under state until ConnectTTL from now.
func (c *Connector) keep(f *connectFlow, state, authURL string) *ConnectStarted {
	now := c.cfg.Clock()
	f.expires = now.Add(ConnectTTL)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sweep(now)
	c.flows[state] = f
	return &ConnectStarted{AuthorizationURL: authURL, State: state, ExpiresAt: f.expires.UTC()}
}

// startMCP runs ConnectMCP up to its authorization URL: the server's 401,
// its metadata, the authorization server's and the client's registration
// (with redirectURI, when dynamic). The flow outlives ctx, for ConnectTTL.
func (c *Connector) startMCP(ctx context.Context, id, subject, redirectURI string) (*ConnectStarted, error) {
	flowCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ConnectTTL)
	m := &mcpFlow{answer: make(chan url.Values, 1), done: make(chan error, 1), cancel: cancel}
	authURL := make(chan string, 1)
	go func() {
		defer cancel()
		m.done <- c.cfg.ConnectMCP(flowCtx, id, upstreamauth.MCPConnect{Subject: subject, RedirectURI: redirectURI,
			Authorize: func(ctx context.Context, u string) (url.Values, error) {
				select {
				case authURL <- u:
				default:
				}
				select {
				case q := <-m.answer:
					return q, nil
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}})
	}()
	select {
	case u := <-authURL:
		parsed, err := url.Parse(u)
		state := ""
		if err == nil {
			state = parsed.Query().Get("state")
		}
		if state == "" {
			cancel()
			return nil, badRequest("the MCP server's authorization server gave an authorization URL without state")
		}
		return c.keep(&connectFlow{mcp: m, conn: id, subject: subject}, state, u), nil
	case err := <-m.done:
		if err == nil {
			// Unreachable: a flow ends only after its authorization response.
			err = errors.New("admin: the MCP connect flow ended without an authorization")
		}
		return nil, mcpProblem(err, errcode.UpstreamError)
	case <-ctx.Done():
		cancel()
		return nil, ctx.Err()
	}
}

// finishMCP gives the authorization response q to f and waits for the
// code's exchange and the account's storing.
func finishMCP(ctx context.Context, f *mcpFlow, q url.Values) error {
	f.answer <- q
	select {
	case err := <-f.done:
		if err != nil {
			return mcpProblem(err, errcode.ValidationError)
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// drop ends f's MCP flow, if any.
func (f *connectFlow) drop() {
	if f.mcp != nil {
		f.mcp.cancel()
	}
}

// sweep drops expired flows, then the oldest while too many are kept.
// The caller holds mu.
func (c *Connector) sweep(now time.Time) {
	for s, f := range c.flows {
		if !now.Before(f.expires) {
			f.drop()
			delete(c.flows, s)
		}
	}
	for len(c.flows) >= maxConnectFlows {
		var oldest string
		for s, f := range c.flows {
			if oldest == "" || f.expires.Before(c.flows[oldest].expires) {
				oldest = s
			}
		}
		c.flows[oldest].drop()
		delete(c.flows, oldest)
	}
}

// take removes and returns the flow of state; a flow is used once,
// whatever its outcome.
func (c *Connector) take(state string) (*connectFlow, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f, ok := c.flows[state]
	delete(c.flows, state)
	if !ok {
		return nil, false
	}
	if !c.cfg.Clock().Before(f.expires) {
		f.drop()
		return nil, false
	}
	return f, true
}

// Finish completes the flow the redirect's query q (state, iss, code or
// error) belongs to. The relay says which connection and subject it
// started the flow for: a state bound to another is refused. On success
// the refresh token is sealed in the vault.
func (c *Connector) Finish(ctx context.Context, id, subject string, q url.Values) (*AccountConnected, error) {
	f, ok := c.take(q.Get("state"))
	if !ok {
		return nil, badRequest("state names no connect flow in progress: it is unknown, used or expired; start again")
	}
	if f.conn != id || f.subject != subject {
		f.drop()
		return nil, badRequest("state belongs to a connect flow of another connection or subject")
	}
	if f.mcp != nil {
		if err := finishMCP(ctx, f.mcp, q); err != nil {
			return nil, err
		}
		return c.connected(ctx, id, subject), nil
	}
	refresh, err := f.auth.Complete(ctx, q)
	if err != nil {
		return nil, connectProblem(err)
	}
	if err := c.cfg.Vault.ConnectAccount(ctx, id, subject, refresh); err != nil {
		return nil, err
	}
	return c.connected(ctx, id, subject), nil
}

// connected logs and answers a connected account.
func (c *Connector) connected(ctx context.Context, id, subject string) *AccountConnected {
	c.log.Info("admin: account connected", "connection", id, "per_subject", subject != "", "request_id", apierror.RequestIDFrom(ctx))
	return &AccountConnected{ConnectionID: id, Subject: subject, Status: credvault.AccountConnected}
}

// mcpProblem answers an MCP flow's failure: as connectProblem, else with
// code and what failed. The owner needs it (no 401, no metadata, an iss
// mismatch); upstreamauth keeps token endpoints' answers out of it.
func mcpProblem(err error, code errcode.Code) error {
	if p := connectProblem(err); p != err || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return p
	}
	msg := strings.TrimPrefix(strings.TrimPrefix(err.Error(), "admin: "), "upstreamauth: ")
	return apierror.Coded(code, textcap.Clip(msg, textcap.Text))
}

// connectProblem turns upstreamauth's errors into answers that name what
// failed, never the provider's answer.
func connectProblem(err error) error {
	var denied *upstreamauth.DeniedError
	var unavailable *upstreamauth.UnavailableError
	switch {
	case errors.Is(err, upstreamauth.ErrStateMismatch):
		return badRequest("the authorization response's state does not match the flow")
	case errors.Is(err, upstreamauth.ErrIssuerMismatch):
		return badRequest("the authorization response's iss is not the connection's issuer (RFC 9207)")
	case errors.Is(err, upstreamauth.ErrNoRefreshToken):
		return badRequest("the provider granted no refresh token: ask for offline access (a scope such as offline_access)")
	case errors.As(err, &denied):
		return badRequest("the provider refused the authorization: " + denied.Code)
	case errors.As(err, &unavailable):
		return apierror.Coded(errcode.UpstreamAuthUnavailable, "the provider's token endpoint gave no token ("+unavailable.Reason+")").
			With("retry_after_seconds", int(unavailable.RetryAfter.Seconds()))
	}
	return err
}
