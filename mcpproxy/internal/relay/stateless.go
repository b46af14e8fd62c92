package relay

//lint:file-ignore SA1019 the agents of 2026-07-28 declare roots, which the SDK's 2025 types name RootsV2.

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/idnhq/idn/apierror"
	"github.com/idnhq/idn/internal/mcpnotify"
	"github.com/idnhq/idn/mcpevent"
	"github.com/idnhq/idn/mcpproxy/internal/engine"
	"github.com/idnhq/idn/mcpproxy/internal/hold"
	"github.com/idnhq/idn/mcpproxy/internal/mirror"
	"github.com/idnhq/idn/mcpproxy/internal/pool"
	"github.com/idnhq/idn/mcpproxy/internal/resume"
	"github.com/idnhq/idn/mcpproxy/internal/rounds"
	"github.com/idnhq/idn/mcpproxy/internal/scrub"
	"github.com/idnhq/idn/mcpproxy/internal/upstream"
	"github.com/idnhq/idn/mcpproxy/internal/wire"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The stateless revision (MCP 2026-07-28): a request carries its protocol
// version and client capabilities in its _meta, and names no session. The
// SDK's stateless handler reads it; the relay serves it as it serves a
// session's request, on a lane: an upstream session (2025-11-25) held for
// the caller, the connection and the capabilities declared, and kept
// while requests come. What the server asks during a call reaches the
// agent as input_required results (package rounds).

// statelessRevision is the first protocol version without sessions.
const statelessRevision = "2026-07-28"

// laneKey names a lane: who asks, on which connection, declaring what.
type laneKey struct {
	conn   string
	caller mcpevent.Caller
	caps   string // the declared capabilities, as JSON
}

// lanes are the upstream sessions of stateless requests.
type lanes struct {
	e      *Endpoint
	sdk    *mcp.StreamableHTTPHandler
	rounds rounds.Table
	sealer *rounds.Sealer // seals a stateless server's states (passthrough.go)

	mu    sync.Mutex
	byKey map[laneKey]*agentSession
	keys  map[*agentSession]laneKey
}

type laneCtxKey struct{}

func newLanes(e *Endpoint, stateKey []byte) *lanes {
	p := e.eng
	l := &lanes{e: e, byKey: map[laneKey]*agentSession{}, keys: map[*agentSession]laneKey{}, sealer: rounds.NewSealer(stateKey)}
	l.rounds.Wait = p.Timeout()
	l.sdk = mcp.NewStreamableHTTPHandler(func(r *http.Request) *mcp.Server {
		if s, ok := r.Context().Value(laneCtxKey{}).(*agentSession); ok {
			return s.server
		}
		return nil
	}, &mcp.StreamableHTTPOptions{
		Stateless:           true,
		MaxRequestBodyBytes: p.MaxBody(),
		Logger:              p.Log,
		// As for sessions (see newEndpoint): every request is signed.
		DisableLocalhostProtection: true,
	})
	return l
}

// declared are the client capabilities a lane's upstream client passes on.
type declared struct {
	Sampling    *mcp.SamplingCapabilities    `json:"sampling,omitempty"`
	Elicitation *mcp.ElicitationCapabilities `json:"elicitation,omitempty"`
	Roots       *mcp.RootCapabilities        `json:"roots,omitempty"`
}

// stateless reports whether a POST without a session is of the stateless
// revision, by its MCP-Protocol-Version header or its _meta, and returns
// the capabilities it declares.
func stateless(r *http.Request, msg wire.Envelope) (declared, bool) {
	if r.Header.Get("Mcp-Protocol-Version") < statelessRevision && msg.Version < statelessRevision {
		return declared{}, false
	}
	var d declared
	_ = json.Unmarshal(msg.Caps, &d)
	return d, true
}

// serve serves one request of the stateless revision on the
// caller's lane.
func (l *lanes) serve(w http.ResponseWriter, r *http.Request, conn *engine.Connection, caller mcpevent.Caller, d declared, body []byte) {
	s, err := l.open(conn, caller, d)
	if err != nil {
		apierror.Write(w, r, engine.ToAPIError(err))
		return
	}
	l.e.sessions.Touch(s)
	s.conn.Store(conn)
	s.begin()
	defer s.end(l.e.idle)
	if l.direct(w, r, s, d, body) {
		return
	}
	l.sdk.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), laneCtxKey{}, s)))
}

