package relay

//lint:file-ignore SA1019 MCP clients of protocol versions up to 2025-11-25 use sampling, roots and logging, which the SDK deprecates for the newer one; relaying them is the point.

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idnhq/idn/mcpevent"
	"github.com/idnhq/idn/mcpproxy/internal/catalog"
	"github.com/idnhq/idn/mcpproxy/internal/engine"

	"github.com/idnhq/idn/apierror"
	"github.com/idnhq/idn/errcode"
	"github.com/idnhq/idn/internal/mcptasks"
	"github.com/idnhq/idn/mcpproxy/internal/arguments"
	"github.com/idnhq/idn/mcpproxy/internal/clienttasks"
	"github.com/idnhq/idn/mcpproxy/internal/hold"
	"github.com/idnhq/idn/mcpproxy/internal/mirror"
	"github.com/idnhq/idn/mcpproxy/internal/pool"
	"github.com/idnhq/idn/mcpproxy/internal/resume"
	"github.com/idnhq/idn/mcpproxy/internal/scrub"
	"github.com/idnhq/idn/mcpproxy/internal/tasks"
	"github.com/idnhq/idn/mcpproxy/internal/wire"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The MCP endpoint: /mcp/{connection_id} speaks the MCP Streamable HTTP
// transport to agents (the go-sdk's server side) and answers tools/list and
// tools/call from the same discovery, policy, validation, rate limit and
// breaker as the REST routes. Each agent session has a server of its own,
// so what it advertises (resources, prompts) follows its connection, and
// its id is known, and bound to its caller, before the SDK hands it out;
// and an upstream session of its own (see engine.Upstream).

// sessionHeader carries the MCP session id (Streamable HTTP transport).
const sessionHeader = "Mcp-Session-Id"

// sessionsFullRetryAfter is what a caller refused a new session is told to
// wait: sessions end when idle or deleted, not on a schedule.
const sessionsFullRetryAfter = 5 * time.Second

var serverInfo = &mcp.Implementation{Name: "idn-gateway", Version: "1"}

// agentSession is one session of the endpoint, bound to the caller that
// opened it and to its connection.
type agentSession struct {
	slot   pool.Slot // its id and owner in the endpoint's table
	connID string
	caller mcpevent.Caller
	server *mcp.Server
	// conn is the connection as resolved by the latest HTTP request on the
	// session, so policy changes apply to the next message.
	conn atomic.Pointer[engine.Connection]
	ss   atomic.Pointer[mcp.ServerSession]
	// version is the protocol version the session's initialize settled on.
	version atomic.Pointer[string]
	// upstream is the session's own upstream session.
	upstream engine.Upstream
	// tools is the complete tool listing of the upstream session, which
	// its calls are checked against; nil until listed, and again when the
	// server says its tools changed.
	tools atomic.Pointer[catalog.Catalog]
	// asks is set when the agent declared sampling or elicitation, which
	// the server asks for during a call: its calls then need an event
	// stream, and are not answered directly.
	asks atomic.Bool
	// tasks is what the session relays of tasks, and the ids of its own;
	// clientTasks the same of the tasks its agent runs for the server.
	tasks       tasks.Book
	clientTasks clienttasks.Relay
	// events numbers and keeps what the session's own event stream
	// carries, task status and progress included, for a client resuming it.
	events *resume.Log
	told   mirror.Told // the cancellations its server writes on its streams
	// answers keeps its agent's elicitation answers as written.
	answers mirror.Answers
	// evicted is set when the session is evicted before it settled.
	evicted atomic.Bool
	// hold bounds what its upstream session's server makes it hold, and
	// ends it all when the session ends.
	hold *hold.Session

	calls wire.InFlight // calls answered directly

	mu     sync.Mutex
	active int         // POST requests being served
	timer  *time.Timer // ends the idle session; nil before settle and after the end
}

// Slot is s's record in the endpoint's table.
func (s *agentSession) Slot() *pool.Slot { return &s.slot }

// begin and end bracket every POST on the session: the idle timeout runs
// only while none is being served. (The endpoint keeps the time itself,
// as the SDK does not see the calls answered directly.)
func (s *agentSession) begin() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.active++
	if s.timer != nil {
		s.timer.Stop()
	}
}

