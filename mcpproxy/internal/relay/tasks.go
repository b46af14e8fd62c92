package relay

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/idnhq/idn/internal/mcptasks"
	"github.com/idnhq/idn/mcpproxy/internal/engine"
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

func (e *Endpoint) relaysTasks(s *agentSession) bool {
	return s.tasks.Relays(s.version.Load(), engine.UpstreamProtocol)
}

// tapped returns hc with its transport under a tap telling s's Book what
// the server offers and s's agent the status and progress notifications,
// under the relay of the client side of tasks s's agent declared, under
// s's hold (which lets through only the server's requests it has room
// for, to the relay and the SDK's client alike), under
// upstream.Withdrawals.
func (e *Endpoint) tapped(s *agentSession, hc *http.Client) *http.Client {
	held := s.hold.Transport(upstream.Withdrawals(hc.Transport))
	hc = &http.Client{Transport: s.clientTasks.Transport(held, e.eng.Timeout(), func(ctx context.Context, method string, raw json.RawMessage) (any, error) {
		return e.ask(ctx, s, method, raw)
	}, s.hold.Unanswered), CheckRedirect: hc.CheckRedirect}
	return mcptasks.Tapped(hc, s.tasks.SetOffer, func(method string, raw json.RawMessage) { e.taskNote(context.Background(), s, method, raw) })
}

// addTaskMethods registers the tasks methods on s's server.
func (e *Endpoint) addTaskMethods(s *agentSession) {
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
			e.eng.Metrics.Tasks.WithLabelValues(method, result).Inc()
			e.eng.Decide(ctx, conn, s.caller, method, "", result, nil)
			return res, err
		})
	}
}

// relayTask relays one tasks method of s upstream, for the tasks s owns,
// tasks/list filtered to them, the server's errors as it sent them.
func (e *Endpoint) relayTask(ctx context.Context, s *agentSession, ss *mcp.ServerSession, conn *engine.Connection, method string, p *mcptasks.Params) (*mcptasks.Result, error) {
	if !e.relaysTasks(s) {
		return nil, mirror.NotExposed(method)
	}
	params, err := s.tasks.Forward(method, p)
	if err != nil {
		return nil, err
	}
	var relay *engine.CallRelay
	if method == "tasks/result" {
		// It waits as long as the task runs; what the server asks
		// meanwhile comes on its stream, and goes to the agent on its own.
		relay = e.relayFor(ctx, s, ss, nil)
	} else {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, e.eng.Timeout())
		defer cancel()
	}
	st, err := e.eng.State(conn)
	if err != nil {
		return nil, rpcError(ctx, err)
	}
	var raw json.RawMessage
	var answered *jsonrpc.Error
	err = e.eng.Guarded(ctx, st, &s.upstream, func(ctx context.Context, cs *mcp.ClientSession) error {
		var err error
		raw, err = e.eng.Exchange(ctx, st, cs, method, params, relay)
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
		return nil, &jsonrpc.Error{Code: answered.Code, Message: st.Scrubber.Load().Replace(answered.Message)}
	case method == "tasks/list":
		if raw, err = s.tasks.OwnList(raw); err != nil {
			return nil, rpcError(ctx, &engine.UpstreamError{ConnectionID: conn.ID, Message: "tasks/list: " + err.Error()})
		}
	}
	clean, err := scrub.Launder(st.Scrubber.Load(), &raw)
	if err != nil {
		return nil, rpcError(ctx, &engine.UpstreamError{ConnectionID: conn.ID, Message: "an answer that cannot be checked for secrets"})
	}
	return &mcptasks.Result{Raw: *clean}, nil
}

