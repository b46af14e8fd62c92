package engine

import (
	"context"
	"encoding/json"

	"github.com/idnhq/idn/internal/mcptasks"
	"github.com/idnhq/idn/mcpproxy/internal/hold"
	"github.com/idnhq/idn/mcpproxy/internal/mirror"
	"github.com/idnhq/idn/mcpproxy/internal/upstream"
	"github.com/idnhq/idn/mcpproxy/internal/wire"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// CallRelay hands an agent what the upstream sends on a call's own event
// stream. A nil *CallRelay drops the notifications and answers the
// server's requests "method not found" (the REST routes).
type CallRelay struct {
	// Progress receives the call's progress, when the agent asked for it.
	Progress func(*mcp.ProgressNotificationParams)
	// Notify receives every other notification the server sends, by method.
	Notify func(method string, params mcp.Params)
	// Ask relays a request of the server to the agent and returns its answer.
	Ask func(ctx context.Context, method string, params json.RawMessage) (any, error)
	// Tasks receives task status notifications, and progress
	// notifications not of this call (a task's), by method.
	Tasks func(method string, params json.RawMessage)
	// Hold gives the server's requests their places: the agent
	// session's.
	Hold *hold.Session
	// Caps is what the agent declared (the _meta clientCapabilities of
	// the stateless revision), which a stateless server is told. Nil
	// declares nothing.
	Caps any
	// Pass, when set, carries a stateless server's rounds to and from a
	// stateless agent instead of answering them (upstream.Rounds).
	Pass *upstream.Rounds
}

// notification hands msg, a notification read from the stream of call id,
// to the relay: the call's progress (with the agent's token, set by the
// progress function, and the message scrubbed), tasks' notifications, or
// any other notification the agent can be told, scrubbed of secrets.
func (r *CallRelay) notification(st *Conn, id string, msg wire.Incoming) {
	if r == nil {
		return
	}
	var n mcp.ProgressNotificationParams
	switch {
	case msg.Method == mcptasks.ProgressMethod && r.Progress != nil && json.Unmarshal(msg.Params, &n) == nil && n.ProgressToken == id:
		// Only the progress itself: the upstream's _meta is not the
		// agent's business, and its message is scrubbed.
		r.Progress(&mcp.ProgressNotificationParams{Progress: n.Progress, Total: n.Total, Message: st.Scrubber.Load().Replace(n.Message)})
	case msg.Method == mcptasks.StatusMethod || msg.Method == mcptasks.ProgressMethod:
		if r.Tasks != nil {
			r.Tasks(msg.Method, msg.Params)
		}
	case r.Notify != nil:
		if params, ok := mirror.CleanParams(st.Scrubber.Load(), msg.Method, msg.Params); ok {
			r.Notify(msg.Method, params)
		}
	}
}
