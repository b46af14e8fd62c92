package mcpproxy

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idnhq/idn/apierror"
	"github.com/idnhq/idn/kit/tracing"
	"github.com/idnhq/idn/mcpevent"
	"github.com/idnhq/idn/mcpproxy/internal/catalog"
	"github.com/idnhq/idn/mcpproxy/internal/hold"
	"github.com/idnhq/idn/mcpproxy/internal/limit"
	"github.com/idnhq/idn/mcpproxy/internal/metrics"
	"github.com/idnhq/idn/mcpproxy/internal/pool"
	"github.com/idnhq/idn/mcpproxy/internal/scrub"
	"github.com/idnhq/idn/mcpproxy/internal/upstream"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"
	oteltrace "go.opentelemetry.io/otel/trace"
)

// Connection is what the proxy needs to know about one MCP connection. The
// gateway builds it from its stored connection on every request, so policy
// changes apply at once; sessions, breaker, limiter and discovery cache are
// kept per ID across requests.
type Connection struct {
	// ID is the connection id; it keys all per-connection state.
	ID string
	// BaseURL is the connection's base_url (http or https).
	BaseURL string
	// Endpoint is mcp_endpoint: a path joined to BaseURL's path, or a full
	// http(s) URL. Empty means BaseURL itself.
	Endpoint string
	// Transport sends the upstream HTTP requests and injects the
	// connection's credentials (it must not mutate the request it is given).
	// Nil means http.DefaultTransport, with no credentials. The most recent
	// value is used for every request, so rotated secrets apply at once.
	Transport http.RoundTripper
	// Policy is the connection's tool policy.
	Policy Policy
	// Discovery is the stored mcp_discovery object (as written by
	// Config.OnDiscovery), used to seed the cache the first time the proxy
	// sees this connection. Nil or invalid means no seed.
	Discovery json.RawMessage
	// Redact lists secret values (credential values, resolved variables) to
	// scrub from any error text, tool result and tool listing, in addition
	// to the endpoint's query values and user info, which are always
	// scrubbed.
	Redact []string
	// ExposeResources and ExposePrompts pass the upstream's resources and
	// prompts through the MCP endpoint (Streamable). False hides them: the
	// endpoint advertises neither and answers their methods "not found".
	ExposeResources bool
	ExposePrompts   bool
	// Hold, when set, sees each tools/call that passed the policy, the
	// schema and the rate limit, before it goes upstream, with its raw
	// arguments. Its error refuses the call: the gateway holds calls
	// that wait for the owner's approval. Nil holds none.
	Hold func(ctx context.Context, caller mcpevent.Caller, tool string, arguments json.RawMessage) error
}

// ConnectionSource looks up an MCP connection by id. It returns errors
// matching ErrConnectionNotFound, ErrConnectionDisabled or ErrNotMCP for
// those cases.
type ConnectionSource interface {
	MCPConnection(ctx context.Context, id string) (*Connection, error)
}

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

// Proxy is the MCP side of the gateway: discovery cache, tool policy,
// validated tool calls, sessions, circuit breakers, retries and rate limits
// for every MCP connection. It is safe for concurrent use.
type Proxy struct {
	sources      ConnectionSource
	caller       func(*http.Request) (mcpevent.Caller, error)
	onDiscovery  func(context.Context, string, Discovery)
	onUpstream   func(context.Context, mcpevent.Exchange)
	onDecision   func(context.Context, mcpevent.Decision)
	pins         pinKeeper
	log          *slog.Logger
	metrics      *metrics.Set
	ttl          time.Duration
	staleIfError time.Duration
	timeout      time.Duration
	breakerN     int
	cooldown     time.Duration
	retry        upstream.RetryPolicy
	maxBody      int64
	now          func() time.Time
	limits       *limit.Limiter
	tracer       tracing.Tracer
	client       *mcp.Client
	callSeq      atomic.Uint64 // ids of the tools/call requests sent upstream
	endpoint     *endpoint
	// sdkAgent and sdkUpstream, set by the tests only, turn the fast
	// paths off: every message of the MCP endpoint goes to the SDK's
	// server (not direct.go), every upstream tools/call through the SDK's
	// client (not exchange.go). paths_test.go holds the paths to one
	// conversation with them.
	sdkAgent, sdkUpstream bool

	mu     sync.Mutex
	conns  map[string]*connState
	closed bool
	wg     sync.WaitGroup // session closes in flight
}

