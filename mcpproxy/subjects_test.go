package mcpproxy_test

import (
	"fmt"
	"testing"

	"github.com/idnhq/idn/mcpevent"
	"github.com/idnhq/idn/mcpproxy"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A connection whose credential is per subject gives each subject its own
// upstream session on the REST routes (a server may bind a session to the
// user whose token opened it); others share one. The sessions kept are
// bounded: a flood of subjects closes the least recently used.
func TestPerSubjectUpstreamSessions(t *testing.T) {
	t.Parallel()
	up := newSessionUpstream(t)
	for _, perSubject := range []bool{false, true} {
		t.Run(fmt.Sprint("per subject ", perSubject), func(t *testing.T) {
			conn := &mcpproxy.Connection{ID: "mcp1", BaseURL: up.srv.URL, PerSubject: perSubject}
			p, err := mcpproxy.New(mcpproxy.Config{Connections: oneConnection{*conn},
				Options: mcpproxy.Options{RateLimitPerMinute: 10 * mcpproxy.SubjectSessions}})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = p.Close() })
			session := func(subject string) string {
				t.Helper()
				res, err := p.Call(t.Context(), conn, mcpevent.Caller{Namespace: "ns", Subject: subject}, "whoami", nil, mcpproxy.RefreshAuto)
				if err != nil {
					t.Fatal(err)
				}
				return res.Content[0].(*mcp.TextContent).Text
			}
			alice, bob := session("alice"), session("bob")
			if again := session("alice"); again != alice {
				t.Fatalf("alice's second call used session %s, her first %s", again, alice)
			}
			if (alice != bob) != perSubject {
				t.Fatalf("alice's session %s, bob's %s", alice, bob)
			}
			if !perSubject {
				return
			}
			// bob is now the least recently used: the flood closes his.
			for i := range mcpproxy.SubjectSessions - 1 {
				session(fmt.Sprint("flood-", i))
			}
			session("alice")
			session("one-too-many")
			up.awaitClosed(t, bob)
			if again := session("alice"); again != alice {
				t.Fatalf("the flood took alice's session: %s, was %s", again, alice)
			}
		})
	}
}
