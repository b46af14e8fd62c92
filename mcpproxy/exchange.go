package mcpproxy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"time"

	"github.com/idnhq/idn/mcpproxy/internal/upstream"
	"github.com/idnhq/idn/mcpproxy/internal/wire"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// An upstream tools/call is one HTTP exchange the proxy runs itself on the
// SDK client session's id: the request is posted with the session's
// headers and its answer, one JSON body or an event stream, is read in the
// calling goroutine. The call's progress arrives on that stream, in wire
// order before its result, so it is relayed as it is read. The SDK's
// client session opens, lists, reads and closes; it sees the calls only
// on a server that offers no protocol the exchange speaks. What this
// saves, against the SDK's call path, is a hand-off between goroutines at
// every step and a decoder that allocates a large buffer per message.

// refusalPeek bounds how much of a refused call's answer is read for a
// JSON-RPC error.
const refusalPeek = 64 << 10

// cancelTimeout bounds the notifications/cancelled sent for a call the
// caller withdrew.
const cancelTimeout = 5 * time.Second

// exchangeCall sends params as a tools/call on cs's session and returns its
// result. A JSON-RPC error answer is returned as a *jsonrpc.Error; a
// session the server no longer knows as an error wrapping
// mcp.ErrSessionMissing. relay, when set, receives what the server sends
// during the call.
func (p *Proxy) exchangeCall(ctx context.Context, st *connState, cs *mcp.ClientSession, params *mcp.CallToolParams, relay *callRelay) (*mcp.CallToolResult, error) {
	if p.sdkUpstream || cs.InitializeResult().ProtocolVersion > upstreamProtocol {
		// A server that offers only newer protocols: the SDK's client
		// speaks them, and the call's progress is not relayed.
		return cs.CallTool(ctx, params)
	}
	id := "idn-" + strconv.FormatUint(p.callSeq.Add(1), 10)
	if relay != nil && relay.progress != nil {
		params.SetProgressToken(id)
	}
	resp, err := p.post(ctx, st, cs, wire.Request{ID: id, Method: "tools/call", Params: params})
	if err != nil {
		return nil, p.withdrawn(ctx, st, cs, id, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, refusal(resp, cs.ID())
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	var res *mcp.CallToolResult
	switch mt {
	case "application/json":
		var raw []byte
		if raw, err = io.ReadAll(io.LimitReader(resp.Body, wire.MaxEventBytes+1)); err == nil {
			var msg wire.Incoming
			switch {
			case len(raw) > wire.MaxEventBytes:
				err = fmt.Errorf("tools/call: the upstream's answer exceeds %d bytes", wire.MaxEventBytes)
			case json.Unmarshal(raw, &msg) != nil:
				err = errors.New("tools/call: the upstream's answer is not a JSON-RPC message")
			default:
				if res, err = wire.CallResult(msg, id); res == nil && err == nil {
					err = errors.New("tools/call: the upstream's answer is not for this call")
				}
			}
		}
	case "text/event-stream":
		res, err = p.readEvents(ctx, st, cs, resp.Body, id, relay)
	default:
		return nil, fmt.Errorf("tools/call: upstream answered content type %q", mt)
	}
	if err != nil {
		return nil, p.withdrawn(ctx, st, cs, id, err)
	}
	return res, nil
}

// refusal is the error of an upstream's non-2xx answer to a call, as the
// SDK's client reads it: an overload status (429, 502, 503, 504) is the
// status; a 404 on a session is a lost session; a JSON-RPC error response
// (with a request id: the TypeScript SDK's "Session not found" has none)
// is the server's answer; anything else is the status.
func refusal(resp *http.Response, sessionID string) error {
	switch {
	case upstream.RetryableStatus(resp.StatusCode):
		return fmt.Errorf("tools/call: upstream answered %s", resp.Status)
	case resp.StatusCode == http.StatusNotFound && sessionID != "":
		return fmt.Errorf("tools/call: %w", mcp.ErrSessionMissing)
	}
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, refusalPeek))
	var msg wire.Incoming
	if json.Unmarshal(raw, &msg) == nil && msg.JSONRPC == "2.0" && msg.Error != nil {
		if _, ok := wire.IDKey(msg.ID); ok {
			return fmt.Errorf("tools/call: upstream answered %s: %w", resp.Status, msg.Error)
		}
	}
	return fmt.Errorf("tools/call: upstream answered %s", resp.Status)
}

