//lint:file-ignore SA1019 MCP clients of protocol versions up to 2025-11-25 use logging, which the SDK deprecates for the newer one; relaying it is the point.

// Package mcpnotify relays the notifications an MCP server sends a client
// session to the client of a server session, by method name, for the
// gateway's MCP endpoint and the idn mcp bridge: Relay hands them on from
// the client side, Send writes one out on the server side.
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

// sentKey marks the context of a notification Send writes: Sending sends
// the marked method and params in place of the progress notification that
// carried them, as the go-sdk's server offers no other way to send these.
type sentKey struct{}

type sent struct {
	method string
	params mcp.Params
}

// Send writes the notification method with params to the client of ss,
// which must have Sending among its sending middleware.
func Send(ctx context.Context, ss *mcp.ServerSession, method string, params mcp.Params) error {
	return ss.NotifyProgress(context.WithValue(ctx, sentKey{}, &sent{method, params}), &mcp.ProgressNotificationParams{})
}

// Sending is the sending middleware that lets Send write any notification.
func Sending(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if r, ok := ctx.Value(sentKey{}).(*sent); ok && method == "notifications/progress" {
			ss, _ := req.GetSession().(*mcp.ServerSession)
			return next(ctx, r.method, &mcp.ServerRequest[mcp.Params]{Session: ss, Params: r.params})
		}
		return next(ctx, method, req)
	}
}
