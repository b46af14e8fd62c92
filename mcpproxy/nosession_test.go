package mcpproxy_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/idnhq/idn/mcpproxy"
)

// TestEndpointWithoutASession: every request of the MCP endpoint but an
// initialize needs the session the initialize set; one without it is
// answered in the JSON error envelope, as every other refusal is, and
// opens nothing. A client probing with server/discover falls back to
// initialize on it.
func TestEndpointWithoutASession(t *testing.T) {
	t.Parallel()
	e := newEnv(t, mcpproxy.Config{}, mcpproxy.Connection{})
	for _, tt := range []struct{ name, method, body string }{
		{"event stream", "GET", ""},
		{"end of a session", "DELETE", ""},
		{"tools/list", "POST", `{"jsonrpc":"2.0","id":7,"method":"tools/list"}`},
		{"server/discover probe", "POST", `{"jsonrpc":"2.0","id":1,"method":"server/discover"}`},
		{"notification", "POST", `{"jsonrpc":"2.0","method":"notifications/initialized"}`},
	} {
		r := e.raw(t, alice, tt.method, "mcp1", "", tt.body)
		if r.status != http.StatusBadRequest || r.header.Get("Content-Type") != "application/json" || r.body["code"] != "VALIDATION_ERROR" {
			t.Errorf("%s without a session: %d %s %s", tt.name, r.status, r.header.Get("Content-Type"), r.raw)
		}
	}
	if n := e.up.count("initialize"); n != 0 {
		t.Errorf("the refusals opened %d upstream sessions", n)
	}
	cs := e.mustConnect(t, alice, nil)
	if _, err := cs.ListTools(context.Background(), nil); err != nil {
		t.Errorf("a session opened after the refusals: %v", err)
	}
}
