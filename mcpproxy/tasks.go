package mcpproxy

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"github.com/idnhq/idn/internal/mcptasks"
	"github.com/idnhq/idn/mcpproxy/internal/clienttasks"
	"github.com/idnhq/idn/mcpproxy/internal/mirror"
	"github.com/idnhq/idn/mcpproxy/internal/scrub"
	"github.com/idnhq/idn/mcpproxy/internal/tasks"
	"github.com/idnhq/idn/mcpproxy/internal/upstream"
	"github.com/idnhq/idn/mcpproxy/toolpin"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Tasks are relayed as JSON where the server offers task-augmented
// tools/call (packages internal/mcptasks and tasks; docs/gateway.md has
// what passes): a task-augmented call is answered directly (direct.go),
// the tasks methods are custom methods of the session's SDK server.

func (e *endpoint) relaysTasks(s *agentSession) bool {
	return s.tasks.Relays(s.version.Load(), upstreamProtocol)
}

// tapped returns hc with its transport under a tap telling s's Book what
// the server offers and s's agent the status and progress notifications,
// under the relay of the client side of tasks s's agent declared, under
// s's hold (which lets through only the server's requests it has room
// for, to the relay and the SDK's client alike), under
// upstream.Withdrawals.
func (e *endpoint) tapped(s *agentSession, hc *http.Client) *http.Client {
	held := s.hold.Transport(upstream.Withdrawals(hc.Transport))
	hc = &http.Client{Transport: s.clientTasks.Transport(held, e.p.timeout, func(ctx context.Context, method string, raw json.RawMessage) (any, error) {
		return e.ask(ctx, s, method, raw)
	}, s.hold.Unanswered), CheckRedirect: hc.CheckRedirect}
	return mcptasks.Tapped(hc, s.tasks.SetOffer, func(method string, raw json.RawMessage) { e.taskNote(context.Background(), s, method, raw) })
}

// addTaskMethods registers the tasks methods on s's server.
func (e *endpoint) addTaskMethods(s *agentSession) {
	for _, method := range mcptasks.Methods {
		_ = mcp.AddReceivingCustomMethod(s.server, method, func(ctx context.Context, ss *mcp.ServerSession, p *mcptasks.Params) (*mcptasks.Result, error) {
			conn := s.conn.Load()
			res, err := e.relayTask(ctx, s, ss, conn, method, p)
			result := "success"
			switch {
			case err == tasks.NotFound: // many are someone probing for ids
				result = "not_owned"
			case err != nil:
				result = "error"
			}
			e.p.metrics.Tasks.WithLabelValues(method, result).Inc()
			e.p.decide(ctx, conn, s.caller, method, "", result, nil)
			return res, err
		})
	}
}

// relayTask relays one tasks method of s upstream, for the tasks s owns,
// tasks/list filtered to them, the server's errors as it sent them.
func (e *endpoint) relayTask(ctx context.Context, s *agentSession, ss *mcp.ServerSession, conn *Connection, method string, p *mcptasks.Params) (*mcptasks.Result, error) {
	if !e.relaysTasks(s) {
		return nil, mirror.NotExposed(method)
	}
	params, err := s.tasks.Forward(method, p)
	if err != nil {
		return nil, err
	}
	var relay *callRelay
	if method == "tasks/result" {
		// It waits as long as the task runs; what the server asks
		// meanwhile comes on its stream, and goes to the agent on its own.
		relay = e.relayFor(ctx, s, ss, nil)
	} else {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, e.p.timeout)
		defer cancel()
	}
	st, err := e.p.state(conn)
	if err != nil {
		return nil, rpcError(ctx, err)
	}
	var raw json.RawMessage
	var answered *jsonrpc.Error
	err = e.p.guarded(ctx, st, &s.upstream, func(ctx context.Context, cs *mcp.ClientSession) error {
		var err error
		raw, err = e.p.exchange(ctx, st, cs, method, params, relay)
		if errors.As(err, &answered) && upstream.ServerAnswered(err) {
			return nil
		}
		answered = nil
		return err
	})
	switch {
	case err != nil:
		return nil, rpcError(ctx, err)
	case answered != nil:
		return nil, &jsonrpc.Error{Code: answered.Code, Message: st.scrubber.Load().Replace(answered.Message)}
	case method == "tasks/list":
		if raw, err = s.tasks.OwnList(raw); err != nil {
			return nil, rpcError(ctx, &UpstreamError{ConnectionID: conn.ID, Message: "tasks/list: " + err.Error()})
		}
	}
	clean, err := scrub.Launder(st.scrubber.Load(), &raw)
	if err != nil {
		return nil, rpcError(ctx, &UpstreamError{ConnectionID: conn.ID, Message: "an answer that cannot be checked for secrets"})
	}
	return &mcptasks.Result{Raw: *clean}, nil
}

