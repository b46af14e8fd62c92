package gateway

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/idnhq/idn/approval"
	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/errcode"
	"github.com/idnhq/idn/mcpevent"
)

// filedDesk is a control plane that files every request and never
// decides.
type filedDesk struct{ filed []approval.Request }

func (d *filedDesk) File(_ context.Context, r approval.Request) error {
	d.filed = append(d.filed, r)
	return nil
}

func (d *filedDesk) Status(context.Context, string) (approval.Status, error) {
	return approval.Status{State: "pending"}, nil
}

// An MCP connection's approval_subjects hold alice's payments on top of
// the connection's approval_tools, however her subject is spelt; bob's
// payments pass, and an unsigned caller is refused by every subject's
// rules.
func TestMCPSubjectApprovalTools(t *testing.T) {
	t.Parallel()
	v := mcpVault(t)
	ctx := context.Background()
	if _, err := v.Create(ctx, &credvault.Connection{ID: "m", Protocol: credvault.ProtocolMCP, BaseURL: "https://mcp.example",
		ApprovalTools:    []string{"delete_*"},
		ApprovalSubjects: map[string]approval.Rules{"alice": {Tools: []string{"payments.*"}}}}, nil); err != nil {
		t.Fatal(err)
	}
	desk := &filedDesk{}
	gate, err := approval.New(approval.Config{Gateway: "ed25519:gw", Desk: desk})
	if err != nil {
		t.Fatal(err)
	}
	mc, err := (&mcpConnections{vault: v, approvals: gate}).MCPConnection(ctx, "m")
	if err != nil {
		t.Fatal(err)
	}
	rows := []struct {
		name, subject, key, tool string
		want                     errcode.Code // 0: passes
	}{
		{"alice's payment", "alice", "ed25519:a", "payments.send", errcode.AuthActionApprovalRequired},
		{"attack: alice in upper case", "ALICE", "ed25519:a", "payments.send", errcode.AuthActionApprovalRequired},
		{"attack: alice with a space", "alice ", "ed25519:a", "payments.send", errcode.AuthActionApprovalRequired},
		{"bob's payment", "bob", "ed25519:a", "payments.send", 0},
		{"the connection's rule holds bob", "bob", "ed25519:a", "delete_repo", errcode.AuthActionApprovalRequired},
		{"alice's read", "alice", "ed25519:a", "read", 0},
		{"attack: unsigned caller", "", "", "payments.send", errcode.AuthActionSubmitFailed},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			err := mc.Hold(ctx, mcpevent.Caller{Namespace: "ns", Subject: row.subject, Key: row.key}, row.tool, json.RawMessage(`{"amount":1}`))
			code, _ := errcode.Of(err)
			if row.want == 0 && err != nil || row.want != 0 && code != row.want {
				t.Fatalf("Hold = %v, want %v", err, row.want)
			}
		})
	}
}
