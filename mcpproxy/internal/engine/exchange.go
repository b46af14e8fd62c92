package engine

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"

	"github.com/idnhq/idn/mcpproxy/internal/clienttasks"
	"github.com/idnhq/idn/mcpproxy/internal/upstream"
	"github.com/idnhq/idn/mcpproxy/internal/wire"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// exchangeCall sends params as a tools/call on cs's session and returns its
// result as the server wrote it, through upstream.Request on the SDK
// client session's id (see package upstream for why). A JSON-RPC error
// answer is returned as a *jsonrpc.Error; a session the server no longer
// knows as an error wrapping mcp.ErrSessionMissing. relay, when set, receives what the server sends
// during the call. schema is the tool's input schema.
func (p *Engine) exchangeCall(ctx context.Context, st *Conn, cs *mcp.ClientSession, params *mcp.CallToolParams, schema []byte, relay *CallRelay) (json.RawMessage, error) {
	ir := cs.InitializeResult()
	switch {
	case p.SDKUpstream:
		res, err := cs.CallTool(ctx, params)
		if err != nil {
			return nil, err
		}
		return json.Marshal(res)
	case ir.ProtocolVersion >= wire.Revision:
		return p.statelessCall(ctx, st, params, schema, relay)
	}
	id := "idn-" + strconv.FormatUint(p.callSeq.Add(1), 10)
	if relay != nil && relay.Progress != nil {
		params.SetProgressToken(id)
	}
	s := upstream.Session{Client: st.HTTPClient, Endpoint: st.CurrentEndpoint, ID: cs.ID(), Protocol: ir.ProtocolVersion}
	return upstream.Request(ctx, s, id, "tools/call", params, callHandler{st, relay, clienttasks.Upstream{ID: s.ID, Version: s.Protocol}}, p.detach)
}

// detach runs f after the caller has gone; Close waits for it.
func (p *Engine) detach(f func()) {
	p.wg.Go(f)
}

// callHandler is what an upstream call's event stream reaches: the call's
// relay, with the connection's scrubber and the upstream session.
type callHandler struct {
	st    *Conn
	relay *CallRelay
	up    clienttasks.Upstream
}

// Enter takes a place for a request of the server: in the agent
// session's hold, or for the REST routes the connection's.
func (h callHandler) Enter() (leave func(), ok bool) {
	if h.relay != nil && h.relay.Hold != nil {
		return h.relay.Hold.Enter()
	}
	return h.st.Asking.Enter()
}

// Notify hands a notification of the call's stream to the relay.
func (h callHandler) Notify(id string, msg wire.Incoming) { h.relay.notification(h.st, id, msg) }

// Answer replies to a request the server sends during a call: ping is
// answered; sampling, elicitation and roots are asked of the agent whose
// call this is, when it offers them (relay.Ask); anything else is a method
// the gateway's client does not offer.
func (h callHandler) Answer(ctx context.Context, msg wire.Incoming) wire.Response {
	relay := h.relay
	reply := wire.Response{JSONRPC: "2.0", ID: msg.ID}
	switch {
	case msg.Method == "ping":
		reply.Result = struct{}{}
	case relay != nil && relay.Ask != nil:
		res, err := relay.Ask(clienttasks.WithUpstream(ctx, h.up), msg.Method, msg.Params)
		if err != nil {
			var je *jsonrpc.Error
			if !errors.As(err, &je) {
				je = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: h.st.Scrubber.Load().Scrub(err.Error())}
			}
			reply.Error = je
		} else {
			reply.Result = res
		}
	default:
		reply.Error = &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "method " + msg.Method + " is not offered by this client"}
	}
	return reply
}