// open returns the caller's lane on conn for what it declared, opening
// one when there is none. Lanes share the sessions' pool and shares.
func (l *lanes) open(conn *engine.Connection, caller mcpevent.Caller, d declared) (*agentSession, error) {
	raw, _ := json.Marshal(d)
	key := laneKey{conn: conn.ID, caller: caller, caps: string(raw)}
	l.mu.Lock()
	s, ok := l.byKey[key]
	l.mu.Unlock()
	if ok {
		return s, nil
	}
	s = l.build(conn, caller, d)
	// Sessions and lanes evicted to make room end after the lock.
	var sessions []*agentSession
	defer func() {
		for _, v := range sessions {
			l.e.evict(v)
		}
	}()
	l.mu.Lock()
	defer l.mu.Unlock()
	if had, ok := l.byKey[key]; ok {
		// Opened meanwhile by another request of the caller.
		s.hold.End()
		return had, nil
	}
	evicted, ok := l.e.sessions.Add(s)
	for _, v := range evicted {
		if !l.dropLocked(v) {
			sessions = append(sessions, v)
		}
	}
	if !ok {
		s.hold.End()
		return nil, &engine.RetryError{Err: engine.ErrSessionsExhausted, RetryAfter: sessionsFullRetryAfter}
	}
	l.byKey[key], l.keys[s] = s, key
	if l.e.idle > 0 {
		s.timer = time.AfterFunc(l.e.idle, func() { _ = l.drop(s) })
	}
	return s, nil
}

// build builds a lane's session: its upstream client declares what the
// agent declared, and its server answers as a session's does.
func (l *lanes) build(conn *engine.Connection, caller mcpevent.Caller, d declared) *agentSession {
	s := &agentSession{slot: pool.Slot{ID: rand.Text(), Owner: pool.Owner{Namespace: caller.Namespace, Key: caller.Key}}, connID: conn.ID, caller: caller, events: resume.NewLog()}
	s.conn.Store(conn)
	var perConnection *hold.Gate
	refused := func() {}
	if st, err := l.e.eng.State(conn); err == nil {
		perConnection, refused = st.Asking, func() { l.e.eng.Refused(st) }
	}
	s.hold = hold.NewSession(hold.NewGate(hold.PerSession, perConnection, refused), min(hold.ReplyTimeout, l.e.eng.Timeout()))
	caps := &mcp.ClientCapabilities{Sampling: d.Sampling, Elicitation: d.Elicitation, RootsV2: d.Roots}
	// Outside a call's stream there is no agent to tell or ask: a
	// stateless agent is reached only through its requests.
	s.upstream.Configure(mirror.Client(serverInfo, caps, nil, func(_ context.Context, method string, _ any) (any, error) {
		return nil, mirror.NotOffered(method)
	}), "", nil)
	srvCaps := &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}}
	if conn.ExposeResources {
		srvCaps.Resources = &mcp.ResourceCapabilities{}
	}
	if conn.ExposePrompts {
		srvCaps.Prompts = &mcp.PromptCapabilities{}
	}
	s.server = mcp.NewServer(serverInfo, &mcp.ServerOptions{Capabilities: srvCaps})
	s.server.AddReceivingMiddleware(l.dispatch(s, d), l.e.dispatch(s))
	s.server.AddSendingMiddleware(mcpnotify.Sending)
	return s
}

// drop ends s when it is a lane (idle, evicted, or at Close); false
// when it is not.
func (l *lanes) drop(s *agentSession) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.dropLocked(s)
}

// dropLocked ends s when it is a lane; false when it is not.
func (l *lanes) dropLocked(s *agentSession) bool {
	key, ok := l.keys[s]
	if !ok {
		return false
	}
	delete(l.keys, s)
	delete(l.byKey, key)
	l.e.sessions.Remove(s)
	s.mu.Lock()
	if s.timer != nil {
		s.timer.Stop()
		s.timer = nil
	}
	s.mu.Unlock()
	// Closing the upstream session may wait for the server; not under the
	// lock. Close waits for it (Endpoint.Close).
	l.e.wg.Go(func() {
		l.e.eng.EndUpstream(&s.upstream)
		s.hold.End()
	})
	return true
}

// dropAll ends every lane.
func (l *lanes) dropAll() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for s := range l.keys {
		l.dropLocked(s)
	}
}

// dispatch answers what the stateless revision asks differently
// from a session: server/discover tells what the upstream offers, and
// tools/call, prompts/get and resources/read carry resultType, the first
// as rounds when the server asks the agent something.
func (l *lanes) dispatch(s *agentSession, d declared) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			upCtx := upstreamContext{ctx}
			switch r := req.(type) {
			case *mcp.ServerRequest[*mcp.DiscoverParams]:
				res, err := next(ctx, method, req)
				if dr, ok := res.(*mcp.DiscoverResult); ok {
					conn := s.conn.Load()
					if up := l.upstream(upCtx, s, conn); up != nil {
						dr.Capabilities = mirror.Capabilities(up.Capabilities, conn.ExposeResources, conn.ExposePrompts)
						dr.Instructions = up.Instructions
					}
				}
				return res, err
			case *mcp.CallToolRequest:
				return l.call(ctx, upCtx, s, d, r)
			case *mcp.GetPromptRequest, *mcp.ReadResourceRequest:
				res, err := next(upCtx, method, req)
				if err != nil {
					return nil, err
				}
				return completed(res)
			}
			return next(upCtx, method, req)
		}
	}
}