func (s *agentSession) end(idle time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.active--
	if s.active == 0 && s.timer != nil {
		s.timer.Reset(idle)
	}
}

// Endpoint serves /mcp/{connection_id}.
type Endpoint struct {
	eng  *engine.Engine
	sdk  *mcp.StreamableHTTPHandler
	idle time.Duration

	streams    context.Context // done once EndStreams was called
	endStreams context.CancelFunc

	sessions *pool.Table[*agentSession]
	wg       sync.WaitGroup // session watchers, lanes closing
	replica  string         // Config.Replica, named in session ids

	lanes *lanes // what serves the stateless revision (stateless.go)

	// SDKAgent, set by the tests only before the endpoint serves, turns
	// the fast paths off: every message goes to the SDK's server (not
	// direct.go). mcpproxy's paths_test.go holds the paths to one
	// conversation with it.
	SDKAgent bool
}

type openingKey struct{}

// Config is what the endpoint takes of mcpproxy.Options, with the same
// zero values.
type Config struct {
	SessionIdleTimeout      time.Duration
	MaxSessions             int
	MaxSessionsPerKey       int
	MaxSessionsPerNamespace int
	Replica                 string
	StateKey                []byte
}

// New returns the endpoint, which calls through eng. cfg.Replica must
// have passed CheckReplica.
func New(eng *engine.Engine, cfg Config) *Endpoint {
	limits := pool.NewLimits(cfg.MaxSessions, cfg.MaxSessionsPerKey, cfg.MaxSessionsPerNamespace)
	e := &Endpoint{
		eng:      eng,
		idle:     cmp.Or(cfg.SessionIdleTimeout, 10*time.Minute),
		sessions: pool.NewTable[*agentSession](limits, eng.Metrics.Sessions, eng.Metrics.Evictions),
		replica:  cfg.Replica,
	}
	e.streams, e.endStreams = context.WithCancel(context.Background())
	e.lanes = newLanes(e, cfg.StateKey)
	e.sdk = mcp.NewStreamableHTTPHandler(e.server, &mcp.StreamableHTTPOptions{
		MaxRequestBodyBytes: eng.MaxBody(),
		Logger:              eng.Log,
		// The guard against DNS rebinding protects unauthenticated local
		// servers; every request here is signed by an admitted caller and
		// the session is bound to it, and the guard would refuse a gateway
		// reached by name through a local reverse proxy.
		DisableLocalhostProtection: true,
	})
	return e
}

// server is the SDK's getServer: the new session's own server when the
// request is an initialize, else none, so that no session exists that
// ServeHTTP did not reserve and bind. ServeHTTP passes the SDK no other
// POST without a session.
func (e *Endpoint) server(r *http.Request) *mcp.Server {
	if s, ok := r.Context().Value(openingKey{}).(*agentSession); ok {
		return s.server
	}
	return nil
}

func (e *Endpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	caller, ok := e.eng.Authenticated(w, r)
	if !ok {
		return
	}
	conn, ok := e.eng.Connection(w, r)
	if !ok {
		return
	}
	var s *agentSession
	if id := r.Header.Get(sessionHeader); id != "" {
		s = e.sessions.Lookup(id)
		// Unknown and foreign sessions get the same answer, so session ids
		// cannot be probed.
		if s == nil && e.misdirected(w, r, id) {
			return
		}
		if s == nil || s.connID != conn.ID || s.caller != caller {
			apierror.Write(w, r, engine.ToAPIError(engine.ErrSessionNotFound))
			return
		}
		e.sessions.Touch(s)
		s.conn.Store(conn)
		if r.Method == http.MethodGet {
			e.serveStream(w, r, s)
			return
		}
	}
	if r.Method != http.MethodPost {
		if s == nil {
			apierror.Write(w, r, errNoSession)
			return
		}
		e.sdk.ServeHTTP(w, r)
		return
	}
	body, refusal := e.readBody(w, r)
	if refusal != nil {
		apierror.Write(w, r, refusal)
		return
	}
	// A session's request is read here only when routing headers name
	// what it is; its path is the session's either way.
	var env wire.Envelope
	if s == nil || routed(r.Header) {
		env = wire.Peek(body)
	}
	if refuseRouting(w, r, body, env) {
		return
	}
	switch {
	case s != nil:
		s.begin()
		defer s.end(e.idle)
		if e.fromAgent(w, r, s, body) || e.direct(w, r, s, body) {
			return
		}
		if stand, ok := s.answers.Take(body); ok {
			r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(stand)), int64(len(stand))
		}
		w = s.answers.Watch(s.told.Watch(w))
	case env.Method == "initialize":
		s, err := e.open(conn, caller)
		if err != nil {
			apierror.Write(w, r, engine.ToAPIError(err))
			return
		}
		defer e.settle(s)
		s.clientTasks.Declare(body)
		r = r.WithContext(context.WithValue(r.Context(), openingKey{}, s))
	default:
		if d, ok := stateless(r, env); ok {
			e.lanes.serve(w, r, conn, caller, d, body)
			return
		}
		apierror.Write(w, r, errNoSession)
		return
	}
	e.sdk.ServeHTTP(w, r)
}

