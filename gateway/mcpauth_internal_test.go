package gateway

import "testing"

// The connect flow's endpoint is the one the MCP engine reaches, so that
// the token's resource is the server the engine talks to.
func TestMCPEndpointAsTheEngineReachesIt(t *testing.T) {
	for _, tc := range []struct{ name, base, endpoint, want string }{
		{"base url alone", "https://mcp.example.com/mcp", "", "https://mcp.example.com/mcp"},
		{"a path joined to the base path", "https://api.example.com/v1/", "/mcp", "https://api.example.com/v1/mcp"},
		{"an absolute endpoint", "https://api.example.com", "https://mcp.example.com/x?y=1", "https://mcp.example.com/x?y=1"},
		{"queries of both", "https://api.example.com/v1?a=1", "mcp?b=2", "https://api.example.com/v1/mcp?a=1&b=2"},
		{"a query on the endpoint alone", "https://api.example.com/v1", "?b=2", "https://api.example.com/v1?b=2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := mcpEndpoint(tc.base, tc.endpoint)
			if err != nil || got != tc.want {
				t.Fatalf("mcpEndpoint(%q, %q) = %q, %v; want %q", tc.base, tc.endpoint, got, err, tc.want)
			}
		})
	}
}
