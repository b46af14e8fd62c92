package engine

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
	// An *apierror.Error it returns is the answer to the request, and does
	// not count against the circuit breaker.
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
	// PerSubject: the credential Transport sends depends on the caller's
	// subject (an OAuth account per subject). The REST routes and
	// discovery then keep an upstream session per subject.
	PerSubject bool
	// LiveSecrets, when set, returns secret values that change between
	// requests (the OAuth access tokens Transport sends), scrubbed as
	// Redact's are. It is called whenever an answer is scrubbed, so it
	// must be cheap; nil means none.
	LiveSecrets func() []string
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

// Config is what the engine takes of mcpproxy.Config: the gateway's
// hooks, and the Options that bound upstream work, with the same zero
// values.
type Config struct {
	Connections    ConnectionSource
	Caller         func(r *http.Request) (mcpevent.Caller, error)
	OnDiscovery    func(ctx context.Context, connectionID string, d Discovery)
	Pins           ToolPins
	Logger         *slog.Logger
	OnUpstream     func(ctx context.Context, e mcpevent.Exchange)
	OnDecision     func(ctx context.Context, e mcpevent.Decision)
	Registerer     prometheus.Registerer
	TracerProvider oteltrace.TracerProvider
	Clock          func() time.Time

	DiscoveryTTL       time.Duration
	StaleIfError       time.Duration
	Timeout            time.Duration
	BreakerFailures    int
	BreakerCooldown    time.Duration
	RateLimitPerMinute int
	RateLimitMaxKeys   int
	MaxRetries         int
	RetryBaseDelay     time.Duration
	RetryMaxDelay      time.Duration
	AttemptTimeout     time.Duration
	MaxBodyBytes       int64
}

// Engine is the call engine: discovery cache, tool policy, pins,
// validated tool calls, upstream sessions, circuit breakers, retries and
// rate limits for every MCP connection. It is safe for concurrent use.
type Engine struct {
	sources      ConnectionSource
	caller       func(*http.Request) (mcpevent.Caller, error)
	onDiscovery  func(context.Context, string, Discovery)
	onUpstream   func(context.Context, mcpevent.Exchange)
	onDecision   func(context.Context, mcpevent.Decision)
	Pins         PinKeeper
	Log          *slog.Logger // never nil
	Metrics      *metrics.Set
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
	// SDKUpstream, set by the tests only, sends every upstream tools/call
	// through the SDK's client (not exchange.go). mcpproxy's paths_test.go
	// holds the paths to one conversation with it.
	SDKUpstream bool

	mu     sync.Mutex
	conns  map[string]*Conn
	closed bool
	wg     sync.WaitGroup // session closes in flight
}

// New returns an Engine for cfg. It fails only when the metrics cannot be
// registered.
func New(cfg Config) (*Engine, error) {
	m, err := metrics.New(cfg.Registerer)
	if err != nil {
		return nil, fmt.Errorf("mcpproxy: registering metrics: %w", err)
	}
	timeout := cmp.Or(cfg.Timeout, 90*time.Second)
	p := &Engine{
		sources:      cfg.Connections,
		caller:       cfg.Caller,
		onDiscovery:  cfg.OnDiscovery,
		onUpstream:   cfg.OnUpstream,
		onDecision:   cfg.OnDecision,
		Log:          cfg.Logger,
		Metrics:      m,
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
		conns:   make(map[string]*Conn),
		tracer:  tracing.New(cfg.TracerProvider, "github.com/idnhq/idn/mcpproxy"),
	}
	if p.Log == nil {
		p.Log = slog.New(slog.DiscardHandler)
	}
	p.Pins = PinKeeper{pins: cfg.Pins, log: p.Log, timeout: timeout}
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
	return p, nil
}

// Timeout bounds one upstream operation (Config.Timeout, defaulted).
func (p *Engine) Timeout() time.Duration { return p.timeout }

// MaxBody bounds a request body (Config.MaxBodyBytes, defaulted).
func (p *Engine) MaxBody() int64 { return p.maxBody }

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

