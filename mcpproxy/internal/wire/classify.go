package wire

import (
	"bytes"
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"slices"
	"strings"
)

// CallParams are the params of a tools/call the direct path serves.
type CallParams struct {
	Name      string
	Arguments json.RawMessage
	// Task is the call's task augmentation (MCP 2025-11-25) as sent; nil
	// for a plain call.
	Task json.RawMessage
	// Meta is the _meta of a task-augmented call as sent (its progress
	// token among it); nil for a plain call, whose _meta is plain.
	Meta json.RawMessage
}

// Message is a message the direct path may serve: a tools/call
// (Call set) or a notifications/cancelled.
type Message struct {
	ID   json.RawMessage // the call's id as sent
	Key  string          // the call's or the cancelled call's id, canonical
	Call *CallParams
}

// Classify returns body's message when it is a single tools/call that
// asks for no progress (progress needs an event stream), a task-augmented
// tools/call (answered at once with its task, whatever its _meta), or a
// notifications/cancelled, each with an id the direct path keeps. Members
// are matched exactly, as the SDK's decoder matches them (encoding/json
// would take "Method" for "method", and the last of repeated names);
// anything else is left to the SDK.
func Classify(body []byte) (Message, bool) {
	msg, ok := members(body, "jsonrpc", "id", "method", "params")
	if !ok || string(msg["jsonrpc"]) != `"2.0"` {
		return Message{}, false
	}
	var method string
	if json.Unmarshal(msg["method"], &method) != nil {
		return Message{}, false
	}
	switch method {
	case "tools/call":
		key, ok := IDKey(msg["id"])
		params, pok := members(msg["params"], "name", "arguments", "_meta", "task")
		var name string
		if !ok || !pok || json.Unmarshal(params["name"], &name) != nil || name == "" {
			return Message{}, false
		}
		task := params["task"]
		if task != nil && !isObject(task) || task == nil && !plainMeta(params["_meta"]) {
			return Message{}, false
		}
		call := &CallParams{Name: name, Arguments: params["arguments"], Task: task}
		if task != nil {
			call.Meta = params["_meta"]
		}
		return Message{ID: msg["id"], Key: key, Call: call}, true
	case "notifications/cancelled":
		params, pok := members(msg["params"], "requestId", "reason")
		if _, hasID := msg["id"]; hasID || !pok {
			return Message{}, false
		}
		key, ok := IDKey(params["requestId"])
		return Message{Key: key}, ok
	}
	return Message{}, false
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

// isObject reports whether raw is a JSON object.
func isObject(raw json.RawMessage) bool {
	var m map[string]json.RawMessage
	return json.Unmarshal(raw, &m) == nil && m != nil
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

// PlainPOST reports whether r carries nothing the SDK would refuse or treat
// specially: a JSON body, an Accept the transport requires (JSON and event
// streams), and no protocol version header other than the session's.
func PlainPOST(r *http.Request, version string) bool {
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
