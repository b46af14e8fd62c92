package relay

//lint:file-ignore SA1019 MCP clients of protocol versions up to 2025-11-25 use sampling, roots and logging, which the SDK deprecates for the newer one; relaying them is the point.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/idnhq/idn/apierror"
	"github.com/idnhq/idn/internal/mcpnotify"
	"github.com/idnhq/idn/mcpproxy/internal/catalog"
	"github.com/idnhq/idn/mcpproxy/internal/engine"
	"github.com/idnhq/idn/mcpproxy/internal/mirror"
	"github.com/idnhq/idn/mcpproxy/internal/scrub"
	"github.com/idnhq/idn/mcpproxy/internal/upstream"
	"github.com/idnhq/idn/mcpproxy/internal/wire"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The relay: an agent session of the MCP endpoint gets what its own
// upstream session offers, minus what policy removes. Its upstream client
// declares the capabilities the agent declared (sampling, elicitation,
// roots), so the server offers that session what it would offer the agent
// directly; the server's notifications and requests to the client reach
// that agent alone, and its answers go back upstream. docs/gateway.md
// lists every method and what happens to it.

// tell sends the agent of s a notification, on the stream of the request
// ctx belongs to (or the session's own stream), unless policy hides its
// subject: resources and prompts notifications only where the connection
// exposes them.
func (e *Endpoint) tell(ctx context.Context, s *agentSession, method string, params mcp.Params) {
	ss := s.ss.Load()
	if ss == nil {
		return
	}
	conn := s.conn.Load()
	if mirror.Hidden(method, conn.ExposeResources, conn.ExposePrompts) {
		return
	}
	if method == "notifications/tools/list_changed" {
		// The tools the session's calls are checked against are listed
		// again at the next call.
		s.tools.Store(nil)
	}
	_ = mcpnotify.Send(ctx, ss, method, params)
}

// ask relays a request the upstream server sent to the agent of s, with
// secrets replaced, when the agent declared the capability it needs
// (mirror.Ask), and returns the agent's answer as it is: it goes to the
// server the agent is using.
func (e *Endpoint) ask(ctx context.Context, s *agentSession, method string, raw json.RawMessage) (any, error) {
	ss := s.ss.Load()
	if ss == nil {
		return nil, mirror.NotOffered(method)
	}
	if s.clientTasks.Handles(ctx, s.version.Load(), s.events.Streaming(), method, raw) {
		return e.askTask(ctx, s, method, raw)
	}
	st, err := e.eng.State(s.conn.Load())
	if err != nil {
		return nil, err
	}
	return mirror.Ask(ctx, ss, &s.told, &s.answers, method, func(p any) error {
		if len(raw) == 0 || string(raw) == "null" {
			return nil
		}
		// What the server asks the agent is scrubbed of secrets, as
		// everything else it says is.
		clean, err := scrub.Launder(st.Scrubber.Load(), &raw)
		if err == nil {
			err = json.Unmarshal(*clean, p)
		}
		if err != nil {
			return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("%s: %v", method, err)}
		}
		return nil
	})
}

// rootsChanged passes the agent's notifications/roots/list_changed on to
// s's upstream session, so that the server asks for the roots again. The
// SDK's client sends it only for roots of its own, which the relay has
// none of. An agent that declared no roots has none to change.
func (e *Endpoint) rootsChanged(ctx context.Context, s *agentSession, conn *engine.Connection, params *mcp.RootsListChangedParams) {
	ss := s.ss.Load()
	if ss == nil || ss.InitializeParams() == nil || ss.InitializeParams().Capabilities == nil || ss.InitializeParams().Capabilities.RootsV2 == nil {
		return
	}
	_ = e.forward(ctx, s, conn, func(ctx context.Context, cs *mcp.ClientSession) error {
		if cs.InitializeResult().ProtocolVersion >= wire.Revision {
			// A stateless server asks for roots within the call that
			// needs them: there is nothing to tell it.
			return nil
		}
		st, err := e.eng.State(conn)
		if err != nil {
			return err
		}
		up := upstream.Session{Client: st.HTTPClient, Endpoint: st.CurrentEndpoint, ID: cs.ID(), Protocol: cs.InitializeResult().ProtocolVersion}
		return upstream.Notify(ctx, up, "notifications/roots/list_changed", params)
	})
}

