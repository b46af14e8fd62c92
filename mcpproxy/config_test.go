package mcpproxy_test

import (
	"net/http"
	"testing"

	"github.com/idnhq/idn/mcpproxy"
)

// TestZeroConfigProtects checks that every protection a Config field
// governs is on at the field's zero value and off only at a negative one.
func TestZeroConfigProtects(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  mcpproxy.Config
		// failures upstream answers 500 to, then calls tool calls are
		// made; the last one gets wantStatus and wantCode.
		failures, calls int
		wantStatus      int
		wantCode        string
	}{
		{"zero BreakerFailures opens the breaker after 3 failures", mcpproxy.Config{}, 3, 4, http.StatusServiceUnavailable, "MCP_CIRCUIT_OPEN"},
		{"negative BreakerFailures disables the breaker", mcpproxy.Config{Options: mcpproxy.Options{BreakerFailures: -1}}, 4, 4, http.StatusBadGateway, "UPSTREAM_ERROR"},
		{"zero RateLimitPerMinute allows 120 calls a minute", mcpproxy.Config{}, 0, 121, http.StatusTooManyRequests, "MCP_TOOL_RATE_LIMITED"},
		{"negative RateLimitPerMinute disables the limit", mcpproxy.Config{Options: mcpproxy.Options{RateLimitPerMinute: -1}}, 0, 121, http.StatusOK, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, tt.cfg, mcpproxy.Connection{})
			wantStatus(t, e.do(http.MethodGet, "/mcp/mcp1/tools", "s", ""), http.StatusOK, "")
			for range tt.failures {
				e.up.fail("tools/call", http.StatusInternalServerError)
			}
			var r response
			for range tt.calls {
				r = e.call("s", "a.echo", `{"text":"x"}`)
			}
			wantStatus(t, r, tt.wantStatus, tt.wantCode)
		})
	}
}
