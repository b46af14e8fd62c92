package upstream

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"math"
	"strconv"
	"strings"
)

// A tool of the stateless revision may ask, in its input schema, for some
// arguments to travel as headers too (x-mcp-header), so that a router can
// read them; its server refuses a call whose headers are missing or
// differ from the body. The SDK's client writes them only for the tools
// it listed itself, so the relay's exchange writes them here, the same way.

// paramHeaderPrefix starts the header an argument travels in.
const paramHeaderPrefix = "Mcp-Param-"

// schemaProperty is what a schema says of one property, for headers.
type schemaProperty struct {
	Header     json.RawMessage           `json:"x-mcp-header"`
	Properties map[string]schemaProperty `json:"properties"`
}

// ParamHeaders returns the Mcp-Param-… headers of a call with arguments
// args to a tool whose input schema is schema: one for each annotated
// property the arguments hold as a string, boolean or safe integer.
func ParamHeaders(schema, args json.RawMessage) map[string]string {
	if !bytes.Contains(schema, []byte("x-mcp-header")) {
		return nil
	}
	var root schemaProperty
	var values map[string]json.RawMessage
	if json.Unmarshal(schema, &root) != nil || json.Unmarshal(args, &values) != nil {
		return nil
	}
	out := map[string]string{}
	collectHeaders(root.Properties, values, out)
	return out
}

func collectHeaders(props map[string]schemaProperty, values map[string]json.RawMessage, out map[string]string) {
	for name, prop := range props {
		raw, ok := values[name]
		if !ok || string(raw) == "null" {
			continue
		}
		var header string
		// The name is the server's to choose: one that is no header token
		// would fail the whole request, so it travels in the body alone.
		if json.Unmarshal(prop.Header, &header) == nil && isToken(header) {
			if v, ok := headerValue(raw); ok {
				out[paramHeaderPrefix+header] = v
			}
		}
		var inner map[string]json.RawMessage
		if len(prop.Properties) > 0 && json.Unmarshal(raw, &inner) == nil {
			collectHeaders(prop.Properties, inner, out)
		}
	}
}

// headerValue is raw as a header: a string, boolean or integer within
// JavaScript's safe range, base64-wrapped when it would not survive as
// plain ASCII or could be taken for a wrapped value.
func headerValue(raw json.RawMessage) (string, bool) {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return "", false
	}
	var s string
	switch v := v.(type) {
	case string:
		s = v
	case bool:
		s = strconv.FormatBool(v)
	case float64:
		const safe = 1<<53 - 1
		if v != math.Trunc(v) || math.Abs(v) > safe {
			return "", false
		}
		s = strconv.FormatInt(int64(v), 10)
	default:
		return "", false
	}
	if needsBase64(s) {
		return "=?base64?" + base64.StdEncoding.EncodeToString([]byte(s)) + "?=", true
	}
	return s, true
}

func needsBase64(s string) bool {
	if s == "" {
		return false
	}
	if strings.ContainsAny(s[:1], " \t") || strings.ContainsAny(s[len(s)-1:], " \t") {
		return true
	}
	for _, c := range s {
		if c < 0x20 || c > 0x7e {
			return true
		}
	}
	return strings.HasPrefix(s, "=?base64?") && strings.HasSuffix(s, "?=")
}

// isToken reports whether s is an HTTP token (RFC 9110 §5.6.2), and so
// can end a header name.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := range len(s) {
		c := s[i]
		if c >= 0x80 || c <= ' ' || c == 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}