// upstreamClient is the client of s's upstream session (mirror.Client):
// what the server sends outside a call's own stream (on the session's
// stream, or during requests the SDK's client sends) reaches the agent.
// A request the SDK's client received carries the upstream request's id
// in its context, which the agent's server would take for the id of an
// agent request whose stream should carry it: the agent's session stream
// carries it instead.
func (e *Endpoint) upstreamClient(s *agentSession, agent *mcp.ClientCapabilities) *mcp.Client {
	tell := func(method string, params mcp.Params) {
		st, err := e.eng.State(s.conn.Load())
		if err != nil {
			return
		}
		raw, err := json.Marshal(params)
		if err != nil {
			return
		}
		if clean, ok := mirror.CleanParams(st.Scrubber.Load(), method, raw); ok {
			e.tell(context.Background(), s, method, clean)
		}
	}
	ask := func(ctx context.Context, method string, params any) (any, error) {
		raw, err := json.Marshal(params)
		if err != nil {
			return nil, err
		}
		// Answered within the MCP timeout, as a request on a call's
		// stream is.
		detached, cancel := context.WithTimeout(context.Background(), e.eng.Timeout())
		defer cancel()
		defer context.AfterFunc(ctx, cancel)()
		return e.ask(detached, s, method, raw)
	}
	return mirror.Client(serverInfo, agent, tell, ask)
}

// relayFor is the relay of a call on s from the request ctx (the agent's
// tools/call), with progress under token when the agent asked for it.
func (e *Endpoint) relayFor(ctx context.Context, s *agentSession, ss *mcp.ServerSession, token any) *engine.CallRelay {
	r := &engine.CallRelay{
		Notify: func(method string, params mcp.Params) { e.tell(ctx, s, method, params) },
		Ask: func(ctx context.Context, method string, params json.RawMessage) (any, error) {
			return e.ask(ctx, s, method, params)
		},
		Tasks: func(method string, params json.RawMessage) { e.taskNote(context.WithoutCancel(ctx), s, method, params) },
		Hold:  s.hold,
	}
	if ip := ss.InitializeParams(); ip != nil && ip.Capabilities != nil {
		c := ip.Capabilities
		r.Caps = declared{Sampling: c.Sampling, Elicitation: c.Elicitation, Roots: c.RootsV2}
	}
	if token != nil {
		r.Progress = func(n *mcp.ProgressNotificationParams) {
			n.ProgressToken = token
			_ = ss.NotifyProgress(ctx, n)
		}
	}
	return r
}

// sessionTools returns the tools s's upstream session lists, the ones its
// calls are checked against, listing them when no listing is kept (none
// yet, or the server said they changed).
func (e *Endpoint) sessionTools(ctx context.Context, s *agentSession, st *engine.Conn) (*catalog.Catalog, error) {
	if snap := s.tools.Load(); snap != nil {
		return snap, nil
	}
	var tools []*mcp.Tool
	err := e.eng.Guarded(ctx, st, &s.upstream, func(ctx context.Context, cs *mcp.ClientSession) error {
		tools = tools[:0]
		params := &mcp.ListToolsParams{}
		for range engine.MaxToolPages {
			res, err := cs.ListTools(ctx, params)
			if err != nil {
				return err
			}
			tools = append(tools, res.Tools...)
			if res.NextCursor == "" {
				return nil
			}
			params = &mcp.ListToolsParams{Cursor: res.NextCursor}
		}
		return errors.New("mcpproxy: tools/list pagination did not end")
	})
	if err != nil {
		return nil, err
	}
	return e.keepTools(ctx, s, st, tools)
}

// keepTools makes tools, a complete listing of s's upstream session, the
// one its calls are checked against.
func (e *Endpoint) keepTools(ctx context.Context, s *agentSession, st *engine.Conn, tools []*mcp.Tool) (*catalog.Catalog, error) {
	snap, err := catalog.Listed(st.Scrubber.Load(), tools)
	if err != nil {
		return nil, &engine.UpstreamError{ConnectionID: st.ID, Message: "tools/list returned tools that cannot be checked for secrets"}
	}
	e.eng.Pins.Observe(ctx, st.ID, snap, true)
	s.tools.Store(snap)
	return snap, nil
}

// pageTools returns two catalogs of a page of s's upstream session's
// tools/list (its first and last when complete). The session's is what
// its calls are checked against. The page's own holds the definitions the
// agent gets, which the pins are checked against.
func (e *Endpoint) pageTools(ctx context.Context, s *agentSession, st *engine.Conn, tools []*mcp.Tool, complete bool) (session, page *catalog.Catalog, err error) {
	if complete {
		session, err = e.keepTools(ctx, s, st, tools)
		return session, session, err
	}
	if session = s.tools.Load(); session == nil {
		if session, err = e.sessionTools(ctx, s, st); err != nil {
			return nil, nil, err
		}
	}
	if page, err = catalog.Listed(st.Scrubber.Load(), tools); err != nil {
		return nil, nil, &engine.UpstreamError{ConnectionID: st.ID, Message: "tools/list returned tools that cannot be checked for secrets"}
	}
	e.eng.Pins.Observe(ctx, st.ID, page, false)
	return session, page, nil
}

