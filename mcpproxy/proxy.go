package mcpproxy

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/idnhq/idn/mcpevent"
	"github.com/idnhq/idn/mcpproxy/internal/engine"
	"github.com/idnhq/idn/mcpproxy/internal/relay"
	"github.com/prometheus/client_golang/prometheus"
	oteltrace "go.opentelemetry.io/otel/trace"
)

// The call engine's types (package internal/engine), named here for the
// gateway and other programs that build connections and read answers.
type (
	// Connection is what the proxy needs to know about one MCP
	// connection; see engine.Connection for its fields.
	Connection = engine.Connection
	// ConnectionSource looks up an MCP connection by id.
	ConnectionSource = engine.ConnectionSource
	// ToolPins keeps the approved definition of each tool of each
	// connection (package toolpin), for Config.Pins.
	ToolPins = engine.ToolPins
	// ToolList is the answer of GET /mcp/{id}/tools.
	ToolList = engine.ToolList
	// CallResult is the answer of POST /mcp/{id}/tools/{tool}/call.
	CallResult = engine.CallResult
	// ServerInfo is the upstream server's metadata.
	ServerInfo = engine.ServerInfo
	// Refresh selects how a request uses the discovery cache.
	Refresh = engine.Refresh
	// SessionState is the state of a connection's shared upstream session.
	SessionState = engine.SessionState
)

// The refresh modes and session states, as package engine names them.
const (
	RefreshAuto                = engine.RefreshAuto
	RefreshForce               = engine.RefreshForce
	SessionInitializeRequired  = engine.SessionInitializeRequired
	SessionReady               = engine.SessionReady
	SessionReinitializePending = engine.SessionReinitializePending
)

// ParseRefresh parses the refresh query parameter; "" means def.
func ParseRefresh(s string, def Refresh) (Refresh, error) { return engine.ParseRefresh(s, def) }

// Config configures a Proxy: the gateway's hooks and the Options policy.
type Config struct {
	// Connections resolves connection ids for Handler. Required by Handler;
	// the library methods take a *Connection directly.
	Connections ConnectionSource
	// Caller returns the authenticated caller of a runtime request, as set
	// by the gateway's signed pipeline (e.g. from its request context).
	// Required by Handler. An error that carries a code (errcode.Error) is
	// answered with that code and its message; any other error is answered
	// 403 AUTH_FORBIDDEN.
	Caller func(r *http.Request) (mcpevent.Caller, error)
	// OnDiscovery, when set, is called after every upstream discovery
	// attempt with the connection's new mcp_discovery value (on failure the
	// previous tools with LastError set), for the gateway to store.
	OnDiscovery func(ctx context.Context, connectionID string, d Discovery)
	// Pins keeps the approved definition of each connection's tools. A
	// tool whose listed definition is not the pinned one (changed, or
	// new) is left out of every listing and its calls are refused
	// (ErrToolChanged) until a reviewer accepts it. Nil pins nothing:
	// every listed tool is served, for a program that keeps no pins.
	Pins ToolPins
	// Logger receives warnings about upstream failures, with secrets
	// scrubbed. Nil discards.
	Logger *slog.Logger
	// OnUpstream, when set, is told of every HTTP exchange with an
	// upstream MCP server (each attempt), for the gateway's upstream
	// metrics and decision log. It must not block.
	OnUpstream func(ctx context.Context, e mcpevent.Exchange)
	// OnDecision, when set, is told of every tool listing, tool call and
	// tasks method a caller asks for and every task status notification
	// relayed to it, with its outcome (see Event). It must not block.
	OnDecision func(ctx context.Context, e mcpevent.Decision)
	// Registerer, when set, gets idn_gateway_mcp_discovery_total,
	// idn_gateway_mcp_tool_call_total, idn_gateway_mcp_task_total and the
	// sessions' gauge and evictions. Nil registers nothing.
	Registerer prometheus.Registerer
	// TracerProvider, when set, receives the mcp.discovery and
	// mcp.tool_call spans, and every upstream request carries the calling
	// span's traceparent. Nil means no spans and no trace headers.
	TracerProvider oteltrace.TracerProvider
	// StateKey seals the requestState of a stateless server's rounds
	// (2026-07-28) handed to an agent, so that only the caller who started
	// a call can go on with it. Gateways given the same key accept each
	// other's states: an agent's retry may land on any replica. Empty
	// means a random key, good in this process only.
	StateKey []byte

	Options

	// Clock is the time source for cache ages, the breaker and the rate
	// limit. Nil means time.Now.
	Clock func() time.Time
}

