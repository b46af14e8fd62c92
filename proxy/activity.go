package proxy

import (
	"context"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/errcode"
	"github.com/idnhq/idn/identity"
)

// Activity is one decision of the Handler about an agent's request, as
// Config.Activity is told of it: who called, through which connection,
// what they asked for and what they were answered. It never holds a
// body, a query string, a header or a secret.
type Activity struct {
	At time.Time
	// AgentName is the agent certificate's name ("" for none); AgentKey
	// its public key ("ed25519:<base64>"), "" when the request was refused
	// before a signature verified or on the unsigned development bypass.
	AgentName, AgentKey string
	// Connection is the connection id the request named; Service its
	// service slug, "" when the connection is unknown. A refusal before a
	// signature verified (AgentKey "", Allowed false) carries neither, nor
	// a Route: whoever sent it chose them, and a recorder should count such
	// refusals by Reason rather than keep each.
	Connection, Service string
	// MCP is set for a request to /mcp/{id}/… refused by the pipeline,
	// or admitted and answered an error the MCP engine made no decision
	// about, such as the 400 of a request without its session (the engine
	// reports its tool decisions itself).
	MCP bool
	// Method is the HTTP method; Route the path after the connection as
	// RouteTemplate makes it.
	Method, Route string
	// Allowed: the request went upstream. Reason is the error code of a
	// refusal or of an upstream failure.
	Allowed bool
	Reason  string
	// Status is the status answered to the agent (the upstream's, for a
	// forwarded request); Latency the time from the request's arrival to
	// the refusal or the upstream's response headers.
	Status  int
	Latency time.Duration
	// OAuthAccount: the connection is oauth2_authorization_code, and
	// Account names the account that served the call, or would have: the
	// subject it serves, "" for the connection's one account. Never a
	// token. AccountNeedsReconnecting: the provider refused its refresh
	// token, so the call was refused.
	OAuthAccount             bool
	Account                  string
	AccountNeedsReconnecting bool
}

// ActivityRecorder receives the Handler's decisions. RecordActivity runs
// on the request path: it must not block (queue and return).
type ActivityRecorder interface {
	RecordActivity(Activity)
}

// activityNote is what a request carries for its activity record, set
// when it arrives; only when Config.Activity is set.
type activityNote struct {
	start time.Time
	rt    route
	// elsewhere: another part (the MCP engine) recorded a decision about
	// the request, so an error it answered is not recorded again.
	elsewhere atomic.Bool
}

// RecordedElsewhere tells the Handler that a decision about the request
// of ctx was recorded by another part (the MCP engine reports its own),
// and returns the time since the Handler received the request: the
// decision's latency. It returns 0 for a request the Handler noted nothing
// of (Config.Activity unset).
func RecordedElsewhere(ctx context.Context) time.Duration {
	n := noteFrom(ctx)
	if n == nil {
		return 0
	}
	n.elsewhere.Store(true)
	return time.Since(n.start)
}

type activityKey struct{}

func noteFrom(ctx context.Context) *activityNote {
	n, _ := ctx.Value(activityKey{}).(*activityNote)
	return n
}

// recordActivity tells Config.Activity of one decision about r.
func (h *Handler) recordActivity(r *http.Request, caller *identity.Caller, service string, allowed bool, reason string, status int) {
	n := noteFrom(r.Context())
	if n == nil {
		return
	}
	if caller == nil {
		caller, _ = CallerFrom(r.Context())
	}
	now := time.Now()
	a := Activity{At: now, Connection: n.rt.connID, Service: service, MCP: n.rt.mcp, Method: r.Method,
		Allowed: allowed, Reason: reason, Status: status, Latency: now.Sub(n.start)}
	if !n.rt.mcp {
		a.Route = RouteTemplate(n.rt.rest)
	}
	if caller != nil {
		a.AgentName, a.AgentKey = caller.Name, caller.PublicKey
	} else if !allowed {
		a.Connection, a.Service, a.Route = "", "", ""
		h.cfg.Activity.RecordActivity(a)
		return
	}
	if res, ok := h.cfg.Connections.Lookup(n.rt.connID); ok && res != nil && res.Connection != nil {
		c := res.Connection
		if a.Service == "" {
			a.Service = c.ServiceSlug()
		}
		if c.AuthMode == credvault.AuthOAuth2AuthorizationCode {
			var subject string
			if caller != nil {
				subject = caller.Subject
			}
			a.OAuthAccount, a.Account = true, c.AccountSubject(subject)
			acct, _ := c.Account(a.Account)
			a.AccountNeedsReconnecting = reason == errcode.UpstreamAuthRequired.String() && acct.Status == credvault.AccountNeedsReconnecting
		}
	}
	h.cfg.Activity.RecordActivity(a)
}
