package main

//lint:file-ignore SA1019 MCP clients of protocol versions up to 2025-11-25 use sampling, roots and logging, which the SDK deprecates for the newer one; relaying them is the point.

import (
	"context"
	"encoding/json"

	"github.com/idnhq/idn/internal/mcpnotify"
	"github.com/idnhq/idn/internal/mcptasks"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The relay of idn mcp: the gateway session is opened with the client
// capabilities and protocol version the stdio client declared, and what
// the gateway says and asks on it reaches the stdio client, whose answers
// go back; the stdio client sees the capabilities and instructions the
// gateway advertised.

// maxRelayedVersion is the newest protocol version idn mcp asks the
// gateway for on the stdio client's behalf (newer ones carry no session).
const maxRelayedVersion = "2025-11-25"

// client is the go-sdk client of a gateway session: it declares what the
// stdio client declared and relays the gateway's notifications and
// requests to it.
func (b *bridge) client() *mcp.Client {
	caps := &mcp.ClientCapabilities{}
	if b.caps != nil {
		caps.Sampling, caps.Elicitation, caps.RootsV2 = b.caps.Sampling, b.caps.Elicitation, b.caps.RootsV2
	}
	tell := func(method string, params mcp.Params) {
		b.mu.Lock()
		local := b.local
		b.mu.Unlock()
		if local != nil {
			_ = mcpnotify.Send(context.Background(), local, method, params)
		}
	}
	opts := &mcp.ClientOptions{
		Capabilities:                caps,
		ProgressNotificationHandler: b.progress,
	}
	mcpnotify.Relay(opts, tell)
	local := func() *mcp.ServerSession {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.local
	}
	if caps.Sampling != nil {
		opts.CreateMessageHandler = func(ctx context.Context, r *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			ctx, cancel := detached(ctx)
			defer cancel()
			return local().CreateMessage(ctx, r.Params)
		}
	}
	c := mcp.NewClient(bridgeInfo, opts)
	for _, method := range mcptasks.Methods {
		_ = mcp.AddSendingCustomMethod[*mcptasks.Params, *mcptasks.Result](c, method)
	}
	if caps.Elicitation != nil {
		c.AddReceivingMiddleware(b.elicit)
	}
	if caps.RootsV2 != nil {
		c.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
			return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
				if method != "roots/list" {
					return next(ctx, method, req)
				}
				ctx, cancel := detached(ctx)
				defer cancel()
				params, _ := req.GetParams().(*mcp.ListRootsParams)
				return local().ListRoots(ctx, params)
			}
		})
	}
	return c
}

// elicit relays the gateway's elicitation/create to the stdio client as a
// request of the bridge's own, and its answer back as the client wrote
// it. The go-sdk's client and server would each check the answer against
// the requested schema and fill in its defaults, which is the server's
// to do, not the relay's.
func (b *bridge) elicit(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		params, ok := req.GetParams().(*mcp.ElicitParams)
		cs, isClient := req.GetSession().(*mcp.ClientSession)
		if method != "elicitation/create" || !ok || !isClient {
			return next(ctx, method, req)
		}
		if params.Mode == "" && params.URL == "" {
			params.Mode = "form" // as the go-sdk's server writes it; an empty mode is no mode
		}
		raw, err := json.Marshal(params)
		if err != nil {
			return nil, err
		}
		ctx, cancel := detached(ctx)
		defer cancel()
		answer, err := b.clientTasks.ask(ctx, cs.ID(), method, raw)
		if err != nil {
			return nil, err
		}
		return &verbatim{raw: answer}, nil
	}
}

// verbatim is a result written as the stdio client wrote it.
type verbatim struct {
	mcp.ResultBase
	raw json.RawMessage
}

func (v *verbatim) MarshalJSON() ([]byte, error) { return v.raw, nil }

// initialize answers the stdio client's initialize: a gateway session is
// opened with the client's capabilities and version (replacing one a
// previous initialize opened), and the answer carries what that
// session's gateway advertised.
func (b *bridge) initialize(ctx context.Context, method string, req mcp.Request, params *mcp.InitializeParams, next mcp.MethodHandler) (mcp.Result, error) {
	b.mu.Lock()
	if params != nil {
		b.caps, b.version = params.Capabilities, params.ProtocolVersion
	}
	old := b.remote
	b.remote = nil
	b.mu.Unlock()
	if old != nil {
		_ = old.Close()
	}
	remote, err := b.session(ctx)
	if err == nil {
		b.clientTasks.awaitStream(ctx, remote.ID())
	}
	res, rerr := next(ctx, method, req)
	if ir, ok := res.(*mcp.InitializeResult); ok && err == nil {
		b.mu.Lock()
		b.local, _ = req.GetSession().(*mcp.ServerSession)
		b.mu.Unlock()
		up := remote.InitializeResult()
		ir.Capabilities, ir.Instructions = up.Capabilities, up.Instructions
		if ir.Capabilities == nil {
			ir.Capabilities = &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}}
		}
		if b.relaysTasks() && ir.ProtocolVersion >= mcptasks.Version {
			return mcptasks.WithTasks(ir, b.tasks.Load().Caps.Relayed())
		}
	}
	return res, rerr
}

// detached is a context for asking the stdio client on the gateway's
// behalf, cancelled with ctx but without its values: the go-sdk server
// would take the gateway request's id in ctx for the id of a stdio
// request whose answer should carry it.
func detached(ctx context.Context) (context.Context, context.CancelFunc) {
	d, cancel := context.WithCancel(context.Background())
	stop := context.AfterFunc(ctx, cancel)
	return d, func() { stop(); cancel() }
}