// New returns a Proxy for cfg. It fails only when the metrics cannot be
// registered.
func New(cfg Config) (*Proxy, error) {
	if err := checkReplica(cfg.Replica); err != nil {
		return nil, err
	}
	m, err := metrics.New(cfg.Registerer)
	if err != nil {
		return nil, fmt.Errorf("mcpproxy: registering metrics: %w", err)
	}
	timeout := cmp.Or(cfg.Timeout, 90*time.Second)
	p := &Proxy{
		sources:      cfg.Connections,
		caller:       cfg.Caller,
		onDiscovery:  cfg.OnDiscovery,
		onUpstream:   cfg.OnUpstream,
		onDecision:   cfg.OnDecision,
		log:          cfg.Logger,
		metrics:      m,
		ttl:          cmp.Or(cfg.DiscoveryTTL, 300*time.Second),
		staleIfError: cmp.Or(cfg.StaleIfError, time.Hour),
		timeout:      timeout,
		breakerN:     limit.OrOff(cfg.BreakerFailures, limit.DefaultBreakerFailures),
		cooldown:     cmp.Or(cfg.BreakerCooldown, 10*time.Second),
		retry: upstream.RetryPolicy{
			MaxRetries:     cfg.MaxRetries,
			BaseDelay:      cmp.Or(cfg.RetryBaseDelay, 100*time.Millisecond),
			MaxDelay:       cmp.Or(cfg.RetryMaxDelay, 2*time.Second),
			AttemptTimeout: max(cmp.Or(cfg.AttemptTimeout, timeout), 0),
		},
		maxBody: cfg.MaxBodyBytes,
		now:     cfg.Clock,
		conns:   make(map[string]*connState),
		tracer:  tracing.New(cfg.TracerProvider, "github.com/idnhq/idn/mcpproxy"),
	}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	p.pins = pinKeeper{pins: cfg.Pins, log: p.log, timeout: timeout}
	if p.staleIfError < 0 {
		p.staleIfError = 0
	}
	switch {
	case p.retry.MaxRetries == 0:
		p.retry.MaxRetries = 2
	case p.retry.MaxRetries < 0:
		p.retry.MaxRetries = 0
	}
	if p.maxBody <= 0 {
		p.maxBody = 8 << 20
	}
	if p.now == nil {
		p.now = time.Now
	}
	maxKeys := cfg.RateLimitMaxKeys
	if maxKeys <= 0 {
		maxKeys = 10000
	}
	p.limits = limit.NewLimiter(limit.OrOff(cfg.RateLimitPerMinute, limit.DefaultRateLimitPerMinute), maxKeys)
	// No capabilities (the SDK's default offers roots): the gateway has
	// nothing to answer a server's requests with but ping.
	p.client = mcp.NewClient(&mcp.Implementation{Name: "idn-gateway", Version: "1"}, &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}})
	p.endpoint = newEndpoint(p, cmp.Or(cfg.SessionIdleTimeout, 10*time.Minute), pool.NewLimits(cfg.MaxSessions, cfg.MaxSessionsPerKey, cfg.MaxSessionsPerNamespace))
	p.endpoint.replica = cfg.Replica
	return p, nil
}

// SessionState is the MCP session state of a connection.
type SessionState string

const (
	// SessionInitializeRequired: no session yet; the next request sends
	// initialize.
	SessionInitializeRequired SessionState = "initialize_required"
	// SessionReady: an initialized session is in use.
	SessionReady SessionState = "ready"
	// SessionReinitializePending: the session was lost or failed; the next
	// request initializes a new one.
	SessionReinitializePending SessionState = "reinitialize_pending"
)

// connState is everything kept per connection id.
type connState struct {
	id         string
	breaker    limit.Breaker
	httpClient *http.Client
	transport  atomic.Pointer[http.RoundTripper]
	scrubber   atomic.Pointer[scrub.Scrubber]
	endpoint   atomic.Pointer[string] // the resolved MCP endpoint
	era        era                    // what its server speaks (era.go)

	mu     sync.Mutex // guards the cache
	snap   *catalog.Catalog
	seeded bool
	flight *flight

	// shared is the upstream session of the REST routes and discovery;
	// each session of the MCP endpoint has its own.
	shared upstreamSession

	// asking counts the server's requests being answered on all the
	// connection's upstream sessions (hold.PerConnection); held bounds
	// the shared one's, as an agent session's hold bounds its own.
	asking *hold.Gate
	held   *hold.Session
	// dropped counts the requests asking turned away since the last
	// warning, logged at the time in droppedLogged (unix ns).
	dropped, droppedLogged atomic.Int64
}

