package wire

import (
	"bytes"
	"encoding/json"
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
		params, pok := fields(msg["params"], "name", "arguments", "_meta", "task")
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
		params, pok := fields(msg["params"], "requestId", "reason")
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

// isObject reports whether raw, a value members returned, is an object.
func isObject(raw json.RawMessage) bool {
	return len(raw) > 0 && raw[0] == '{'
}

// members returns the members of the JSON object raw, when it is one whose
// names are all among names, each at most once. Names match exactly, as
// the SDK's decoder matches them. The values are raw's own bytes, so
// those of their members are read with fields, which trusts them valid.
func members(raw []byte, names ...string) (map[string]json.RawMessage, bool) {
	if !json.Valid(raw) {
		return nil, false
	}
	return fields(raw, names...)
}

// fields is members of a raw known to be valid JSON: it only finds where
// its parts end. No names allows any.
func fields(raw []byte, names ...string) (map[string]json.RawMessage, bool) {
	s := scan{b: raw}
	if !s.next('{') {
		return nil, false
	}
	out := make(map[string]json.RawMessage, max(len(names), 4))
	if s.next('}') {
		return out, s.end()
	}
	for {
		name, ok := s.name()
		if _, seen := out[name]; !ok || seen || len(names) > 0 && !slices.Contains(names, name) || !s.next(':') {
			return nil, false
		}
		out[name] = s.value()
		if s.next('}') {
			return out, s.end()
		}
		if !s.next(',') {
			return nil, false
		}
	}
}

// Fields returns the members of raw, a JSON object the caller knows to be
// valid (its own encoding), by name; false when raw is no object.
func Fields(raw []byte) (map[string]json.RawMessage, bool) { return fields(raw) }

// Envelope is what the endpoint reads of a POST's body, once, before it
// picks a path: the message's method, the target its params name, and
// the stateless revision's _meta. Names match exactly and at most once,
// as the SDK reads them.
type Envelope struct {
	// One is set when the body is a single JSON object with no repeated
	// member name; the other fields are then read from it.
	One     bool
	Method  string
	Name    string          // params.name
	URI     string          // params.uri
	Version string          // params._meta's io.modelcontextprotocol/protocolVersion
	Caps    json.RawMessage // params._meta's io.modelcontextprotocol/clientCapabilities
}

// Peek reads body's envelope. A member of another type than the one
// read is read as absent.
func Peek(body []byte) Envelope {
	msg, ok := members(body)
	if !ok {
		return Envelope{}
	}
	e := Envelope{One: true, Method: text(msg["method"])}
	params, _ := fields(msg["params"])
	e.Name, e.URI = text(params["name"]), text(params["uri"])
	meta, _ := fields(params["_meta"])
	e.Version = text(meta["io.modelcontextprotocol/protocolVersion"])
	e.Caps = meta["io.modelcontextprotocol/clientCapabilities"]
	return e
}

// text is raw as a string; empty when it is none.
func text(raw json.RawMessage) string {
	var s string
	if len(raw) > 0 && raw[0] == '"' {
		_ = json.Unmarshal(raw, &s)
	}
	return s
}

// scan walks valid JSON.
type scan struct {
	b []byte
	i int
}

// next consumes c, after any whitespace, when it comes next.
func (s *scan) next(c byte) bool {
	s.space()
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// end reports whether only whitespace is left.
func (s *scan) end() bool {
	s.space()
	return s.i == len(s.b)
}

func (s *scan) space() {
	for s.i < len(s.b) && (s.b[s.i] == ' ' || s.b[s.i] == '\t' || s.b[s.i] == '\n' || s.b[s.i] == '\r') {
		s.i++
	}
}

// name consumes a member's name and returns it unquoted.
func (s *scan) name() (string, bool) {
	s.space()
	if s.i == len(s.b) || s.b[s.i] != '"' {
		return "", false
	}
	quoted := s.b[s.i:s.str()]
	if !bytes.Contains(quoted, []byte{'\\'}) {
		return string(quoted[1 : len(quoted)-1]), true
	}
	var name string
	err := json.Unmarshal(quoted, &name)
	return name, err == nil
}

// str consumes the string that starts at s.i and returns where it ended.
func (s *scan) str() int {
	for s.i++; s.i < len(s.b); s.i++ {
		switch s.b[s.i] {
		case '\\':
			s.i++
		case '"':
			s.i++
			return s.i
		}
	}
	return s.i
}

// value consumes a value and returns its bytes.
func (s *scan) value() json.RawMessage {
	s.space()
	start := s.i
	if s.i == len(s.b) {
		return nil
	}
	switch s.b[s.i] {
	case '"':
		s.str()
	case '{', '[':
		for depth := 0; s.i < len(s.b); {
			switch s.b[s.i] {
			case '"':
				s.str()
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
			}
			s.i++
			if depth == 0 {
				break
			}
		}
	default: // a number, true, false or null
		for s.i < len(s.b) && !strings.ContainsRune(",}] \t\n\r", rune(s.b[s.i])) {
			s.i++
		}
	}
	return s.b[start:s.i]
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