// Options is the proxy's policy: cache ages, upstream time limits, the
// circuit breaker, retries, rate and session limits. Its zero value is the
// safe default: every field left at zero takes the documented default, and
// a protection (the circuit breaker, the tool-call rate limit, the idle
// timeout) is switched off only by a negative value.
type Options struct {
	// DiscoveryTTL is how long a discovery is fresh. Zero means 300 s.
	DiscoveryTTL time.Duration
	// StaleIfError is how long past DiscoveryTTL a stale discovery may be
	// served when refreshing fails. Zero means 3600 s; negative means never.
	StaleIfError time.Duration
	// Timeout bounds one upstream operation (discovery, or a call with its
	// retries). Zero means 90 s (GATEWAY_MCP_TIMEOUT_SECONDS).
	Timeout time.Duration

	// BreakerFailures is how many consecutive upstream failures open a
	// connection's circuit breaker. Zero means 3; negative disables the
	// breaker.
	BreakerFailures int
	// BreakerCooldown is how long an open breaker refuses calls before it
	// lets one probe through. Zero means 10 s.
	BreakerCooldown time.Duration

	// RateLimitPerMinute is the tool-call rate per connection_id + namespace
	// (bursts up to the same number). Zero means 120; negative disables the
	// limit.
	RateLimitPerMinute int
	// RateLimitMaxKeys bounds the number of connection_id + namespace
	// buckets kept. Zero means 10000.
	RateLimitMaxKeys int

	// MaxRetries is how many times one upstream HTTP exchange is retried
	// after a network timeout or a 429/502/503/504. Zero means 2; negative
	// means no retries.
	MaxRetries int
	// RetryBaseDelay is the first retry's backoff ceiling, doubled for each
	// further retry; the actual wait is random below it. Zero means 100 ms.
	RetryBaseDelay time.Duration
	// RetryMaxDelay caps one backoff. Zero means 2 s.
	RetryMaxDelay time.Duration
	// AttemptTimeout bounds each upstream HTTP attempt until its response
	// headers arrive; hitting it counts as a network timeout. It also
	// bounds the posts that have no operation around them (answers to the
	// server's requests, notifications). Zero means Timeout; negative
	// means attempts are bounded only by their operation.
	AttemptTimeout time.Duration

	// MaxBodyBytes bounds a tool call's request body. Zero means 8 MiB.
	MaxBodyBytes int64

	// SessionIdleTimeout ends a session of the MCP endpoint (see
	// Streamable) that has received no request for this long. Zero means
	// 10 minutes; negative means sessions never end for being idle.
	SessionIdleTimeout time.Duration
	// MaxSessions bounds the sessions of the MCP endpoint open at once.
	// Zero means 1000. When they are all open, a caller opening one more
	// evicts the least recently used session of its own namespace, or is
	// answered 503 MCP_SESSIONS_EXHAUSTED when its namespace has none.
	MaxSessions int
	// MaxSessionsPerKey bounds the sessions one caller key (in one
	// namespace) holds open; opening one more evicts the key's least
	// recently used session, so one caller cannot take the shared pool.
	// Zero means 32; it is capped at MaxSessionsPerNamespace.
	MaxSessionsPerKey int
	// MaxSessionsPerNamespace bounds the sessions the keys of one namespace
	// hold open together; opening one more evicts the namespace's least
	// recently used session. Zero means 128; it is capped at MaxSessions.
	MaxSessionsPerNamespace int
	// Replica names this gateway among the replicas of a fleet, in the ids
	// of the sessions it opens: a session id naming another replica is
	// answered 421 MCP_SESSION_MISDIRECTED, not 404. Empty means a lone
	// gateway, whose ids name none. 1-63 lower-case letters, digits and
	// inner hyphens.
	Replica string
}

// Proxy is the MCP side of the gateway: the call engine (discovery
// cache, tool policy, validated tool calls, upstream sessions, circuit
// breakers, retries and rate limits for every MCP connection) and the
// relay endpoint at /mcp/{connection_id}. It is safe for concurrent use.
type Proxy struct {
	eng      *engine.Engine
	endpoint *relay.Endpoint
}