// listTools answers tools/list with the page of tools the session's
// upstream session lists, as listed (order, metadata, cursor), minus the
// tools the session's subject may not use.
func (e *Endpoint) listTools(ctx context.Context, s *agentSession, conn *engine.Connection, params *mcp.ListToolsParams) (mcp.Result, error) {
	var res mcp.Result
	var err error
	if e.relaysTasks(s) {
		res, err = e.rawTools(ctx, s, conn, params)
	} else {
		res, err = e.toolsPage(ctx, s, conn, params)
	}
	e.eng.Decide(ctx, conn, s.caller, "tools/list", "", engine.Outcome(err), err)
	if err != nil {
		return nil, rpcError(ctx, err)
	}
	return res, nil
}

func (e *Endpoint) toolsPage(ctx context.Context, s *agentSession, conn *engine.Connection, params *mcp.ListToolsParams) (*mcp.ListToolsResult, error) {
	ctx, cancel := context.WithTimeout(ctx, e.eng.Timeout())
	defer cancel()
	st, err := e.eng.State(conn)
	if err != nil {
		return nil, err
	}
	var list *mcp.ListToolsResult
	err = e.eng.Guarded(ctx, st, &s.upstream, func(ctx context.Context, cs *mcp.ClientSession) error {
		var err error
		list, err = cs.ListTools(ctx, params)
		return err
	})
	if err != nil {
		return nil, err
	}
	// A complete listing: the session's calls are checked against it.
	snap, page, err := e.pageTools(ctx, s, st, list.Tools, params.Cursor == "" && list.NextCursor == "")
	if err != nil {
		return nil, err
	}
	pinned := e.eng.Pins.Pinned(conn.ID, page)
	kept := list.Tools[:0]
	for _, t := range list.Tools {
		if snap.Has(t.Name) && conn.Policy.Explain(s.caller.Subject, t.Name, snap.Names).Allowed && pinned(t.Name) {
			kept = append(kept, t)
		}
	}
	list.Tools = kept
	clean, err := scrub.Launder(st.Scrubber.Load(), &list)
	if err != nil {
		return nil, &engine.UpstreamError{ConnectionID: conn.ID, Message: "tools/list returned tools that cannot be checked for secrets"}
	}
	mirror.DefaultCacheScope(*clean)
	return *clean, nil
}

// openUpstream prepares s's upstream session for the agent's initialize
// params (the capabilities its client declares, the version it asks for)
// and opens it, so that the agent's session can advertise what the server
// offers. It returns the server's initialize result, scrubbed, or nil
// when the server cannot be reached now: the session then advertises
// what its own server was given (tools, and resources and prompts where
// exposed), and its upstream session is opened by its first request.
func (e *Endpoint) openUpstream(ctx context.Context, s *agentSession, conn *engine.Connection, params *mcp.InitializeParams) *mcp.InitializeResult {
	var caps *mcp.ClientCapabilities
	version := ""
	if params != nil {
		caps, version = params.Capabilities, params.ProtocolVersion
	}
	// Roots are asked for on the session's own stream when a call is
	// answered directly; sampling and elicitation belong on the call's.
	s.asks.Store(caps != nil && (caps.Sampling != nil || caps.Elicitation != nil))
	s.upstream.Configure(e.upstreamClient(s, caps), mirror.Version(version, engine.UpstreamProtocol), func(hc *http.Client) *http.Client { return e.tapped(s, hc) })

	st, err := e.eng.State(conn)
	if err != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, e.eng.Timeout())
	defer cancel()
	cs, err := e.eng.Acquire(ctx, st, &s.upstream)
	if err != nil {
		e.eng.Log.WarnContext(ctx, "mcpproxy: opening the upstream session of an MCP session failed", "request_id", apierror.RequestIDFrom(ctx),
			"connection_id", conn.ID, "error", st.Scrubber.Load().Scrub(err.Error()))
		return nil
	}
	res, err := scrub.Launder(st.Scrubber.Load(), cs.InitializeResult())
	if err != nil {
		return nil
	}
	return res
}
