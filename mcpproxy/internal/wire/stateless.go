package wire

import "encoding/json"

// Revision is the stateless protocol version the stateless fast path
// serves.
const Revision = "2026-07-28"

// ClassifyStateless returns body's message when it is a single tools/call
// of the stateless revision that the fast path serves: no progress token
// (progress needs an event stream), no retry of an earlier round
// (requestState), and a _meta holding the revision's own keys only: its
// protocol version, the client's capabilities as an object, and
// optionally the client's info. Anything else is left to the SDK, which
// checks it.
func ClassifyStateless(body []byte) (Message, bool) {
	msg, ok := members(body, "jsonrpc", "id", "method", "params")
	if !ok || string(msg["jsonrpc"]) != `"2.0"` || string(msg["method"]) != `"tools/call"` {
		return Message{}, false
	}
	key, ok := IDKey(msg["id"])
	params, pok := fields(msg["params"], "name", "arguments", "_meta")
	var name string
	if !ok || !pok || json.Unmarshal(params["name"], &name) != nil || name == "" {
		return Message{}, false
	}
	meta, ok := fields(params["_meta"], "io.modelcontextprotocol/protocolVersion", "io.modelcontextprotocol/clientCapabilities", "io.modelcontextprotocol/clientInfo")
	if !ok || string(meta["io.modelcontextprotocol/protocolVersion"]) != `"`+Revision+`"` || !isObject(meta["io.modelcontextprotocol/clientCapabilities"]) {
		return Message{}, false
	}
	if info, has := meta["io.modelcontextprotocol/clientInfo"]; has && !isObject(info) {
		return Message{}, false
	}
	return Message{ID: msg["id"], Key: key, Call: &CallParams{Name: name, Arguments: params["arguments"]}}, true
}