// exchange sends one request of method on cs's session (upstream.Request)
// and returns its result as the server wrote it; relay, when set,
// receives what the server sends meanwhile.
func (p *Proxy) exchange(ctx context.Context, st *connState, cs *mcp.ClientSession, method string, params any, relay *callRelay) (json.RawMessage, error) {
	id := "idn-" + strconv.FormatUint(p.callSeq.Add(1), 10)
	s := upstream.Session{Client: st.httpClient, Endpoint: st.currentEndpoint, ID: cs.ID(), Protocol: cs.InitializeResult().ProtocolVersion}
	return upstream.Request(ctx, s, id, method, params, callHandler{st, relay, clienttasks.Upstream{ID: s.ID, Version: s.Protocol}}, p.detach)
}

// callAsTask sends a checked task-augmented tools/call upstream. The
// server answers with the task it created, which becomes the session's,
// or, when it ran the call as a plain one, with the call's result.
func (p *Proxy) callAsTask(ctx context.Context, st *connState, conn *Connection, tool string, args json.RawMessage, sc *sessionCall) (*CallResult, *mcp.CallToolResult, error) {
	var raw json.RawMessage
	err := p.guarded(ctx, st, sc.upstream, func(ctx context.Context, cs *mcp.ClientSession) error {
		var err error
		raw, err = p.exchange(ctx, st, cs, "tools/call", tasks.Call(tool, args, *sc.task), sc.relay)
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	id, ok := mcptasks.Created(raw)
	if !ok {
		var res mcp.CallToolResult
		if err := json.Unmarshal(raw, &res); err != nil {
			return nil, nil, &UpstreamError{ConnectionID: conn.ID, Message: "tools/call: unreadable result"}
		}
		return nil, &res, nil
	}
	sc.own(id)
	clean, err := scrub.Launder(st.scrubber.Load(), &raw)
	if err != nil {
		return nil, nil, &UpstreamError{ConnectionID: conn.ID, Message: "tool " + tool + " returned a task that cannot be checked for secrets"}
	}
	return &CallResult{ConnectionID: conn.ID, Tool: tool, task: *clean}, nil, nil
}

// rawTools is toolsPage for a session that relays tasks: the page as the
// server wrote it (with each tool's execution), minus what policy removes.
func (e *endpoint) rawTools(ctx context.Context, s *agentSession, conn *Connection, params *mcp.ListToolsParams) (mcp.Result, error) {
	ctx, cancel := context.WithTimeout(ctx, e.p.timeout)
	defer cancel()
	st, err := e.p.state(conn)
	if err != nil {
		return nil, err
	}
	var raw json.RawMessage
	if err = e.p.guarded(ctx, st, &s.upstream, func(ctx context.Context, cs *mcp.ClientSession) error {
		raw, err = e.p.exchange(ctx, st, cs, "tools/list", params, nil)
		return err
	}); err != nil {
		return nil, err
	}
	unreadable := &UpstreamError{ConnectionID: conn.ID, Message: "tools/list returned tools that cannot be read"}
	if e.p.pins.pins != nil {
		// The listing goes to the agent as the server wrote it: JSON that
		// reads two ways (a member twice) could be pinned in one reading
		// and read by the agent in the other.
		if _, err := toolpin.Canonical(raw); err != nil {
			return nil, &UpstreamError{ConnectionID: conn.ID, Message: "tools/list returned JSON that reads two ways (a member twice, or invalid UTF-8)"}
		}
	}
	page, err := tasks.ParseTools(raw)
	if err != nil {
		return nil, unreadable
	}
	snap, listed, err := e.pageTools(ctx, s, st, page.Tools, params.Cursor == "" && page.Next == "")
	if err != nil {
		return nil, err
	}
	pinned := e.p.pins.pinned(conn.ID, listed)
	if raw, err = page.Keep(func(t *mcp.Tool) bool {
		return snap.Has(t.Name) && conn.Policy.Explain(s.caller.Subject, t.Name, snap.Names).Allowed && pinned(t.Name)
	}); err != nil {
		return nil, unreadable
	}
	clean, err := scrub.Launder(st.scrubber.Load(), &raw)
	if err != nil {
		return nil, &UpstreamError{ConnectionID: conn.ID, Message: "tools/list returned tools that cannot be checked for secrets"}
	}
	return &mcptasks.Result{Raw: *clean}, nil
}

// taskNote writes a task status or progress notification (method) to the
// agent of s, on its own stream, when its task or its progress token is
// s's (a status about a task s does not own yet is held until it does),
// secrets replaced (Book.Note). Each is a decision and counted: relayed,
// no_stream, or not_owned when dropped unclaimed.
func (e *endpoint) taskNote(ctx context.Context, s *agentSession, method string, raw json.RawMessage) {
	conn := s.conn.Load()
	st, err := e.p.state(conn)
	if err != nil || !e.relaysTasks(s) {
		return
	}
	msg, dropped, err := s.tasks.Note(st.scrubber.Load(), method, raw)
	outcome := "not_owned"
	switch {
	case err != nil || msg == nil && !dropped:
		return
	case msg != nil:
		outcome = "relayed"
		if !s.events.Send(msg) {
			outcome = "no_stream"
		}
	}
	e.p.metrics.Tasks.WithLabelValues(method, outcome).Inc()
	e.p.decide(ctx, conn, s.caller, method, "", outcome, nil)
}

// askTask relays a server's request of the client side of tasks to the
// agent of s, on its own event stream (clienttasks.Relay.Ask); each is a
// decision and counted.
func (e *endpoint) askTask(ctx context.Context, s *agentSession, method string, raw json.RawMessage) (any, error) {
	conn := s.conn.Load()
	st, err := e.p.state(conn)
	if err != nil {
		return nil, err
	}
	res, outcome, err := s.clientTasks.Ask(ctx, st.scrubber.Load(), method, raw, s.events.SendOpen)
	e.p.metrics.Tasks.WithLabelValues(method, string(outcome)).Inc()
	e.p.decide(ctx, conn, s.caller, method, "", string(outcome), nil)
	return res, err
}

// fromAgent takes the agent's POST body on s when it is the client side
// of tasks: an answer to a request askTask sent, or a status notification
// of one of its tasks, relayed to the upstream session the task is bound
// to when that is still s's (counted relayed, not_owned or error).
func (e *endpoint) fromAgent(w http.ResponseWriter, r *http.Request, s *agentSession, body []byte) bool {
	if s.clientTasks.Answered(body) {
		w.WriteHeader(http.StatusAccepted)
		return true
	}
	params, bound, ok, err := s.clientTasks.Status(body)
	if !ok {
		return false
	}
	w.WriteHeader(http.StatusAccepted)
	conn, outcome := s.conn.Load(), "not_owned"
	s.upstream.mu.Lock()
	cs := s.upstream.session
	s.upstream.mu.Unlock()
	if st, stErr := e.p.state(conn); err == nil && stErr == nil && cs != nil && cs.ID() == bound {
		up := upstream.Session{Client: st.httpClient, Endpoint: st.currentEndpoint, ID: bound, Protocol: cs.InitializeResult().ProtocolVersion}
		if outcome = "relayed"; upstream.Notify(r.Context(), up, mcptasks.StatusMethod, params) != nil {
			outcome = "error"
		}
	}
	e.p.metrics.Tasks.WithLabelValues(mcptasks.StatusMethod, outcome).Inc()
	e.p.decide(r.Context(), conn, s.caller, mcptasks.StatusMethod, "", outcome, nil)
	return true
}
