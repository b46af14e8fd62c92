//lint:file-ignore SA1019 MCP clients of protocol versions up to 2025-11-25 use logging, which the SDK deprecates for the newer one; relaying it is the point.

// Package mcpnotify hands the notifications an MCP server sends a client
// session on to one function, by method name, so a relay (the gateway's MCP
// endpoint, the idn mcp bridge) forwards each kind the same way.
package mcpnotify

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Relay sets the handlers of opts for the server's list-changed,
// resource-updated, logging and elicitation-complete notifications to call
// tell with the notification's method and parameters (an empty value of
// the parameters' type when the server sent none). Progress is not among
// them: it belongs to the call it reports on, which relays it itself.
func Relay(opts *mcp.ClientOptions, tell func(method string, params mcp.Params)) {
	opts.ToolListChangedHandler = func(_ context.Context, r *mcp.ToolListChangedRequest) {
		tell("notifications/tools/list_changed", orEmpty(r.Params))
	}
	opts.PromptListChangedHandler = func(_ context.Context, r *mcp.PromptListChangedRequest) {
		tell("notifications/prompts/list_changed", orEmpty(r.Params))
	}
	opts.ResourceListChangedHandler = func(_ context.Context, r *mcp.ResourceListChangedRequest) {
		tell("notifications/resources/list_changed", orEmpty(r.Params))
	}
	opts.ResourceUpdatedHandler = func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) {
		tell("notifications/resources/updated", orEmpty(r.Params))
	}
	opts.LoggingMessageHandler = func(_ context.Context, r *mcp.LoggingMessageRequest) {
		if r.Params != nil {
			tell("notifications/message", r.Params)
		}
	}
	opts.ElicitationCompleteHandler = func(_ context.Context, r *mcp.ElicitationCompleteNotificationRequest) {
		tell("notifications/elicitation/complete", orEmpty(r.Params))
	}
}

// orEmpty returns p as Params, or an empty value of its type when nil.
func orEmpty[T any, P interface {
	*T
	mcp.Params
}](p P) mcp.Params {
	if p == nil {
		return P(new(T))
	}
	return p
}
