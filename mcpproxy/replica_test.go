package mcpproxy_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/idnhq/idn/mcpproxy"
)

// TestSessionOnAnotherReplica: a session's request sent to a replica
// other than the one that opened it gets 421 MCP_SESSION_MISDIRECTED,
// naming the right replica. A 404 would make the client silently open a
// new session.
func TestSessionOnAnotherReplica(t *testing.T) {
	t.Parallel()
	a := newEnv(t, mcpproxy.Config{Options: mcpproxy.Options{Replica: "gw-a"}}, mcpproxy.Connection{})
	b := newEnv(t, mcpproxy.Config{Options: mcpproxy.Options{Replica: "gw-b"}}, mcpproxy.Connection{})
	lone := newEnv(t, mcpproxy.Config{}, mcpproxy.Connection{})
	const list = `{"jsonrpc":"2.0","id":7,"method":"tools/list"}`
	sid := a.mustConnect(t, alice, nil).ID()
	if !strings.HasPrefix(sid, "gw-a.") {
		t.Fatalf("session id %q does not name its replica", sid)
	}
	if r := a.raw(t, alice, "POST", "mcp1", sid, list); r.status != http.StatusOK {
		t.Fatalf("on its own replica: %d %s", r.status, r.raw)
	}
	for _, method := range []string{"POST", "GET", "DELETE"} {
		r := b.raw(t, alice, method, "mcp1", sid, list)
		if r.status != http.StatusMisdirectedRequest || r.body["code"] != "MCP_SESSION_MISDIRECTED" || r.body["replica"] != "gw-a" {
			t.Errorf("%s on another replica: %d %s", method, r.status, r.raw)
		}
	}
	notFound := []struct{ name, sid string }{
		{"unknown id of this replica", "gw-b.ABCDEFGHIJKLMNOPQRSTUVWXYZ"},
		{"id without a replica", "ABCDEFGHIJKLMNOPQRSTUVWXYZ"},
		{"replica name that is not one", "GW A.ABCDEFGHIJKLMNOPQRSTUVWXYZ"},
	}
	for _, tt := range notFound {
		if r := b.raw(t, alice, "POST", "mcp1", tt.sid, list); r.status != http.StatusNotFound || r.body["code"] != "MCP_SESSION_NOT_FOUND" {
			t.Errorf("%s: %d %s", tt.name, r.status, r.raw)
		}
	}
	// A lone gateway names no replica, in its ids or its answers.
	if r := lone.raw(t, alice, "POST", "mcp1", sid, list); r.status != http.StatusNotFound {
		t.Errorf("fleet session id on a lone gateway: %d %s", r.status, r.raw)
	}
	if id := lone.mustConnect(t, alice, nil).ID(); strings.Contains(id, ".") {
		t.Errorf("lone gateway's session id %q names a replica", id)
	}
}

func TestReplicaNameChecked(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"A", "gw.a", "-gw", "gw-", "gw a", strings.Repeat("a", 64)} {
		if _, err := mcpproxy.New(mcpproxy.Config{Options: mcpproxy.Options{Replica: name}}); err == nil {
			t.Errorf("replica name %q accepted", name)
		}
	}
}