// errNoSession answers a request of the MCP endpoint that needs a session
// and names none, in the JSON envelope (the SDK's own answer is text).
var errNoSession = apierror.Coded(errcode.ValidationError,
	"mcpproxy: only an initialize may come without an Mcp-Session-Id header; send the header the initialize answer set")

// serveStream serves a session's standalone SSE stream (GET). It lives as
// long as the session, so it is exempt from the server's read timeout, and
// it ends at EndStreams so a graceful shutdown does not wait for it.
func (e *Endpoint) serveStream(w http.ResponseWriter, r *http.Request, s *agentSession) {
	if e.streams.Err() != nil {
		// 405 tells a client this server offers no stream; it carries on
		// with POST alone.
		w.Header().Set("Allow", "POST, DELETE")
		apierror.Write(w, r, apierror.Coded(errcode.MethodNotAllowed, "mcpproxy: the gateway is shutting down and opens no new event streams"))
		return
	}
	_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	defer context.AfterFunc(e.streams, cancel)()
	sw, sr, err := s.events.Open(w, r.WithContext(ctx), resume.Primes(s.version.Load()), cancel)
	if err != nil {
		apierror.Write(w, r, apierror.Coded(errcode.ValidationError, err.Error()))
		return
	}
	defer sw.Close()
	e.sdk.ServeHTTP(s.answers.Watch(s.told.Watch(sw)), sr)
}

// readBody reads a POST's body within the size limit, leaving r.Body
// readable from the start for the SDK.
func (e *Endpoint) readBody(w http.ResponseWriter, r *http.Request) ([]byte, *apierror.Error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, e.eng.MaxBody()))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return nil, apierror.Coded(errcode.RequestBodyTooLarge, "mcpproxy: request body too large")
		}
		return nil, apierror.Coded(errcode.ValidationError, "mcpproxy: reading request body failed")
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	return body, nil
}

// EndStreams ends every standalone event stream (GET) of the MCP endpoint
// and refuses new ones with 405, which MCP clients take as "no stream".
// Call it when a graceful shutdown starts (http.Server.RegisterOnShutdown):
// the streams would otherwise hold the drain until its deadline. Sessions
// and their POST requests are unaffected.
func (e *Endpoint) EndStreams() { e.endStreams() }