// rawTools is toolsPage for a session that relays tasks: the page as the
// server wrote it (with each tool's execution), minus what policy removes.
func (e *Endpoint) rawTools(ctx context.Context, s *agentSession, conn *engine.Connection, params *mcp.ListToolsParams) (mcp.Result, error) {
	ctx, cancel := context.WithTimeout(ctx, e.eng.Timeout())
	defer cancel()
	st, err := e.eng.State(conn)
	if err != nil {
		return nil, err
	}
	var raw json.RawMessage
	if err = e.eng.Guarded(ctx, st, &s.upstream, func(ctx context.Context, cs *mcp.ClientSession) error {
		raw, err = e.eng.Exchange(ctx, st, cs, "tools/list", params, nil)
		return err
	}); err != nil {
		return nil, err
	}
	unreadable := &engine.UpstreamError{ConnectionID: conn.ID, Message: "tools/list returned tools that cannot be read"}
	if e.eng.Pins.Keeps() {
		// The listing goes to the agent as the server wrote it: JSON that
		// reads two ways (a member twice) could be pinned in one reading
		// and read by the agent in the other.
		if _, err := toolpin.Canonical(raw); err != nil {
			return nil, &engine.UpstreamError{ConnectionID: conn.ID, Message: "tools/list returned JSON that reads two ways (a member twice, or invalid UTF-8)"}
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
	pinned := e.eng.Pins.Pinned(conn.ID, listed)
	if raw, err = page.Keep(func(t *mcp.Tool) bool {
		return snap.Has(t.Name) && conn.Policy.Explain(s.caller.Subject, t.Name, snap.Names).Allowed && pinned(t.Name)
	}); err != nil {
		return nil, unreadable
	}
	clean, err := scrub.Launder(st.Scrubber.Load(), &raw)
	if err != nil {
		return nil, &engine.UpstreamError{ConnectionID: conn.ID, Message: "tools/list returned tools that cannot be checked for secrets"}
	}
	return &mcptasks.Result{Raw: *clean}, nil
}

// taskNote writes a task status or progress notification (method) to the
// agent of s, on its own stream, when its task or its progress token is
// s's (a status about a task s does not own yet is held until it does),
// secrets replaced (Book.Note). Each is a decision and counted: relayed,
// no_stream, or not_owned when dropped unclaimed.
func (e *Endpoint) taskNote(ctx context.Context, s *agentSession, method string, raw json.RawMessage) {
	conn := s.conn.Load()
	st, err := e.eng.State(conn)
	if err != nil || !e.relaysTasks(s) {
		return
	}
	msg, dropped, err := s.tasks.Note(st.Scrubber.Load(), method, raw)
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
	e.eng.Metrics.Tasks.WithLabelValues(method, outcome).Inc()
	e.eng.Decide(ctx, conn, s.caller, method, "", outcome, nil)
}

// askTask relays a server's request of the client side of tasks to the
// agent of s, on its own event stream (clienttasks.Relay.Ask); each is a
// decision and counted.
func (e *Endpoint) askTask(ctx context.Context, s *agentSession, method string, raw json.RawMessage) (any, error) {
	conn := s.conn.Load()
	st, err := e.eng.State(conn)
	if err != nil {
		return nil, err
	}
	res, outcome, err := s.clientTasks.Ask(ctx, st.Scrubber.Load(), method, raw, s.events.SendOpen)
	e.eng.Metrics.Tasks.WithLabelValues(method, string(outcome)).Inc()
	e.eng.Decide(ctx, conn, s.caller, method, "", string(outcome), nil)
	return res, err
}

// fromAgent takes the agent's POST body on s when it is the client side
// of tasks: an answer to a request askTask sent, or a status notification
// of one of its tasks, relayed to the upstream session the task is bound
// to when that is still s's (counted relayed, not_owned or error).
func (e *Endpoint) fromAgent(w http.ResponseWriter, r *http.Request, s *agentSession, body []byte) bool {
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
	cs := s.upstream.Session()
	if st, stErr := e.eng.State(conn); err == nil && stErr == nil && cs != nil && cs.ID() == bound {
		up := upstream.Session{Client: st.HTTPClient, Endpoint: st.CurrentEndpoint, ID: bound, Protocol: cs.InitializeResult().ProtocolVersion}
		if outcome = "relayed"; upstream.Notify(r.Context(), up, mcptasks.StatusMethod, params) != nil {
			outcome = "error"
		}
	}
	e.eng.Metrics.Tasks.WithLabelValues(mcptasks.StatusMethod, outcome).Inc()
	e.eng.Decide(r.Context(), conn, s.caller, mcptasks.StatusMethod, "", outcome, nil)
	return true
}
