package wire

import (
	"encoding/json"
	"testing"

	"github.com/idnhq/idn/apierror"
	"github.com/idnhq/idn/errcode"
)

// A held tool call's JSON-RPC error names its action in data, as the REST
// answer does, and nothing else of the envelope's fields.
func TestRPCErrorCarriesTheAction(t *testing.T) {
	ae := apierror.Coded(errcode.AuthActionApprovalRequired, "").With("action_id", "act_x").With("expires_at", "2026-12-02T03:00:00Z").
		With("details", "not for data")
	je := RPCError(ae, "req_1")
	var data map[string]any
	if err := json.Unmarshal(je.Data, &data); err != nil {
		t.Fatal(err)
	}
	if data["code"] != "AUTH_ACTION_APPROVAL_REQUIRED" || data["action_id"] != "act_x" || data["expires_at"] != "2026-12-02T03:00:00Z" || data["details"] != nil {
		t.Fatalf("data = %v", data)
	}
}
