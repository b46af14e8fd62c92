package admin

import (
	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/mcpevent"
)

// mcpTestResult is the test route's answer for an mcp connection: the
// result every test gives, and what the handshake learned once
// initialize succeeded.
type mcpTestResult struct {
	credvault.TestResult
	MCP *mcpevent.Handshake `json:"mcp,omitempty"`
}
