package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The stateless revision (MCP 2026-07-28) through idn mcp. A stdio client
// of that revision sends no initialize: each request carries its protocol
// version and client capabilities in _meta. Such a request is taken off
// stdin before the go-sdk server reads it, and sent to the gateway on a
// connection of the go-sdk's Streamable HTTP client transport of its own.
// The transport sets MCP-Protocol-Version, Mcp-Method and Mcp-Name from
// the message, which the identity's transport signs, and reads the answer,
// one JSON body or an event stream. Each message of the answer is written
// to stdout.
//
// These are carried as JSON-RPC messages, past the go-sdk's server and
// client, because their types would rewrite what must pass unchanged: an
// input_required result's inputRequests (an elicitation would gain a
// default mode), the client's inputResponses (keys reordered, numbers
// reformatted), and the client's own _meta, whose capabilities choose
// the gateway's lane.

// statelessRelay forwards the stdio client's requests of the stateless
// revision to the gateway, each on its own HTTP request.
type statelessRelay struct {
	ctx      context.Context // ends when the bridge does
	endpoint string
	sign     http.RoundTripper // signs each request
	out      io.Writer         // stdout, one whole message per Write
	retry    time.Duration     // how often a held call is sent again (zero: defaultRetry)
	wg       sync.WaitGroup

	mu       sync.Mutex
	inFlight map[jsonrpc.ID]context.CancelFunc
}

// metaVersionKey is the _meta key naming a request's protocol version.
const metaVersionKey = "io.modelcontextprotocol/protocolVersion"

// take reports whether line is the relay's to handle: a request of the
// stateless revision, or the cancellation of one in flight.
func (s *statelessRelay) take(line []byte) bool {
	cancel := bytes.Contains(line, []byte(`"notifications/cancelled"`))
	if !cancel && !bytes.Contains(line, []byte(metaVersionKey)) {
		return false
	}
	msg, err := jsonrpc.DecodeMessage(bytes.TrimSpace(line))
	req, ok := msg.(*jsonrpc.Request)
	if err != nil || !ok {
		return false
	}
	if req.Method == "notifications/cancelled" {
		return s.cancel(req.Params)
	}
	if !req.IsCall() || !statelessRequest(req.Params) {
		return false
	}
	ctx, cancelReq := context.WithCancel(s.ctx)
	s.mu.Lock()
	if s.inFlight == nil {
		s.inFlight = map[jsonrpc.ID]context.CancelFunc{}
	}
	s.inFlight[req.ID] = cancelReq
	s.mu.Unlock()
	s.wg.Go(func() {
		defer func() {
			s.mu.Lock()
			delete(s.inFlight, req.ID)
			s.mu.Unlock()
			cancelReq()
		}()
		s.forward(ctx, req)
	})
	return true
}

// statelessRequest reports whether params name a protocol version of the
// stateless revision in their _meta.
func statelessRequest(params json.RawMessage) bool {
	var p struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	var version string
	return json.Unmarshal(params, &p) == nil && json.Unmarshal(p.Meta[metaVersionKey], &version) == nil &&
		version >= statelessRevision
}

// statelessRevision is the first protocol version without sessions.
const statelessRevision = "2026-07-28"

// cancel withdraws the request in flight that params name: its HTTP
// request ends, which ends the gateway's work on it. It reports whether
// the request was the relay's.
func (s *statelessRelay) cancel(params json.RawMessage) bool {
	var p struct {
		RequestID any `json:"requestId"`
	}
	if json.Unmarshal(params, &p) != nil {
		return false
	}
	id, err := jsonrpc.MakeID(p.RequestID)
	if err != nil {
		return false
	}
	s.mu.Lock()
	cancel, ok := s.inFlight[id]
	s.mu.Unlock()
	if ok {
		cancel()
	}
	return ok
}

// forward sends req to the gateway and writes what it answers to stdout.
// A tools/call the gateway holds for the owner's passkey is sent again
// every retry, as for a session (callHeld), the client told once per
// action (a log message).
func (s *statelessRelay) forward(ctx context.Context, req *jsonrpc.Request) {
	every := s.retry
	if every <= 0 {
		every = defaultRetry
	}
	told := ""
	for {
		res := s.once(ctx, req)
		if res == nil {
			return
		}
		id, expires, held := heldAction(res.Error)
		if !held || !time.Now().Add(every).Before(expires) {
			s.write(res)
			return
		}
		if id != told {
			told = id
			//lint:ignore SA1019 desktop clients show log messages, deprecated in 2026-07-28 but still served over stdio
			params, _ := json.Marshal(&mcp.LoggingMessageParams{Level: "warning", Logger: "idn",
				Data: "idn: the gateway holds this call until the namespace owner approves it with a passkey (action " + id +
					", in the dashboard's Actions page) before " + expires.UTC().Format(time.RFC3339) + "; idn asks again every " + every.String() + "."})
			s.write(&jsonrpc.Request{Method: "notifications/message", Params: params})
		}
		t := time.NewTimer(every)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return
		}
	}
}

// once sends req to the gateway, writes to stdout what it says before
// its response, and returns the response; nil when the client withdrew
// req. A refusal of the gateway's own (its JSON envelope) is a JSON-RPC
// error saying why, its code in data.
func (s *statelessRelay) once(ctx context.Context, req *jsonrpc.Request) *jsonrpc.Response {
	why := &refusals{base: s.sign}
	// As for the session: a redirect is never followed.
	client := &http.Client{Transport: why, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	conn, err := (&mcp.StreamableClientTransport{Endpoint: s.endpoint, HTTPClient: client, DisableStandaloneSSE: true}).Connect(ctx)
	if err != nil {
		return s.fail(ctx, req.ID, why, err)
	}
	defer conn.Close()
	if err := conn.Write(ctx, req); err != nil {
		return s.fail(ctx, req.ID, why, err)
	}
	for {
		msg, err := conn.Read(ctx)
		if err != nil {
			return s.fail(ctx, req.ID, why, err)
		}
		if res, ok := msg.(*jsonrpc.Response); ok && res.ID == req.ID {
			return res
		}
		s.write(msg)
	}
}

// fail is the response to request id that err gives, nil when the
// client withdrew it.
func (s *statelessRelay) fail(ctx context.Context, id jsonrpc.ID, why *refusals, err error) *jsonrpc.Response {
	if ctx.Err() != nil {
		return nil // cancelled: the client expects no answer
	}
	var je *jsonrpc.Error
	if !errors.As(err, &je) {
		je = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "idn: gateway: " + err.Error()}
		if refusal := why.lastRefusal(); refusal != "" {
			je.Message = "idn: gateway: " + refusal
			je.Data, _ = json.Marshal(map[string]string{"code": why.lastErrcode().String()})
		}
	}
	return &jsonrpc.Response{ID: id, Error: je}
}

// write writes msg to stdout as one line.
func (s *statelessRelay) write(msg jsonrpc.Message) {
	data, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return
	}
	_, _ = s.out.Write(append(data, '\n'))
}
