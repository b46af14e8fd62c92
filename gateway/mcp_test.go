package gateway

import (
	"errors"
	"net/http/httptest"
	"testing"

	"github.com/idnhq/idn/errcode"
)

// A request that did not pass the proxy's pipeline is refused by the MCP
// engine's caller hook, with a code.
func TestMCPCallerRequiresPipeline(t *testing.T) {
	t.Parallel()
	_, err := mcpCaller(httptest.NewRequest("GET", "/mcp/x/tools", nil))
	var coded interface{ Code() errcode.Code }
	if !errors.As(err, &coded) || coded.Code() != errcode.AuthForbidden {
		t.Fatalf("mcpCaller accepted, or refused without AUTH_FORBIDDEN, a request that bypassed the pipeline: %v", err)
	}
}