// upstream opens s's upstream session and returns its server's
// initialize result, scrubbed; nil when the server cannot be reached.
func (l *lanes) upstream(ctx context.Context, s *agentSession, conn *engine.Connection) *mcp.InitializeResult {
	st, err := l.e.eng.State(conn)
	if err != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, l.e.eng.Timeout())
	defer cancel()
	cs, err := l.e.eng.Acquire(ctx, st, &s.upstream)
	if err != nil {
		return nil
	}
	res, err := scrub.Launder(st.Scrubber.Load(), cs.InitializeResult())
	if err != nil {
		return nil
	}
	return res
}

// call answers tools/call in rounds: a fresh call takes Call's
// checks and starts upstream; a retry naming a requestState hands the
// agent's answers to the call it names and waits for what comes next.
// Notifications go out on ctx, the request's; upstream work runs on upCtx.
func (l *lanes) call(ctx, upCtx context.Context, s *agentSession, d declared, r *mcp.CallToolRequest) (mcp.Result, error) {
	conn := s.conn.Load()
	if r.Params.RequestState != "" {
		answers := make(map[string]json.RawMessage, len(r.Params.InputResponses))
		for id, a := range r.Params.InputResponses {
			raw, err := json.Marshal(a)
			if err != nil {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "inputResponses: " + err.Error()}
			}
			answers[id] = raw
		}
		if rounds.IsSealed(r.Params.RequestState) {
			return l.resumePassed(upCtx, s, d, r.Params.Name, r.Params.Arguments, r.Params.RequestState, answers)
		}
		out, err := l.rounds.Resume(upCtx, roundOwner(s, r.Params.Name), r.Params.RequestState, answers)
		if err != nil {
			return nil, errNoCall
		}
		return roundResult(out)
	}
	relay := &engine.CallRelay{
		Notify: func(method string, params mcp.Params) {
			if !mirror.Hidden(method, conn.ExposeResources, conn.ExposePrompts) {
				_ = mcpnotify.Send(ctx, r.Session, method, params)
			}
		},
		Hold: s.hold,
		Caps: d,
	}
	if token := r.Params.GetProgressToken(); token != nil {
		relay.Progress = func(n *mcp.ProgressNotificationParams) {
			n.ProgressToken = token
			_ = r.Session.NotifyProgress(ctx, n)
		}
	}
	return l.start(upCtx, s, d, r.Params.Name, r.Params.Arguments, relay)
}

// start starts a call on s's lane and returns its first round.
func (l *lanes) start(ctx context.Context, s *agentSession, d declared, name string, args json.RawMessage, relay *engine.CallRelay) (mcp.Result, error) {
	conn := s.conn.Load()
	if l.passes(ctx, s, conn) {
		return l.pass(ctx, s, d, name, args, relay, &upstream.Rounds{})
	}
	out := l.rounds.Start(ctx, roundOwner(s, name), l.e.eng.Timeout(), func(ctx context.Context, ask func(context.Context, rounds.Question) (json.RawMessage, error)) (any, error) {
		relay.Ask = func(ctx context.Context, method string, params json.RawMessage) (any, error) {
			return l.ask(ctx, s, d, ask, method, params)
		}
		return l.e.call(ctx, s, conn, name, args, nil, relay)
	})
	return roundResult(out)
}

// roundOwner binds a call's rounds to its lane (connection, caller and
// declared capabilities) and tool.
func roundOwner(s *agentSession, tool string) string { return s.slot.ID + "\x00" + tool }

// roundResult is the answer of a round: the call's result or error, or
// the questions the agent must answer.
func roundResult(out rounds.Outcome) (mcp.Result, error) {
	switch {
	case out.Done && out.Err != nil:
		return nil, out.Err
	case out.Done:
		return completed(out.Result.(mcp.Result))
	}
	return inputRequired(out)
}

// ask puts a request the server sent during a call to the agent as
// a question of the next round, when the agent declared what it needs;
// the server's params are scrubbed of secrets, the agent's answer goes
// back as the agent wrote it.
func (l *lanes) ask(ctx context.Context, s *agentSession, d declared, ask func(context.Context, rounds.Question) (json.RawMessage, error), method string, params json.RawMessage) (any, error) {
	if !offered(d, method) {
		return nil, mirror.NotOffered(method)
	}
	st, err := l.e.eng.State(s.conn.Load())
	if err != nil {
		return nil, err
	}
	if len(params) > 0 {
		clean, err := scrub.Launder(st.Scrubber.Load(), &params)
		if err != nil {
			return nil, err
		}
		params = *clean
	}
	return ask(ctx, rounds.Question{Method: method, Params: params})
}

