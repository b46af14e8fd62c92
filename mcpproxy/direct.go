package mcpproxy

import (
	"context"
	"encoding/json"
	"errors"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The endpoint answers its most frequent message itself: a single
// tools/call that asks for no progress, on an initialized session. The
// transport lets a server answer a POST with one application/json response
// instead of an event stream, and such a call has nothing to stream. The
// checks and the result are the SDK path's (endpoint.call); what is saved
// is the SDK server's decoding and its hand-offs between goroutines, which
// cost more than the rest of the gateway's work on a call. Everything else,
// and anything unusual about such a message, goes to the SDK.

// rpcMessage is the part of a JSON-RPC message the direct path reads.
// Params stays raw until the method is known.
type rpcMessage struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`
}

type directCallParams struct {
	Name      string                     `json:"name"`
	Arguments json.RawMessage            `json:"arguments"`
	Meta      map[string]json.RawMessage `json:"_meta"`
}

type cancelledParams struct {
	RequestID json.RawMessage `json:"requestId"`
}

// rpcResponse is a JSON-RPC response with exactly one of Result and Error.
type rpcResponse struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  mcp.Result      `json:"result,omitempty"`
	Error   *jsonrpc.Error  `json:"error,omitempty"`
}

// direct answers body, a POST on session s, when it is a call the endpoint
// serves itself or the cancellation of one, and reports whether it did.
func (e *endpoint) direct(w http.ResponseWriter, r *http.Request, s *agentSession, body []byte) bool {
	version := s.version.Load()
	if s.ss.Load() == nil || version == nil || !plainPOST(r, *version) {
		return false
	}
	m, ok := classify(body)
	switch {
	case !ok:
		return false
	case m.call != nil:
		e.directCall(w, r, s, m)
		return true
	case s.cancel(m.key):
		w.WriteHeader(http.StatusAccepted)
		return true
	}
	return false
}

// directMessage is a message the direct path may serve: a tools/call
// (call set) or a notifications/cancelled.
type directMessage struct {
	id   json.RawMessage // the call's id as sent
	key  string          // the call's or the cancelled call's id, canonical
	call *directCallParams
}

// classify returns body's message when it is a single tools/call without
// _meta (progress needs an event stream) or a notifications/cancelled,
// each with an id the direct path keeps.
func classify(body []byte) (directMessage, bool) {
	var msg rpcMessage
	if json.Unmarshal(body, &msg) != nil || msg.JSONRPC != "2.0" {
		return directMessage{}, false
	}
	switch msg.Method {
	case "tools/call":
		var params directCallParams
		key, ok := idKey(msg.ID)
		if !ok || json.Unmarshal(msg.Params, &params) != nil || params.Name == "" || len(params.Meta) > 0 {
			return directMessage{}, false
		}
		return directMessage{id: msg.ID, key: key, call: &params}, true
	case "notifications/cancelled":
		var params cancelledParams
		if msg.ID != nil || json.Unmarshal(msg.Params, &params) != nil {
			return directMessage{}, false
		}
		key, ok := idKey(params.RequestID)
		return directMessage{key: key}, ok
	}
	return directMessage{}, false
}

// directCall answers one tools/call as application/json. The call ends
// when the client cancels it or goes away.
func (e *endpoint) directCall(w http.ResponseWriter, r *http.Request, s *agentSession, m directMessage) {
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	id, key := m.id, m.key
	if !s.track(key, cancel) {
		writeRPC(w, http.StatusBadRequest, rpcResponse{ID: id, Error: &jsonrpc.Error{
			Code: jsonrpc.CodeInvalidRequest, Message: "mcpproxy: request id " + key + " is already in flight on this session",
		}})
		return
	}
	defer s.untrack(key)
	res, err := e.call(ctx, s, s.conn.Load(), m.call.Name, m.call.Arguments, nil)
	if err != nil {
		var je *jsonrpc.Error
		if !errors.As(err, &je) {
			je = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}
		}
		writeRPC(w, http.StatusOK, rpcResponse{ID: id, Error: je})
		return
	}
	writeRPC(w, http.StatusOK, rpcResponse{ID: id, Result: res})
}

func writeRPC(w http.ResponseWriter, status int, res rpcResponse) {
	res.JSONRPC = "2.0"
	raw, err := json.Marshal(res)
	if err != nil {
		status = http.StatusOK
		raw, _ = json.Marshal(rpcResponse{JSONRPC: "2.0", ID: res.ID, Error: &jsonrpc.Error{
			Code: jsonrpc.CodeInternalError, Message: "mcpproxy: the result could not be encoded",
		}})
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(raw)))
	w.WriteHeader(status)
	_, _ = w.Write(raw)
}

// plainPOST reports whether r carries nothing the SDK would refuse or treat
// specially: a JSON body, an Accept the transport requires (JSON and event
// streams), and no protocol version header other than the session's.
func plainPOST(r *http.Request, version string) bool {
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return false
	}
	if v := r.Header.Get("Mcp-Protocol-Version"); v != "" && v != version {
		return false
	}
	if r.Header.Get("Last-Event-ID") != "" {
		return false
	}
	var jsonOK, streamOK bool
	for _, v := range r.Header.Values("Accept") {
		for part := range strings.SplitSeq(v, ",") {
			mt, _, _ := strings.Cut(part, ";")
			switch strings.ToLower(strings.TrimSpace(mt)) {
			case "application/json", "application/*":
				jsonOK = true
			case "text/event-stream", "text/*":
				streamOK = true
			case "*/*":
				jsonOK, streamOK = true, true
			}
		}
	}
	return jsonOK && streamOK
}

// idKey returns the canonical form of a request id that the direct path
// keeps, a string or an integer, so that a cancellation finds its call.
func idKey(id json.RawMessage) (string, bool) {
	if len(id) > 0 && id[0] == '"' {
		var s string
		if json.Unmarshal(id, &s) != nil {
			return "", false
		}
		return strconv.Quote(s), true
	}
	n, err := strconv.ParseInt(string(id), 10, 64)
	if err != nil {
		return "", false
	}
	return strconv.FormatInt(n, 10), true
}
