package gateway

import (
	"context"
	"net/http"

	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/errcode"
	"github.com/idnhq/idn/internal/apierror"
	"github.com/idnhq/idn/mcpproxy"
	"github.com/idnhq/idn/proxy"
)

// The gateway composes the MCP engine with the rest: connections come from
// the vault, the caller from the proxy's signed pipeline, and what the
// engine observes goes to the proxy's metrics and decision log. proxy and
// mcpproxy know nothing of each other.

// mcpConnections is the mcpproxy.ConnectionSource of a vault: each lookup
// builds the connection from the current snapshot (so policy changes and
// rotations apply at once), with a transport that injects the credential
// and the credential's forms listed for redaction. base sends the upstream
// requests (nil means http.DefaultTransport).
type mcpConnections struct {
	vault *credvault.Vault
	base  http.RoundTripper
}

func (s mcpConnections) MCPConnection(_ context.Context, id string) (*mcpproxy.Connection, error) {
	res, ok := s.vault.Lookup(id)
	switch {
	case !ok:
		return nil, mcpproxy.ErrConnectionNotFound
	case res.Connection.Status == credvault.StatusDisabled:
		return nil, mcpproxy.ErrConnectionDisabled
	case res.Connection.Protocol != credvault.ProtocolMCP:
		return nil, mcpproxy.ErrNotMCP
	}
	return mcpConnection(res, s.vault.Transport(id, s.base)), nil
}

// mcpConnection converts a stored connection to what mcpproxy needs, with
// transport sending (and authenticating) its upstream requests.
func mcpConnection(res *credvault.Resolved, transport http.RoundTripper) *mcpproxy.Connection {
	c := res.Connection
	policy := mcpproxy.Policy{Allow: c.MCPToolAllowlist, Deny: c.MCPToolDenylist, MaxTools: c.MCPMaxTools}
	if len(c.MCPSubjectToolPolicies) > 0 {
		policy.Subjects = make(map[string]mcpproxy.SubjectPolicy, len(c.MCPSubjectToolPolicies))
		for subject, p := range c.MCPSubjectToolPolicies {
			policy.Subjects[subject] = mcpproxy.SubjectPolicy{Allow: p.Allow, Deny: p.Deny}
		}
	}
	return &mcpproxy.Connection{
		ID:              c.ID,
		BaseURL:         c.BaseURL,
		Endpoint:        c.MCPEndpoint,
		Transport:       transport,
		Policy:          policy,
		Discovery:       c.MCPDiscovery,
		ExposeResources: c.MCPExposeResources,
		ExposePrompts:   c.MCPExposePrompts,
		Redact:          res.Redactions(),
	}
}

// mcpCaller is the mcpproxy.Config.Caller of a gateway: it reads the
// caller the proxy's pipeline verified. A request that did not pass the
// pipeline is refused.
func mcpCaller(r *http.Request) (mcpproxy.Caller, error) {
	caller, ok := proxy.CallerFrom(r.Context())
	if !ok {
		return mcpproxy.Caller{}, apierror.Coded(errcode.AuthForbidden, errcode.AuthForbidden.Message())
	}
	if caller == nil { // unsigned development bypass: one anonymous caller
		return mcpproxy.Caller{}, nil
	}
	return mcpproxy.Caller{Namespace: caller.Namespace, Subject: caller.Subject, Key: caller.PublicKey}, nil
}

// mcpObserved returns the engine's hooks that report to o.
func mcpObserved(o *proxy.MCPObserver) (upstream func(context.Context, mcpproxy.UpstreamExchange), decision func(context.Context, mcpproxy.Event)) {
	upstream = func(ctx context.Context, e mcpproxy.UpstreamExchange) {
		o.Upstream(ctx, proxy.MCPExchange{ConnectionID: e.ConnectionID, Method: e.Method, Status: e.Status, Err: e.Err, Elapsed: e.Elapsed})
	}
	decision = func(ctx context.Context, e mcpproxy.Event) {
		o.Decision(ctx, proxy.MCPDecision{ConnectionID: e.ConnectionID, Method: e.Method, Tool: e.Tool, Outcome: e.Outcome, Code: e.Code,
			Namespace: e.Caller.Namespace, Subject: e.Caller.Subject, Key: e.Caller.Key})
	}
	return upstream, decision
}