// readEvents reads an event stream until the response to the call id,
// relaying the call's progress and answering the server's requests on the
// way.
func (p *Proxy) readEvents(ctx context.Context, st *connState, cs *mcp.ClientSession, body io.Reader, id string, relay *callRelay) (*mcp.CallToolResult, error) {
	events := wire.NewEventReader(bufio.NewReader(body))
	for {
		data, err := events.Next()
		if errors.Is(err, io.EOF) {
			return nil, errors.New("tools/call: the upstream's event stream ended before the result")
		}
		if err != nil {
			return nil, err
		}
		var msg wire.Incoming
		if err := json.Unmarshal(data, &msg); err != nil {
			return nil, fmt.Errorf("tools/call: unreadable message in the upstream's event stream: %w", err)
		}
		switch {
		case msg.Method == "":
			if res, err := wire.CallResult(msg, id); res != nil || err != nil {
				return res, err
			}
		case msg.ID == nil:
			relay.notification(st, id, msg)
		default:
			p.answer(ctx, st, cs, msg, relay)
		}
	}
}

// answer replies to a request the server sends during a call: ping is
// answered; sampling, elicitation and roots are asked of the agent whose
// call this is, when it offers them (relay.ask); anything else is a method
// the gateway's client does not offer.
func (p *Proxy) answer(ctx context.Context, st *connState, cs *mcp.ClientSession, msg wire.Incoming, relay *callRelay) {
	reply := wire.Response{JSONRPC: "2.0", ID: msg.ID}
	switch {
	case msg.Method == "ping":
		reply.Result = struct{}{}
	case relay != nil && relay.ask != nil:
		res, err := relay.ask(ctx, msg.Method, msg.Params)
		if err != nil {
			var je *jsonrpc.Error
			if !errors.As(err, &je) {
				je = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: st.scrubber.Load().Scrub(err.Error())}
			}
			reply.Error = je
		} else {
			reply.Result = res
		}
	default:
		reply.Error = &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "method " + msg.Method + " is not offered by this client"}
	}
	if resp, err := p.post(ctx, st, cs, reply); err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}

// withdrawn returns err, first telling the server, when ctx ended, that
// the call id is withdrawn (notifications/cancelled), as the SDK's client
// does for its own requests.
func (p *Proxy) withdrawn(ctx context.Context, st *connState, cs *mcp.ClientSession, id string, err error) error {
	if ctx.Err() == nil {
		return err
	}
	note := wire.Request{Method: "notifications/cancelled", Params: &mcp.CancelledParams{RequestID: id, Reason: ctx.Err().Error()}}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cancelTimeout)
		defer cancel()
		if resp, err := p.post(ctx, st, cs, note); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}()
	return err
}

// post sends one JSON-RPC message on cs's session.
func (p *Proxy) post(ctx context.Context, st *connState, cs *mcp.ClientSession, msg any) (*http.Response, error) {
	if m, ok := msg.(wire.Request); ok {
		m.JSONRPC = "2.0"
		msg = m
	}
	body, err := json.Marshal(msg)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, st.currentEndpoint(), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if id := cs.ID(); id != "" {
		req.Header.Set("Mcp-Session-Id", id)
	}
	if ir := cs.InitializeResult(); ir != nil {
		req.Header.Set("Mcp-Protocol-Version", ir.ProtocolVersion)
	}
	return st.httpClient.Do(req)
}
