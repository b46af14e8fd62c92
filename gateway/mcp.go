package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"

	"github.com/idnhq/idn/apierror"
	"github.com/idnhq/idn/approval"
	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/errcode"
	"github.com/idnhq/idn/mcpevent"
	"github.com/idnhq/idn/mcpproxy"
	"github.com/idnhq/idn/pairing"
	"github.com/idnhq/idn/proxy"
	"github.com/idnhq/idn/upstreamauth"
)

// The gateway composes the MCP engine with the rest: connections come from
// the vault, the caller from the proxy's signed pipeline, and what the
// engine observes goes to the proxy's metrics and decision log. proxy and
// mcpproxy know nothing of each other.

// VaultExtensions are the credvault.Extensions of a gateway's vault: an
// MCP connection's settings (mcpproxy.Settings, the mcp_* fields) and its
// last discovery (mcp_discovery) are records of mcpproxy that the vault
// keeps with the connection. They are checked and completed as mcpproxy
// says, mcp_endpoint and mcp_transport are part of the secret's route, and
// an absolute mcp_endpoint may receive the credential. A program that
// opens the gateway's store itself (the gateway command's subcommands)
// passes them to credvault.New.
func VaultExtensions() credvault.Extensions {
	return credvault.Extensions{Check: checkMCPExtensions, SecretRoute: mcpproxy.SecretRouteMembers(), Destinations: mcpDestinations}
}

// checkMCPExtensions is the Extensions.Check of a gateway's vault.
func checkMCPExtensions(c *credvault.Connection) error {
	s, discovery, err := mcpproxy.DecodeSettings(c.Extensions)
	if err != nil {
		return asValidation(err)
	}
	if c.Protocol != credvault.ProtocolMCP {
		if !s.IsZero() {
			return &credvault.ValidationError{Field: "protocol", Message: fmt.Sprintf("mcp_* fields need protocol %q", credvault.ProtocolMCP)}
		}
		return nil
	}
	s.Normalize()
	if err := s.Check(); err != nil {
		return asValidation(err)
	}
	if e := s.Endpoint; e != "" && !strings.HasPrefix(e, "/") {
		if err := credvault.ValidateUpstreamURL("mcp_endpoint", e); err != nil {
			return err
		}
	}
	c.Extensions = s.Members()
	if discovery != nil {
		c.Extensions[mcpproxy.DiscoveryMember] = discovery
	}
	return nil
}

// asValidation gives an mcpproxy.SettingsError the vault's form.
func asValidation(err error) error {
	var se *mcpproxy.SettingsError
	if errors.As(err, &se) {
		return &credvault.ValidationError{Field: se.Field, Message: se.Message}
	}
	return err
}

// mcpDestinations is the Extensions.Destinations of a gateway's vault: an
// MCP connection's absolute endpoint.
func mcpDestinations(c *credvault.Connection) []string {
	s, _, err := mcpproxy.DecodeSettings(c.Extensions)
	if err != nil || c.Protocol != credvault.ProtocolMCP || s.Endpoint == "" || strings.HasPrefix(s.Endpoint, "/") {
		return nil
	}
	return []string{s.Endpoint}
}

// mcpConnections is the mcpproxy.ConnectionSource of a vault: each lookup
// builds the connection from the current snapshot (so policy changes and
// rotations apply at once), with a transport that injects the credential
// and the credential's forms listed for redaction. base sends the upstream
// requests (nil means http.DefaultTransport).
type mcpConnections struct {
	vault *credvault.Vault
	base  http.RoundTripper
	// tokens gets the access tokens of connections in the OAuth modes.
	tokens *upstreamauth.Tokens
	log    *slog.Logger
	// approvals holds the calls of approval_tools; nil refuses them.
	approvals *approval.Gate
	// decoded keeps, by connection id, the settings of the snapshot entry
	// they were read from, so that a lookup decodes them once per change.
	decoded sync.Map
}

