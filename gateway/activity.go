package gateway

import (
	"context"
	"net/http"
	"time"

	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/errcode"
	"github.com/idnhq/idn/kit/textcap"
	"github.com/idnhq/idn/mcpevent"
	"github.com/idnhq/idn/mcpproxy/toolpin"
	"github.com/idnhq/idn/pairing"
	"github.com/idnhq/idn/proxy"
)

// A paired gateway reports its decisions to its owner's Activity page:
// the proxy's (reported) and the MCP engine's (mcpActivity) go to one
// pairing.Reporter, which Start runs.

// mcpActivity is the activity record of an MCP decision: the tool ran (or
// the listing was answered) unless the gateway refused it first.
func mcpActivity(ctx context.Context, e mcpevent.Decision, vault *credvault.Vault) pairing.Activity {
	// The tool is the agent's choice: a queued record keeps no more of
	// it than the report sends.
	a := pairing.Activity{At: time.Now(), AgentKey: e.Caller.Key, Connection: e.ConnectionID, MCP: true, Method: e.Method,
		Tool: textcap.Clip(e.Tool, textcap.Name), Reason: e.Code, Status: http.StatusOK, Latency: proxy.RecordedElsewhere(ctx)}
	if caller, _ := proxy.CallerFrom(ctx); caller != nil {
		a.AgentName = caller.Name
	}
	if res, ok := vault.Lookup(e.ConnectionID); ok && res.Connection != nil {
		c := res.Connection
		a.Service = c.ServiceSlug()
		if c.AuthMode == credvault.AuthOAuth2AuthorizationCode {
			// The account's subject, as the proxy records an HTTP call's:
			// never its token.
			a.OAuthAccount, a.Account = true, c.AccountSubject(e.Caller.Subject)
			acct, _ := c.Account(a.Account)
			a.AccountNeedsReconnecting = e.Code == errcode.UpstreamAuthRequired.String() && acct.Status == credvault.AccountNeedsReconnecting
		}
	}
	switch e.Outcome {
	case "success", "tool_error", "error":
		a.Allowed = true
	}
	if code, ok := errcode.Parse(e.Code); ok {
		a.Status = code.Status()
	}
	return a
}

// pinActivity is the activity record of a change of connection id's
// pinned tool definitions: denied while agents do not get the definition
// (MCP_TOOL_CHANGED), allowed once they do.
func pinActivity(id string, e toolpin.Event, vault *credvault.Vault) pairing.Activity {
	a := pairing.Activity{At: time.Now(), AgentName: textcap.Clip(e.By, textcap.Name), Connection: id, MCP: true,
		Tool: textcap.Clip(e.Tool, textcap.Name), Event: "tool_" + e.Kind}
	switch e.Kind {
	case toolpin.EventPinned, toolpin.EventAccepted:
		a.Allowed = true
	default:
		a.Reason = errcode.MCPToolChanged.String()
	}
	if res, ok := vault.Lookup(id); ok && res.Connection != nil {
		a.Service = res.Connection.ServiceSlug()
	}
	return a
}

// reported gives the proxy's decisions to the activity reporter.
type reported struct{ r *pairing.Reporter }

func (p reported) RecordActivity(a proxy.Activity) {
	p.r.Record(pairing.Activity{At: a.At, AgentName: a.AgentName, AgentKey: a.AgentKey, Connection: a.Connection,
		Service: a.Service, MCP: a.MCP, Method: a.Method, Route: a.Route, Allowed: a.Allowed, Reason: a.Reason,
		Status: a.Status, Latency: a.Latency, OAuthAccount: a.OAuthAccount, Account: a.Account, AccountNeedsReconnecting: a.AccountNeedsReconnecting})
}
