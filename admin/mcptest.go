package admin

import "github.com/idnhq/idn/credvault"

// MCPHandshake is what the test of an mcp connection learned (see
// Config.TestMCP), answered as the test result's mcp member.
type MCPHandshake struct {
	// ServerName, ServerVersion and ProtocolVersion are from the server's
	// initialize answer; empty when initialize failed.
	ServerName      string `json:"server_name"`
	ServerVersion   string `json:"server_version"`
	ProtocolVersion string `json:"protocol_version"`
	// Tools is the number of tools the server lists.
	Tools int `json:"tools"`
	// Status is the HTTP status of the server's last answer, answered as
	// the test result's status; 0 when none came.
	Status int `json:"-"`
}

// mcpTestResult is the test route's answer for an mcp connection: the
// result every test gives, and what the handshake learned once
// initialize succeeded.
type mcpTestResult struct {
	credvault.TestResult
	MCP *MCPHandshake `json:"mcp,omitempty"`
}