// decodedSettings are the MCP records of one snapshot entry.
type decodedSettings struct {
	res       *credvault.Resolved
	settings  mcpproxy.Settings
	discovery json.RawMessage
}

func (s *mcpConnections) MCPConnection(_ context.Context, id string) (*mcpproxy.Connection, error) {
	res, ok := s.vault.Lookup(id)
	switch {
	case !ok:
		return nil, mcpproxy.ErrConnectionNotFound
	case res.Connection.Status == credvault.StatusDisabled:
		return nil, mcpproxy.ErrConnectionDisabled
	case res.Connection.Protocol != credvault.ProtocolMCP:
		return nil, mcpproxy.ErrNotMCP
	}
	if d, ok := s.decoded.Load(id); ok && d.(*decodedSettings).res == res {
		return s.held(mcpConnection(res, d.(*decodedSettings).settings, d.(*decodedSettings).discovery, s.vault, s.tokens, s.base, s.log), res), nil
	}
	settings, discovery, err := mcpproxy.DecodeSettings(res.Connection.Extensions)
	if err != nil {
		return nil, fmt.Errorf("gateway: connection %q: %w", id, err)
	}
	s.decoded.Store(id, &decodedSettings{res: res, settings: settings, discovery: discovery})
	return s.held(mcpConnection(res, settings, discovery, s.vault, s.tokens, s.base, s.log), res), nil
}

// held gives a connection with approval rules its Hold: a call the rules
// hold for its caller's subject waits for the owner's passkey approval of
// its arguments.
func (s *mcpConnections) held(conn *mcpproxy.Connection, res *credvault.Resolved) *mcpproxy.Connection {
	c := res.Connection
	policy := res.Approvals()
	if policy.Empty() {
		return conn
	}
	conn.Hold = func(ctx context.Context, caller mcpevent.Caller, tool string, args json.RawMessage) error {
		if !policy.HoldsTool(caller.Subject, tool) {
			return nil
		}
		if s.approvals == nil || caller.Key == "" {
			return coded{errcode.AuthActionSubmitFailed, errors.New("gateway: no approval desk, or an unsigned caller")}
		}
		call := &approval.Call{Connection: c.ID, Service: c.ServiceSlug(), Namespace: caller.Namespace, PublicKey: caller.Key,
			Subject: caller.Subject, Tool: tool, Arguments: args}
		if id, ok := proxy.CallerFrom(ctx); ok && id != nil {
			call.AgentName = id.Name
		}
		err := s.approvals.Admit(ctx, call)
		if code, ok := errcode.Of(err); err == nil || ok && (code == errcode.AuthActionApprovalRequired || code == errcode.AuthActionDenied ||
			code == errcode.DatabaseUnavailable) {
			return err
		}
		if errors.Is(err, approval.ErrDuplicateKey) {
			return coded{errcode.MCPToolArgumentsInvalid, err}
		}
		return coded{errcode.AuthActionSubmitFailed, err}
	}
	return conn
}

// coded is an error answered with code.
type coded struct {
	code errcode.Code
	err  error
}

func (e coded) Error() string      { return e.err.Error() }
func (e coded) Unwrap() error      { return e.err }
func (e coded) Code() errcode.Code { return e.code }

// mcpConnection is what mcpproxy needs of a stored MCP connection, with
// mcpTransport sending (and authenticating) its upstream requests. The
// access tokens of an OAuth connection are scrubbed from what its server
// answers, as its static secrets are.
func mcpConnection(res *credvault.Resolved, s mcpproxy.Settings, discovery json.RawMessage, v *credvault.Vault, tokens *upstreamauth.Tokens, base http.RoundTripper, log *slog.Logger) *mcpproxy.Connection {
	var live func() []string
	if res.Connection.OAuth() {
		id := res.Connection.ID
		live = func() []string { return tokens.Issued(id) }
	}
	return &mcpproxy.Connection{
		ID:              res.Connection.ID,
		BaseURL:         res.Connection.BaseURL,
		Endpoint:        s.Endpoint,
		Transport:       mcpTransport(v, tokens, res, base, log),
		LiveSecrets:     live,
		PerSubject:      res.Connection.OAuthPerSubject,
		Policy:          s.Policy(),
		Discovery:       discovery,
		ExposeResources: s.ExposeResources,
		ExposePrompts:   s.ExposePrompts,
		Redact:          res.Redactions(),
	}
}

