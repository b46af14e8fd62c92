// Package mirror decides what an agent session of the MCP endpoint sees of
// its own upstream session: the capabilities it advertises, the
// notifications it is passed, which completions may pass, and the
// answer to what the connection does not expose.
package mirror

//lint:file-ignore SA1019 MCP clients of protocol versions up to 2025-11-25 use logging, which the SDK deprecates for the newer one; relaying it is the point.

import (
	"encoding/json"
	"slices"

	"github.com/idnhq/idn/mcpproxy/internal/scrub"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Capabilities is what an agent session advertises: the upstream
// server's capabilities with their flags, minus what the connection does
// not expose (resources, prompts, and completions when it exposes
// neither), minus what the relay does not carry (experimental and
// extension capabilities, which name methods it does not know).
func Capabilities(up *mcp.ServerCapabilities, resources, prompts bool) *mcp.ServerCapabilities {
	caps := &mcp.ServerCapabilities{}
	if up != nil {
		caps.Tools, caps.Logging, caps.Completions = up.Tools, up.Logging, up.Completions
		if resources {
			caps.Resources = up.Resources
		}
		if prompts {
			caps.Prompts = up.Prompts
		}
	}
	if !resources && !prompts {
		caps.Completions = nil
	}
	if caps.Tools == nil {
		// The gateway answers tools/list and tools/call itself, with none
		// when the server offers none.
		caps.Tools = &mcp.ToolCapabilities{}
	}
	return caps
}

// NotificationParams decodes the params of a notification the relay
// passes on; false for any other method (notifications/cancelled about
// the gateway's own requests, and methods the relay does not know).
func NotificationParams(method string, raw json.RawMessage) (mcp.Params, bool) {
	var p mcp.Params
	switch method {
	case "notifications/message":
		p = &mcp.LoggingMessageParams{}
	case "notifications/resources/updated":
		p = &mcp.ResourceUpdatedNotificationParams{}
	case "notifications/resources/list_changed":
		p = &mcp.ResourceListChangedParams{}
	case "notifications/tools/list_changed":
		p = &mcp.ToolListChangedParams{}
	case "notifications/prompts/list_changed":
		p = &mcp.PromptListChangedParams{}
	case "notifications/elicitation/complete":
		p = &mcp.ElicitationCompleteParams{}
	default:
		return nil, false
	}
	if len(raw) > 0 && string(raw) != "null" {
		if json.Unmarshal(raw, p) != nil {
			return nil, false
		}
	}
	return p, true
}

// CleanParams is NotificationParams of raw with secrets replaced.
func CleanParams(sc *scrub.Scrubber, method string, raw json.RawMessage) (mcp.Params, bool) {
	clean, err := scrub.Launder(sc, &raw)
	if err != nil {
		return nil, false
	}
	return NotificationParams(method, *clean)
}

// Version is the protocol version an agent session's upstream session
// asks for: the agent's own when the SDK speaks it and it is at most
// newest, else newest. The server may answer with another (see
// docs/gateway.md).
func Version(agent, newest string) string {
	if agent <= newest && slices.Contains(mcp.SupportedProtocolVersions(), agent) {
		return agent
	}
	return newest
}

// DefaultCacheScope sets a result's cache scope to the protocol's default,
// "public", when the server sent none: the SDK always writes the field,
// and an empty scope is not a valid one (its own servers send "public").
func DefaultCacheScope(res mcp.Result) {
	var c *mcp.Cacheable
	switch r := res.(type) {
	case *mcp.ListResourcesResult:
		c = &r.Cacheable
	case *mcp.ListResourceTemplatesResult:
		c = &r.Cacheable
	case *mcp.ReadResourceResult:
		c = &r.Cacheable
	case *mcp.ListPromptsResult:
		c = &r.Cacheable
	case *mcp.ListToolsResult:
		c = &r.Cacheable
	default:
		return
	}
	if c.CacheScope == "" {
		c.CacheScope = "public"
	}
}

// Hidden reports whether a notification of method is kept from the agent
// by what the connection exposes: resources and prompts notifications
// only where it exposes them.
func Hidden(method string, resources, prompts bool) bool {
	switch method {
	case "notifications/resources/updated", "notifications/resources/list_changed":
		return !resources
	case "notifications/prompts/list_changed":
		return !prompts
	}
	return false
}

// Completable reports whether a completion/complete about ref may pass:
// prompt arguments where the connection exposes prompts, resource
// template arguments where it exposes resources.
func Completable(ref *mcp.CompleteReference, resources, prompts bool) bool {
	switch {
	case ref == nil:
		return false
	case ref.Type == "ref/prompt":
		return prompts
	case ref.Type == "ref/resource":
		return resources
	}
	return false
}

// NotExposed is the answer to a method the connection does not expose.
func NotExposed(method string) error {
	return &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "mcpproxy: " + method + " is not offered on this connection"}
}