// upstreamContext is a context without the SDK's own values: those of
// its server (the agent's protocol version among them) would steer its
// client talking upstream.
type upstreamContext struct{ context.Context }

func (c upstreamContext) Value(key any) any {
	if t := reflect.TypeOf(key); t != nil && t.PkgPath() == sdkPackage {
		return nil
	}
	return c.Context.Value(key)
}

var sdkPackage = reflect.TypeFor[mcp.Implementation]().PkgPath()

// direct answers body itself when it is a first tools/call
// that asks for no progress (wire.ClassifyStateless), with its headers as
// the revision wants them: one application/json answer, as direct.go
// gives a session's call. Its rounds need no stream: the server's
// questions travel in the result. It reports whether it answered.
func (l *lanes) direct(w http.ResponseWriter, r *http.Request, s *agentSession, d declared, body []byte) bool {
	if l.e.SDKAgent || r.Header.Get("Mcp-Protocol-Version") != wire.Revision || !wire.PlainPOST(r, wire.Revision) ||
		r.Header.Get("Mcp-Method") == "" || r.Header.Get("Mcp-Name") == "" {
		return false
	}
	m, ok := wire.ClassifyStateless(body)
	if !ok {
		return false
	}
	// No stream: what the server says during the call is not relayed.
	relay := &engine.CallRelay{Hold: s.hold, Caps: d}
	res, err := l.start(r.Context(), s, d, m.Call.Name, m.Call.Arguments, relay)
	if err != nil {
		var je *jsonrpc.Error
		if !errors.As(err, &je) {
			je = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}
		}
		wire.Write(w, http.StatusOK, wire.Response{ID: m.ID, Error: je})
		return true
	}
	// As the SDK's server does for the revision: it names itself.
	res.(*rawResult).Meta = mcp.Meta{mcp.MetaKeyServerInfo: serverInfo}
	wire.Write(w, http.StatusOK, wire.Response{ID: m.ID, Result: res})
	return true
}

// rawResult is a result as JSON, its members by name, with the _meta the
// SDK's server adds merged in when written.
type rawResult struct {
	mcp.ResultBase
	fields map[string]json.RawMessage
}

func (r *rawResult) MarshalJSON() ([]byte, error) {
	meta := r.fields["_meta"]
	if len(r.Meta) > 0 {
		merged := map[string]any{}
		if meta != nil {
			if err := json.Unmarshal(meta, &merged); err != nil {
				return nil, err
			}
		}
		for k, v := range r.Meta {
			if _, ok := merged[k]; !ok {
				merged[k] = v
			}
		}
		var err error
		if meta, err = json.Marshal(merged); err != nil {
			return nil, err
		}
	}
	// The members are JSON the relay encoded or read whole; written in
	// the order of their names, as encoding/json writes a map.
	names := slices.Collect(maps.Keys(r.fields))
	if meta != nil && r.fields["_meta"] == nil {
		names = append(names, "_meta")
	}
	slices.Sort(names)
	out := []byte{'{'}
	for i, name := range names {
		if i > 0 {
			out = append(out, ',')
		}
		key, _ := json.Marshal(name)
		out = append(append(out, key...), ':')
		if name == "_meta" {
			out = append(out, meta...)
		} else {
			out = append(out, r.fields[name]...)
		}
	}
	return append(out, '}'), nil
}

// completed marks a result of a method that may take rounds as complete,
// as the SDK's own server does for the stateless revision (the field is
// not settable from outside the SDK).
func completed(res mcp.Result) (mcp.Result, error) {
	if r, ok := res.(*rawResult); ok {
		r.fields["resultType"] = json.RawMessage(`"complete"`)
		return r, nil
	}
	raw, err := json.Marshal(res)
	if err != nil {
		return nil, err
	}
	fields, ok := wire.Fields(raw)
	if !ok {
		return nil, errors.New("mcpproxy: a result that is no JSON object")
	}
	fields["resultType"] = json.RawMessage(`"complete"`)
	return &rawResult{fields: fields}, nil
}

// inputRequired is the result of a round that asks the agent: the
// server's requests as it sent them (scrubbed), under the ids the agent
// answers them by.
func inputRequired(out rounds.Outcome) (mcp.Result, error) {
	qs, err := json.Marshal(out.Questions)
	if err != nil {
		return nil, err
	}
	state, _ := json.Marshal(out.State)
	return &rawResult{fields: map[string]json.RawMessage{
		"resultType":    json.RawMessage(`"input_required"`),
		"inputRequests": qs,
		"requestState":  state,
	}}, nil
}