// mcpCaller is the mcpproxy.Config.Caller of a gateway: it reads the
// caller the proxy's pipeline verified. A request that did not pass the
// pipeline is refused.
func mcpCaller(r *http.Request) (mcpevent.Caller, error) {
	caller, ok := proxy.CallerFrom(r.Context())
	if !ok {
		return mcpevent.Caller{}, apierror.Coded(errcode.AuthForbidden, errcode.AuthForbidden.Message())
	}
	if caller == nil { // unsigned development bypass: one anonymous caller
		return mcpevent.Caller{}, nil
	}
	return mcpevent.Caller{Namespace: caller.Namespace, Subject: caller.Subject, Key: caller.PublicKey}, nil
}

// mcpDecided returns the engine's decision hook: it reports to o and,
// when activity is not nil, each tool listing and call to activity.
func mcpDecided(o *proxy.MCPObserver, activity *pairing.Reporter, vault *credvault.Vault) func(context.Context, mcpevent.Decision) {
	if activity == nil {
		return o.Decision
	}
	return func(ctx context.Context, e mcpevent.Decision) {
		o.Decision(ctx, e)
		activity.Record(mcpActivity(ctx, e, vault))
	}
}

// testMCP is the admin API's TestMCP: a handshake of the MCP engine with
// the connection's server, with its credential sent by base.
func (g *Gateway) testMCP(ctx context.Context, conn *credvault.Connection, base http.RoundTripper) (mcpevent.Handshake, error) {
	return probeMCP(ctx, g.vault, g.tokens, g.mcp, conn.ID, base)
}

// TestMCP tests the mcp connection id of v with an MCP handshake
// (initialize, then tools/list, with the stored credential), as the admin
// API's test route does, for a program that has the vault but no running
// gateway (gateway test). The error is the handshake's scrubbed message
// alone.
func TestMCP(ctx context.Context, v *credvault.Vault, id string) (mcpevent.Handshake, error) {
	engine, err := mcpproxy.New(mcpproxy.Config{})
	if err != nil {
		return mcpevent.Handshake{}, err
	}
	defer engine.Close()
	tokens, err := upstreamauth.New(upstreamauth.Config{Vault: v})
	if err != nil {
		return mcpevent.Handshake{}, err
	}
	return probeMCP(ctx, v, tokens, engine, id, nil)
}

// probeMCP is a handshake of engine with the server of v's connection id,
// its credential sent by base (nil: the default transport). The error it
// returns is the engine's scrubbed message alone, which the test result
// shows.
func probeMCP(ctx context.Context, v *credvault.Vault, tokens *upstreamauth.Tokens, engine *mcpproxy.Proxy, id string, base http.RoundTripper) (mcpevent.Handshake, error) {
	res, ok := v.Lookup(id)
	if !ok {
		return mcpevent.Handshake{}, credvault.ErrNotFound
	}
	settings, discovery, err := mcpproxy.DecodeSettings(res.Connection.Extensions)
	if err != nil {
		return mcpevent.Handshake{}, errors.New("the connection's MCP settings cannot be read")
	}
	hs, err := engine.Probe(ctx, mcpConnection(res, settings, discovery, v, tokens, base, nil))
	var ue *mcpproxy.UpstreamError
	switch {
	case err == nil:
	case errors.As(err, &ue):
		err = errors.New(ue.Message)
	case errors.Is(err, mcpproxy.ErrBadRequest):
		err = errors.New("the connection's MCP endpoint is not a valid URL")
	default:
		err = errors.New("the MCP handshake failed")
	}
	return hs, err
}