// upstreamSession is one session with a connection's upstream MCP server.
// The connection's shared one serves the REST routes and discovery, whose
// requests carry no session state; each session of the MCP endpoint has one
// of its own, opened when it first needs one and closed when it ends, so
// what one agent session sets upstream (a subscription, a logging level,
// anything the server keeps per session) is never seen by another.
type upstreamSession struct {
	mu      sync.Mutex // held while initializing
	owner   *connState // whose client and endpoint opened session
	opened  string     // the endpoint session was opened at
	session *mcp.ClientSession
	state   SessionState
	ended   bool // the agent session ended: nothing is opened again

	// client opens the session; nil means the proxy's own, which declares
	// no capabilities and opens no standalone event stream. An agent
	// session's client declares what its agent declared and relays what
	// the server sends (see relay.go).
	client *mcp.Client
	// protocol is the version asked for first; empty means the
	// connection's era (era.go).
	protocol string
	// tap, when set, wraps the connection's HTTP client for the session
	// (an agent session reads the server's tasks capability; tasks.go).
	tap func(*http.Client) *http.Client
}

// endUpstream closes u's session for good; later requests on it get
// errSessionEnded.
func (p *Proxy) endUpstream(u *upstreamSession) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.ended = true
	if u.session != nil {
		p.closeSession(u.session)
		u.session = nil
	}
}

func (st *connState) currentTransport() http.RoundTripper {
	if rt := st.transport.Load(); rt != nil && *rt != nil {
		return *rt
	}
	return http.DefaultTransport
}

func (st *connState) currentEndpoint() string {
	if ep := st.endpoint.Load(); ep != nil {
		return *ep
	}
	return ""
}