// dispatch answers the methods the gateway serves itself; the rest
// (initialize, whose version it notes, ping, notifications) are the SDK's.
func (e *Endpoint) dispatch(s *agentSession) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			// The SDK hands its handlers the context of the request that
			// opened the session, whose request id is not this request's.
			ctx = apierror.WithRequestID(ctx, "")
			conn := s.conn.Load()
			switch r := req.(type) {
			case *mcp.ServerRequest[*mcp.InitializeParams]:
				up := e.openUpstream(ctx, s, conn, r.Params)
				res, err := next(ctx, method, req)
				if ir, ok := res.(*mcp.InitializeResult); ok {
					if up != nil {
						ir.Capabilities = mirror.Capabilities(up.Capabilities, conn.ExposeResources, conn.ExposePrompts)
						ir.Instructions = up.Instructions
					}
					// Before the answer leaves, so the session's next
					// request can be answered directly.
					s.version.Store(&ir.ProtocolVersion)
					s.ss.Store(r.Session)
					if e.relaysTasks(s) {
						return mcptasks.WithTasks(ir, s.tasks.Offered().Relayed())
					}
				}
				return res, err
			case *mcp.ListToolsRequest:
				params := &mcp.ListToolsParams{}
				if r.Params != nil {
					params.Cursor = r.Params.Cursor
				}
				return e.listTools(ctx, s, conn, params)
			case *mcp.CallToolRequest:
				return e.call(ctx, s, conn, r.Params.Name, r.Params.Arguments, nil, e.relayFor(ctx, s, r.Session, r.Params.GetProgressToken()))
			case *mcp.ListResourcesRequest:
				if !conn.ExposeResources {
					return nil, mirror.NotExposed(method)
				}
				params := &mcp.ListResourcesParams{}
				if r.Params != nil {
					params.Cursor = r.Params.Cursor
				}
				return passThrough(ctx, e.eng, s, conn, func(ctx context.Context, cs *mcp.ClientSession) (*mcp.ListResourcesResult, error) {
					return cs.ListResources(ctx, params)
				})
			case *mcp.ListResourceTemplatesRequest:
				if !conn.ExposeResources {
					return nil, mirror.NotExposed(method)
				}
				params := &mcp.ListResourceTemplatesParams{}
				if r.Params != nil {
					params.Cursor = r.Params.Cursor
				}
				return passThrough(ctx, e.eng, s, conn, func(ctx context.Context, cs *mcp.ClientSession) (*mcp.ListResourceTemplatesResult, error) {
					return cs.ListResourceTemplates(ctx, params)
				})
			case *mcp.ReadResourceRequest:
				if !conn.ExposeResources || r.Params == nil {
					return nil, mirror.NotExposed(method)
				}
				params := &mcp.ReadResourceParams{URI: r.Params.URI}
				return passThrough(ctx, e.eng, s, conn, func(ctx context.Context, cs *mcp.ClientSession) (*mcp.ReadResourceResult, error) {
					return cs.ReadResource(ctx, params)
				})
			case *mcp.ListPromptsRequest:
				if !conn.ExposePrompts {
					return nil, mirror.NotExposed(method)
				}
				params := &mcp.ListPromptsParams{}
				if r.Params != nil {
					params.Cursor = r.Params.Cursor
				}
				return passThrough(ctx, e.eng, s, conn, func(ctx context.Context, cs *mcp.ClientSession) (*mcp.ListPromptsResult, error) {
					return cs.ListPrompts(ctx, params)
				})
			case *mcp.GetPromptRequest:
				if !conn.ExposePrompts || r.Params == nil {
					return nil, mirror.NotExposed(method)
				}
				params := &mcp.GetPromptParams{Name: r.Params.Name, Arguments: r.Params.Arguments}
				return passThrough(ctx, e.eng, s, conn, func(ctx context.Context, cs *mcp.ClientSession) (*mcp.GetPromptResult, error) {
					return cs.GetPrompt(ctx, params)
				})
			case *mcp.SubscribeRequest, *mcp.UnsubscribeRequest:
				// Forwarded by the server's SubscribeHandler and
				// UnsubscribeHandler (see open).
				if !conn.ExposeResources {
					return nil, mirror.NotExposed(method)
				}
			case *mcp.CompleteRequest:
				if r.Params == nil || !mirror.Completable(r.Params.Ref, conn.ExposeResources, conn.ExposePrompts) {
					return nil, mirror.NotExposed(method)
				}
				params := r.Params
				return passThrough(ctx, e.eng, s, conn, func(ctx context.Context, cs *mcp.ClientSession) (*mcp.CompleteResult, error) {
					return cs.Complete(ctx, params)
				})
			case *mcp.RootsListChangedRequest:
				e.rootsChanged(ctx, s, conn, r.Params)
			case *mcp.ServerRequest[*mcp.SetLoggingLevelParams]:
				if r.Params == nil {
					return next(ctx, method, req)
				}
				params := r.Params
				if err := e.forward(ctx, s, conn, func(ctx context.Context, cs *mcp.ClientSession) error {
					return cs.SetLoggingLevel(ctx, params)
				}); err != nil {
					return nil, err
				}
			}
			return next(ctx, method, req)
		}
	}
}

