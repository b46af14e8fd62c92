package proxy

import (
	"context"
	"net/http"
	"strings"
	"time"

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
	// service slug, "" when the connection is unknown.
	Connection, Service string
	// MCP is set for a request to /mcp/{id}/… refused by the pipeline
	// (the MCP engine reports its tool decisions itself).
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
	}
	if a.Service == "" {
		if res, ok := h.cfg.Connections.Lookup(n.rt.connID); ok && res != nil && res.Connection != nil {
			a.Service = res.Connection.ServiceSlug()
		}
	}
	h.cfg.Activity.RecordActivity(a)
}

// Bounds of RouteTemplate.
const (
	maxRouteSegments = 16
	maxWordSegment   = 40
)

// RouteTemplate is the route an activity record keeps of an escaped path
// after the connection: each segment that reads as a word (letters, then
// letters, '-', '_' or '.', at most 40; or a version such as v2 or v1.1)
// is kept, and every other one (a number, an id, a hash, an address,
// anything escaped) becomes "{id}"; past 16 segments the rest is "/…".
// The query is never part of it.
func RouteTemplate(rest string) string {
	if rest == "" || rest == "/" {
		return "/"
	}
	var b strings.Builder
	segs := strings.Split(strings.TrimPrefix(rest, "/"), "/")
	for i, seg := range segs {
		if i == maxRouteSegments {
			b.WriteString("/…")
			break
		}
		b.WriteByte('/')
		switch {
		case seg == "":
		case wordSegment(seg) || versionSegment(seg):
			b.WriteString(seg)
		default:
			b.WriteString("{id}")
		}
	}
	return b.String()
}

// wordSegment: a letter, then letters, '-', '_' or '.', at most
// maxWordSegment, and not all hexadecimal digits past 8 (a hash spelled
// with a to f only).
func wordSegment(s string) bool {
	if len(s) > maxWordSegment || !isLetter(s[0]) {
		return false
	}
	hex := true
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !isLetter(c) && c != '-' && c != '_' && c != '.' {
			return false
		}
		hex = hex && (c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F')
	}
	return !hex || len(s) < 8
}

// versionSegment: v or V, one to three digits, optionally a dot and one
// to three more.
func versionSegment(s string) bool {
	if len(s) < 2 || len(s) > 8 || (s[0] != 'v' && s[0] != 'V') {
		return false
	}
	major, minor, dotted := strings.Cut(s[1:], ".")
	return digits(major, 3) && (!dotted || digits(minor, 3))
}

func digits(s string, max int) bool {
	if s == "" || len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