// state returns the per-connection state for conn, updating its transport,
// secrets and endpoint, and seeding its cache from conn.Discovery.
func (p *Proxy) state(conn *Connection) (*connState, error) {
	endpoint, err := upstream.ResolveEndpoint(conn.BaseURL, conn.Endpoint)
	if err != nil {
		return nil, fmt.Errorf("%w: connection %s has an invalid MCP endpoint", ErrBadRequest, conn.ID)
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, errors.New("mcpproxy: proxy closed")
	}
	st, ok := p.conns[conn.ID]
	if !ok {
		st = &connState{
			id:      conn.ID,
			breaker: limit.Breaker{Threshold: p.breakerN, Cooldown: p.cooldown, Now: p.now},
			shared:  upstreamSession{state: SessionInitializeRequired},
		}
		st.asking = hold.NewGate(hold.PerConnection, nil, func() { p.refused(st) })
		st.held = hold.NewSession(hold.NewGate(hold.PerSession, st.asking, func() { p.refused(st) }), min(hold.ReplyTimeout, p.timeout))
		st.httpClient = &http.Client{
			Transport: &upstream.Transport{Base: st.currentTransport, Policy: p.retry, Tracer: p.tracer, Observe: func(r *http.Request, resp *http.Response, err error, start time.Time) {
				p.observe(r.Context(), st.id, r, resp, err, start)
			}},
			// Never follow redirects: the credential transport would hand
			// the secret to wherever the upstream points.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
		p.conns[conn.ID] = st
	}
	p.mu.Unlock()

	rt := conn.Transport
	st.transport.Store(&rt)
	st.scrubber.Store(scrub.New(endpoint, conn.Redact))

	ep := endpoint.String()
	var moved bool
	if old := st.endpoint.Load(); old == nil || *old != ep {
		old = st.endpoint.Swap(&ep)
		moved = old != nil && *old != ep
	}
	if moved {
		// Every upstream session opened at the old endpoint is replaced
		// when next used; the shared one goes now.
		st.shared.mu.Lock()
		if st.shared.session != nil {
			p.closeSession(st.shared.session)
			st.shared.session = nil
			st.shared.state = SessionInitializeRequired
		}
		st.shared.mu.Unlock()
	}

	st.mu.Lock()
	if moved {
		// Tools discovered at the old endpoint say nothing about the new one.
		st.snap = nil
	}
	var seed *catalog.Catalog
	if !st.seeded {
		st.seeded = true
		if st.snap == nil && len(conn.Discovery) > 0 {
			var d Discovery
			if err := json.Unmarshal(conn.Discovery, &d); err == nil {
				st.snap = catalog.New(d)
				seed = st.snap
			} else {
				p.log.Warn("mcpproxy: ignoring unreadable stored discovery", "connection_id", conn.ID)
			}
		}
	}
	st.mu.Unlock()
	p.pins.seed(conn.ID, seed)
	return st, nil
}

// upstreamProtocol is the protocol version the proxy's upstream sessions
// ask for first: the newest whose requests the proxy's own tools/call
// exchange speaks (later versions move session state into each request's
// _meta and headers). Servers of the stateless 2026-07-28 protocol offer
// it too, unless they were limited to newer versions.
const upstreamProtocol = "2025-11-25"

// acquire returns u's session, initializing one on st when needed (or when
// u's was opened on another endpoint or for a connection since forgotten).
// Holding u.mu while connecting makes concurrent requests share one
// initialize. A server that refuses upstreamProtocol (a 400 during the
// handshake) gets a second handshake in which the SDK's client picks the
// version.
func (p *Proxy) acquire(ctx context.Context, st *connState, u *upstreamSession) (*mcp.ClientSession, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.ended {
		return nil, errSessionEnded
	}
	endpoint := st.currentEndpoint()
	if u.session != nil && u.owner == st && u.opened == endpoint {
		return u.session, nil
	}
	if u.session != nil {
		p.closeSession(u.session)
		u.session = nil
	}
	client, protocol, hc := u.client, u.protocol, st.httpClient
	if client == nil {
		client = p.client
	}
	switch {
	case u.tap != nil:
		hc = u.tap(hc)
	case u == &st.shared:
		hc = &http.Client{Transport: st.held.Transport(hc.Transport), CheckRedirect: hc.CheckRedirect}
	}
	// Only an agent session's client has anyone to hand the server's own
	// messages to.
	cs, _, err := p.connectEra(ctx, st, hc, endpoint, client, protocol, u.client != nil)
	if err != nil {
		if u.state == SessionReady {
			u.state = SessionReinitializePending
		}
		return nil, err
	}
	u.owner, u.opened, u.session, u.state = st, endpoint, cs, SessionReady
	return cs, nil
}

// connect opens a session of client, over hc, with the upstream server at
// endpoint, asking for protocol ("" lets the SDK's client pick).
// events opens the standalone event stream the server sends its own
// messages on.
func (p *Proxy) connect(ctx context.Context, hc *http.Client, endpoint string, client *mcp.Client, protocol string, events bool) (*mcp.ClientSession, error) {
	var opts *mcp.ClientSessionOptions
	if protocol != "" {
		opts = &mcp.ClientSessionOptions{ProtocolVersion: protocol}
	}
	return client.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint:             endpoint,
		HTTPClient:           hc,
		MaxRetries:           -1, // retries are upstream.Transport's, which knows what is safe to repeat
		DisableStandaloneSSE: !events,
	}, opts)
}

// errSessionEnded: the agent session whose upstream session a request
// needs has ended (deleted, idle or evicted) while the request was served.
var errSessionEnded = errors.New("mcpproxy: the MCP session ended")

// dropSession forgets a failed session so the next request re-initializes.
func (p *Proxy) dropSession(u *upstreamSession, cs *mcp.ClientSession) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.session == cs {
		u.session = nil
		u.state = SessionReinitializePending
		p.closeSession(cs)
	}
}

func (p *Proxy) closeSession(cs *mcp.ClientSession) {
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		_ = cs.Close()
	}()
}