// call answers tools/call through Call's checks, against the tools the
// session's upstream session lists, for the SDK's server and for the
// direct path alike. relay receives what the server sends during the call
// (nil: nothing is relayed); cancelling ctx withdraws the upstream call.
// A task-augmented call (task set; direct path only) is answered with the
// task the server created, which becomes s's.
func (e *Endpoint) call(ctx context.Context, s *agentSession, conn *engine.Connection, tool string, args []byte, task *tasks.Spec, relay *engine.CallRelay) (mcp.Result, error) {
	res, err := e.eng.CallTool(ctx, conn, s.caller, tool, args, engine.RefreshAuto, &engine.SessionCall{
		Upstream: &s.upstream,
		Tools: func(ctx context.Context, st *engine.Conn) (*catalog.Catalog, error) {
			return e.sessionTools(ctx, s, st)
		},
		Relay: relay,
		Task:  task,
		Own: func(id string) {
			for _, params := range s.tasks.Own(id, task.Token) {
				e.taskNote(context.WithoutCancel(ctx), s, mcptasks.StatusMethod, params)
			}
		},
		// A stateless server's result passes through as it wrote it.
		Raw: relay != nil && relay.Pass != nil,
	})
	var ae *engine.ArgumentsError
	if errors.As(err, &ae) && task == nil {
		// As the go-sdk's own servers do: a tool error the model can read
		// and correct, rather than a protocol error.
		return arguments.ToolResult(ae.Tool, ae.Failures), nil
	}
	if err != nil {
		return nil, rpcError(ctx, err)
	}
	if res.Task() != nil {
		return &mcptasks.Result{Raw: res.Task()}, nil
	}
	if raw := res.Raw(); raw != nil {
		fields, ok := wire.Fields(raw)
		if !ok {
			return nil, rpcError(ctx, &engine.UpstreamError{ConnectionID: conn.ID, Message: "tools/call: a result that is no JSON object"})
		}
		return &rawResult{fields: fields}, nil
	}
	return &mcp.CallToolResult{Meta: res.Meta(), Content: res.Content, StructuredContent: res.StructuredContent, IsError: res.IsError}, nil
}

// passThrough forwards one resources or prompts request upstream, on the
// session's own upstream session, behind the connection's breaker, with secrets replaced in the answer.
func passThrough[R mcp.Result](ctx context.Context, p *engine.Engine, s *agentSession, conn *engine.Connection, op func(context.Context, *mcp.ClientSession) (R, error)) (mcp.Result, error) {
	ctx, cancel := context.WithTimeout(ctx, p.Timeout())
	defer cancel()
	st, err := p.State(conn)
	if err != nil {
		return nil, rpcError(ctx, err)
	}
	var out R
	err = p.Guarded(ctx, st, &s.upstream, func(ctx context.Context, cs *mcp.ClientSession) error {
		var err error
		out, err = op(ctx, cs)
		return err
	})
	if err != nil {
		return nil, rpcError(ctx, err)
	}
	clean, err := scrub.Launder(st.Scrubber.Load(), &out)
	if err != nil {
		return nil, rpcError(ctx, &engine.UpstreamError{ConnectionID: conn.ID, Message: "an answer that cannot be checked for secrets"})
	}
	mirror.DefaultCacheScope(*clean)
	return *clean, nil
}

// forward sends one request without a result upstream, on the session's
// own upstream session, behind the connection's breaker.
func (e *Endpoint) forward(ctx context.Context, s *agentSession, conn *engine.Connection, op func(context.Context, *mcp.ClientSession) error) error {
	ctx, cancel := context.WithTimeout(ctx, e.eng.Timeout())
	defer cancel()
	st, err := e.eng.State(conn)
	if err != nil {
		return rpcError(ctx, err)
	}
	if err := e.eng.Guarded(ctx, st, &s.upstream, op); err != nil {
		return rpcError(ctx, err)
	}
	return nil
}

// rpcError turns an error of this package into a JSON-RPC error whose data
// carries the stable code of the REST answer (wire.RPCError).
func rpcError(ctx context.Context, err error) error {
	return wire.RPCError(engine.ToAPIError(err), apierror.RequestIDFrom(ctx))
}