// Conn is everything kept per connection id.
type Conn struct {
	ID         string
	breaker    limit.Breaker
	HTTPClient *http.Client
	transport  atomic.Pointer[http.RoundTripper]
	Scrubber   atomic.Pointer[scrub.Scrubber]
	endpoint   atomic.Pointer[string] // the resolved MCP endpoint
	era        era                    // what its server speaks (era.go)

	mu     sync.Mutex // guards the cache
	snap   *catalog.Catalog
	seeded bool
	flight *flight

	// shared is the upstream session of the REST routes and discovery;
	// each session of the MCP endpoint has its own. A per-subject
	// credential has subjects' instead.
	shared     Upstream
	perSubject atomic.Bool
	subjects   subjects

	// asking counts the server's requests being answered on all the
	// connection's upstream sessions (hold.PerConnection); held bounds
	// the shared one's, as an agent session's hold bounds its own.
	Asking *hold.Gate
	held   *hold.Session
	// dropped counts the requests asking turned away since the last
	// warning, logged at the time in droppedLogged (unix ns).
	dropped, droppedLogged atomic.Int64
}

// Upstream is one session with a connection's upstream MCP server.
// The connection's shared one serves the REST routes and discovery, whose
// requests carry no session state; each session of the MCP endpoint has one
// of its own, opened when it first needs one and closed when it ends, so
// what one agent session sets upstream (a subscription, a logging level,
// anything the server keeps per session) is never seen by another.
type Upstream struct {
	mu      sync.Mutex // held while initializing
	owner   *Conn      // whose client and endpoint opened session
	opened  string     // the endpoint session was opened at
	session *mcp.ClientSession
	state   SessionState
	ended   bool // the agent session ended: nothing is opened again

	// client opens the session; nil means the engine's own, which declares
	// no capabilities and opens no standalone event stream. An agent
	// session's client declares what its agent declared and relays what
	// the server sends (package relay).
	client *mcp.Client
	// protocol is the version asked for first; empty means the
	// connection's era (era.go).
	protocol string
	// tap, when set, wraps the connection's HTTP client for the session
	// (an agent session reads the server's tasks capability; package relay).
	tap func(*http.Client) *http.Client
}

// Configure sets what opens u's session: client (nil: the engine's
// own), the protocol version asked for first ("": the connection's era),
// and tap, which wraps the connection's HTTP client for it (nil: none).
// An agent session's client declares what its agent declared.
func (u *Upstream) Configure(client *mcp.Client, protocol string, tap func(*http.Client) *http.Client) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.client, u.protocol, u.tap = client, protocol, tap
}

// Session returns u's open session; nil when none is open.
func (u *Upstream) Session() *mcp.ClientSession {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.session
}

// EndUpstream closes u's session for good; later requests on it get
// errSessionEnded.
func (p *Engine) EndUpstream(u *Upstream) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.ended = true
	if u.session != nil {
		p.closeSession(u.session)
		u.session = nil
	}
}

func (st *Conn) currentTransport() http.RoundTripper {
	if rt := st.transport.Load(); rt != nil && *rt != nil {
		return *rt
	}
	return http.DefaultTransport
}

func (st *Conn) CurrentEndpoint() string {
	if ep := st.endpoint.Load(); ep != nil {
		return *ep
	}
	return ""
}

