package relay

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/idnhq/idn/mcpproxy/internal/engine"
	"github.com/idnhq/idn/mcpproxy/internal/tasks"
	"github.com/idnhq/idn/mcpproxy/internal/wire"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The endpoint answers its most frequent message itself: a single
// tools/call that asks for no progress, on an initialized session. The
// transport lets a server answer a POST with one application/json response
// instead of an event stream, and such a call has nothing to stream. The
// checks and the result are the SDK path's (endpoint.call); what is saved
// is the SDK server's decoding and its hand-offs between goroutines, about
// half of what the endpoint used to add to a call. Everything else goes
// to the SDK; but task-augmented calls, which its server would run as
// plain calls, are answered here on every session that relays tasks.

// direct answers body, a POST on session s, when it is a call the endpoint
// serves itself or the cancellation of one, and reports whether it did.
// A session whose agent offers sampling or elicitation has every plain
// call served by the SDK, whose answer is an event stream that can carry
// the server's requests; roots are asked for on the session's own stream.
func (e *Endpoint) direct(w http.ResponseWriter, r *http.Request, s *agentSession, body []byte) bool {
	version := s.version.Load()
	relays := e.relaysTasks(s)
	if !relays && (e.SDKAgent || s.asks.Load()) || s.ss.Load() == nil || version == nil {
		return false
	}
	plain := wire.PlainPOST(r, *version)
	if !plain && !relays {
		return false
	}
	m, ok := wire.Classify(body)
	task := ok && m.Call != nil && m.Call.Task != nil && relays
	switch {
	case task && !plain:
		// The SDK would run it as a plain call.
		wire.Write(w, http.StatusBadRequest, wire.Response{ID: m.ID, Error: &jsonrpc.Error{
			Code: jsonrpc.CodeInvalidRequest, Message: "mcpproxy: a task-augmented tools/call takes a JSON body, an Accept of JSON and event streams, and the session's protocol version",
		}})
		return true
	case task:
		e.directCall(w, r, s, m)
		return true
	case !plain || !ok:
		return false
	case m.Call == nil: // a cancellation, of a call answered here or the SDK's
		if s.calls.Cancel(m.Key) {
			w.WriteHeader(http.StatusAccepted)
			return true
		}
		return false
	case e.SDKAgent || s.asks.Load():
		return false
	}
	e.directCall(w, r, s, m)
	return true
}

// directCall answers one tools/call as application/json. The call ends
// when the client cancels it or goes away.
func (e *Endpoint) directCall(w http.ResponseWriter, r *http.Request, s *agentSession, m wire.Message) {
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	id, key := m.ID, m.Key
	if !s.calls.Track(key, cancel) {
		wire.Write(w, http.StatusBadRequest, wire.Response{ID: id, Error: &jsonrpc.Error{
			Code: jsonrpc.CodeInvalidRequest, Message: "mcpproxy: request id " + key + " is already in flight on this session",
		}})
		return
	}
	defer s.calls.Untrack(key)
	// What the server says or asks during the call goes to the session's
	// own stream: this answer has none.
	relay := &engine.CallRelay{
		Notify: func(method string, params mcp.Params) { e.tell(context.WithoutCancel(ctx), s, method, params) },
		Ask: func(ctx context.Context, method string, params json.RawMessage) (any, error) {
			return e.ask(ctx, s, method, params)
		},
		Tasks: func(method string, params json.RawMessage) { e.taskNote(context.WithoutCancel(ctx), s, method, params) },
	}
	var task *tasks.Spec
	if m.Call.Task != nil && e.relaysTasks(s) {
		task = &tasks.Spec{}
		if err := json.Unmarshal(m.Call.Task, task); err != nil {
			wire.Write(w, http.StatusOK, wire.Response{ID: id, Error: &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "mcpproxy: unreadable task: " + err.Error()}})
			return
		}
		task.Token = s.tasks.Track(m.Call.Meta)
		defer s.tasks.Untrack(task.Token)
	}
	res, err := e.call(ctx, s, s.conn.Load(), m.Call.Name, m.Call.Arguments, task, relay)
	if err != nil {
		var je *jsonrpc.Error
		if !errors.As(err, &je) {
			je = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}
		}
		wire.Write(w, http.StatusOK, wire.Response{ID: id, Error: je})
		return
	}
	wire.Write(w, http.StatusOK, wire.Response{ID: id, Result: res})
}
