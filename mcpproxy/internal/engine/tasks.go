package engine

import (
	"context"
	"encoding/json"
	"strconv"

	"github.com/idnhq/idn/internal/mcptasks"
	"github.com/idnhq/idn/mcpproxy/internal/clienttasks"
	"github.com/idnhq/idn/mcpproxy/internal/scrub"
	"github.com/idnhq/idn/mcpproxy/internal/tasks"
	"github.com/idnhq/idn/mcpproxy/internal/upstream"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// exchange sends one request of method on cs's session (upstream.Request)
// and returns its result as the server wrote it; relay, when set,
// receives what the server sends meanwhile.
func (p *Engine) Exchange(ctx context.Context, st *Conn, cs *mcp.ClientSession, method string, params any, relay *CallRelay) (json.RawMessage, error) {
	id := "idn-" + strconv.FormatUint(p.callSeq.Add(1), 10)
	s := upstream.Session{Client: st.HTTPClient, Endpoint: st.CurrentEndpoint, ID: cs.ID(), Protocol: cs.InitializeResult().ProtocolVersion}
	return upstream.Request(ctx, s, id, method, params, callHandler{st, relay, clienttasks.Upstream{ID: s.ID, Version: s.Protocol}}, p.detach)
}

// callAsTask sends a checked task-augmented tools/call upstream. The
// server answers with the task it created, which becomes the session's,
// or, when it ran the call as a plain one, with the call's result.
func (p *Engine) callAsTask(ctx context.Context, st *Conn, conn *Connection, tool string, args json.RawMessage, sc *SessionCall) (*CallResult, json.RawMessage, error) {
	var raw json.RawMessage
	err := p.Guarded(ctx, st, sc.Upstream, func(ctx context.Context, cs *mcp.ClientSession) error {
		var err error
		raw, err = p.Exchange(ctx, st, cs, "tools/call", tasks.Call(tool, args, *sc.Task), sc.Relay)
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	id, ok := mcptasks.Created(raw)
	if !ok {
		return nil, raw, nil
	}
	sc.Own(id)
	clean, err := scrub.Launder(st.Scrubber.Load(), &raw)
	if err != nil {
		return nil, nil, &UpstreamError{ConnectionID: conn.ID, Message: "tool " + tool + " returned a task that cannot be checked for secrets"}
	}
	return &CallResult{ConnectionID: conn.ID, Tool: tool, task: *clean}, nil, nil
}
