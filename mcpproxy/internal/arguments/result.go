package arguments

import (
	"strings"

	"github.com/idnhq/idn/errcode"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ErrorMetaKey names the _meta entry of a tool result the gateway made
// itself (invalid arguments), with its stable code and details.
const ErrorMetaKey = "idn/error"

// ToolResult is the MCP endpoint's answer to a call of tool whose
// arguments failed: as the go-sdk's own servers answer, a tool error the
// model can read and correct rather than a protocol error.
func ToolResult(tool string, failures []Failure) *mcp.CallToolResult {
	var b strings.Builder
	b.WriteString("invalid arguments for tool " + tool)
	for _, f := range failures {
		path := f.Path
		if path == "" {
			path = "(arguments)"
		}
		b.WriteString("\n" + path + ": " + f.Message)
	}
	return &mcp.CallToolResult{
		Meta:    mcp.Meta{ErrorMetaKey: map[string]any{"code": errcode.MCPToolArgumentsInvalid.String(), "details": failures}},
		Content: []mcp.Content{&mcp.TextContent{Text: b.String()}},
		IsError: true,
	}
}
