package upstream

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
	"time"

	"github.com/idnhq/idn/mcpproxy/internal/wire"
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

// Session is the upstream session a call is exchanged on.
type Session struct {
	Client   *http.Client  // the connection's client (a Transport under it)
	Endpoint func() string // the MCP endpoint's current URL
	ID       string        // the Mcp-Session-Id; empty when the server gave none
	Protocol string        // the negotiated protocol version; empty before
	// Meta and Header go with each request of the stateless revision:
	// the _meta of StatelessMeta, and headers beyond Mcp-Method.
	Meta   mcp.Meta
	Header http.Header
}

// Handler receives what the server sends on a call's event stream.
type Handler interface {
	// Enter takes a place for a request of the server (package hold);
	// a request that gets none is dropped unanswered.
	Enter() (leave func(), ok bool)
	// Notify is told of a notification read from the stream of call id.
	Notify(id string, msg wire.Incoming)
	// Answer returns the reply to a request of the server.
	Answer(ctx context.Context, msg wire.Incoming) wire.Response
}

// refusalPeek bounds how much of a refused call's answer is read for a
// JSON-RPC error.
const refusalPeek = 64 << 10

// cancelTimeout bounds the notifications/cancelled sent for a call the
// caller withdrew.
const cancelTimeout = 5 * time.Second

// Request sends params as the request id of method on s and returns its
// result as the server wrote it. A JSON-RPC error answer is returned as a
// *jsonrpc.Error; a session the server no longer knows as an error
// wrapping mcp.ErrSessionMissing. h receives what the server sends during
// the request. When ctx ends first, the server is told the request is
// withdrawn, in a function handed to detach, which must run it.
func Request(ctx context.Context, s Session, id, method string, params any, h Handler, detach func(func())) (json.RawMessage, error) {
	// The POST ends with ctx until its answer is read; its stream's tail
	// is then read in the background (drain).
	postCtx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, func() { cancel(context.Cause(ctx)) })
	resp, err := post(postCtx, s, wire.Request{ID: id, Method: method, Params: params})
	if err != nil {
		stop()
		cancel(nil)
		return nil, withdrawn(ctx, s, id, err, detach)
	}
	streamed := false
	defer func() {
		if !streamed || !stop() {
			_ = resp.Body.Close()
			cancel(nil)
			return
		}
		detach(func() { drain(resp.Body, cancel) })
	}()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, refusal(resp, s.ID, method)
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	var res json.RawMessage
	switch mt {
	case "application/json":
		var raw []byte
		if raw, err = io.ReadAll(io.LimitReader(resp.Body, wire.MaxEventBytes+1)); err == nil {
			var msg wire.Incoming
			switch {
			case len(raw) > wire.MaxEventBytes:
				err = fmt.Errorf("%s: the upstream's answer exceeds %d bytes", method, wire.MaxEventBytes)
			case json.Unmarshal(raw, &msg) != nil:
				err = fmt.Errorf("%s: the upstream's answer is not a JSON-RPC message", method)
			default:
				if res, err = wire.Result(msg, id); res == nil && err == nil {
					err = fmt.Errorf("%s: the upstream's answer is not for this request", method)
				}
			}
		}
	case "text/event-stream":
		res, err = readEvents(ctx, s, resp.Body, id, method, h)
		streamed = err == nil
	default:
		return nil, fmt.Errorf("%s: upstream answered content type %q", method, mt)
	}
	if err != nil {
		return nil, withdrawn(ctx, s, id, err, detach)
	}
	return res, nil
}

const (
	// drainWait bounds the wait for the end of a call's event stream
	// after its result.
	drainWait = time.Second
	// drainBytes bounds what is read of it.
	drainBytes = 64 << 10
)

// drain reads the tail of an event stream whose result was read (the
// server ends it next), so that its connection serves the next request:
// a response closed unread takes its connection with it. A server that
// keeps the stream open or writes on has it closed after drainWait or
// drainBytes; cancel ends the request then.
func drain(body io.ReadCloser, cancel context.CancelCauseFunc) {
	timer := time.AfterFunc(drainWait, func() { cancel(errDrained) })
	defer timer.Stop()
	_, _ = io.Copy(io.Discard, io.LimitReader(body, drainBytes))
	_ = body.Close()
	cancel(nil)
}

var errDrained = errors.New("mcpproxy: the upstream's event stream went on after the result")