// guarded runs op against upstream session u (nil: the connection's shared
// one) behind the connection's circuit breaker. A lost session (the server
// answers 404 for its id, or the request never left) is re-initialized and
// op retried once, transparently; any other transport failure drops the
// session and is returned scrubbed. A JSON-RPC error answer means the
// server is up: it does not count against the breaker.
func (p *Proxy) guarded(ctx context.Context, st *connState, u *upstreamSession, op func(context.Context, *mcp.ClientSession) error) error {
	if u == nil {
		u = &st.shared
	}
	ok, probe, retryAfter := st.breaker.Allow()
	if !ok {
		return &RetryError{Err: ErrCircuitOpen, RetryAfter: retryAfter}
	}
	err := p.withSession(ctx, st, u, op)
	if errors.Is(err, errSessionEnded) || err != nil && !upstream.ServerAnswered(err) && errors.Is(ctx.Err(), context.Canceled) {
		// The caller gave up (an MCP client's notifications/cancelled, or a
		// closed session): that says nothing about the upstream.
		st.breaker.Abandon(probe)
		return fmt.Errorf("mcpproxy: request cancelled: %w", context.Canceled)
	}
	healthy := err == nil || upstream.ServerAnswered(err)
	st.breaker.Done(probe, healthy)
	if err == nil {
		return nil
	}
	msg := st.scrubber.Load().Scrub(err.Error())
	p.log.WarnContext(ctx, "mcpproxy: upstream MCP request failed", "request_id", apierror.RequestIDFrom(ctx), "connection_id", st.id, "error", msg)
	return &UpstreamError{ConnectionID: st.id, Message: msg}
}

func (p *Proxy) withSession(ctx context.Context, st *connState, u *upstreamSession, op func(context.Context, *mcp.ClientSession) error) error {
	for try := 0; ; try++ {
		cs, err := p.acquire(ctx, st, u)
		if errors.Is(err, errSessionEnded) {
			return err
		}
		if err != nil {
			return fmt.Errorf("initializing MCP session: %w", err)
		}
		opCtx, tr := upstream.WithTrace(ctx)
		err = op(opCtx, cs)
		if err == nil || upstream.ServerAnswered(err) || errors.Is(ctx.Err(), context.Canceled) {
			// A cancelled request was withdrawn upstream with
			// notifications/cancelled; its session is still good.
			return err
		}
		p.dropSession(u, cs)
		attempts, _ := tr.Snapshot()
		if try == 0 && ctx.Err() == nil && (errors.Is(err, mcp.ErrSessionMissing) || attempts == 0) {
			continue
		}
		return err
	}
}

// SessionState reports the state of a connection id's shared upstream MCP
// session, the one the REST routes and discovery use.
func (p *Proxy) SessionState(connectionID string) SessionState {
	p.mu.Lock()
	st, ok := p.conns[connectionID]
	p.mu.Unlock()
	if !ok {
		return SessionInitializeRequired
	}
	st.shared.mu.Lock()
	defer st.shared.mu.Unlock()
	return st.shared.state
}

// Forget drops all state kept for a connection id (session, cache, breaker),
// e.g. after the connection was deleted or its endpoint changed.
func (p *Proxy) Forget(connectionID string) {
	p.mu.Lock()
	st, ok := p.conns[connectionID]
	delete(p.conns, connectionID)
	p.mu.Unlock()
	if ok {
		st.shared.mu.Lock()
		if st.shared.session != nil {
			p.closeSession(st.shared.session)
			st.shared.session = nil
		}
		st.shared.mu.Unlock()
		st.held.End()
	}
}

// Close ends every session of the MCP endpoint and every upstream session,
// and waits for them to close. The Proxy cannot be used afterwards.
func (p *Proxy) Close() error {
	p.endpoint.closeAll()
	p.mu.Lock()
	p.closed = true
	ids := make([]string, 0, len(p.conns))
	for id := range p.conns {
		ids = append(ids, id)
	}
	p.mu.Unlock()
	for _, id := range ids {
		p.Forget(id)
	}
	p.wg.Wait()
	return nil
}

// refused counts a request of st's server turned away past a bound of
// package hold, and warns at most once a minute per connection: a
// hostile server sends them by the thousand.
func (p *Proxy) refused(st *connState) {
	p.metrics.ServerRequestsDropped.Inc()
	n := st.dropped.Add(1)
	now, last := p.now().UnixNano(), st.droppedLogged.Load()
	if now-last < int64(time.Minute) || !st.droppedLogged.CompareAndSwap(last, now) {
		return
	}
	st.dropped.Add(-n)
	p.log.Warn("mcpproxy: an upstream MCP server sent more requests than the gateway answers at once; the excess was dropped",
		"connection_id", st.id, "dropped", n, "per_session", hold.PerSession, "per_connection", hold.PerConnection)
}
