package mcpsettings_test

import (
	"encoding/json"
	"fmt"

	"github.com/idnhq/idn/mcpproxy/mcpsettings"
)

// A connection's MCP settings as a store keeps them (the mcp_* members of
// the connection object), read back, completed and turned into the policy
// a Connection carries.
func ExampleDecode() {
	stored := map[string]json.RawMessage{
		"mcp_endpoint":       json.RawMessage(`"/mcp"`),
		"mcp_tool_allowlist": json.RawMessage(`["docs.*"]`),
		"mcp_tool_denylist":  json.RawMessage(`["docs.delete"]`),
	}
	s, _, err := mcpsettings.Decode(stored)
	if err != nil {
		fmt.Println(err)
		return
	}
	s.Normalize()
	policy := s.Policy()
	d := policy.Explain("agent", "docs.delete", []string{"docs.read", "docs.delete"})
	fmt.Println(s.Check(), s.Transport, d.Allowed, d.Source)
	_, _, err = mcpsettings.Decode(map[string]json.RawMessage{"mcp_max_tools": json.RawMessage(`"many"`)})
	fmt.Println(err)
	// Output:
	// <nil> streamable_http false connection_denylist
	// mcpproxy: mcp_max_tools has the wrong JSON type
}
