package gateway

import (
	"context"
	"strings"
	"testing"

	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/errcode"
	"github.com/idnhq/idn/kit/textcap"
	"github.com/idnhq/idn/mcpevent"
)

// Attack: an approved agent calls tools with 2 MB names while the
// control plane is away. Each queued activity record keeps at most
// textcap.Name bytes of the name, so the report queue's 10,000 records
// cannot hold gigabytes.
func TestQueuedActivityKeepsNoLongToolName(t *testing.T) {
	t.Parallel()
	vault := mcpVault(t)
	a := mcpActivity(context.Background(), mcpevent.Decision{ConnectionID: "m", Method: "tools/call", Tool: strings.Repeat("t", 2<<20), Outcome: "not_found"}, vault)
	if len(a.Tool) != textcap.Name {
		t.Errorf("a queued record keeps %d bytes of the tool name", len(a.Tool))
	}
}

// An MCP tool call on an oauth2_authorization_code connection names the
// account that served it, by subject: the caller's own with
// oauth_per_subject, else the connection's one account (""). A refusal
// for an account whose refresh token the provider refused says so.
func TestMCPActivityNamesTheAccount(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	vault := mcpVault(t)
	for _, c := range []*credvault.Connection{
		{ID: "one", Service: "one", Protocol: credvault.ProtocolMCP, BaseURL: "https://mcp.example.com", AuthMode: credvault.AuthOAuth2AuthorizationCode},
		{ID: "each", Service: "each", Protocol: credvault.ProtocolMCP, BaseURL: "https://mcp.example.com", AuthMode: credvault.AuthOAuth2AuthorizationCode, OAuthPerSubject: true},
	} {
		if _, err := vault.Create(ctx, c, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := vault.ConnectAccount(ctx, "each", "alice", "refresh-of-alice"); err != nil {
		t.Fatal(err)
	}
	if err := vault.MarkNeedsReconnecting(ctx, "each", "alice", "refresh-of-alice"); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, conn, subject, code string
		account                   string
		reconnect                 bool
	}{
		{name: "one account serves every subject", conn: "one", subject: "alice", account: ""},
		{name: "each subject its own account", conn: "each", subject: "bob", account: "bob"},
		{name: "refused refresh token", conn: "each", subject: "alice", code: errcode.UpstreamAuthRequired.String(), account: "alice", reconnect: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a := mcpActivity(ctx, mcpevent.Decision{ConnectionID: tt.conn, Caller: mcpevent.Caller{Subject: tt.subject}, Method: "tools/call", Tool: "search", Outcome: "success", Code: tt.code}, vault)
			if !a.OAuthAccount || a.Account != tt.account || a.AccountNeedsReconnecting != tt.reconnect {
				t.Errorf("account %v %q, needs reconnecting %v; want %q, %v", a.OAuthAccount, a.Account, a.AccountNeedsReconnecting, tt.account, tt.reconnect)
			}
		})
	}
}
