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

// maxEventBytes bounds one event of an upstream's event stream, as the
// SDK's client does by default.
const maxEventBytes = 16 << 20

// refusalPeek bounds how much of a refused call's answer is read for a
// JSON-RPC error.
const refusalPeek = 64 << 10

// cancelTimeout bounds the notifications/cancelled sent for a call the
// caller withdrew.
const cancelTimeout = 5 * time.Second

// rpcRequest is an outgoing JSON-RPC request or, without ID, notification.
type rpcRequest struct {
	JSONRPC string `json:"jsonrpc"`
	ID      any    `json:"id,omitempty"`
	Method  string `json:"method"`
	Params  any    `json:"params,omitempty"`
}

// rpcIncoming is any JSON-RPC message an upstream sends.
type rpcIncoming struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`
	Result  json.RawMessage `json:"result"`
	Error   *jsonrpc.Error  `json:"error"`
}

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
	resp, err := p.post(ctx, st, cs, rpcRequest{ID: id, Method: "tools/call", Params: params})
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
		if raw, err = io.ReadAll(io.LimitReader(resp.Body, maxEventBytes+1)); err == nil {
			var msg rpcIncoming
			switch {
			case len(raw) > maxEventBytes:
				err = fmt.Errorf("tools/call: the upstream's answer exceeds %d bytes", maxEventBytes)
			case json.Unmarshal(raw, &msg) != nil:
				err = errors.New("tools/call: the upstream's answer is not a JSON-RPC message")
			default:
				if res, err = callResult(msg, id); res == nil && err == nil {
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
	var msg rpcIncoming
	if json.Unmarshal(raw, &msg) == nil && msg.JSONRPC == "2.0" && msg.Error != nil {
		if _, ok := idKey(msg.ID); ok {
			return fmt.Errorf("tools/call: upstream answered %s: %w", resp.Status, msg.Error)
		}
	}
	return fmt.Errorf("tools/call: upstream answered %s", resp.Status)
}

// readEvents reads an event stream until the response to the call id,
// relaying the call's progress and answering the server's requests on the
// way.
func (p *Proxy) readEvents(ctx context.Context, st *connState, cs *mcp.ClientSession, body io.Reader, id string, relay *callRelay) (*mcp.CallToolResult, error) {
	events := &eventReader{r: bufio.NewReader(body)}
	for {
		data, err := events.next()
		if errors.Is(err, io.EOF) {
			return nil, errors.New("tools/call: the upstream's event stream ended before the result")
		}
		if err != nil {
			return nil, err
		}
		var msg rpcIncoming
		if err := json.Unmarshal(data, &msg); err != nil {
			return nil, fmt.Errorf("tools/call: unreadable message in the upstream's event stream: %w", err)
		}
		switch {
		case msg.Method == "":
			if res, err := callResult(msg, id); res != nil || err != nil {
				return res, err
			}
		case msg.ID == nil:
			relay.notification(st, id, msg)
		default:
			p.answer(ctx, st, cs, msg, relay)
		}
	}
}

// eventReader reads the data of server-sent events.
type eventReader struct {
	r    *bufio.Reader
	data []byte
}

// next returns the data of the next event that has any (its data lines
// joined by newlines), valid until the following call. Event names, ids,
// retry hints and comments say nothing here and are skipped.
func (e *eventReader) next() ([]byte, error) {
	e.data = e.data[:0]
	for {
		line, err := e.line()
		if err != nil {
			return nil, err
		}
		if len(line) == 0 {
			if len(e.data) > 0 {
				return e.data, nil
			}
			continue
		}
		if v, ok := bytes.CutPrefix(line, []byte("data:")); ok {
			if len(e.data) > 0 {
				e.data = append(e.data, '\n')
			}
			e.data = append(e.data, bytes.TrimPrefix(v, []byte(" "))...)
		}
	}
}

// line returns the next line without its line ending (LF or CRLF, as MCP
// servers write them), valid until the following read; an event's lines
// together may not exceed maxEventBytes.
func (e *eventReader) line() ([]byte, error) {
	var line []byte
	for {
		chunk, err := e.r.ReadSlice('\n')
		if len(e.data)+len(line)+len(chunk) > maxEventBytes {
			return nil, fmt.Errorf("tools/call: an event of the upstream's event stream exceeds %d bytes", maxEventBytes)
		}
		switch {
		case err == nil && line == nil:
			return bytes.TrimSuffix(chunk[:len(chunk)-1], []byte("\r")), nil
		case err == nil:
			line = append(line, chunk[:len(chunk)-1]...)
			return bytes.TrimSuffix(line, []byte("\r")), nil
		case errors.Is(err, bufio.ErrBufferFull):
			line = append(line, chunk...)
		default:
			return nil, err
		}
	}
}

// callResult returns the result or error of msg when it answers the call
// id, and nil, nil for a response to anything else.
func callResult(msg rpcIncoming, id string) (*mcp.CallToolResult, error) {
	if key, ok := idKey(msg.ID); !ok || key != strconv.Quote(id) {
		if (msg.ID == nil || string(msg.ID) == "null") && msg.Error != nil {
			// A server that cannot tell which request failed (a parse
			// error) answers with a null id.
			return nil, msg.Error
		}
		return nil, nil
	}
	if msg.Error != nil {
		return nil, msg.Error
	}
	var res mcp.CallToolResult
	if err := json.Unmarshal(msg.Result, &res); err != nil {
		return nil, fmt.Errorf("tools/call: unreadable result: %w", err)
	}
	return &res, nil
}

// answer replies to a request the server sends during a call: ping is
// answered; sampling, elicitation and roots are asked of the agent whose
// call this is, when it offers them (relay.ask); anything else is a method
// the gateway's client does not offer.
func (p *Proxy) answer(ctx context.Context, st *connState, cs *mcp.ClientSession, msg rpcIncoming, relay *callRelay) {
	reply := rpcResponse{JSONRPC: "2.0", ID: msg.ID}
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
	note := rpcRequest{Method: "notifications/cancelled", Params: &mcp.CancelledParams{RequestID: id, Reason: ctx.Err().Error()}}
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
	if m, ok := msg.(rpcRequest); ok {
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
