package mirror

//lint:file-ignore SA1019 MCP clients of protocol versions up to 2025-11-25 use sampling and roots, which the SDK deprecates for the newer one; relaying them is the point.

import (
	"context"
	"encoding/json"

	"github.com/idnhq/idn/internal/mcpnotify"
	"github.com/idnhq/idn/internal/mcptasks"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Client is the client of an agent session's upstream session: it
// declares the client capabilities the agent declared that the relay
// passes on (sampling, elicitation, roots), hands tell the notifications
// the server sends outside a call's own stream, and has ask put the
// server's requests to the agent. A nil tell listens for nothing: to a
// server of the stateless revision, the client then holds no
// subscriptions/listen stream open. An elicitation's answer comes back as
// ask returned it: the SDK's client would check it against the requested
// schema and fill in its defaults (see Answers).
func Client(info *mcp.Implementation, agent *mcp.ClientCapabilities, tell func(method string, params mcp.Params), ask func(ctx context.Context, method string, params any) (any, error)) *mcp.Client {
	caps := &mcp.ClientCapabilities{}
	if agent != nil {
		caps.Sampling, caps.Elicitation, caps.RootsV2 = agent.Sampling, agent.Elicitation, agent.RootsV2
	}
	opts := &mcp.ClientOptions{Capabilities: caps}
	if tell != nil {
		mcpnotify.Relay(opts, tell)
	}
	if caps.Sampling != nil {
		opts.CreateMessageHandler = func(ctx context.Context, r *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			return asked[*mcp.CreateMessageResult](ask(ctx, "sampling/createMessage", r.Params))
		}
	}
	if caps.Elicitation != nil {
		// Input requests of a server of 2026-07-28 reach this handler
		// alone, past the middleware below: the SDK reads their answers.
		opts.ElicitationHandler = func(ctx context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			res, err := ask(ctx, "elicitation/create", r.Params)
			if raw, ok := res.(json.RawMessage); ok && err == nil {
				var read mcp.ElicitResult
				if err := json.Unmarshal(raw, &read); err != nil {
					return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "elicitation/create: unreadable answer: " + err.Error()}
				}
				return &read, nil
			}
			return asked[*mcp.ElicitResult](res, err)
		}
	}
	c := mcp.NewClient(info, opts)
	// The SDK's client answers roots/list from roots of its own, and
	// elicitation/create after its own checks: both go to the agent as
	// they are instead.
	c.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			switch {
			case method == "roots/list" && caps.RootsV2 != nil:
				return asked[*mcp.ListRootsResult](ask(ctx, method, req.GetParams()))
			case method == "elicitation/create" && caps.Elicitation != nil:
				res, err := ask(ctx, method, req.GetParams())
				if raw, ok := res.(json.RawMessage); ok && err == nil {
					return &mcptasks.Result{Raw: raw}, nil
				}
				return asked[*mcp.ElicitResult](res, err)
			}
			return next(ctx, method, req)
		}
	})
	return c
}

func asked[R any](res any, err error) (R, error) {
	var zero R
	if err != nil {
		return zero, err
	}
	return res.(R), nil
}

// Ask puts a request of the server to the agent of ss, when the agent
// declared the capability it needs, with its params read by decode, and
// returns the agent's answer as it is: an elicitation's as the JSON the
// agent wrote, when answers took it (see Answers). When the server withdraws the
// request (ctx ends with the cause wire.ErrWithdrawn), the SDK's server
// tells the agent; Ask returns once it has (told), or after a second.
func Ask(ctx context.Context, ss *mcp.ServerSession, told *Told, answers *Answers, method string, decode func(params any) error) (any, error) {
	caps := &mcp.ClientCapabilities{}
	if ip := ss.InitializeParams(); ip != nil && ip.Capabilities != nil {
		caps = ip.Capabilities
	}
	var before uint64
	if told != nil {
		before, _ = told.mark()
		defer func() { awaitTold(ctx, told, before) }()
	}
	switch {
	case method == "sampling/createMessage" && caps.Sampling != nil:
		var p mcp.CreateMessageParams
		if err := decode(&p); err != nil {
			return nil, err
		}
		return ss.CreateMessage(ctx, &p)
	case method == "elicitation/create" && caps.Elicitation != nil:
		var p mcp.ElicitParams
		if err := decode(&p); err != nil {
			return nil, err
		}
		res, err := ss.Elicit(ctx, &p)
		if err == nil && answers != nil {
			if raw, ok := answers.Claim(res); ok {
				return raw, nil
			}
		}
		return res, err
	case method == "roots/list" && caps.RootsV2 != nil:
		var p mcp.ListRootsParams
		if err := decode(&p); err != nil {
			return nil, err
		}
		return ss.ListRoots(ctx, &p)
	}
	return nil, NotOffered(method)
}

// NotOffered is the answer to a request of the server the agent's client
// does not offer.
func NotOffered(method string) error {
	return &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "method " + method + " is not offered by this client"}
}