// New returns a Proxy for cfg. It fails only when the metrics cannot be
// registered or Replica is not a valid name.
func New(cfg Config) (*Proxy, error) {
	if err := relay.CheckReplica(cfg.Replica); err != nil {
		return nil, err
	}
	eng, err := engine.New(engine.Config{
		Connections:        cfg.Connections,
		Caller:             cfg.Caller,
		OnDiscovery:        cfg.OnDiscovery,
		Pins:               cfg.Pins,
		Logger:             cfg.Logger,
		OnUpstream:         cfg.OnUpstream,
		OnDecision:         cfg.OnDecision,
		Registerer:         cfg.Registerer,
		TracerProvider:     cfg.TracerProvider,
		Clock:              cfg.Clock,
		DiscoveryTTL:       cfg.DiscoveryTTL,
		StaleIfError:       cfg.StaleIfError,
		Timeout:            cfg.Timeout,
		BreakerFailures:    cfg.BreakerFailures,
		BreakerCooldown:    cfg.BreakerCooldown,
		RateLimitPerMinute: cfg.RateLimitPerMinute,
		RateLimitMaxKeys:   cfg.RateLimitMaxKeys,
		MaxRetries:         cfg.MaxRetries,
		RetryBaseDelay:     cfg.RetryBaseDelay,
		RetryMaxDelay:      cfg.RetryMaxDelay,
		AttemptTimeout:     cfg.AttemptTimeout,
		MaxBodyBytes:       cfg.MaxBodyBytes,
	})
	if err != nil {
		return nil, err
	}
	return &Proxy{eng: eng, endpoint: relay.New(eng, relay.Config{
		SessionIdleTimeout:      cfg.SessionIdleTimeout,
		MaxSessions:             cfg.MaxSessions,
		MaxSessionsPerKey:       cfg.MaxSessionsPerKey,
		MaxSessionsPerNamespace: cfg.MaxSessionsPerNamespace,
		Replica:                 cfg.Replica,
		StateKey:                cfg.StateKey,
	})}, nil
}

// Discover returns the connection's full, unfiltered discovery, for the
// admin discover route (whose default is RefreshForce).
func (p *Proxy) Discover(ctx context.Context, conn *Connection, refresh Refresh) (Discovery, error) {
	return p.eng.Discover(ctx, conn, refresh)
}

// Tools returns the tools subject may see on conn.
func (p *Proxy) Tools(ctx context.Context, conn *Connection, subject string, refresh Refresh) (*ToolList, error) {
	return p.eng.Tools(ctx, conn, subject, refresh)
}

// Explain says whether subject may use tool on conn, and which rule
// decided. A tool the server did not list is ErrToolNotFound.
func (p *Proxy) Explain(ctx context.Context, conn *Connection, subject, tool string, refresh Refresh) (Decision, error) {
	return p.eng.Explain(ctx, conn, subject, tool, refresh)
}

// Call calls tool on conn for caller with body as its arguments (a JSON
// object; empty means {}); engine.Engine.Call says what is checked, in
// which order, and what each refusal is.
func (p *Proxy) Call(ctx context.Context, conn *Connection, caller mcpevent.Caller, tool string, body []byte, refresh Refresh) (*CallResult, error) {
	return p.eng.Call(ctx, conn, caller, tool, body, refresh)
}

// Probe tests conn for the admin test route, in a session of its own,
// apart from the discovery cache and the circuit breaker.
func (p *Proxy) Probe(ctx context.Context, conn *Connection) (mcpevent.Handshake, error) {
	return p.eng.Probe(ctx, conn)
}

// SessionState reports the state of a connection id's shared upstream MCP
// session, the one the REST routes and discovery use.
func (p *Proxy) SessionState(connectionID string) SessionState {
	return p.eng.SessionState(connectionID)
}

// Forget drops all state kept for a connection id (session, cache, breaker),
// e.g. after the connection was deleted or its endpoint changed.
func (p *Proxy) Forget(connectionID string) { p.eng.Forget(connectionID) }

// Close ends every session of the MCP endpoint and every upstream session,
// and waits for them to close. The Proxy cannot be used afterwards.
func (p *Proxy) Close() error {
	p.endpoint.Close()
	return p.eng.Close()
}

// EndStreams ends every standalone event stream (GET) of the MCP endpoint
// and refuses new ones with 405, which MCP clients take as "no stream".
// Call it when a graceful shutdown starts (http.Server.RegisterOnShutdown):
// the streams would otherwise hold the drain until its deadline. Sessions
// and their POST requests are unaffected.
func (p *Proxy) EndStreams() { p.endpoint.EndStreams() }
