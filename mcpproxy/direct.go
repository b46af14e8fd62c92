package mcpproxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"slices"
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
// is the SDK server's decoding and its hand-offs between goroutines, about
// half of what the endpoint used to add to a call. Everything else,
// and anything unusual about such a message, goes to the SDK.

// directCallParams are the params of a tools/call the direct path serves.
type directCallParams struct {
	Name      string
	Arguments json.RawMessage
}

// rpcResponse is a JSON-RPC response with exactly one of Result and Error.
type rpcResponse struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  any             `json:"result,omitempty"`
	Error   *jsonrpc.Error  `json:"error,omitempty"`
}

// direct answers body, a POST on session s, when it is a call the endpoint
// serves itself or the cancellation of one, and reports whether it did.
// A session whose agent offers sampling or elicitation has every call
// served by the SDK, whose answer is an event stream that can carry the
// server's requests; roots are asked for on the session's own stream.
func (e *endpoint) direct(w http.ResponseWriter, r *http.Request, s *agentSession, body []byte) bool {
	version := s.version.Load()
	if e.p.sdkAgent || s.ss.Load() == nil || version == nil || s.asks.Load() || !plainPOST(r, *version) {
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

// classify returns body's message when it is a single tools/call that
// asks for no progress (progress needs an event stream) or a
// notifications/cancelled, each with an id the direct path keeps. Members
// are matched exactly, as the SDK's decoder matches them (encoding/json
// would take "Method" for "method", and the last of repeated names);
// anything else is left to the SDK.
func classify(body []byte) (directMessage, bool) {
	msg, ok := members(body, "jsonrpc", "id", "method", "params")
	if !ok || string(msg["jsonrpc"]) != `"2.0"` {
		return directMessage{}, false
	}
	var method string
	if json.Unmarshal(msg["method"], &method) != nil {
		return directMessage{}, false
	}
	switch method {
	case "tools/call":
		key, ok := idKey(msg["id"])
		params, pok := members(msg["params"], "name", "arguments", "_meta")
		var name string
		if !ok || !pok || json.Unmarshal(params["name"], &name) != nil || name == "" || !plainMeta(params["_meta"]) {
			return directMessage{}, false
		}
		return directMessage{id: msg["id"], key: key, call: &directCallParams{Name: name, Arguments: params["arguments"]}}, true
	case "notifications/cancelled":
		params, pok := members(msg["params"], "requestId", "reason")
		if _, hasID := msg["id"]; hasID || !pok {
			return directMessage{}, false
		}
		key, ok := idKey(params["requestId"])
		return directMessage{key: key}, ok
	}
	return directMessage{}, false
}

// plainMeta reports whether a call's _meta (nil when absent) is an object
// that matters to neither path: no progress token, and none of the
// protocol's own io.modelcontextprotocol/ keys, which the SDK checks. The
// call itself ignores _meta either way.
func plainMeta(raw json.RawMessage) bool {
	if raw == nil {
		return true
	}
	var meta map[string]json.RawMessage
	if json.Unmarshal(raw, &meta) != nil || meta == nil {
		return false
	}
	for k := range meta {
		if k == "progressToken" || strings.HasPrefix(k, "io.modelcontextprotocol/") {
			return false
		}
	}
	return true
}

// members returns the members of the JSON object raw, when it is one whose
// names are all among names, each at most once.
func members(raw []byte, names ...string) (map[string]json.RawMessage, bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, false
	}
	out := make(map[string]json.RawMessage, len(names))
	for dec.More() {
		tok, err := dec.Token()
		name, _ := tok.(string)
		if _, seen := out[name]; err != nil || seen || !slices.Contains(names, name) {
			return nil, false
		}
		var v json.RawMessage
		if dec.Decode(&v) != nil {
			return nil, false
		}
		out[name] = v
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return nil, false
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, false
	}
	return out, true
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
	// What the server says or asks during the call goes to the session's
	// own stream: this answer has none.
	relay := &callRelay{
		notify: func(method string, params mcp.Params) { e.tell(context.WithoutCancel(ctx), s, method, params) },
		ask: func(ctx context.Context, method string, params json.RawMessage) (any, error) {
			return e.ask(ctx, s, method, params)
		},
	}
	res, err := e.call(ctx, s, s.conn.Load(), m.call.Name, m.call.Arguments, relay)
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