// State returns the per-connection state for conn, updating its transport,
// secrets and endpoint, and seeding its cache from conn.Discovery.
func (p *Engine) State(conn *Connection) (*Conn, error) {
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
		st = &Conn{
			ID:      conn.ID,
			breaker: limit.Breaker{Threshold: p.breakerN, Cooldown: p.cooldown, Now: p.now},
			shared:  Upstream{state: SessionInitializeRequired},
		}
		st.Asking = hold.NewGate(hold.PerConnection, nil, func() { p.Refused(st) })
		st.held = hold.NewSession(hold.NewGate(hold.PerSession, st.Asking, func() { p.Refused(st) }), min(hold.ReplyTimeout, p.timeout))
		st.HTTPClient = &http.Client{
			Transport: &upstream.Transport{Base: st.currentTransport, Policy: p.retry, Tracer: p.tracer, Observe: func(r *http.Request, resp *http.Response, err error, start time.Time) {
				p.observe(r.Context(), st.ID, r, resp, err, start)
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
	st.perSubject.Store(conn.PerSubject)
	st.Scrubber.Store(scrub.New(endpoint, conn.Redact).Live(conn.LiveSecrets))

	ep := endpoint.String()
	var moved bool
	if old := st.endpoint.Load(); old == nil || *old != ep {
		old = st.endpoint.Swap(&ep)
		moved = old != nil && *old != ep
	}
	if moved {
		// Every upstream session opened at the old endpoint is replaced
		// when next used; the shared one goes now. The new endpoint's
		// server may be of another era.
		st.era.forget()
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
				p.Log.Warn("mcpproxy: ignoring unreadable stored discovery", "connection_id", conn.ID)
			}
		}
	}
	st.mu.Unlock()
	p.Pins.seed(conn.ID, seed)
	return st, nil
}

// UpstreamProtocol is the protocol version the proxy's upstream sessions
// ask for first: the newest whose requests the proxy's own tools/call
// exchange speaks (later versions move session state into each request's
// _meta and headers). Servers of the stateless 2026-07-28 protocol offer
// it too, unless they were limited to newer versions.
const UpstreamProtocol = "2025-11-25"

// Acquire returns u's session, initializing one on st when needed (or when
// u's was opened on another endpoint or for a connection since forgotten).
// Holding u.mu while connecting makes concurrent requests share one
// initialize. The version asked for is u's, or the connection's era
// (connectEra).
func (p *Engine) Acquire(ctx context.Context, st *Conn, u *Upstream) (*mcp.ClientSession, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.ended {
		return nil, errSessionEnded
	}
	endpoint := st.CurrentEndpoint()
	if u.session != nil && u.owner == st && u.opened == endpoint {
		return u.session, nil
	}
	if u.session != nil {
		p.closeSession(u.session)
		u.session = nil
	}
	client, protocol, hc := u.client, u.protocol, st.HTTPClient
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
func (p *Engine) connect(ctx context.Context, hc *http.Client, endpoint string, client *mcp.Client, protocol string, events bool) (*mcp.ClientSession, error) {
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
func (p *Engine) dropSession(u *Upstream, cs *mcp.ClientSession) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.session == cs {
		u.session = nil
		u.state = SessionReinitializePending
		p.closeSession(cs)
	}
}

func (p *Engine) closeSession(cs *mcp.ClientSession) {
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		_ = cs.Close()
	}()
}

// Guarded runs op against upstream session u (nil: the connection's shared
// one) behind the connection's circuit breaker. An *apierror.Error from
// Connection.Transport is returned as it is. A lost session (the server
// answers 404 for its id, or the request never left) is re-initialized and
// op retried once, transparently; any other transport failure drops the
// session and is returned scrubbed. A JSON-RPC error answer means the
// server is up: it does not count against the breaker.
func (p *Engine) Guarded(ctx context.Context, st *Conn, u *Upstream, op func(context.Context, *mcp.ClientSession) error) error {
	if u == nil {
		u = p.sharedUpstream(ctx, st)
	}
	ok, probe, retryAfter := st.breaker.Allow()
	if !ok {
		return &RetryError{Err: ErrCircuitOpen, RetryAfter: retryAfter}
	}
	err := p.withSession(ctx, st, u, op)
	if refusal, ok := errors.AsType[*apierror.Error](err); ok && !upstream.ServerAnswered(err) {
		// Connection.Transport refused to send (the gateway's OAuth
		// refusals): the server is not at fault, and the refusal is the
		// answer.
		st.breaker.Abandon(probe)
		return refusal
	}
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
	msg := st.Scrubber.Load().Scrub(err.Error())
	p.Log.WarnContext(ctx, "mcpproxy: upstream MCP request failed", "request_id", apierror.RequestIDFrom(ctx), "connection_id", st.ID, "error", msg)
	return &UpstreamError{ConnectionID: st.ID, Message: msg}
}

func (p *Engine) withSession(ctx context.Context, st *Conn, u *Upstream, op func(context.Context, *mcp.ClientSession) error) error {
	for try := 0; ; try++ {
		cs, err := p.Acquire(ctx, st, u)
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
func (p *Engine) SessionState(connectionID string) SessionState {
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
func (p *Engine) Forget(connectionID string) {
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
		p.endSubjects(st)
		st.held.End()
	}
}

// Close ends every upstream session and waits for them to close. The
// Engine cannot be used afterwards.
func (p *Engine) Close() error {
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

// Refused counts a request of st's server turned away past a bound of
// package hold, and warns at most once a minute per connection: a
// hostile server sends them by the thousand.
func (p *Engine) Refused(st *Conn) {
	p.Metrics.ServerRequestsDropped.Inc()
	n := st.dropped.Add(1)
	now, last := p.now().UnixNano(), st.droppedLogged.Load()
	if now-last < int64(time.Minute) || !st.droppedLogged.CompareAndSwap(last, now) {
		return
	}
	st.dropped.Add(-n)
	p.Log.Warn("mcpproxy: an upstream MCP server sent more requests than the gateway answers at once; the excess was dropped",
		"connection_id", st.ID, "dropped", n, "per_session", hold.PerSession, "per_connection", hold.PerConnection)
}
