package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"

	"github.com/idnhq/idn/apierror"
	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/errcode"
	"github.com/idnhq/idn/mcpproxy"
	"github.com/idnhq/idn/proxy"
	"github.com/idnhq/idn/upstreamauth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// mcpOAuth sends the upstream requests of an MCP connection in an OAuth
// mode with the access token of the account serving the caller's
// subject, as the MCP authorization spec has a client do: a 401 is
// retried once with a fresh token, and a 403 insufficient_scope marks the
// account as needing reconnecting with the scopes the server named (the
// step-up is the owner's to make, with gateway connect).
type mcpOAuth struct {
	tokens *upstreamauth.Tokens
	vault  *credvault.Vault
	res    *credvault.Resolved
	base   http.RoundTripper // the vault's transport: it checks the destination
	log    *slog.Logger
}

// maxDrain bounds what is read of a refused answer before its retry, so
// that its connection can be reused.
const maxDrain = 64 << 10

func (t *mcpOAuth) RoundTrip(req *http.Request) (*http.Response, error) {
	var subject string
	if caller, _ := proxy.CallerFrom(req.Context()); caller != nil {
		subject = caller.Subject
	}
	tok, err := t.tokens.Token(req.Context(), t.res, subject)
	if err != nil {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, tokenRefusal(err)
	}
	resp, err := t.send(req, req.Body, tok)
	if err != nil {
		return nil, err
	}
	switch resp.StatusCode {
	case http.StatusUnauthorized:
		if req.Body != nil && req.Body != http.NoBody && req.GetBody == nil {
			return resp, nil
		}
		t.tokens.Invalidate(t.res, subject, tok)
		fresh, ferr := t.tokens.Token(req.Context(), t.res, subject)
		if ferr != nil || fresh.Value == tok.Value {
			return resp, nil // the server's 401 is the answer
		}
		body := req.Body
		if req.GetBody != nil {
			if body, err = req.GetBody(); err != nil {
				return resp, nil
			}
		}
		drain(resp)
		return t.send(req, body, fresh)
	case http.StatusForbidden:
		scopes, ok := insufficientScope(resp.Header)
		if !ok {
			return resp, nil
		}
		drain(resp)
		c := t.res.Connection
		account := c.AccountSubject(subject)
		if err := (credvault.MCPAccounts{Vault: t.vault}).RequireScopes(req.Context(), c.ID, account, scopes); err != nil && !errors.Is(err, credvault.ErrAccountNotFound) {
			t.log.Error("gateway: could not record the scopes an MCP server asked for", "connection_id", c.ID, "error", err)
		}
		return nil, tokenRefusal(&upstreamauth.AuthRequiredError{Connection: c.ID, Subject: account, NeedsReconnecting: true, InsufficientScope: true, Scopes: scopes})
	}
	return resp, nil
}

// tokenRefusal is the answer to a call that got no token, as the proxy
// answers one (the MCP engine answers an *apierror.Error as it is): what
// the agent may act on, never the provider's answer.
func tokenRefusal(err error) error {
	if ue, ok := errors.AsType[*upstreamauth.UnavailableError](err); ok {
		return apierror.Coded(errcode.UpstreamAuthUnavailable, strings.TrimPrefix(ue.Error(), "upstreamauth: ")).WithRetryAfter(ue.RetryAfter)
	}
	if re, ok := errors.AsType[*upstreamauth.AuthRequiredError](err); ok {
		ae := apierror.Coded(errcode.UpstreamAuthRequired, strings.TrimPrefix(re.Error(), "upstreamauth: ")).
			With("connection_id", re.Connection).With("needs_reconnecting", re.NeedsReconnecting)
		if re.InsufficientScope {
			ae = ae.With("scopes", re.Scopes)
		}
		return ae
	}
	return err
}

// send sends a copy of req with body and tok's Authorization header.
func (t *mcpOAuth) send(req *http.Request, body io.ReadCloser, tok *credvault.AccessToken) (*http.Response, error) {
	out := req.Clone(req.Context())
	out.Body = body
	out.Header.Set("Authorization", credvault.DefaultBearerPrefix+tok.Value)
	resp, err := t.base.RoundTrip(out)
	if err != nil {
		return nil, err
	}
	// A server that echoes the token does not hand it to the agent.
	proxy.RedactBody(resp, tok.Redactions)
	resp.Request = req
	return resp, nil
}

func drain(resp *http.Response) {
	_, _ = io.CopyN(io.Discard, resp.Body, maxDrain)
	_ = resp.Body.Close()
}

// insufficientScope reads a Bearer challenge with error insufficient_scope
// (RFC 6750 §3.1) and the scopes it names.
func insufficientScope(h http.Header) ([]string, bool) {
	challenges, err := oauthex.ParseWWWAuthenticate(h.Values("WWW-Authenticate"))
	if err != nil {
		return nil, false
	}
	for _, c := range challenges {
		if c.Scheme == "bearer" && c.Params["error"] == "insufficient_scope" {
			return strings.Fields(c.Params["scope"]), true
		}
	}
	return nil, false
}

// mcpTransport is the transport of res's MCP connection: the vault's,
// which injects a static credential and checks the destination, under
// mcpOAuth for the OAuth modes. A nil log discards.
func mcpTransport(v *credvault.Vault, tokens *upstreamauth.Tokens, res *credvault.Resolved, base http.RoundTripper, log *slog.Logger) http.RoundTripper {
	rt := v.Transport(res.Connection.ID, base)
	if !res.Connection.OAuth() {
		return rt
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &mcpOAuth{tokens: tokens, vault: v, res: res, base: rt, log: log}
}

// ConnectMCPAccount runs the MCP connect flow of v's connection id
// (upstreamauth.Tokens.ConnectMCP, at the connection's MCP endpoint) and
// stores what it got with credvault.MCPAccounts.Connect: the
// authorization server, the client, and the account serving m.Subject.
func ConnectMCPAccount(ctx context.Context, v *credvault.Vault, tokens *upstreamauth.Tokens, id string, m upstreamauth.MCPConnect) (*upstreamauth.MCPGrant, error) {
	res, ok := v.Lookup(id)
	if !ok {
		return nil, fmt.Errorf("%w: %q", credvault.ErrNotFound, id)
	}
	settings, _, err := mcpproxy.DecodeSettings(res.Connection.Extensions)
	if err != nil {
		return nil, fmt.Errorf("gateway: connection %q: %w", id, err)
	}
	endpoint, err := mcpproxy.ResolveEndpoint(res.Connection.BaseURL, settings.Endpoint)
	if err != nil {
		return nil, fmt.Errorf("gateway: connection %q has an invalid MCP endpoint", id)
	}
	m.Endpoint = endpoint.String()
	g, err := tokens.ConnectMCP(ctx, res, m)
	if err != nil {
		return nil, err
	}
	if err := (credvault.MCPAccounts{Vault: v}).Connect(ctx, id, m.Subject, g.Grant, g.Client, g.Scopes); err != nil {
		return nil, err
	}
	return g, nil
}
