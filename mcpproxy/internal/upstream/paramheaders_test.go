package upstream

import (
	"encoding/json"
	"strings"
	"testing"
)

// A server names the headers its tools' arguments travel in; whatever its
// schema and the agent's arguments, every header the exchange writes is
// one an HTTP request can carry: a token name and a printable value.
func FuzzParamHeaders(f *testing.F) {
	f.Add(`{"properties":{"region":{"type":"string","x-mcp-header":"Region"}}}`, `{"region":"eu-west é"}`)
	f.Add(`{"properties":{"a":{"x-mcp-header":"A","properties":{"b":{"x-mcp-header":"B"}}}}}`, `{"a":{"b":true}}`)
	f.Add(`{"properties":{"n":{"x-mcp-header":"N"}}}`, `{"n":9007199254740993}`)
	f.Add(`{"properties":{"x":{"x-mcp-header":"X\r\nInjected: 1"}}}`, `{"x":"v"}`)
	f.Add(`{"properties":{"x":{"x-mcp-header":"X"}}}`, `{"x":" padded\n"}`)
	f.Fuzz(func(t *testing.T, schema, args string) {
		for name, value := range ParamHeaders(json.RawMessage(schema), json.RawMessage(args)) {
			if !strings.HasPrefix(name, paramHeaderPrefix) || !isToken(name) {
				t.Fatalf("header name %q", name)
			}
			for _, c := range []byte(value) {
				if c < 0x20 || c > 0x7e {
					t.Fatalf("header %s: value %q is not printable ASCII", name, value)
				}
			}
		}
	})
}

// A header name that is no token leaves the argument in the body alone,
// instead of failing the call.
func TestParamHeadersSkipNamesThatAreNoToken(t *testing.T) {
	t.Parallel()
	got := ParamHeaders(json.RawMessage(`{"properties":{"x":{"x-mcp-header":"X\r\nInjected: 1"},"y":{"x-mcp-header":"Y"}}}`), json.RawMessage(`{"x":"a","y":"b"}`))
	if len(got) != 1 || got["Mcp-Param-Y"] != "b" {
		t.Fatalf("ParamHeaders = %v, want Mcp-Param-Y alone", got)
	}
}
