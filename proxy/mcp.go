package proxy

import (
	"context"
	"net/http"

	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/errcode"
	"github.com/idnhq/idn/mcpproxy"
)

// MCPConnections adapts a Vault to mcpproxy.ConnectionSource: each lookup
// builds the connection from the current snapshot (so policy changes and
// rotations apply at once), with a transport that injects the credential
// and the credential's forms listed for redaction. base sends the upstream
// requests (nil means http.DefaultTransport).
func MCPConnections(v *credvault.Vault, base http.RoundTripper) mcpproxy.ConnectionSource {
	return &mcpSource{vault: v, base: base}
}

type mcpSource struct {
	vault *credvault.Vault
	base  http.RoundTripper
}

func (s *mcpSource) MCPConnection(_ context.Context, id string) (*mcpproxy.Connection, error) {
	res, ok := s.vault.Lookup(id)
	switch {
	case !ok:
		return nil, mcpproxy.ErrConnectionNotFound
	case res.Connection.Status == credvault.StatusDisabled:
		return nil, mcpproxy.ErrConnectionDisabled
	case res.Connection.Protocol != credvault.ProtocolMCP:
		return nil, mcpproxy.ErrNotMCP
	}
	return MCPConnection(res, s.vault.Transport(id, s.base)), nil
}

// MCPConnection converts a stored connection to what mcpproxy needs, with
// transport sending (and authenticating) its upstream requests.
func MCPConnection(res *credvault.Resolved, transport http.RoundTripper) *mcpproxy.Connection {
	c := res.Connection
	policy := mcpproxy.Policy{Allow: c.MCPToolAllowlist, Deny: c.MCPToolDenylist, MaxTools: c.MCPMaxTools}
	if len(c.MCPSubjectToolPolicies) > 0 {
		policy.Subjects = make(map[string]mcpproxy.SubjectPolicy, len(c.MCPSubjectToolPolicies))
		for subject, p := range c.MCPSubjectToolPolicies {
			policy.Subjects[subject] = mcpproxy.SubjectPolicy{Allow: p.Allow, Deny: p.Deny}
		}
	}
	mc := &mcpproxy.Connection{
		ID:              c.ID,
		BaseURL:         c.BaseURL,
		Endpoint:        c.MCPEndpoint,
		Transport:       transport,
		Policy:          policy,
		Discovery:       c.MCPDiscovery,
		ExposeResources: c.MCPExposeResources,
		ExposePrompts:   c.MCPExposePrompts,
	}
	mc.Redact = res.Redactions()
	return mc
}

// MCPCaller is the mcpproxy.Config.Caller of a gateway: it reads the caller
// the Handler verified. A request that did not pass the Handler's pipeline
// is refused.
func MCPCaller(r *http.Request) (mcpproxy.Caller, error) {
	caller, ok := CallerFrom(r.Context())
	if !ok {
		return mcpproxy.Caller{}, newError(errcode.AuthForbidden, nil)
	}
	if caller == nil { // unsigned development bypass: one anonymous caller
		return mcpproxy.Caller{}, nil
	}
	return mcpproxy.Caller{Namespace: caller.Namespace, Subject: caller.Subject, Key: caller.PublicKey}, nil
}
