package upstream_test

import (
	"testing"

	"github.com/idnhq/idn/mcpproxy/internal/upstream"
)

func TestResolveEndpoint(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, base, endpoint, want string
	}{
		{"path joined to base path", "https://h.example/v1/", "/mcp", "https://h.example/v1/mcp"},
		{"relative path", "https://h.example/v1", "mcp", "https://h.example/v1/mcp"},
		{"empty endpoint is base", "https://h.example/mcp", "", "https://h.example/mcp"},
		{"full url wins", "https://h.example/v1", "http://other.example:8080/mcp", "http://other.example:8080/mcp"},
		{"queries merged", "https://h.example/?a=1", "/mcp?b=2", "https://h.example/mcp?a=1&b=2"},
		{"fragment dropped", "https://h.example", "/mcp#frag", "https://h.example/mcp"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u, err := upstream.ResolveEndpoint(tt.base, tt.endpoint)
			if err != nil || u.String() != tt.want {
				t.Errorf("resolveEndpoint = %v, %v; want %s", u, err, tt.want)
			}
		})
	}
	for _, bad := range [][2]string{{"file:///etc", ""}, {"https://h.example", "ftp://x/y"}, {"", "/mcp"}, {"https://h.example", "javascript:alert(1)"}} {
		if _, err := upstream.ResolveEndpoint(bad[0], bad[1]); err == nil {
			t.Errorf("resolveEndpoint(%q, %q) accepted", bad[0], bad[1])
		}
	}
}