// refusal is the error of an upstream's non-2xx answer to a call, as the
// SDK's client reads it: an overload status (429, 502, 503, 504) is the
// status; a 404 on a session is a lost session; a JSON-RPC error response
// (with a request id: the TypeScript SDK's "Session not found" has none)
// is the server's answer; anything else is the status.
func refusal(resp *http.Response, sessionID, method string) error {
	switch {
	case RetryableStatus(resp.StatusCode):
		return fmt.Errorf("%s: upstream answered %s", method, resp.Status)
	case resp.StatusCode == http.StatusNotFound && sessionID != "":
		return fmt.Errorf("%s: %w", method, mcp.ErrSessionMissing)
	}
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, refusalPeek))
	var msg wire.Incoming
	if json.Unmarshal(raw, &msg) == nil && msg.JSONRPC == "2.0" && msg.Error != nil {
		if _, ok := wire.IDKey(msg.ID); ok {
			return fmt.Errorf("%s: upstream answered %s: %w", method, resp.Status, msg.Error)
		}
	}
	return fmt.Errorf("%s: upstream answered %s", method, resp.Status)
}

// readEvents reads an event stream until the response to the request id,
// relaying the notifications and answering the server's requests on the
// way (asks), which the server may withdraw meanwhile. A stream the server
// ends first is resumed (resumer).
func readEvents(ctx context.Context, s Session, body io.Reader, id, method string, h Handler) (json.RawMessage, error) {
	events := wire.NewEventReader(bufio.NewReader(body))
	var asks *asks // made at the server's first request: most calls have none
	defer func() {
		if asks != nil {
			asks.end()
		}
	}()
	resumes := &resumer{s: s, method: method}
	defer resumes.close()
	for {
		data, err := events.Next()
		if errors.Is(err, io.EOF) {
			if err := resumes.reopen(ctx, events); err != nil {
				return nil, err
			}
			continue
		}
		if err != nil {
			return nil, err
		}
		var msg wire.Incoming
		if err := json.Unmarshal(data, &msg); err != nil {
			return nil, fmt.Errorf("%s: unreadable message in the upstream's event stream: %w", method, err)
		}
		switch {
		case msg.Method == "":
			if res, err := wire.Result(msg, id); res != nil || err != nil {
				return res, err
			}
		case msg.Method == "notifications/cancelled":
			// The server's own requests are its to withdraw; the
			// notification is not relayed as it came (its id is not
			// the one the agent was asked with).
			if asks != nil {
				asks.withdraw(msg.Params)
			}
		case msg.ID == nil:
			h.Notify(id, msg)
		default:
			leave, ok := h.Enter()
			if !ok {
				continue
			}
			if asks == nil {
				asks = newAsks(ctx)
			}
			asks.answer(s, h, msg, leave)
		}
	}
}

// withdrawn returns err, first telling the server, when ctx ended, that
// the call id is withdrawn (notifications/cancelled), as the SDK's client
// does for its own requests.
func withdrawn(ctx context.Context, s Session, id string, err error, detach func(func())) error {
	if ctx.Err() == nil {
		return err
	}
	note := wire.Request{Method: "notifications/cancelled", Params: &mcp.CancelledParams{RequestID: id, Reason: ctx.Err().Error()}}
	detach(func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cancelTimeout)
		defer cancel()
		if resp, err := post(ctx, s, note); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	})
	return err
}

// Notify sends the notification method with params on s.
func Notify(ctx context.Context, s Session, method string, params any) error {
	resp, err := post(ctx, s, wire.Request{Method: method, Params: params})
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("%s: upstream answered %s", method, resp.Status)
	}
	return nil
}

// post sends one JSON-RPC message on s.
func post(ctx context.Context, s Session, msg any) (*http.Response, error) {
	if m, ok := msg.(wire.Request); ok {
		m.JSONRPC = "2.0"
		msg = m
	}
	// Answers the relay carries as JSON (an elicitation's) go as their
	// writer wrote them: no HTML-safe escapes.
	var body bytes.Buffer
	enc := json.NewEncoder(&body)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(msg); err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.Endpoint(), &body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if s.ID != "" {
		req.Header.Set("Mcp-Session-Id", s.ID)
	}
	if s.Protocol != "" {
		req.Header.Set("Mcp-Protocol-Version", s.Protocol)
	}
	if m, ok := msg.(wire.Request); ok && s.Protocol >= wire.Revision {
		// The stateless revision routes by headers, which the server
		// holds to the body.
		req.Header.Set("Mcp-Method", m.Method)
		if m.ID != nil {
			for k, v := range s.Header {
				req.Header[k] = v
			}
		}
	}
	return s.Client.Do(req)
}
